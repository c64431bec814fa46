"""alltoall at MoE scale: per-link aggregation instead of p^2 flows.

An alltoall of p ranks is p(p-1) concurrent transfers, all of n/p bytes, finishing together
(one synchronous step). Its time is set by the slowest transfer, and in max-min fairness the
slowest rate is the first level of progressive filling: ``min over links of capacity / (transfers
crossing it)`` (and any per-flow cap below that). So the model needs only how many transfers
cross each link, never the transfers themselves.

Those counts come from *legs* that many transfers share exactly (NCCL's PXN, as the flow model
routes it): a transfer from GPU s on node A to GPU d on node B leaves by the NIC on d's rail r:
s -> owner(A, r) over NVLink (when s is not that NIC's GPU), NIC(A, r) -> NIC(B, r) over PCIe and
the fabric, owner(B, r) -> d over NVLink (when d is not). The gpn x |rail r's GPUs| transfers of a
(A, B, r) triple share the network leg, including its ECMP hash (same NICs, same key), so it is
routed once with that multiplicity: N(N-1)R network legs instead of p(p-1) transfers, routed in
chunks so memory stays flat. NVLink legs are counted per node. 8,192 ranks (1,024 nodes x 8) are
8.4 million network legs.

Exact for the slowest transfer's rate and the step's latency; per-flow rates other than the
slowest are not computed (an alltoall step waits for the slowest). DCQCN is applied to the
saturated switch egresses with more than one leg at the slowest level; PFC head-of-line
blocking is not modelled on this path (docs/sim.md, limits).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from fabricscope.errors import FabricscopeError
from fabricscope.sim import effects
from fabricscope.sim.fabrics import Routes
from fabricscope.sim.patterns import AggregatePattern, Pattern, PatternResult
from fabricscope.sim.solver import Solution
from fabricscope.sim.topology import Topology
from fabricscope.sim.transport import Transport

CHUNK = 262_144  # network legs routed at once


def build(topo: Topology, groups: np.ndarray, layout: tuple[int, int], pxn: bool = True) -> AggregatePattern:
    """The legs of an alltoall over ``groups`` (node-major, every node the same local GPUs)."""
    G, N = topo.node.gpus_per_node, topo.node.nics_per_node
    ng, p = groups.shape
    nn, gpn = layout
    loc = groups.reshape(ng, nn, gpn)
    local = loc[0, 0] % G
    if not np.all(loc % G == local):
        raise FabricscopeError("a large alltoall needs every node to contribute the same local GPUs")
    nodes = loc[:, :, 0] // G
    rail = topo.local_nic_of_gpu[local]  # NIC of each local rank
    owner = topo.local_gpu_of_nic[rail]  # GPU on that NIC's PCIe switch
    per_rail = np.bincount(rail, minlength=N)  # destinations per rail on a node
    # NVLink legs on one node, as (src local, dst local) -> transfers, then copied to every node
    legs: dict[tuple[int, int], float] = {}
    for i, s in enumerate(local):
        for j, d in enumerate(local):
            if i != j:  # direct, inside the node
                legs[(int(s), int(d))] = legs.get((int(s), int(d)), 0.0) + 1.0
        # to the GPU of the NIC it leaves by, for every remote node: the destination's rail (PXN)
        # or its own NIC (without PXN)
        outs = (
            [(r, (nn - 1) * per_rail[r]) for r in np.flatnonzero(per_rail)]
            if pxn
            else [(rail[i], (nn - 1) * gpn)]
        )
        for r, m in outs:
            o = int(topo.local_gpu_of_nic[r])
            if o != s:
                legs[(int(s), o)] = legs.get((int(s), o), 0.0) + m
    for j, d in enumerate(local):  # from the NIC's GPU to the destination, for every remote sender
        o = int(owner[j])
        if o != d:
            legs[(o, int(d))] = legs.get((o, int(d)), 0.0) + (nn - 1) * gpn
    pre = any(
        int(topo.local_gpu_of_nic[r]) != s
        for s in local
        for r in (np.flatnonzero(per_rail) if pxn else [topo.local_nic_of_gpu[s]])
    )
    post = bool(np.any(owner != local))
    pairs = np.array(list(legs.keys()), np.int64).reshape(-1, 2)
    mult = np.array(list(legs.values()))
    base = nodes.ravel() * G
    src = (base[:, None] + pairs[None, :, 0]).ravel()
    dst = (base[:, None] + pairs[None, :, 1]).ravel()
    return AggregatePattern(
        "alltoall-agg" if pxn else "alltoall-agg-nopxn",
        nodes,
        local,
        src,
        dst,
        np.tile(mult, len(base)),
        ng * p * (p - 1),
        pxn,
        int(pre) + int(post),
    )


def network_legs(topo: Topology, ap: AggregatePattern) -> Iterator[tuple[np.ndarray, ...]]:
    """(src GPU, dst GPU, src NIC, dst NIC, transfers) of the network legs, in chunks."""
    G, N = topo.node.gpus_per_node, topo.node.nics_per_node
    rail = topo.local_nic_of_gpu[ap.local]
    per_rail = np.bincount(rail, minlength=N)
    rails = np.flatnonzero(per_rail)
    gpn = len(ap.local)
    if ap.pxn:  # one leg per rail: every sender of the node to that rail's destinations
        ra, rb = rails, rails
        m = gpn * per_rail[rails].astype(np.float64)
    else:  # one leg per (source rail, destination rail)
        ra, rb = np.repeat(rails, len(rails)), np.tile(rails, len(rails))
        m = (per_rail[ra] * per_rail[rb]).astype(np.float64)
    oa, ob = topo.local_gpu_of_nic[ra], topo.local_gpu_of_nic[rb]
    k = len(ra)
    for nodes in ap.nodes:
        nn = len(nodes)
        step = max(1, CHUNK // max(1, (nn - 1) * k))
        for a0 in range(0, nn, step):
            a = np.arange(a0, min(nn, a0 + step))
            ai, bi = np.meshgrid(a, np.arange(nn), indexing="ij")
            keep = ai != bi
            pairs = int(keep.sum())
            A = np.repeat(nodes[ai[keep]], k)
            B = np.repeat(nodes[bi[keep]], k)
            yield (
                A * G + np.tile(oa, pairs),
                B * G + np.tile(ob, pairs),
                A * N + np.tile(ra, pairs),
                B * N + np.tile(rb, pairs),
                np.tile(m, pairs),
            )


def solve(
    topo: Topology,
    tr: Transport,
    ap: AggregatePattern,
    base_cap: np.ndarray,
    adaptive: bool,
    seed: int,
    intra_alpha_s: float,
) -> PatternResult:
    """Per-link transfer counts -> the slowest transfer's rate, its bottleneck and the latency.
    The transport's effects are sim/effects.py's, as for every other pattern."""
    n_links = topo.n_links
    w = np.zeros(n_links)  # transfers per link, times coefficient (and retransmission inflation)
    intra = topo.route(
        ap.intra_src,
        ap.intra_dst,
        np.full(len(ap.intra_src), -1),
        np.full(len(ap.intra_src), -1),
        np.zeros(len(ap.intra_src), np.int64),
        adaptive,
        seed,
    )
    w += np.bincount(intra.link, weights=intra.coef * ap.intra_mult[intra.flow], minlength=n_links)
    lat_intra = _max_path(topo, intra, len(ap.intra_src))
    hops = lat_intra * ap.hops  # NVLink legs of a transfer's way: its round trip includes them
    net = _add_network_legs(topo, tr, ap, w, adaptive, seed, hops)
    legs = net.legs
    lat = max(net.lat + hops + tr.alpha_s if legs else 0.0, lat_intra + intra_alpha_s)
    cap = base_cap
    rate, link = _first_level(cap, w)
    adjustments = [
        f"alltoall by per-link aggregation: {legs:,} network legs for {ap.transfers:,} transfers",
        *net.notes,
    ]
    if tr.name == "roce" and tr.lossless and not tr.ecn:
        adjustments.append("PFC head-of-line blocking is not modelled for an aggregated alltoall")
    if legs and effects.dcqcn_active(tr):
        cap, note = _dcqcn(topo, tr, cap, w, rate)
        if note:
            rate, link = _first_level(cap, w)
            adjustments.append(note)
    rtt = 2 * (net.lat + hops + tr.alpha_s)
    if net.flow_cap < rate:
        rate, link = net.flow_cap, -1
    load = w * rate
    sol = Solution(
        rate=np.array([rate]),
        bottleneck=np.array([link]),
        load=load,
        saturated=(w > 0) & (load >= cap * (1 - 1e-9)),
        iterations=1,
    )
    one = np.array([0], np.int64)
    rep = Pattern(
        ap.key, one, one + 1, one if legs else -one - 1, one + 1 if legs else -one - 1, one * 0, one * 0
    )
    rto = np.array([tr.rto(rtt) if tr.loss > 0 else 0.0])
    res = PatternResult(
        rep,
        intra,
        sol,
        np.array([lat - (tr.alpha_s if legs else intra_alpha_s)]),
        np.array([tr.alpha_s if legs else intra_alpha_s]),
        np.array([legs > 0]),
        rto,
        cap,
        adjustments,
    )
    res.n_transfers = ap.transfers
    res.link_flows = w
    res.network_transfers = int(round(net.transfers))
    return res


@dataclass
class _NetworkLegs:
    """What routing the network legs found besides the per-link counts: the longest path, how many
    legs and transfers, the transport's per-flow cap and its notes."""

    lat: float = 0.0
    legs: int = 0
    flow_cap: float = np.inf
    transfers: float = 0.0
    notes: list[str] = field(default_factory=list)


def _add_network_legs(
    topo: Topology, tr: Transport, ap: AggregatePattern, w: np.ndarray, adaptive: bool, seed: int, hops: float
) -> _NetworkLegs:
    """Route the network legs chunk by chunk, adding their transfers (times the transport's
    coefficient, sim/effects.py) to the per-link counts ``w``."""
    out = _NetworkLegs()
    for src, dst, sn, dn, mult in network_legs(topo, ap):
        r = topo.route(src, dst, sn, dn, np.zeros(len(src), np.int64), adaptive, seed)
        path = np.bincount(r.flow, weights=r.coef * topo.lat_s[r.link], minlength=len(src))
        if tr.loss > 0 or np.isfinite(tr.per_flow_cap_Bps):  # the transport changes the legs (sim/effects.py)
            fx = effects.apply(
                topo,
                tr,
                r,
                r.coef,
                np.ones(len(src), bool),
                2 * (tr.alpha_s + path + hops),
                per_connection=True,
            )
            coef = fx.coef
            out.flow_cap = min(out.flow_cap, float(fx.flow_cap.min()))
            out.notes = out.notes or fx.notes
        else:
            coef = r.coef
        w += np.bincount(r.link, weights=coef * mult[r.flow], minlength=topo.n_links)
        out.lat = max(out.lat, float(path.max()))
        out.legs += len(src)
        out.transfers += float(mult.sum())
    return out


def _dcqcn(
    topo: Topology, tr: Transport, cap: np.ndarray, w: np.ndarray, rate: float
) -> tuple[np.ndarray, str | None]:
    """DCQCN on the saturated switch egresses that carry more than one leg at the slowest level."""
    sat = (w > 0) & (w * rate >= cap * (1 - 1e-9)) & effects.switch_egress(topo) & (w > 1)
    o, E = topo.o_fabric, topo.n_nics
    nic_out = slice(o, o + E)
    if np.all((w[nic_out] == 0) | (w[nic_out] * rate >= cap[nic_out] * (1 - 1e-9))):
        # every sending NIC is full at the same level: the senders pace the receivers' ports, where
        # no queue builds (symmetric all-to-all); queues can still build inside the fabric
        sat[o + E : o + 2 * E] = False
    return effects.congestion(tr, cap, sat)


def _max_path(topo: Topology, routes: Routes, n: int) -> float:
    if not len(routes):
        return 0.0
    lat = np.bincount(routes.flow, weights=routes.coef * topo.lat_s[routes.link], minlength=n)
    return float(lat.max())


def _first_level(cap: np.ndarray, w: np.ndarray) -> tuple[float, int]:
    """Progressive filling's first freeze: min over loaded links of capacity / load."""
    on = np.flatnonzero(w > 0)
    if not len(on):
        return float("inf"), -1
    ratio = cap[on] / w[on]
    i = int(np.argmin(ratio))
    return float(ratio[i]), int(on[i])
