"""The leaf types of the simulator: traffic patterns, the phases and plans built from them, and a
solved pattern. They sit below the engine, the collective planners and the alltoall aggregation,
which all use them, so none of those needs to import another for its types (the cycle
engine -> alltoall -> engine that ``Any`` annotations used to paper over).

* ``Pattern``: one set of concurrent transfers (src GPU -> dst GPU, and for inter-node transfers
  the NICs they leave and enter by);
* ``Phase``: a pattern repeated ``steps`` times with ``bytes`` per transfer per step, and how the
  steps compose in time (``ring``, ``sync``, ``pipeline``: sim/collectives.py);
* ``Plan``: the phases of one collective;
* ``AggregatePattern``: an alltoall described by its shared legs (sim/alltoall.py);
* ``PatternResult``: a pattern routed and solved, with what the transport made of it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from fabricscope.sim.fabrics import Routes
from fabricscope.sim.solver import Solution


@dataclass
class Pattern:
    key: str
    src_gpu: np.ndarray
    dst_gpu: np.ndarray
    src_nic: np.ndarray  # -1: intra-node (NVLink)
    dst_nic: np.ndarray
    entropy: np.ndarray  # extra ECMP hash input (channel / QP)
    chain: np.ndarray  # ring or chain id (for ring timing); 0 when irrelevant
    share: np.ndarray | None = None  # of the transfer's bytes each row carries (1 unless striped)

    def __len__(self) -> int:
        return len(self.src_gpu)

    @staticmethod
    def concat(key: str, parts: list[Pattern]) -> Pattern:
        return Pattern(
            key,
            *(
                np.concatenate([getattr(p, a) for p in parts])
                for a in ("src_gpu", "dst_gpu", "src_nic", "dst_nic", "entropy", "chain")
            ),
        )


@dataclass
class Phase:
    name: str
    pattern: Pattern
    timing: str  # ring | sync | pipeline
    steps: int
    bytes: float  # per transfer per step (ring, sync) or in total (pipeline)


@dataclass
class Plan:
    op: str
    algo: str
    size_bytes: int
    ranks: int
    phases: list[Phase] = field(default_factory=list)
    # Phases that run at once, sliced and pipelined (the intra- and inter-node parts of a
    # hierarchical algorithm): the plan takes the slowest phase's bandwidth time, not the sum.
    overlap: bool = False


@dataclass
class AggregatePattern:
    """An alltoall described by its legs (see the module docstring)."""

    key: str
    nodes: np.ndarray  # (groups, nodes per group): node ids of each communicator
    local: np.ndarray  # local GPU ids every node contributes
    intra_src: np.ndarray  # NVLink legs: src/dst GPU and multiplicity (transfers per leg)
    intra_dst: np.ndarray
    intra_mult: np.ndarray
    transfers: int
    pxn: bool = True  # leave by the NIC on the destination's rail (NCCL's PXN), else by one's own
    hops: int = 0  # NVLink legs on a network transfer's way (to the NIC's GPU, from it)

    def __len__(self) -> int:
        return self.transfers

    @property
    def id(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        for a in (self.nodes, self.local):
            h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
        return f"{self.key}:{self.transfers}:{h.hexdigest()}"


@dataclass
class PatternResult:
    pattern: Pattern
    routes: Routes
    solution: Solution
    path_lat_s: np.ndarray  # per transfer, sum of link latencies (coefficient-weighted)
    alpha_s: np.ndarray  # per transfer, endpoint latency of one message
    network: np.ndarray  # per transfer, crosses the network
    rto_s: np.ndarray  # per transfer, retransmission timeout (0 without loss)
    eff_cap: np.ndarray  # capacities the solver used (per link)
    adjustments: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    n_transfers: int | None = None  # when ``pattern`` stands for more transfers (aggregated alltoall)
    network_transfers: int | None = None  # of those, the ones that cross the network (each may time out)
    link_flows: np.ndarray | None = None  # per link, transfers crossing it (aggregated alltoall)
