"""What a matrix run measures and in which order: its parameters and the rounds of disjoint pairs.

The circle method splits all pairs into rounds of disjoint pairs (N-1 rounds for even N); each
round runs twice, once per direction, so every measured flow has both of its hosts' links to
itself. Retests of suspects are packed the same way: no host in two flows of one phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench.matrix import rdma as matrix_rdma
from fabricscope.errors import FabricscopeError

Phase = list[tuple[int, int]]  # directed flows (sender, receiver) that run at the same time


class MatrixError(FabricscopeError):
    """The matrix could not be measured (a peer vanished, a deadline passed)."""


class MatrixParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    duration_s: float = Field(default=2.0, gt=0.05, le=600)
    warmup_s: float = Field(default=0.25, ge=0, le=60)
    retest: bool = True
    retest_peers: int = Field(default=2, ge=1, le=8)
    rel_margin: float = Field(default=0.2, gt=0, lt=1)
    retx_floor_pct: float = Field(default=0.5, ge=0, le=100)
    timeout_s: float = Field(default=120.0, gt=0, le=86400)
    bind: str | None = None
    rdma: bool = True  # also measure RDMA with perftest where every host has it
    rdma_test: Literal["write_bw", "read_bw", "send_bw"] = "write_bw"
    rdma_device: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    rdma_port: int = Field(default=18515, ge=1024, le=60000)  # + the receiver's index: one port per host
    root: str | None = None  # read the RDMA inventory here instead of the live machine
    topology: str | None = None  # FILE (absolute), lab:NAME or discover: localize on the fabric
    lldp_socket: str | None = None  # discover: lldpd control socket, {host} = the rank's host
    switch_lldp: list[str] = Field(
        default_factory=list
    )  # discover: switch tables (topology discover --switch-lldp)


def round_robin(n: int) -> list[Phase]:
    """All pairs of ``n`` hosts in rounds of disjoint pairs (circle method)."""
    if n < 2:
        return []
    ids: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    m = len(ids)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = ids[i], ids[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        ids = [ids[0], ids[-1], *ids[1:-1]]
    return rounds


def phases(n: int) -> list[Phase]:
    """Directed phases: each round once low->high, once high->low."""
    out = []
    for pairs in round_robin(n):
        out.append(list(pairs))
        out.append([(b, a) for a, b in pairs])
    return out


def pack_phases(flows: Sequence[tuple[int, int]]) -> list[Phase]:
    """Greedy: put directed flows into phases where no host appears twice."""
    remaining = list(dict.fromkeys(flows))
    out: list[Phase] = []
    while remaining:
        busy: set[int] = set()
        phase, rest = [], []
        for a, b in remaining:
            if a in busy or b in busy:
                rest.append((a, b))
            else:
                phase.append((a, b))
                busy.update((a, b))
        out.append(phase)
        remaining = rest
    return out


def expected_s(params: MatrixParams, n: int) -> float:
    """A generous bound on a whole run, for ranks that only wait for its end."""
    flows = len(phases(n)) * 2  # main rounds and, at most as many again, retests
    per_flow = params.duration_s + params.warmup_s + 5.0
    if params.rdma:
        per_flow += matrix_rdma.flow_seconds(params.duration_s) + 10.0
    return flows * per_flow + params.timeout_s
