"""Which (algorithm, protocol) NCCL would run, and how long it takes: NCCL's tuning model with the
flow model as the judge of bandwidth.

For every pair NCCL allows for the operation on this system (``tuning.allowed``/``protocols``):

* bandwidth: the flow model solves the algorithm's own traffic on the topology (ring channels,
  trees, NVLS through the NVSwitch, SHARP on the rails) and gives its bandwidth time; NCCL's
  protocol factors and per-channel caps (``tuning.protocol_busbw``) turn that into the protocol's;
* latency: NCCL's latency model (``tuning.latency_s``), each hop charged by its own link type;
* time = latency + size / algbw, as ``ncclTopoGetAlgoTime``; ``auto`` takes the least.

CPU hosts (``--gpu none``) are not NCCL: the flow model's own alpha-beta timing applies (gloo's
ring), and the protocol is reported as ``none``. The algorithms that are not NCCL's
(``hierarchical``, ``halving-doubling``) and point-to-point operations (alltoall, sendrecv) are
timed by the flow model alone, protocol ``Simple``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from fabricscope import collective_ops
from fabricscope.collective_ops import bus_factor
from fabricscope.errors import FabricscopeError
from fabricscope.sim import collectives, gpus, pipeline, tuning
from fabricscope.sim.engine import CollectiveResult, Simulator
from fabricscope.sim.patterns import Plan
from fabricscope.sim.transport import Transport

AUTO = "auto"
FLOW_ONLY_ALGOS = ("hierarchical", "halving-doubling", "direct")
ALGOS = (AUTO, *tuning.NCCL_ALGOS, *FLOW_ONLY_ALGOS)
PROTO_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
PROTOS = (AUTO, *PROTO_NAMES)
# NCCL's network latencies are RDMA's; a transport adds what its alpha exceeds the InfiniBand
# default by (the socket transport's kernel round trips, for TCP).
RDMA_ALPHA_S = 3.0e-6


@dataclass
class Alternative:
    algo: str
    proto: str
    time_s: float
    latency_s: float
    bandwidth_s: float
    busbw_GBps: float


def comm_shape(sim: Simulator, op: str, groups: np.ndarray | None, sharp: bool) -> tuning.CommShape | None:
    """What NCCL's tuner sees; None for CPU hosts (not NCCL)."""
    topo = sim.topo
    arch = gpus.arch_of(topo.node.gpu)
    if arch is None:
        return None
    if groups is None:
        nn, ranks = topo.nodes, topo.n_gpus
        gpn = topo.node.gpus_per_node
    elif collectives.uneven(topo, groups):  # NCCL sizes its channels by the fullest node
        node = groups[0] // topo.node.gpus_per_node
        nn, gpn, ranks = len(np.unique(node)), int(np.bincount(node).max()), groups.shape[1]
    else:
        nn, gpn = collectives._layout(topo, groups)
        ranks = groups.shape[1]
    intra = topo.node.intra_link
    return tuning.CommShape(
        op=op,
        ranks=ranks,
        nodes=nn,
        arch=arch,
        intra_hw=intra,
        nvswitch=intra == "nvlink" and tuning.NVLS_EFFICIENCY[arch] > 0 and topo.node.nvswitch,
        channels=tuning.channels_for(nn, topo.node.nics_per_node, gpn),
        nics_per_node=topo.node.nics_per_node,
        sharp=sharp,
        net_extra_us=max(0.0, _hop_s(sim.transport) - RDMA_ALPHA_S) * 1e6,
    )


def _hop_s(tr: Transport) -> float:
    return tr.alpha_s if tr.nccl_hop_s is None else tr.nccl_hop_s


def flow_plan(
    sim: Simulator,
    op: str,
    algo: str,
    size: int,
    groups: np.ndarray | None,
    channels: int | None,
    shape: tuning.CommShape | None,
) -> Plan:
    """The traffic of ``algo`` as phases the flow model solves."""
    topo = sim.topo
    if algo in ("ring", "pat"):
        return collectives.plan(topo, op, "ring", size, groups, channels)
    if algo not in ("nvls", "nvlstree", "collnet"):
        return collectives.plan(topo, op, algo, size, groups, channels)
    g = np.arange(topo.n_gpus, dtype=np.int64)[None, :] if groups is None else groups
    eff = tuning.NVLS_EFFICIENCY[shape.arch] if shape is not None else 0.0
    pl = Plan(op, algo, size, g.shape[1], overlap=True)
    if algo == "nvls" and (shape is None or shape.nodes == 1):
        pl.phases.append(collectives.nvls_phase(topo, g, float(size), op, eff))
    elif algo == "nvls":  # NVLS across nodes is NVLS + CollNet (SHARP) in NCCL
        pl.phases.extend(collectives.collnet_phases(topo, g, float(size), op, eff))
    elif algo == "nvlstree":
        pl.phases.extend(collectives.nvlstree_phases(topo, g, float(size), eff))
    else:
        pl.phases.extend(collectives.collnet_phases(topo, g, float(size), op, 0.0))
    return pl


def _split(res: CollectiveResult, overlap: bool) -> tuple[float, float]:
    """(bandwidth time, stall time) of a flow result: serialisation of every step at the slowest
    transfer's rate, without the flow model's own latency (NCCL's model supplies that)."""
    times, stall = [], 0.0
    for ph in res.phases:
        rate = ph.get("min_rate_GBps")
        if not rate:
            continue
        b = ph["bytes_per_transfer"] / (rate * 1e9)
        times.append(b if ph.get("timing") == "pipeline" else ph["steps"] * b)
        stall += ph.get("stall_s", 0.0)
    if not times:
        return 0.0, stall
    return (max(times) if overlap else sum(times)), stall


def _limited(res: CollectiveResult, latency_s: float, bandwidth_s: float) -> str:
    if latency_s > bandwidth_s:
        return "latency (message too small for this many steps)"
    if res.limited_by.startswith("latency"):
        b = res.bottlenecks[0] if res.bottlenecks else {}
        if b.get("kind") == "transport":
            return "per-flow cap of the transport"
        return f"{b['kind']} bandwidth" if b.get("kind") else "bandwidth"
    return res.limited_by


def collective(
    sim: Simulator,
    op: str,
    size: int,
    groups: np.ndarray | None = None,
    algo: str | None = None,
    proto: str | None = None,
    channels: int | None = None,
    sharp: bool = False,
    explain: bool = False,
    pxn: bool = True,
) -> CollectiveResult:
    """One collective at one size: the chosen (or forced) algorithm and protocol."""
    algo = (algo or AUTO).lower()
    proto = (proto or AUTO).lower()
    if algo not in ALGOS:
        raise FabricscopeError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")
    if proto not in PROTOS:
        raise FabricscopeError(f"unknown protocol {proto!r} (choose from {', '.join(PROTOS)})")
    shape = comm_shape(sim, op, groups, sharp)
    p2p = op in ("alltoall", "sendrecv")
    if shape is None or p2p or algo in FLOW_ONLY_ALGOS:
        return _flow_only(sim, op, size, groups, algo, proto, channels, shape is None, pxn)
    names = tuning.NCCL_ALGOS if algo == AUTO else (algo,)
    if groups is not None and collectives.uneven(sim.topo, groups):
        if algo not in (AUTO, "ring"):
            raise FabricscopeError(
                f"--algo {algo}: ranks spread unevenly over the nodes are modelled as a ring only"
            )
        names = ("ring",)
    alts: list[Alternative] = []
    excluded: list[dict[str, str]] = []
    flows: dict[str, CollectiveResult] = {}
    for a in names:
        ok, why = tuning.allowed(shape, a)
        if not ok:
            if algo != AUTO:
                raise FabricscopeError(f"--algo {a}: {why}")
            excluded.append({"algo": a, "reason": why})
            continue
        protos = tuning.protocols(shape, a)
        if proto != AUTO:
            if PROTO_NAMES[proto] not in protos:
                if algo != AUTO:
                    raise FabricscopeError(f"--proto {proto}: NCCL runs {a} with {', '.join(protos)} only")
                excluded.append({"algo": a, "reason": f"runs {', '.join(protos)} only"})
                continue
            protos = [PROTO_NAMES[proto]]
        res = sim.run_plan(flow_plan(sim, op, a, size, groups, channels, shape))
        flows[a] = res
        alts.extend(_alternatives(shape, a, protos, res, size, op))
    if not alts:
        raise FabricscopeError(f"no algorithm NCCL runs for {op} on this system takes --proto {proto}")
    alts.sort(key=lambda x: x.time_s)  # NCCL picks by its own estimate ...
    best = alts[0]
    res = flows[best.algo]
    rp = ramp_of(shape, best, size)  # ... and the kernel then runs its chunks through the pipeline
    time_s = best.time_s + rp.extra_s
    algbw = size / time_s / 1e9
    out = replace(
        res,
        algo=best.algo,
        proto=best.proto,
        time_s=time_s,
        algbw_GBps=algbw,
        busbw_GBps=algbw * bus_factor(op, res.ranks),
        limited_by=_limited(res, best.latency_s + rp.extra_s, best.bandwidth_s),
    )
    out.stats = {
        **res.stats,
        "nccl_latency_s": best.latency_s,
        "nccl_channels": shape.channels,
        "nccl_estimate_s": best.time_s,
        "pipeline": {**asdict(rp), "extra_s": rp.extra_s},
    }
    if explain:
        out.alternatives = [asdict(x) for x in alts]
        out.excluded = excluded
    return out


def ramp_of(shape: tuning.CommShape, alt: Alternative, size: int) -> pipeline.Ramp:
    """What NCCL's estimate of ``alt`` leaves out at this size (sim/pipeline.py)."""
    heads = shape.nics_per_node if shape.nodes > 1 else max(1, int(shape.ppn))
    return pipeline.ramp(
        alt.algo,
        alt.proto,
        shape.op,
        size,
        alt.bandwidth_s,
        channels=shape.channels,
        ranks=shape.ranks,
        nodes=shape.nodes,
        heads=heads,
        nvls_channels=tuning.NVLS_CHANNELS,
    )


def _alternatives(
    shape: tuning.CommShape, algo: str, protos: list[str], res: CollectiveResult, size: int, op: str
) -> list[Alternative]:
    bw_s, stall = _split(res, overlap=algo in ("nvls", "nvlstree", "collnet"))
    factor = bus_factor(op, res.ranks)
    flow_busbw = size / bw_s / 1e9 * factor if bw_s > 0 else math.inf
    out = []
    for p in protos:
        busbw = tuning.protocol_busbw(shape, algo, p, flow_busbw, size)
        t_bw = size / (busbw / factor * 1e9) if math.isfinite(busbw) and busbw > 0 else 0.0
        lat = tuning.latency_s(shape, algo, p, size) + stall
        t = lat + t_bw
        out.append(Alternative(algo, p, t, lat, t_bw, size / t / 1e9 * factor))
    return out


def _flow_only(
    sim: Simulator,
    op: str,
    size: int,
    groups: np.ndarray | None,
    algo: str,
    proto: str,
    channels: int | None,
    cpu: bool,
    pxn: bool = True,
) -> CollectiveResult:
    """Algorithms and hosts NCCL's model does not cover: the flow model's own timing."""
    if proto not in (AUTO, "simple") or (cpu and proto != AUTO):
        why = "CPU hosts (--gpu none) run gloo, not NCCL" if cpu else f"{op}/{algo} runs Simple"
        raise FabricscopeError(f"--proto {proto}: {why}")
    if algo == AUTO:
        algo = collectives.DEFAULT_ALGO[collective_ops.lookup(op, among=collective_ops.MEASURED).name]
    if algo in ("nvls", "nvlstree", "collnet", "pat") and cpu:
        raise FabricscopeError(f"--algo {algo} is NCCL's; CPU hosts (--gpu none) have no NVLink or NCCL")
    if algo in ("nvls", "nvlstree", "collnet", "pat"):
        raise FabricscopeError(f"--algo {algo} does not apply to {op}")
    res = sim.run_plan(collectives.plan(sim.topo, op, algo, size, groups, channels, pxn))
    res.proto = "none" if cpu else "Simple"
    return res
