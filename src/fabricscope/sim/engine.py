"""The simulator: route each distinct pattern once, solve max-min rates, time the phases.

Link capacities seen by the solver are the raw capacities times an efficiency per link kind:
NVLink times the node's NVLink efficiency, network links times the transport's efficiency.
Transport effects that depend on the solution are applied as a second solve:

* RoCE with ECN (DCQCN): contended links (a saturated switch egress fed through two or more
  input ports, where a queue builds; never a NIC's own egress) lose ``1 - dcqcn_efficiency``
  of their capacity to rate oscillation;
* RoCE with PFC but no ECN: flows that share a link upstream of an incast point with flows
  paused there are held to those flows' rate (head-of-line blocking);
* loss: go-back-N / retransmissions inflate link load; TCP flows are capped by the Padhye
  bound; timeouts add an expected stall per step.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabricscope.collective_ops import bus_factor
from fabricscope.errors import FabricscopeError
from fabricscope.sim import alltoall, collectives, effects
from fabricscope.sim.fabrics import KIND_ACCESS, KIND_FABRIC, KIND_NAMES, KIND_NVLINK, Routes
from fabricscope.sim.params import NVLINK_EFFICIENCY
from fabricscope.sim.patterns import AggregatePattern, Pattern, PatternResult, Phase, Plan
from fabricscope.sim.solver import Solution, max_min
from fabricscope.sim.topology import Topology
from fabricscope.sim.transport import Transport

SCHEMA = "fabricscope.sim/v1"
INTRA_ALPHA_S = 0.6e-6  # per NVLink hop of a step: kernel/flag latency (NCCL LL ~1 us per step)
SLICE_BYTES = 512 * 1024  # pipeline granularity of trees and chains (NCCL Simple chunk order)
MAX_ENTRIES = 120_000_000  # incidence entries one pattern may hold (~2.9 GB); beyond: clear error


@dataclass
class CollectiveResult:
    op: str
    algo: str
    size_bytes: int
    ranks: int
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    phases: list[dict[str, Any]]
    bottlenecks: list[dict[str, Any]]
    limited_by: str
    stats: dict[str, Any]
    proto: str = "Simple"
    alternatives: list[dict[str, Any]] | None = None  # --explain: every pair NCCL allows, with its time
    excluded: list[dict[str, str]] | None = None  # --explain: algorithms NCCL does not run here, and why

    def summary(self) -> dict[str, Any]:
        """What a training or serving step keeps of one call: time, bandwidths, the algorithm and
        protocol NCCL picks, and the three worst bottlenecks."""
        return {
            "time_s": self.time_s,
            "busbw_GBps": self.busbw_GBps,
            "algbw_GBps": self.algbw_GBps,
            "size_bytes": self.size_bytes,
            "algo": self.algo,
            "proto": self.proto,
            "limited_by": self.limited_by,
            "bottlenecks": self.bottlenecks[:3],
        }

    def to_dict(self) -> dict[str, Any]:
        d = {
            "op": self.op,
            "algo": self.algo,
            "proto": self.proto,
            "size_bytes": self.size_bytes,
            "ranks": self.ranks,
            "time_s": self.time_s,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "limited_by": self.limited_by,
            "bottlenecks": self.bottlenecks,
            "phases": self.phases,
            "solver": self.stats,
        }
        if self.alternatives is not None:
            d["alternatives"] = self.alternatives
            d["excluded"] = self.excluded or []
        return d


class Simulator:
    """One topology + transport + routing; caches solved patterns across collectives."""

    def __init__(
        self,
        topology: Topology,
        transport: Transport,
        routing: str | None = None,
        seed: int = 0,
        nvlink_efficiency: float = NVLINK_EFFICIENCY,
        intra_alpha_s: float = INTRA_ALPHA_S,
        slice_bytes: int = SLICE_BYTES,
    ) -> None:
        self.topo = topology
        self.transport = transport
        self.routing = (routing or transport.default_routing).lower()
        if self.routing not in ("ecmp", "adaptive"):
            raise FabricscopeError("--routing is ecmp or adaptive")
        self.seed = int(seed)
        if not 0 < nvlink_efficiency <= 1:
            raise FabricscopeError("NVLink efficiency must be in (0, 1]")
        self.nvlink_efficiency = nvlink_efficiency
        self.intra_alpha_s = intra_alpha_s
        self.slice_bytes = slice_bytes
        kind = topology.link_kind
        eff = np.ones(topology.n_links)
        eff[kind == KIND_NVLINK] = nvlink_efficiency
        net = (kind == KIND_ACCESS) | (kind == KIND_FABRIC)
        eff[net] = transport.efficiency
        self.base_cap = topology.cap_Bps * eff
        host = transport.host_cap_Bps(topology.node.nics_per_node)
        if np.isfinite(host):  # the socket transport stages every byte through host memory (sim/transport.py)
            access = kind == KIND_ACCESS
            self.base_cap[access] = np.minimum(self.base_cap[access], host)
        self._cache: dict[str, PatternResult] = {}

    # ----------------------------------------------------------------------------- patterns
    @staticmethod
    def pattern_id(pattern: Pattern) -> str:
        """Identity of a traffic pattern: its key plus a digest of its transfers, so that two
        patterns are solved once only when they really are the same."""
        if isinstance(pattern, AggregatePattern):
            return pattern.id
        cached = getattr(pattern, "_id", None)
        if cached is not None:
            return cached
        h = hashlib.blake2b(digest_size=16)
        for a in (pattern.src_gpu, pattern.dst_gpu, pattern.src_nic, pattern.dst_nic, pattern.entropy):
            h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
        pid = f"{pattern.key}:{len(pattern)}:{h.hexdigest()}"
        pattern._id = pid  # type: ignore[attr-defined]
        return pid

    def solve_pattern(self, pattern: Pattern) -> PatternResult:
        pid = self.pattern_id(pattern)
        if pid in self._cache:
            return self._cache[pid]
        t0 = time.perf_counter()
        tr = self.transport
        if isinstance(pattern, AggregatePattern):
            res = alltoall.solve(
                self.topo,
                tr,
                pattern,
                self.base_cap,
                self.routing == "adaptive",
                self.seed,
                self.intra_alpha_s,
            )
            res.wall_s = time.perf_counter() - t0
            self._cache[pid] = res
            return res
        topo = self.topo
        pattern = collectives.stripe(pattern, tr.stripes)
        n = len(pattern)
        routes = topo.route(
            pattern.src_gpu,
            pattern.dst_gpu,
            pattern.src_nic,
            pattern.dst_nic,
            pattern.entropy,
            self.routing == "adaptive",
            self.seed,
        )
        if len(routes) > MAX_ENTRIES:
            raise FabricscopeError(
                f"pattern needs {len(routes):,} link entries (limit {MAX_ENTRIES:,}); use ECMP routing or fewer ranks"
            )
        lat = np.bincount(routes.flow, weights=routes.coef * topo.lat_s[routes.link], minlength=n)
        network = pattern.src_nic >= 0
        alpha = np.where(network, tr.alpha_s, self.intra_alpha_s)
        alpha[pattern.src_gpu == pattern.dst_gpu] = 0.0
        fx = effects.apply(topo, tr, routes, routes.coef, network, 2.0 * (lat + alpha))
        coef, flow_cap, rto, adjustments = fx.coef, fx.flow_cap, fx.rto, fx.notes
        sol = max_min(n, routes.flow, routes.link, coef, self.base_cap, flow_cap)
        cap_used = self.base_cap
        if network.any() and effects.dcqcn_active(tr):
            cap_used, note = effects.congestion(tr, self.base_cap, self._contended(routes, sol))
            if note:
                sol = max_min(n, routes.flow, routes.link, coef, cap_used, flow_cap)
                adjustments.append(note)
        if network.any() and tr.name == "roce" and tr.lossless and not tr.ecn:
            victim_cap = self._pfc_hol_caps(routes, sol, n)
            hit = victim_cap < sol.rate * (1 - 1e-9)
            if hit.any():
                flow_cap = np.minimum(flow_cap, victim_cap)
                sol = max_min(n, routes.flow, routes.link, coef, cap_used, flow_cap)
                adjustments.append(f"PFC head-of-line blocking slows {int(hit.sum())} victim flow(s)")
        res = PatternResult(pattern, routes, sol, lat, alpha, network, rto, cap_used, adjustments)
        res.wall_s = time.perf_counter() - t0
        self._cache[pid] = res
        return res

    def _fan_in(self, routes: Routes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per link, the number of distinct upstream links its flows arrive over; with the
        incidence sorted by (flow, stage) and each entry's upstream link (-1 at a flow's first)."""
        order = np.lexsort((routes.stage, routes.flow))
        f, lk = routes.flow[order], routes.link[order]
        same = np.r_[False, f[1:] == f[:-1]] if len(f) else np.zeros(0, bool)
        prev = np.full(len(f), -1, np.int64)
        if len(f) > 1:
            prev[1:][same[1:]] = lk[:-1][same[1:]]
        fan = np.zeros(self.topo.n_links, np.int64)
        on = prev >= 0
        if on.any():  # distinct (link, upstream link) pairs, as one int64 key each (a 1-D unique is fast)
            n = np.int64(self.topo.n_links)
            keys = np.unique(lk[on].astype(np.int64) * n + prev[on])
            fan = np.bincount(keys // n, minlength=self.topo.n_links)
        return fan, f, lk, same

    def _contended(self, routes: Routes, sol: Solution) -> np.ndarray:
        """Where DCQCN acts: a saturated switch egress fed by two or more input ports, where a
        queue builds and ECN marks (Zhu et al., SIGCOMM 2015). Not a NIC's own egress, not a
        switch port whose flows all come in through one port (the upstream link paces them), and
        not a port whose flows are all held at their senders' saturated NICs already."""
        fan, f, lk, _ = self._fan_in(routes)
        candidate = sol.saturated & effects.switch_egress(self.topo) & (fan >= 2)
        if not candidate.any():
            return candidate
        # A queue builds only where flows arrive faster than the port drains them: a link that carries
        # some flow whose own NIC egress still has room. Where every flow through it is already held
        # at its sender's saturated NIC (a symmetric all-to-all), the senders pace it: no queue.
        o, E = self.topo.o_fabric, self.topo.n_nics
        nic_egress = (lk >= o) & (lk < o + E)
        sender_full = np.zeros(int(f.max()) + 1 if len(f) else 0, bool)
        sender_full[f[nic_egress]] = sol.saturated[lk[nic_egress]]
        unpaced = np.bincount(lk[~sender_full[f]], minlength=self.topo.n_links) > 0
        return candidate & unpaced

    def _pfc_hol_caps(self, routes: Routes, sol: Solution, n: int) -> np.ndarray:
        """Victim caps under PFC without ECN.

        An incast point is a saturated network link whose flows arrive over at least two
        different upstream links. Its queue fills and PFC pauses every upstream link feeding
        it; a paused link stops all flows of that priority, so every flow crossing such an
        upstream link is held to the pace of the flows paused at the incast point (one FIFO,
        served in arrival order): cap(u) = min over the incast points e that u feeds of the
        fastest rate through e. Flows that do cross e are at or below that rate already, so the
        cap only binds the victims. One pass; documented as an approximation.
        """
        topo = self.topo
        caps = np.full(n, np.inf)
        k = topo.link_kind
        net = (k == KIND_ACCESS) | (k == KIND_FABRIC)
        if len(routes) < 2:
            return caps
        fan_in, f, lk, same = self._fan_in(routes)
        incast = sol.saturated & effects.switch_egress(self.topo) & (fan_in >= 2)
        at_e = np.flatnonzero(incast[lk])  # entries sitting on an incast link
        if not len(at_e):
            return caps
        paced = np.zeros(topo.n_links)
        np.maximum.at(paced, lk[at_e], sol.rate[f[at_e]])
        # upstream entries of each incast entry: the same flow's earlier entries (sorted by stage)
        first = np.r_[0, np.flatnonzero(~same[1:]) + 1]
        start = first[np.searchsorted(first, at_e, side="right") - 1]
        count = at_e - start
        idx = np.repeat(start, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
        e_of = np.repeat(lk[at_e], count)
        up = lk[idx]
        keep = net[up]
        cap_link = np.full(topo.n_links, np.inf)
        np.minimum.at(cap_link, up[keep], paced[e_of[keep]])
        bound = np.isfinite(cap_link[lk])
        np.minimum.at(caps, f[bound], cap_link[lk[bound]])
        return caps

    # ----------------------------------------------------------------------------- timing
    def phase_time(self, phase: Phase, res: PatternResult) -> dict[str, Any]:
        tr = self.transport
        rate = res.solution.rate
        if res.pattern.share is not None:  # striped: a row moves share of the bytes at its rate
            rate = rate / res.pattern.share
        b = float(phase.bytes)
        lat = res.path_lat_s + res.alpha_s
        moving = res.pattern.src_gpu != res.pattern.dst_gpu
        if not moving.any() or b == 0:
            return {
                "name": phase.name,
                "time_s": 0.0,
                "steps": phase.steps,
                "bytes_per_transfer": b,
                "transfers": res.n_transfers or len(res.pattern),
                "min_rate_GBps": None,
                "latency_s": 0.0,
                "stall_s": 0.0,
            }
        r_min = float(rate[moving].min())
        if r_min <= 0:
            raise FabricscopeError(
                f"phase {phase.name!r}: a transfer gets no bandwidth (a zero-capacity link?)"
            )
        if phase.timing == "pipeline":
            # The first slice crosses every hop paying latency and serialisation; the others
            # follow at the bottleneck's pace, their latency hidden by the slices in flight.
            slices = max(1, math.ceil(b / self.slice_bytes))
            t_slice = b / slices / r_min
            lat_hop = float(lat[moving].max())
            fill = phase.steps * (lat_hop + t_slice)
            n_steps = slices + phase.steps - 1
            bw = (slices - 1 + phase.steps) * t_slice
            lat_step = phase.steps * lat_hop / n_steps
            step_s = (fill + (slices - 1) * t_slice) / n_steps
            bw = bw / n_steps
            packets = b / slices / max(tr.payload_bytes, 1)
        elif phase.timing == "ring":
            # Pipelined ring (max-plus view): a step cannot be shorter than the slowest
            # transfer's serialisation b/r_min, nor than one slice going round at the ring's
            # mean hop latency. With one slice per step this is the textbook alpha + b*beta.
            chains = res.pattern.chain[moving]
            sums = np.bincount(chains, weights=lat[moving])
            cnt = np.bincount(chains)
            lat_step = float((sums[cnt > 0] / cnt[cnt > 0]).max())
            slices = max(1, math.ceil(b / self.slice_bytes))
            bw = b / r_min
            step_s = max(bw, lat_step + bw / slices)
            lat_step = step_s - bw
            n_steps = phase.steps
            packets = b / max(tr.payload_bytes, 1)
        else:
            bw = b / r_min
            lat_step = float(lat[moving].max())
            step_s = lat_step + bw
            n_steps = phase.steps
            packets = b / max(tr.payload_bytes, 1)
        stall = 0.0
        if tr.loss > 0 and res.network.any():
            q = tr.message_timeout_probability(packets)
            n_net = (
                res.network_transfers
                if res.network_transfers is not None
                else int((res.network & moving).sum())
            )
            p_any = 1.0 - (1.0 - q) ** n_net
            stall = p_any * float(res.rto_s[res.network].max())
        total = n_steps * (step_s + stall)
        return {
            "name": phase.name,
            "timing": phase.timing,
            "steps": int(n_steps),
            "bytes_per_transfer": b,
            "transfers": int(res.n_transfers or len(res.pattern)),
            "min_rate_GBps": r_min / 1e9,
            "latency_s": n_steps * lat_step,
            "bandwidth_s": n_steps * bw,
            "stall_s": n_steps * stall,
            "time_s": total,
            "adjustments": res.adjustments,
        }

    def bottlenecks(self, res: PatternResult, top: int = 5) -> list[dict[str, Any]]:
        sol = res.solution
        moving = res.pattern.src_gpu != res.pattern.dst_gpu
        if not moving.any():
            return []
        r_min = float(sol.rate[moving].min())
        slow = moving & (sol.rate <= r_min * (1 + 1e-6))
        links = sol.bottleneck[slow]
        out: list[dict[str, Any]] = []
        capped = int((links < 0).sum())
        links = links[links >= 0]
        if len(links):
            ids, counts = np.unique(links, return_counts=True)
            order = np.argsort(-counts, kind="stable")[:top]
            for i, c in zip(ids[order], counts[order], strict=False):
                i = int(i)
                out.append(
                    {
                        "link": self.topo.link_name(i),
                        "kind": KIND_NAMES[int(self.topo.link_kind[i])],
                        "capacity_gbps": float(self.topo.cap_Bps[i]) * 8 / 1e9,
                        "usable_GBps": float(res.eff_cap[i]) / 1e9,
                        "utilization": float(sol.load[i] / res.eff_cap[i]) if res.eff_cap[i] > 0 else None,
                        "flows": int(np.sum(res.routes.link == i))
                        if res.link_flows is None
                        else int(round(res.link_flows[i])),
                        "slowest_flows_bottlenecked": int(c),
                    }
                )
            if len(ids) > top:
                out.append({"link": f"... and {len(ids) - top} more link(s) of the same kind", "kind": None})
        if capped:
            out.append(
                {
                    "link": "per-flow cap",
                    "kind": "transport",
                    "detail": f"{capped} slowest flow(s) limited by the transport's per-flow cap",
                    "cap_GBps": r_min / 1e9,
                }
            )
        return out

    # ----------------------------------------------------------------------------- collectives
    def run_plan(self, pl: Plan) -> CollectiveResult:
        t0 = time.perf_counter()
        phases, total = [], 0.0
        worst: tuple[float, PatternResult | None] = (-1.0, None)
        for ph in pl.phases:
            res = self.solve_pattern(ph.pattern)
            d = self.phase_time(ph, res)
            phases.append(d)
            total += d["time_s"]
            bw_s = d.get("bandwidth_s", 0.0)
            if bw_s > worst[0]:
                worst = (bw_s, res)
        if pl.overlap and phases:
            # pipelined phases: every phase's latency, but only the slowest phase's bandwidth time
            total = sum(p["time_s"] - p.get("bandwidth_s", 0.0) for p in phases) + max(
                p.get("bandwidth_s", 0.0) for p in phases
            )
        algbw = pl.size_bytes / total / 1e9 if total > 0 else math.inf
        busbw = algbw * bus_factor(pl.op, pl.ranks)
        bott = self.bottlenecks(worst[1]) if worst[1] is not None else []
        lat_total = sum(p.get("latency_s", 0.0) for p in phases)
        bw_total = sum(p.get("bandwidth_s", 0.0) for p in phases)
        stall_total = sum(p.get("stall_s", 0.0) for p in phases)
        if stall_total > max(lat_total, bw_total):
            limited = "loss recovery (timeouts)"
        elif lat_total > bw_total:
            limited = "latency (message too small for this many steps)"
        elif bott and bott[0].get("kind") == "transport":
            limited = "per-flow cap of the transport"
        elif bott:
            limited = f"{bott[0]['kind']} bandwidth"
        else:
            limited = "nothing (no data moves)"
        ids = {self.pattern_id(p.pattern) for p in pl.phases}
        n_flows = sum(self._cache[k].n_transfers or len(self._cache[k].pattern) for k in ids)
        stats = {
            "distinct_patterns": len(ids),
            "transfers": n_flows,
            "links": self.topo.n_links,
            "wall_s": time.perf_counter() - t0,
            "routing": self.routing,
            "seed": self.seed,
        }
        return CollectiveResult(
            pl.op, pl.algo, pl.size_bytes, pl.ranks, total, algbw, busbw, phases, bott, limited, stats
        )

    def collective(
        self,
        op: str,
        algo: str | None,
        size_bytes: int,
        groups: np.ndarray | None = None,
        channels: int | None = None,
    ) -> CollectiveResult:
        pl = collectives.plan(self.topo, op, algo, size_bytes, groups, channels)
        return self.run_plan(pl)

    def describe(self) -> dict[str, Any]:
        return {
            "topology": self.topo.describe(),
            "transport": self.transport.describe(),
            "routing": self.routing,
            "seed": self.seed,
            "nvlink_efficiency": self.nvlink_efficiency,
            "intra_node_alpha_s": self.intra_alpha_s,
        }
