"""What a communicator's collectives should reach on this fabric: the simulator's bus bandwidth
for the communicator's shape (ranks, nodes, GPUs per node) with this node's GPUs (the model
nvidia-smi names, from the one GPU table in sim/gpus.py) and NICs (count and rate from the
inventory, RoCE or InfiniBand), per operation and message size, cached.

The model is :mod:`fabricscope.sim` (``sim collective``): NCCL's own algorithm and protocol
choice on a rail-optimised fabric, or on the fabric a topology file describes (``--topology``:
``topology discover``'s file, or any file ``sim --topology-file`` reads). A GPU the table does
not know gives no expectation ("not available"), never an H100's. Nodes are assumed alike (the
other nodes of the job have this node's GPUs and NICs). With a topology file, the communicator's
nodes are this node (the Inspector's hostname, found in the file's ``hosts``) and the ones after
it in the file's order, as a block allocation places them: the Inspector does not say which
nodes a communicator spans.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricscope import collective_ops
from fabricscope.monitor.topology import Topology

log = logging.getLogger("fabricscope.exporter")

SIM_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce")
MAX_ENTRIES = 4096


@dataclass(frozen=True)
class Fabric:
    """A topology file the exporter judges communicators against, read once at start."""

    path: str
    hosts: tuple[str, ...]  # node i's host name ("" where the file names none)
    document: dict[str, Any] = dataclasses.field(compare=False, hash=False, repr=False)

    def node_of(self, host: str) -> int | None:
        """This host's node index in the file: its name, or its short name, in ``hosts``."""
        for name in (host, host.split(".")[0]):
            for index, known in enumerate(self.hosts):
                if name and (known == name or known.split(".")[0] == name):
                    return index
        return None if self.hosts else 0  # a family file (no hosts): every node is alike


def load_fabric(path: str) -> Fabric:
    """Read and check a topology file (the simulator builds it once here): a bad one is refused
    with one line (FabricscopeError), before the exporter starts."""
    from fabricscope.sim.custom import load_document, topology_from_document

    document = load_document(path)
    topology_from_document(dict(document))
    hosts = document.get("hosts")
    names = tuple(str(h) for h in hosts) if isinstance(hosts, list) else ()
    return Fabric(str(Path(path)), names, document)


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
    gpu: str  # the simulator's GPU name (sim/gpus.py)
    fabric: Fabric | None = None  # a topology file, when the communicator spans nodes in it
    first_node: int = 0  # this node's index in the fabric's nodes


def shape_of(
    op: str,
    size_bytes: float,
    n_ranks: int,
    n_nodes: int,
    topo: Topology,
    fabric: Fabric | None = None,
    host: str = "",
) -> Shape | None:
    """The simulation that answers for this collective, or None when the model has nothing to
    say (a P2P operation or an unknown collective, no ranks, a GPU the table does not know,
    several nodes but no active NIC, or a host the topology file does not name)."""
    row = collective_ops.find(op)
    if row is None or row.name not in SIM_OPS or n_ranks < 2 or n_nodes < 1 or size_bytes <= 0:
        return None
    if topo.gpu_model is None:
        return None
    if n_nodes > 1 and (not topo.nics or not topo.nic_rate_gbps):
        return None
    first = 0
    if fabric is not None and n_nodes > 1:
        node = fabric.node_of(host)
        if node is None:
            return None
        first = node
    digits = max(0, int(math.floor(math.log10(size_bytes))) - 1)
    size = int(round(size_bytes / 10**digits) * 10**digits)
    return Shape(
        row.name,
        size,
        n_ranks,
        n_nodes,
        len(topo.nics) or 1,
        topo.nic_rate_gbps or 400.0,
        topo.roce,
        topo.gpu_model,
        fabric if n_nodes > 1 else None,
        first,
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
    from fabricscope.sim.scenario import build_simulator, normalise, run_collective

    gpus_per_node = max(1, math.ceil(shape.ranks / shape.nodes))
    params: dict[str, Any] = {
        "nodes": shape.nodes,
        "gpus_per_node": gpus_per_node,
        "nics_per_node": min(shape.nics, max(gpus_per_node, 1)),
        "nic_rate": f"{shape.nic_rate_gbps:g}G",
        "gpu": shape.gpu,
        "transport": "roce" if shape.roce else "ib",
        "op": shape.op,
        "size": str(shape.size),
    }
    try:
        sim = None
        if shape.fabric is not None:
            topo = _on_fabric(shape, params, gpus_per_node)
            if topo is None:
                return None
            sim = build_simulator(normalise(params), topo)
        doc = run_collective(params, sim)
    except Exception as exc:  # the model refusing a shape must not cost a scrape
        log.info("no expected bandwidth for %s: %s", shape, exc)
        return None
    busbw = doc.get("busbw_GBps")
    return float(busbw) * 1e9 if isinstance(busbw, int | float) and busbw > 0 else None


def _on_fabric(shape: Shape, params: dict[str, Any], gpus_per_node: int) -> Any:
    """The topology file's fabric with this node's GPUs, and the communicator's nodes (this one
    and those after it) as the simulator's node order; None when the file has too few nodes."""
    from fabricscope.sim.custom import topology_from_document

    assert shape.fabric is not None
    document = {**shape.fabric.document, "gpu": shape.gpu, "gpus_per_node": gpus_per_node}
    topo = topology_from_document(document)
    if shape.nodes > topo.nodes:
        log.info("no expected bandwidth for %s: %s has %d node(s)", shape, shape.fabric.path, topo.nodes)
        return None
    order = [(shape.first_node + i) % topo.nodes for i in range(shape.nodes)]
    params["node_order"] = ",".join(str(i) for i in order)
    params["nodes"] = topo.nodes
    return topo
