"""What a readiness run does, and how its time budget is shared between the steps.

Every rank plans the same steps from the same options and the job's size alone (no rank waits
for another to tell it what to run): the matrix's flow length and the collective's iterations
shrink to fit the budget, and a budget too short for the smallest useful run is refused before
anything starts, with what it would need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench.matrix.schedule import phases
from fabricscope.collective_ops import MeasuredOp
from fabricscope.errors import FabricscopeError

NODE_STEP_S = (
    10.0  # doctor or lint on every node, gathered (each reads the node once: ~2-7 s measured in the lab)
)
STORE_SLACK_S = 3.0  # per step: joining the store, the gather
MATRIX_WARMUP_S = 0.25
MIN_FLOW_S, MAX_FLOW_S = 0.5, 2.0
MIN_ITERS, MAX_ITERS = 3, 20
MIN_COLLECTIVE_S = 10.0
STEPS = ("doctor", "lint", "matrix", "collective")
PORT_OFFSET = {"doctor": 0, "lint": 1, "matrix": 2, "collective": 3}  # each step meets at its own port


class ReadyError(FabricscopeError):
    """A readiness run cannot start or complete (a budget too short, a peer gone)."""


class ReadyParams(BaseModel):
    """The options every rank runs with (``--launch`` hands them on as options)."""

    model_config = ConfigDict(extra="forbid")

    budget_s: float = Field(default=300.0, ge=10, le=86400)
    root: str | None = None  # {host}: each node's snapshot instead of the live node
    expect: str | None = None  # the --expect manifest (absolute path)
    scripts: list[str] = Field(default_factory=list)
    env_files: list[str] = Field(default_factory=list)
    nccl_version: str | None = None
    topology: str | None = None  # FILE, lab:NAME or discover
    nic_rate: str | None = None  # when neither topology nor doctor says how fast a node's link is
    op: MeasuredOp = "all_reduce"
    sizes: list[int] = Field(default_factory=lambda: [64 << 20])
    dtype: str = "float"
    backend: Literal["gloo", "nccl"] = "gloo"
    rdma: bool = True
    fail_on_warn: bool = False
    slurm_drain: bool = False  # rank 0: drain the bad nodes in Slurm (dry run unless apply)
    k8s_taint: str | None = None  # rank 0: taint the bad nodes KEY=VALUE:EFFECT (dry run unless apply)
    apply: bool = False


@dataclass(frozen=True)
class Plan:
    """Each step's share of the budget: the matrix's flow length, the collective's iterations,
    and the deadline every wait of a step gets."""

    flow_s: float
    iters: int
    warmup: int
    node_timeout_s: float
    matrix_timeout_s: float
    collective_timeout_s: float

    @property
    def total_s(self) -> float:
        return 2 * self.node_timeout_s + self.matrix_timeout_s + self.collective_timeout_s


def matrix_seconds(hosts: int, flow_s: float) -> float:
    """The matrix's main rounds and, at most as many again, retests (bench matrix's schedule)."""
    return 2 * len(phases(hosts)) * (flow_s + MATRIX_WARMUP_S + 0.5)


def job_nodes(world_size: int, launcher: str, environ: Mapping[str, str]) -> int:
    """The job's node count as every rank sees it alike: under srun, SLURM_NNODES (srun -N 3 -n 5:
    3); under torchrun, WORLD_SIZE / LOCAL_WORLD_SIZE; else the rank count (one rank per node at
    most). Only the launcher's own variables count (a lab launched inside an allocation has 4 hosts
    whatever SLURM_NNODES says)."""
    keys = {"slurm": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"), "torchrun": ()}.get(launcher, ())
    for key in keys:
        value = environ.get(key, "")
        if value.isdigit() and 0 < int(value) <= world_size:
            return int(value)
    local = environ.get("LOCAL_WORLD_SIZE", "") if launcher == "torchrun" else ""
    if local.isdigit() and 0 < int(local) <= world_size and world_size % int(local) == 0:
        return world_size // int(local)
    return world_size


def plan(params: ReadyParams, world_size: int, nodes: int | None = None) -> Plan:
    """Fit the steps into ``budget_s``: the matrix runs between the job's ``nodes`` (default: its
    size, one rank per node at most), known alike to every rank, so every rank plans alike. The
    matrix's flows are as long as leaves the collective half of the rest; the collective gets
    what the matrix leaves."""
    hosts = max(2, nodes or world_size)
    fixed = 2 * (NODE_STEP_S + STORE_SLACK_S) + 2 * STORE_SLACK_S
    left = params.budget_s - fixed
    if left - matrix_seconds(hosts, MIN_FLOW_S) < MIN_COLLECTIVE_S:
        need = fixed + matrix_seconds(hosts, MIN_FLOW_S) + MIN_COLLECTIVE_S
        raise ReadyError(
            f"a budget of {params.budget_s:g} s is too short for {world_size} rank(s): it needs at least {math.ceil(need)} s (--budget)"
        )
    flow_s = MAX_FLOW_S  # the longest flows that leave the collective half of what is left
    while flow_s > MIN_FLOW_S and left - matrix_seconds(hosts, flow_s) < max(MIN_COLLECTIVE_S, left / 2):
        flow_s = max(MIN_FLOW_S, flow_s / 2)
    matrix_s = matrix_seconds(hosts, flow_s)
    collective_s = left - matrix_s
    iters = MAX_ITERS if collective_s >= 120 else max(MIN_ITERS, int(MAX_ITERS * collective_s / 120))
    return Plan(flow_s, iters, 1 if iters < 10 else 3, NODE_STEP_S + STORE_SLACK_S, matrix_s + STORE_SLACK_S + 30.0,
                collective_s + STORE_SLACK_S)  # fmt: skip
