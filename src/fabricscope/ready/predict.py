"""What this allocation should deliver, before anything is measured: the simulator's figures for
the pairwise matrix and for the job's own collective on this allocation's fabric.

Two models of the same fabric, both from the simulator (:mod:`fabricscope.sim`), never a constant:

* the *prediction*: the fabric as it is now. Every link at the rate the topology gives it (a
  lab's current shaping, a discovered cable's speed), every node at the rate its doctor document
  shows (a degraded port counts at its real rate), and the transport calibrated from a stored
  run of the same collective when there is one. This is what the measurement should show; a
  step far below it has a cause nobody knows of yet.
* the *expectation*: the fabric as built. Every node at the fleet's usual NIC rate and every
  switch cable at the usual rate of its kind. A step below it is not ready, and what the
  prediction lowered (a slow host, a slow uplink) is the culprit.

Matrix flows are solved phase by phase, exactly as ``bench matrix`` runs them (the rounds of
:func:`fabricscope.bench.matrix.schedule.phases`): flows of one phase share the fabric, so an
oversubscribed uplink shows in the pairs that cross it together.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fabricscope.bench.matrix.schedule import phases
from fabricscope.errors import FabricscopeError
from fabricscope.units import format_rate, parse_rate

TBF_PREFIX = "lab:"  # a lab shapes with tc tbf, which counts whole Ethernet frames


@dataclass(frozen=True)
class Degradation:
    """Something the prediction runs slower than the fabric as built: a node or a cable."""

    kind: str  # host | link
    name: str  # h3, or leaf2-spine
    rate_bps: float
    nominal_bps: float
    source: str  # topology | doctor

    def describe(self) -> str:
        what = "link" if self.kind == "host" else "cable"
        return (
            f"{what} at {format_rate(self.rate_bps)}b/s where the fabric is built for "
            f"{format_rate(self.nominal_bps)}b/s (from the {self.source})"
        )


@dataclass
class Allocation:
    """The job's nodes on its fabric.

    ``hosts``: the matrix's hosts in its order (one per node); ``rank_hosts``: the host of every
    rank, in rank order (the ring of the job's collective visits them in this order);
    ``document``: the fabric as the simulator's explicit graph (``topology discover`` / a lab's
    plan / a file), or None: unknown, modelled as one non-blocking switch; ``placed``: matrix host
    -> topology host; ``doctor_bps``: each node's NIC rate as its doctor document shows it (its
    slowest active RDMA port), where known."""

    hosts: list[str]
    rank_hosts: list[str]
    document: dict[str, Any] | None
    source: str | None
    placed: dict[str, str] = field(default_factory=dict)
    doctor_bps: dict[str, float] = field(default_factory=dict)
    nic_rate_bps: float | None = None  # --nic-rate: the rate when neither topology nor doctor says
    rdma_bps: dict[str, float] = field(default_factory=dict)  # each node's slowest active RDMA port

    @property
    def framing(self) -> str:
        return "tbf" if (self.source or "").startswith(TBF_PREFIX) else "ethernet"


def _majority(values: Sequence[float]) -> float | None:
    """The most common value; a tie goes to the fastest (the fabric as built is not the slow part)."""
    if not values:
        return None
    counts = Counter(values)
    top = max(counts.values())
    return max(v for v, n in counts.items() if n == top)


def _star_document(alloc: Allocation) -> dict[str, Any]:
    """No topology: every host on one non-blocking switch, at the rate doctor (or --nic-rate) gives."""
    rates = [r for r in alloc.doctor_bps.values() if r]
    nominal = _majority(rates) or alloc.nic_rate_bps
    if nominal is None:
        raise FabricscopeError(
            "nothing says how fast the nodes' links are: give --topology (a file, lab:NAME or discover) or --nic-rate"
        )
    return {"name": "assumed-star", "nodes": len(alloc.hosts), "nics_per_node": 1, "nic_rate": format_rate(nominal),
            "hosts": list(alloc.hosts), "switches": ["switch"], "links": [], "attach": {"switch": [f"0-{len(alloc.hosts) - 1}"]}}  # fmt: skip


def _node_rates(doc: dict[str, Any]) -> dict[int, float]:
    return {int(k): parse_rate(str(v)) for k, v in (doc.get("node_nic_rate") or {}).items()}


def documents(alloc: Allocation) -> tuple[dict[str, Any], dict[str, Any], list[Degradation]]:
    """(prediction, expectation, what the prediction runs slower) as simulator documents with one
    single-GPU node per topology host (``gpus_per_node`` and ``gpu`` are set per use)."""
    base = copy.deepcopy(alloc.document) if alloc.document is not None else _star_document(alloc)
    topo_hosts: list[str] = list(base.get("hosts") or [])
    nic_bps = parse_rate(str(base.get("nic_rate", "400G")))
    rates = _node_rates(base)
    degraded: list[Degradation] = []
    back = {t: h for h, t in alloc.placed.items()} or {h: h for h in alloc.hosts}
    for i, name in enumerate(topo_hosts):
        here = rates.get(i, nic_bps)
        if here < nic_bps * (1 - 1e-9):
            degraded.append(Degradation("host", back.get(name, name), here, nic_bps, "topology"))
        seen = alloc.doctor_bps.get(back.get(name, name))
        if seen is not None and seen < here * (1 - 1e-9):
            here = seen
            degraded.append(Degradation("host", back.get(name, name), seen, nic_bps, "doctor document"))
        if not math.isclose(here, nic_bps):
            rates[i] = here
    predicted = dict(base, node_nic_rate={i: format_rate(r) for i, r in rates.items()})
    if not rates:
        predicted.pop("node_nic_rate", None)
    expected = {k: v for k, v in base.items() if k != "node_nic_rate"}
    links = list(base.get("links") or [])
    usual = _majority([parse_rate(str(link.get("rate", base.get("nic_rate")))) for link in links])
    fixed = []
    for link in links:
        rate = parse_rate(str(link.get("rate", base.get("nic_rate"))))
        if usual is not None and rate < usual * (1 - 1e-9):
            degraded.append(Degradation("link", f"{link['a']}-{link['b']}", rate, usual, "topology"))
            link = dict(link, rate=format_rate(usual))
        fixed.append(link)
    expected["links"] = fixed
    return predicted, expected, degraded


def _simulator(doc: dict[str, Any], transport: str, framing: str, gpus_per_node: int, gpu: str) -> Any:
    from fabricscope.sim.custom import topology_from_document
    from fabricscope.sim.engine import Simulator
    from fabricscope.sim.transport import make_transport

    topo = topology_from_document(dict(doc, gpus_per_node=gpus_per_node, gpu=gpu))
    return Simulator(topo, make_transport(transport, framing=framing))


def _node_index(alloc: Allocation, doc: dict[str, Any]) -> dict[str, int]:
    names = list(doc.get("hosts") or [])
    index = {name: i for i, name in enumerate(names)}
    out = {}
    for host in alloc.hosts:
        topo_host = alloc.placed.get(host, host)
        if topo_host not in index:
            raise FabricscopeError(f"host {host} is not in the topology ({', '.join(names[:6])}...)")
        out[host] = index[topo_host]
    return out


def matrix_gbps(
    alloc: Allocation, doc: dict[str, Any], framing: str, transport: str = "tcp"
) -> list[list[float | None]]:
    """Each directed pair's rate (Gbit/s) in the phase ``bench matrix`` runs it in: TCP (iperf3's
    flows), or ``ib``/``roce`` for the RDMA matrix (perftest's, one queue pair a flow)."""
    import numpy as np

    sim = _simulator(doc, transport, framing, 1, "none")
    where = _node_index(alloc, doc)
    n = len(alloc.hosts)
    out: list[list[float | None]] = [[None] * n for _ in range(n)]
    from fabricscope.sim.collectives import p2p_plan

    for k, phase in enumerate(phases(n)):
        src = np.array([where[alloc.hosts[a]] for a, _ in phase], np.int64)
        dst = np.array([where[alloc.hosts[b]] for _, b in phase], np.int64)
        pattern = p2p_plan(sim.topo, src, dst, 1 << 20, f"ready-matrix-{k}").phases[0].pattern
        res = sim.solve_pattern(pattern)
        rates = _per_transfer(res, len(phase))
        for (a, b), rate in zip(phase, rates):
            out[a][b] = rate * 8 / 1e9
    return out


def _per_transfer(res: Any, count: int) -> list[float]:
    """Per transfer rate (bytes/s): striped rows summed back onto the transfer they carry."""
    import numpy as np

    rate = np.asarray(res.solution.rate, np.float64)
    if len(rate) == count:
        return [float(r) for r in rate]
    per = len(rate) // count  # stripe(): each network transfer repeated over its sockets
    return [float(rate[i * per : (i + 1) * per].sum()) for i in range(count)]


@dataclass(frozen=True)
class CollectiveModel:
    """How to model the job's collective: its operation and sizes, backend and transport."""

    op: str
    sizes: tuple[int, ...]
    backend: str  # gloo | nccl
    transport: str  # tcp | ib | roce
    gpu: str = "none"


def collective_busbw(alloc: Allocation, doc: dict[str, Any], framing: str, model: CollectiveModel,
                     calibration: Any = None) -> tuple[list[float], list[str], dict[str, Any] | None]:  # fmt: skip
    """busbw (GB/s) per size for the job's ranks, node by node as they first appear in rank order
    (each node with as many ranks as it holds: unequal counts are the simulator's uneven ring),
    the bottlenecks of the largest size, and the calibration report when a stored run calibrated
    the transport."""
    import numpy as np

    from fabricscope.sim import select

    nodes = list(dict.fromkeys(alloc.rank_hosts))
    per_node = Counter(alloc.rank_hosts)
    gpus = max(per_node.values())  # the topology's node holds the fullest node's ranks
    sim = _simulator(doc, model.transport, framing, gpus, model.gpu)
    where = _node_index(Allocation(nodes, alloc.rank_hosts, doc, alloc.source, alloc.placed), doc)
    groups = np.array([[where[h] * gpus + k for h in nodes for k in range(per_node[h])]], np.int64)
    algo = (
        "ring" if model.backend == "gloo" and model.op == "all_reduce" else None
    )  # gloo's all_reduce is a ring
    report = None
    if calibration is not None:
        from fabricscope.sim.calibrate import calibrate, samples_from_result

        sim, report = calibrate(sim, samples_from_result(calibration), algo=algo)
    results = [select.collective(sim, model.op, size, groups, algo=algo) for size in model.sizes]
    last = results[-1].to_dict()
    return (
        [r.busbw_GBps for r in results],
        [str(b.get("link")) for b in last.get("bottlenecks", []) if b.get("kind") != "transport"],
        report,
    )


def rdma_view(alloc: Allocation) -> Allocation | None:
    """The allocation as the RDMA matrix sees it: every node at its slowest active RDMA port (a
    degraded port at its real rate), on the same fabric; None when no node has an RDMA port."""
    if not alloc.rdma_bps:
        return None
    return dataclasses.replace(alloc, doctor_bps=dict(alloc.rdma_bps), nic_rate_bps=None)
