"""The network between NICs: the Clos and dragonfly fabric families, and the sparse incidence
(``Routes``) every router returns.

A fabric is a table of links (capacity, latency, kind) plus a vectorised ``route`` that turns
(src NIC, dst NIC) arrays into (flow, link, coefficient) triples: 1 for a hashed ECMP path, 1/k on
each of k sprayed paths under adaptive routing. Split from topology.py, which assembles GPUs,
NVLink and PCIe around a fabric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fabricscope.errors import FabricscopeError
from fabricscope.sim.hashing import flow_hash, pick

KIND_NVLINK, KIND_PCIE, KIND_ACCESS, KIND_FABRIC = 0, 1, 2, 3
KIND_NAMES = ("nvlink", "pcie", "access", "fabric")


@dataclass
class Routes:
    """Sparse incidence: flow ``flow[i]`` puts share ``coef[i]`` of its bytes on ``link[i]``.

    ``stage[i]`` orders a flow's links along its path (smaller is nearer the sender); the PFC
    head-of-line model needs to know which links lie upstream of a congested one.
    """

    flow: np.ndarray
    link: np.ndarray
    coef: np.ndarray
    stage: np.ndarray

    def __len__(self) -> int:
        return len(self.flow)

    @staticmethod
    def concat(parts: list[Routes]) -> Routes:
        parts = [p for p in parts if len(p.flow)]
        if not parts:
            e = np.zeros(0, dtype=np.int64)
            return Routes(e, e.copy(), np.zeros(0), np.zeros(0, np.int16))
        return Routes(
            np.concatenate([p.flow for p in parts]),
            np.concatenate([p.link for p in parts]),
            np.concatenate([p.coef for p in parts]),
            np.concatenate([p.stage for p in parts]),
        )

    @staticmethod
    def unit(flow: np.ndarray, link: np.ndarray, stage: int = 0, coef: np.ndarray | None = None) -> Routes:
        flow = np.asarray(flow, np.int64)
        c = np.ones(len(flow)) if coef is None else np.asarray(coef, np.float64)
        return Routes(flow, np.asarray(link, np.int64), c, np.full(len(flow), stage, np.int16))


class Fabric:
    """NIC-to-NIC network. Subclasses fill the arrays and implement ``route``."""

    family = "fabric"
    n_nics: int
    cap_Bps: np.ndarray
    lat_s: np.ndarray
    link_kind: np.ndarray

    @property
    def n_links(self) -> int:
        return len(self.cap_Bps)

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray, adaptive: bool, seed: int) -> Routes:
        raise NotImplementedError

    def link_name(self, i: int) -> str:
        """The access links every fabric numbers first (``_access_arrays``): NIC ``e`` to its switch
        at ``e``, back at ``E + e``; the fabric names the rest."""
        E = self.n_nics
        if i < E:
            return f"nic{i}->{self._access_switch(i)}"
        if i < 2 * E:
            return f"{self._access_switch(i - E)}->nic{i - E}"
        return self._core_link_name(i)

    def _access_switch(self, nic: int) -> str:
        raise NotImplementedError

    def _core_link_name(self, i: int) -> str:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {}


def _access_arrays(access_Bps: np.ndarray, latency_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cap = np.concatenate([access_Bps, access_Bps]).astype(np.float64)
    lat = np.full(len(cap), latency_s)
    kind = np.full(len(cap), KIND_ACCESS, dtype=np.int8)
    return cap, lat, kind


class ClosFabric(Fabric):
    """Up/down routed Clos: leaves, spines grouped in pods, cores grouped in planes.

    Leaf ``l`` is in pod ``l // leaves_per_pod`` and links to every spine of its pod; spine ``j``
    of every pod links to every core of plane ``j`` (Al-Fares et al., SIGCOMM 2008). A path
    goes up to the lowest common tier and down; the down path from a core is unique, so ECMP
    choices are the spine (one hash) and the core (a second, independent hash).
    """

    family = "clos"

    def __init__(
        self,
        *,
        leaf_of_nic: np.ndarray,
        n_leaves: int,
        leaves_per_pod: int,
        spines_per_pod: int,
        cores_per_plane: int,
        access_Bps: np.ndarray,
        uplink_Bps: float,
        core_Bps: float,
        link_latency_s: float,
        leaf_label: Any = None,
    ) -> None:
        self.leaf_of_nic = np.asarray(leaf_of_nic, dtype=np.int64)
        self.n_nics = E = len(self.leaf_of_nic)
        self.L, self.S, self.K = int(n_leaves), int(spines_per_pod), int(cores_per_plane)
        self.lpp = max(1, int(leaves_per_pod))
        self.P = -(-self.L // self.lpp)
        if self.L > 1 and self.S < 1:
            raise FabricscopeError("a fabric with several leaves needs at least one spine")
        if self.P > 1 and self.K < 1:
            raise FabricscopeError("a fabric with several pods needs a core tier")
        self.leaf_label = leaf_label or (lambda leaf: f"leaf{leaf}")
        cap, lat, kind = _access_arrays(access_Bps, link_latency_s)
        self.o_up, self.o_down = 0, E
        self.o_ls = 2 * E
        self.o_sl = self.o_ls + self.L * self.S
        self.o_sc = self.o_sl + self.L * self.S
        self.o_cs = self.o_sc + self.P * self.S * self.K
        n_ls = self.L * self.S
        n_sc = self.P * self.S * self.K if self.P > 1 else 0
        if self.P == 1:
            self.K = 0
        # Adaptive routing sprays a flow evenly over every spine (and core) it may use, and every
        # flow on a leaf's uplinks (a pod's core links) is sprayed the same way, so the S (S*K)
        # parallel links carry identical loads and saturate together. Their capacity
        # constraints are the same inequality, so one aggregate link per leaf (per pod) with S
        # (S*K) times the capacity gives exactly the same max-min rates with S (S*K) times fewer
        # incidence entries. ECMP never uses these aggregates; adaptive never uses the others.
        self.o_agg_up = self.o_cs + self.P * self.S * self.K
        self.o_agg_down = self.o_agg_up + self.L
        self.o_agg_cup = self.o_agg_down + self.L
        self.o_agg_cdown = self.o_agg_cup + self.P
        n_agg = 2 * self.L + 2 * self.P
        self.cap_Bps = np.concatenate(
            [
                cap,
                np.full(2 * n_ls, uplink_Bps),
                np.full(2 * n_sc, core_Bps),
                np.full(2 * self.L, uplink_Bps * self.S),
                np.full(2 * self.P, core_Bps * self.S * max(self.K, 1)),
            ]
        )
        self.lat_s = np.concatenate([lat, np.full(2 * (n_ls + n_sc) + n_agg, link_latency_s)])
        self.link_kind = np.concatenate(
            [kind, np.full(2 * (n_ls + n_sc) + n_agg, KIND_FABRIC, dtype=np.int8)]
        )
        self.uplink_Bps, self.core_Bps = uplink_Bps, core_Bps

    def describe(self) -> dict[str, Any]:
        return {
            "leaves": self.L,
            "spines": self.S * self.P,
            "pods": self.P,
            "spines_per_pod": self.S,
            "cores": self.S * self.K if self.P > 1 else 0,
            "uplink_gbps": self.uplink_Bps * 8 / 1e9 if self.S else None,
        }

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray, adaptive: bool, seed: int) -> Routes:
        n = len(src)
        fid = np.arange(n, dtype=np.int64)
        la, lb = self.leaf_of_nic[src], self.leaf_of_nic[dst]
        pa, pb = la // self.lpp, lb // self.lpp
        parts = [Routes.unit(fid, self.o_up + src, 0), Routes.unit(fid, self.o_down + dst, 5)]
        up = la != lb
        cross = pa != pb
        S, K = self.S, self.K
        if not adaptive:
            h = flow_hash(src, dst, key, seed=seed)
            j = pick(h, max(S, 1), salt=1)
            f = fid[up]
            parts.append(Routes.unit(f, self.o_ls + la[up] * S + j[up], 1))
            parts.append(Routes.unit(f, self.o_sl + lb[up] * S + j[up], 4))
            if cross.any():
                k = pick(h, max(K, 1), salt=2)
                f = fid[cross]
                parts.append(Routes.unit(f, self.o_sc + (pa[cross] * S + j[cross]) * K + k[cross], 2))
                parts.append(Routes.unit(f, self.o_cs + (pb[cross] * S + j[cross]) * K + k[cross], 3))
            return Routes.concat(parts)
        # Adaptive routing / packet spraying: the flow's bytes spread evenly over every
        # equal-cost choice (what ideal per-packet load balancing converges to), expressed on
        # the exact aggregate links described in __init__.
        f = fid[up]
        parts.append(Routes.unit(f, self.o_agg_up + la[up], 1))
        parts.append(Routes.unit(f, self.o_agg_down + lb[up], 4))
        f = fid[cross]
        parts.append(Routes.unit(f, self.o_agg_cup + pa[cross], 2))
        parts.append(Routes.unit(f, self.o_agg_cdown + pb[cross], 3))
        return Routes.concat(parts)

    def _access_switch(self, nic: int) -> str:
        return self.leaf_label(int(self.leaf_of_nic[nic]))

    def _core_link_name(self, i: int) -> str:
        S, K = self.S, self.K
        if i < self.o_sl:
            leaf, j = divmod(i - self.o_ls, S)
            return f"{self.leaf_label(leaf)}->{self._spine(leaf // self.lpp, j)}"
        if i < self.o_sc:
            leaf, j = divmod(i - self.o_sl, S)
            return f"{self._spine(leaf // self.lpp, j)}->{self.leaf_label(leaf)}"
        if i < self.o_cs:
            ps, k = divmod(i - self.o_sc, K)
            p, j = divmod(ps, S)
            return f"{self._spine(p, j)}->core({j},{k})"
        if i < self.o_agg_up:
            ps, k = divmod(i - self.o_cs, K)
            p, j = divmod(ps, S)
            return f"core({j},{k})->{self._spine(p, j)}"
        if i < self.o_agg_down:
            return f"{self.leaf_label(i - self.o_agg_up)}->spines (sprayed over {S})"
        if i < self.o_agg_cup:
            return f"spines (sprayed over {S})->{self.leaf_label(i - self.o_agg_down)}"
        if i < self.o_agg_cdown:
            return f"pod{i - self.o_agg_cup} spines->cores (sprayed over {S * K})"
        return f"cores->pod{i - self.o_agg_cdown} spines (sprayed over {S * K})"

    def _spine(self, pod: int, j: int) -> str:
        return f"spine{j}" if self.P == 1 else f"spine(pod{pod},{j})"


class DragonflyFabric(Fabric):
    """Dragonfly (Kim et al., ISCA 2008): groups of ``a`` routers, all-to-all local links inside a
    group, ``h`` global links per router, ``p`` NICs per router. Minimal routing: local hop to
    the router that owns a global link to the destination group, the global link, a local hop
    to the destination router. ECMP hashes among the parallel global links of a group pair;
    adaptive routing spreads over them. Non-minimal (Valiant/UGAL) paths are not modelled.
    """

    family = "dragonfly"

    def __init__(
        self,
        *,
        n_nics: int,
        hosts_per_router: int,
        routers_per_group: int,
        global_per_router: int,
        access_Bps: np.ndarray,
        local_Bps: float,
        global_Bps: float,
        link_latency_s: float,
        global_latency_s: float,
    ) -> None:
        self.n_nics = E = n_nics
        self.p, self.a, self.h = hosts_per_router, routers_per_group, global_per_router
        self.R = -(-E // self.p)
        self.G = -(-self.R // self.a)
        if self.G > 1:
            if self.G - 1 > self.a * self.h:
                raise FabricscopeError(
                    f"dragonfly with {self.G} groups needs at least {self.G - 1} global ports per group; "
                    f"{self.a} routers x {self.h} global links have {self.a * self.h}"
                )
            self.m = (self.a * self.h) // (self.G - 1)
        else:
            self.m = 0
        cap, lat, kind = _access_arrays(access_Bps, link_latency_s)
        self.o_local = 2 * E
        n_local = self.G * self.a * self.a
        self.o_global = self.o_local + n_local
        n_pairs = self.G * (self.G - 1) // 2
        n_global = 2 * n_pairs * self.m
        self.cap_Bps = np.concatenate([cap, np.full(n_local, local_Bps), np.full(n_global, global_Bps)])
        self.lat_s = np.concatenate(
            [lat, np.full(n_local, link_latency_s), np.full(n_global, global_latency_s)]
        )
        self.link_kind = np.concatenate([kind, np.full(n_local + n_global, KIND_FABRIC, dtype=np.int8)])
        self.local_Bps, self.global_Bps = local_Bps, global_Bps

    def describe(self) -> dict[str, Any]:
        return {
            "groups": self.G,
            "routers_per_group": self.a,
            "hosts_per_router": self.p,
            "global_links_per_router": self.h,
            "global_links_per_group_pair": self.m,
            "global_gbps": self.global_Bps * 8 / 1e9,
        }

    def _pair(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        lo, hi = np.minimum(x, y), np.maximum(x, y)
        return lo * (2 * self.G - lo - 1) // 2 + (hi - lo - 1)

    def _gateway(self, g: np.ndarray, peer: np.ndarray, i: np.ndarray) -> np.ndarray:
        pos = np.where(peer < g, peer, peer - 1)
        return g * self.a + (pos * self.m + i) // self.h

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray, adaptive: bool, seed: int) -> Routes:
        n = len(src)
        fid = np.arange(n, dtype=np.int64)
        rs, rd = src // self.p, dst // self.p
        gs, gd = rs // self.a, rd // self.a
        parts = [Routes.unit(fid, src, 0), Routes.unit(fid, self.n_nics + dst, 4)]
        same_group = (gs == gd) & (rs != rd)
        f = fid[same_group]
        parts.append(Routes.unit(f, self._local(rs[f], rd[f]), 2))
        cross = gs != gd
        f = fid[cross]
        if len(f):
            if adaptive:
                ff = np.repeat(f, self.m)
                ii = np.tile(np.arange(self.m), len(f))
                coef = np.full(len(ff), 1.0 / self.m)
            else:
                h = flow_hash(src[f], dst[f], key[f], seed=seed)
                ff, ii, coef = f, pick(h, self.m, salt=3), np.ones(len(f))
            a, b = gs[ff], gd[ff]
            rx, ry = self._gateway(a, b, ii), self._gateway(b, a, ii)
            gl = self.o_global + (self._pair(a, b) * self.m + ii) * 2 + (a > b)
            parts.append(Routes.unit(ff, gl, 2, coef))
            pre = rx != rs[ff]
            parts.append(Routes.unit(ff[pre], self._local(rs[ff][pre], rx[pre]), 1, coef[pre]))
            post = ry != rd[ff]
            parts.append(Routes.unit(ff[post], self._local(ry[post], rd[ff][post]), 3, coef[post]))
        return Routes.concat(parts)

    def _local(self, r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
        g = r1 // self.a
        return self.o_local + (g * self.a + r1 % self.a) * self.a + r2 % self.a

    def _access_switch(self, nic: int) -> str:
        return f"router{nic // self.p}"

    def _core_link_name(self, i: int) -> str:
        if i < self.o_global:
            g, rest = divmod(i - self.o_local, self.a * self.a)
            r1, r2 = divmod(rest, self.a)
            return f"g{g}/router{g * self.a + r1}->router{g * self.a + r2}"
        idx, direction = divmod(i - self.o_global, 2)
        pair, k = divmod(idx, self.m)
        # invert the triangular pair index
        x = 0
        while pair >= self.G - x - 1:
            pair -= self.G - x - 1
            x += 1
        y = x + 1 + pair
        a, b = (x, y) if direction == 0 else (y, x)
        return f"global g{a}->g{b} #{k}"
