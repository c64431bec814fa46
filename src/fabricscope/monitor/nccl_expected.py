"""What a communicator's collectives should reach on this fabric: the simulator's bus bandwidth
for the communicator's shape (ranks, nodes, GPUs per node) on this node's NICs (count and rate
from the inventory, RoCE or InfiniBand), per operation and message size, cached.

The model is :mod:`fabricscope.sim` (``sim collective``): rail-optimised fabric, NCCL's own
algorithm and protocol choice, H100-class GPUs unless told otherwise. Nodes are assumed alike
(the other nodes of the job have this node's NICs): a job spanning different node types is
judged against this one.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from fabricscope import collective_ops
from fabricscope.monitor.topology import Topology

log = logging.getLogger("fabricscope.exporter")

SIM_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce")
MAX_ENTRIES = 4096


@dataclass(frozen=True)
class Shape:
    """What the expected bandwidth depends on."""

    op: str  # the simulator's name ("all_reduce")
    size: int  # bytes, two significant digits
    ranks: int
    nodes: int
    nics: int
    nic_rate_gbps: float
    roce: bool


def shape_of(op: str, size_bytes: float, n_ranks: int, n_nodes: int, topo: Topology) -> Shape | None:
    """The simulation that answers for this collective, or None when the model has nothing to
    say (a P2P operation or an unknown collective, no ranks, several nodes but no active NIC)."""
    row = collective_ops.find(op)
    if row is None or row.name not in SIM_OPS or n_ranks < 2 or n_nodes < 1 or size_bytes <= 0:
        return None
    if n_nodes > 1 and (not topo.nics or not topo.nic_rate_gbps):
        return None
    digits = max(0, int(math.floor(math.log10(size_bytes))) - 1)
    size = int(round(size_bytes / 10**digits) * 10**digits)
    return Shape(
        row.name, size, n_ranks, n_nodes, len(topo.nics) or 1, topo.nic_rate_gbps or 400.0, topo.roce
    )


class ExpectedBusbw:
    """Simulated bus bandwidth (bytes/s) per :class:`Shape`, computed once each."""

    def __init__(self) -> None:
        self._cache: dict[Shape, float | None] = {}

    def __call__(self, shape: Shape | None) -> float | None:
        if shape is None:
            return None
        if shape in self._cache:
            return self._cache[shape]
        if len(self._cache) >= MAX_ENTRIES:
            self._cache.clear()
        self._cache[shape] = value = _simulate(shape)
        return value


def _simulate(shape: Shape) -> float | None:
    from fabricscope.sim.scenario import run_collective

    gpus_per_node = max(1, math.ceil(shape.ranks / shape.nodes))
    params = {
        "nodes": shape.nodes,
        "gpus_per_node": gpus_per_node,
        "nics_per_node": min(shape.nics, max(gpus_per_node, 1)),
        "nic_rate": f"{shape.nic_rate_gbps:g}G",
        "transport": "roce" if shape.roce else "ib",
        "op": shape.op,
        "size": str(shape.size),
    }
    try:
        doc = run_collective(params)
    except Exception as exc:  # the model refusing a shape must not cost a scrape
        log.info("no expected bandwidth for %s: %s", shape, exc)
        return None
    busbw = doc.get("busbw_GBps")
    return float(busbw) * 1e9 if isinstance(busbw, int | float) and busbw > 0 else None
