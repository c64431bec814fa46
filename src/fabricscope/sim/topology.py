"""Topologies as link tables (numpy arrays) plus a vectorised router per fabric family.

A topology is: GPUs grouped in nodes (an NVSwitch domain per node, one link per GPU per
direction), NICs on PCIe (one link per NIC per direction), and a *fabric* that connects NICs:
a Clos (star, leaf-spine, 2/3-tier fat-tree, rail-optimized), a dragonfly, or a user graph
from YAML. Links are numbered globally; every link has a capacity (bytes/s), a latency and a
kind. Routing turns (src, dst) arrays into a sparse incidence: (flow, link, coefficient)
triples, where the coefficient is the share of the flow's bytes that crosses the link (1 for
a hashed ECMP path, 1/k on each of k sprayed paths under adaptive routing).

Nothing here is a Python object per packet, flow or link: 100,000 GPUs are a few arrays.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricscope.errors import FabricscopeError
from fabricscope.sim.hashing import flow_hash, pick

KIND_NVLINK, KIND_PCIE, KIND_ACCESS, KIND_FABRIC = 0, 1, 2, 3
KIND_NAMES = ("nvlink", "pcie", "access", "fabric")

TOPOLOGY_KINDS = ("single-node", "star", "leaf-spine", "fat-tree", "rail-optimized", "dragonfly")

# Per-GPU NVLink bandwidth into the NVSwitch domain (GB/s, one direction) and the effective
# PCIe bandwidth of the NIC's x16 slot (GB/s, one direction, after TLP/DLLP overhead ~88%).
# Sources: NVIDIA H100/A100/B200 datasheets (900/600/1800 GB/s bidirectional NVLink);
# PCIe Gen4/5/6 x16 = 31.5/63/126 GB/s raw per direction.
GPU_PRESETS: dict[str, dict[str, float]] = {
    "a100": {"nvlink_GBps": 300.0, "pcie_GBps": 27.7},
    "h100": {"nvlink_GBps": 450.0, "pcie_GBps": 55.4},
    "h200": {"nvlink_GBps": 450.0, "pcie_GBps": 55.4},
    "b200": {"nvlink_GBps": 900.0, "pcie_GBps": 110.9},
    "none": {"nvlink_GBps": math.inf, "pcie_GBps": math.inf},
}


@dataclass(frozen=True)
class NodeSpec:
    """One server: GPUs in an NVLink/NVSwitch domain and NICs on PCIe."""

    gpus_per_node: int = 8
    nics_per_node: int = 8
    nvlink_GBps: float = 450.0
    pcie_GBps: float = 55.4
    nvlink_latency_s: float = 0.35e-6  # per link; a GPU->GPU hop crosses two
    pcie_latency_s: float = 0.4e-6
    gpu: str = "h100"

    @classmethod
    def preset(cls, gpu: str, gpus_per_node: int, nics_per_node: int | None = None, **overrides: Any) -> NodeSpec:
        key = gpu.lower()
        if key not in GPU_PRESETS:
            raise FabricscopeError(f"unknown GPU preset {gpu!r} (choose from {', '.join(GPU_PRESETS)})")
        values: dict[str, Any] = dict(GPU_PRESETS[key])
        values.update({k: v for k, v in overrides.items() if v is not None})
        nics = gpus_per_node if nics_per_node is None else nics_per_node
        spec = cls(gpus_per_node=gpus_per_node, nics_per_node=nics, gpu=key, **values)
        spec.validate()
        return spec

    def validate(self) -> None:
        if self.gpus_per_node < 1 or self.gpus_per_node > 1024:
            raise FabricscopeError("--gpus-per-node must be between 1 and 1024")
        if self.nics_per_node < 1 or self.nics_per_node > 64:
            raise FabricscopeError("--nics-per-node must be between 1 and 64")
        if not (self.nvlink_GBps > 0 and self.pcie_GBps > 0):
            raise FabricscopeError("NVLink and PCIe bandwidths must be positive")


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
        self.cap_Bps = np.concatenate([
            cap, np.full(2 * n_ls, uplink_Bps), np.full(2 * n_sc, core_Bps),
            np.full(2 * self.L, uplink_Bps * self.S), np.full(2 * self.P, core_Bps * self.S * max(self.K, 1)),
        ])
        self.lat_s = np.concatenate([lat, np.full(2 * (n_ls + n_sc) + n_agg, link_latency_s)])
        self.link_kind = np.concatenate([kind, np.full(2 * (n_ls + n_sc) + n_agg, KIND_FABRIC, dtype=np.int8)])
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

    def link_name(self, i: int) -> str:
        E, S, K = self.n_nics, self.S, self.K
        if i < self.o_down:
            return f"nic{i}->{self.leaf_label(int(self.leaf_of_nic[i]))}"
        if i < self.o_ls:
            e = i - E
            return f"{self.leaf_label(int(self.leaf_of_nic[e]))}->nic{e}"
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
        self.lat_s = np.concatenate([lat, np.full(n_local, link_latency_s), np.full(n_global, global_latency_s)])
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

    def link_name(self, i: int) -> str:
        E = self.n_nics
        if i < E:
            return f"nic{i}->router{i // self.p}"
        if i < 2 * E:
            return f"router{(i - E) // self.p}->nic{i - E}"
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


@dataclass
class Topology:
    """GPUs, NICs and a fabric, with one global link table."""

    kind: str
    nodes: int
    node: NodeSpec
    fabric: Fabric | None
    nic_rate_Bps: float
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        G, N = self.node.gpus_per_node, self.node.nics_per_node
        self.n_gpus = P = self.nodes * G
        self.n_nics = E = self.nodes * N
        self.o_nvl_up, self.o_nvl_down = 0, P
        self.o_pcie_up, self.o_pcie_down = 2 * P, 2 * P + E
        self.o_fabric = 2 * P + 2 * E
        nvl = self.node.nvlink_GBps * 1e9
        pcie = self.node.pcie_GBps * 1e9
        fab_cap = self.fabric.cap_Bps if self.fabric else np.zeros(0)
        fab_lat = self.fabric.lat_s if self.fabric else np.zeros(0)
        fab_kind = self.fabric.link_kind if self.fabric else np.zeros(0, dtype=np.int8)
        self.cap_Bps = np.concatenate([np.full(2 * P, nvl), np.full(2 * E, pcie), fab_cap])
        self.lat_s = np.concatenate(
            [np.full(2 * P, self.node.nvlink_latency_s), np.full(2 * E, self.node.pcie_latency_s), fab_lat]
        )
        self.link_kind = np.concatenate(
            [np.full(2 * P, KIND_NVLINK, np.int8), np.full(2 * E, KIND_PCIE, np.int8), fab_kind]
        )
        local = np.arange(G)
        self.local_nic_of_gpu = local * N // G  # nearest NIC of each local GPU
        self.local_gpu_of_nic = np.arange(N) * G // N  # GPU on the NIC's PCIe switch

    @property
    def n_links(self) -> int:
        return len(self.cap_Bps)

    def nic_of_gpu(self, gpu: np.ndarray) -> np.ndarray:
        G, N = self.node.gpus_per_node, self.node.nics_per_node
        return (gpu // G) * N + self.local_nic_of_gpu[gpu % G]

    def gpu_of_nic(self, nic: np.ndarray) -> np.ndarray:
        G, N = self.node.gpus_per_node, self.node.nics_per_node
        return (nic // N) * G + self.local_gpu_of_nic[nic % N]

    def route(
        self,
        src_gpu: np.ndarray,
        dst_gpu: np.ndarray,
        src_nic: np.ndarray,
        dst_nic: np.ndarray,
        key: np.ndarray,
        adaptive: bool,
        seed: int,
    ) -> Routes:
        """Links of each transfer. ``src_nic < 0`` means an intra-node (NVLink) transfer.

        An inter-node transfer whose GPU is not on the chosen NIC's PCIe switch first crosses
        NVLink to the GPU that is (NCCL's PXN), so rail-aligned channels stay on their rail.
        """
        src_gpu = np.asarray(src_gpu, np.int64)
        dst_gpu = np.asarray(dst_gpu, np.int64)
        src_nic = np.asarray(src_nic, np.int64)
        dst_nic = np.asarray(dst_nic, np.int64)
        key = np.asarray(key, np.int64)
        fid = np.arange(len(src_gpu), dtype=np.int64)
        parts: list[Routes] = []
        intra = src_nic < 0
        moving = intra & (src_gpu != dst_gpu)
        f = fid[moving]
        parts.append(Routes.unit(f, self.o_nvl_up + src_gpu[f], 0))
        parts.append(Routes.unit(f, self.o_nvl_down + dst_gpu[f], 1))
        inter = ~intra
        f = fid[inter]
        if len(f):
            if self.fabric is None:
                raise FabricscopeError(f"topology {self.kind!r} has no network between nodes")
            sn, dn = src_nic[f], dst_nic[f]
            s_owner, d_owner = self.gpu_of_nic(sn), self.gpu_of_nic(dn)
            pxn = src_gpu[f] != s_owner
            parts.append(Routes.unit(f[pxn], self.o_nvl_up + src_gpu[f][pxn], 0))
            parts.append(Routes.unit(f[pxn], self.o_nvl_down + s_owner[pxn], 1))
            parts.append(Routes.unit(f, self.o_pcie_up + sn, 2))
            r = self.fabric.route(sn, dn, key[f], adaptive, seed)
            parts.append(Routes(f[r.flow], self.o_fabric + r.link, r.coef, (r.stage + 3).astype(np.int16)))
            parts.append(Routes.unit(f, self.o_pcie_down + dn, 40))
            post = dst_gpu[f] != d_owner
            parts.append(Routes.unit(f[post], self.o_nvl_up + d_owner[post], 41))
            parts.append(Routes.unit(f[post], self.o_nvl_down + dst_gpu[f][post], 42))
        return Routes.concat(parts)

    def link_name(self, i: int) -> str:
        G, N = self.node.gpus_per_node, self.node.nics_per_node
        P, E = self.n_gpus, self.n_nics
        if i < P:
            return f"node{i // G}/gpu{i % G}->nvswitch"
        if i < 2 * P:
            g = i - P
            return f"node{g // G}/nvswitch->gpu{g % G}"
        if i < 2 * P + E:
            e = i - 2 * P
            return f"node{e // N}/pcie->nic{e % N}"
        if i < self.o_fabric:
            e = i - 2 * P - E
            return f"node{e // N}/nic{e % N}->pcie"
        assert self.fabric is not None
        name = self.fabric.link_name(i - self.o_fabric)
        # fabric names use global NIC numbers; show them as node/nic
        return re.sub(r"\bnic(\d+)", lambda m: f"node{int(m.group(1)) // N}/nic{int(m.group(1)) % N}", name)

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "nodes": self.nodes,
            "gpus_per_node": self.node.gpus_per_node,
            "nics_per_node": self.node.nics_per_node,
            "gpus": self.n_gpus,
            "nic_gbps": self.nic_rate_Bps * 8 / 1e9,
            "gpu": self.node.gpu,
            "nvlink_GBps": _finite(self.node.nvlink_GBps),
            "pcie_GBps": _finite(self.node.pcie_GBps),
            "links": self.n_links,
        }
        d.update(self.params)
        if self.fabric is not None:
            d.update(self.fabric.describe())
        return d


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------------------------- builders


@dataclass
class TopologyOptions:
    """Everything a user can set about a fabric; unset values take documented defaults."""

    kind: str = "rail-optimized"
    nodes: int = 2
    gpus_per_node: int = 8
    nics_per_node: int | None = None
    nic_rate_bps: float = 400e9
    gpu: str = "h100"
    nvlink_GBps: float | None = None
    pcie_GBps: float | None = None
    oversubscription: float = 1.0
    hosts_per_leaf: int | None = None
    spines: int | None = None
    uplink_rate_bps: float | None = None
    radix: int | None = None
    tiers: int | None = None
    hosts_per_router: int | None = None
    routers_per_group: int | None = None
    global_links_per_router: int | None = None
    global_rate_bps: float | None = None
    link_latency_s: float = 0.25e-6
    global_latency_s: float = 1.0e-6
    node_nic_rate_bps: Mapping[int, float] = field(default_factory=dict)


def build(opts: TopologyOptions) -> Topology:
    """Build one of the named topology families from parameters."""
    kind = opts.kind.lower()
    if kind not in TOPOLOGY_KINDS:
        raise FabricscopeError(f"unknown topology {opts.kind!r} (choose from {', '.join(TOPOLOGY_KINDS)})")
    if opts.nodes < 1 or opts.nodes > 1_000_000:
        raise FabricscopeError("--nodes must be between 1 and 1,000,000")
    node = NodeSpec.preset(
        opts.gpu, opts.gpus_per_node, opts.nics_per_node, nvlink_GBps=opts.nvlink_GBps, pcie_GBps=opts.pcie_GBps
    )
    if kind == "single-node":
        if opts.nodes != 1:
            raise FabricscopeError("single-node topology has exactly one node (--nodes 1)")
        return Topology(kind, 1, node, None, opts.nic_rate_bps / 8)
    N = node.nics_per_node
    E = opts.nodes * N
    nic_Bps = opts.nic_rate_bps / 8
    access = np.full(E, nic_Bps)
    for n, rate in opts.node_nic_rate_bps.items():
        if not 0 <= int(n) < opts.nodes:
            raise FabricscopeError(f"per-node NIC rate given for node {n}, but nodes are 0..{opts.nodes - 1}")
        access[int(n) * N : (int(n) + 1) * N] = rate / 8
    X = float(opts.oversubscription)
    lat = opts.link_latency_s
    params: dict[str, Any] = {"oversubscription": X}
    if kind == "star":
        fabric: Fabric = ClosFabric(
            leaf_of_nic=np.zeros(E, np.int64), n_leaves=1, leaves_per_pod=1, spines_per_pod=0, cores_per_plane=0,
            access_Bps=access, uplink_Bps=nic_Bps, core_Bps=nic_Bps, link_latency_s=lat,
            leaf_label=lambda leaf: "switch",
        )
        params = {}
    elif kind == "leaf-spine":
        h = opts.hosts_per_leaf or min(32, E)
        leaves = -(-E // h)
        S = opts.spines or max(1, round(h / X))
        up = opts.uplink_rate_bps / 8 if opts.uplink_rate_bps else h * nic_Bps / (X * S)
        fabric = ClosFabric(
            leaf_of_nic=np.arange(E) // h, n_leaves=leaves, leaves_per_pod=leaves, spines_per_pod=S,
            cores_per_plane=0, access_Bps=access, uplink_Bps=up, core_Bps=up, link_latency_s=lat,
        )
        params = {"hosts_per_leaf": h, "oversubscription": h * nic_Bps / (S * up)}
    elif kind in ("fat-tree", "rail-optimized"):
        fabric, params = _fat_tree(opts, node, E, access, nic_Bps, rail=(kind == "rail-optimized"))
    else:
        fabric, params = _dragonfly(opts, E, access, nic_Bps)
    return Topology(kind, opts.nodes, node, fabric, nic_Bps, params)


def _fat_tree(
    opts: TopologyOptions, node: NodeSpec, E: int, access: np.ndarray, nic_Bps: float, rail: bool
) -> tuple[Fabric, dict[str, Any]]:
    X = float(opts.oversubscription)
    N = node.nics_per_node
    radices = [opts.radix] if opts.radix else [64, 128, 256, 512]
    for k in radices:
        if k is None or k < 4 or k % 2:
            raise FabricscopeError("--radix must be an even number >= 4")
        down = opts.hosts_per_leaf or max(1, round(k * X / (1 + X)))
        up_ports = max(1, k - down) if not opts.spines else opts.spines
        if rail:
            leaves = -(-opts.nodes // down) * N
        else:
            leaves = -(-E // down)
        tiers = opts.tiers or (1 if leaves == 1 else 2 if leaves <= k else 3)
        if tiers == 2 and leaves > k:
            continue
        lpp = leaves if tiers <= 2 else k // 2
        pods = -(-leaves // lpp)
        if tiers == 3 and pods > k:
            continue
        break
    else:
        cap = radices[-1] ** 3 // 4
        raise FabricscopeError(
            f"{E} NICs do not fit a 3-tier fat-tree of radix {radices[-1]} (about {cap} NICs); pass a larger --radix"
        )
    if rail:
        nic = np.arange(E)
        leaf_of_nic = (nic // N // down) * N + nic % N
        su = down

        def label(leaf: int) -> str:
            return f"leaf(su{leaf // N},rail{leaf % N})"
    else:
        leaf_of_nic = np.arange(E) // down
        label = None  # type: ignore[assignment]
    S = up_ports if tiers >= 2 else 0
    up_Bps = opts.uplink_rate_bps / 8 if opts.uplink_rate_bps else (down * nic_Bps / (X * S) if S else nic_Bps)
    K = k // 2 if tiers == 3 else 0
    fabric = ClosFabric(
        leaf_of_nic=leaf_of_nic, n_leaves=leaves, leaves_per_pod=lpp, spines_per_pod=S, cores_per_plane=K,
        access_Bps=access, uplink_Bps=up_Bps, core_Bps=up_Bps, link_latency_s=opts.link_latency_s,
        leaf_label=label,
    )
    params: dict[str, Any] = {
        "radix": k,
        "tiers": tiers,
        "hosts_per_leaf": down,
        "oversubscription": (down * nic_Bps / (S * up_Bps)) if S else 1.0,
    }
    if rail:
        params["nodes_per_scalable_unit"] = su
    return fabric, params


def _dragonfly(opts: TopologyOptions, E: int, access: np.ndarray, nic_Bps: float) -> tuple[Fabric, dict[str, Any]]:
    p, a, h = opts.hosts_per_router, opts.routers_per_group, opts.global_links_per_router
    if p is None or a is None or h is None:
        for pp in (2, 4, 8, 16, 32, 64):
            ap, hp = a or 2 * pp, h or pp
            pp2 = p or pp
            if (ap * hp + 1) * ap * pp2 >= E:
                p, a, h = pp2, ap, hp
                break
        else:
            raise FabricscopeError("dragonfly too large for the automatic sizes; give --hosts-per-router etc.")
    glob = (opts.global_rate_bps or opts.nic_rate_bps) / 8
    fabric = DragonflyFabric(
        n_nics=E, hosts_per_router=p, routers_per_group=a, global_per_router=h, access_Bps=access,
        local_Bps=nic_Bps, global_Bps=glob, link_latency_s=opts.link_latency_s,
        global_latency_s=opts.global_latency_s,
    )
    return fabric, {}
