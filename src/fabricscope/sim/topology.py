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
from fabricscope.sim import gpus
from fabricscope.sim.fabrics import (  # noqa: F401  (re-exported: the link kinds and fabrics belong to a topology)
    KIND_ACCESS,
    KIND_FABRIC,
    KIND_NAMES,
    KIND_NVLINK,
    KIND_PCIE,
    ClosFabric,
    DragonflyFabric,
    Fabric,
    Routes,
)

TOPOLOGY_KINDS = ("single-node", "star", "leaf-spine", "fat-tree", "rail-optimized", "dragonfly")


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
    intra_link: str = "nvlink"  # "pci": GPUs of a node talk over PCIe (no NVLink)
    nvswitch: bool = True  # GPUs on an NVSwitch (NVLS possible from Hopper on)

    @classmethod
    def preset(
        cls, gpu: str, gpus_per_node: int, nics_per_node: int | None = None, **overrides: Any
    ) -> NodeSpec:
        key = gpu.lower()
        values: dict[str, Any] = dict(gpus.node_bandwidths(key))
        values.update({k: v for k, v in overrides.items() if v is not None})
        nics = gpus_per_node if nics_per_node is None else nics_per_node
        spec = cls(gpus_per_node=gpus_per_node, nics_per_node=nics, gpu=key, **values)
        spec.validate()
        return spec

    def validate(self) -> None:
        if self.gpus_per_node < 1 or self.gpus_per_node > 1024:
            raise FabricscopeError("--gpus-per-node must be between 1 and 1024")
        if self.nics_per_node < 1 or self.nics_per_node > 1024:  # an NVL72 domain has 72
            raise FabricscopeError("--nics-per-node must be between 1 and 1024")
        if not (self.nvlink_GBps > 0 and self.pcie_GBps > 0):
            raise FabricscopeError("NVLink and PCIe bandwidths must be positive")


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
        intra_kind = KIND_NVLINK if self.node.intra_link == "nvlink" else KIND_PCIE
        self.link_kind = np.concatenate(
            [np.full(2 * P, intra_kind, np.int8), np.full(2 * E, KIND_PCIE, np.int8), fab_kind]
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
        switch = "nvswitch" if self.node.intra_link == "nvlink" else "pcie-switch"
        if i < P:
            return f"node{i // G}/gpu{i % G}->{switch}"
        if i < 2 * P:
            g = i - P
            return f"node{g // G}/{switch}->gpu{g % G}"
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
    intra_link: str = "nvlink"  # "pci" for servers whose GPUs have no NVLink
    nvswitch: bool = True


def build(opts: TopologyOptions) -> Topology:
    """Build one of the named topology families from parameters."""
    kind = opts.kind.lower()
    if kind not in TOPOLOGY_KINDS:
        raise FabricscopeError(f"unknown topology {opts.kind!r} (choose from {', '.join(TOPOLOGY_KINDS)})")
    if opts.nodes < 1 or opts.nodes > 1_000_000:
        raise FabricscopeError("--nodes must be between 1 and 1,000,000")
    if opts.spines is not None and not 1 <= opts.spines <= 65_536:
        raise FabricscopeError("--spines must be between 1 and 65,536")
    if opts.tiers is not None and opts.tiers not in (2, 3):
        raise FabricscopeError("--tiers must be 2 or 3")
    node = NodeSpec.preset(
        opts.gpu,
        opts.gpus_per_node,
        opts.nics_per_node,
        nvlink_GBps=opts.nvlink_GBps,
        pcie_GBps=opts.pcie_GBps,
        intra_link=opts.intra_link,
        nvswitch=opts.nvswitch and opts.intra_link == "nvlink",
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
            leaf_of_nic=np.zeros(E, np.int64),
            n_leaves=1,
            leaves_per_pod=1,
            spines_per_pod=0,
            cores_per_plane=0,
            access_Bps=access,
            uplink_Bps=nic_Bps,
            core_Bps=nic_Bps,
            link_latency_s=lat,
            leaf_label=lambda leaf: "switch",
        )
        params = {}
    elif kind == "leaf-spine":
        h = opts.hosts_per_leaf or min(32, E)
        leaves = -(-E // h)
        S = opts.spines or max(1, round(h / X))
        up = opts.uplink_rate_bps / 8 if opts.uplink_rate_bps else h * nic_Bps / (X * S)
        fabric = ClosFabric(
            leaf_of_nic=np.arange(E) // h,
            n_leaves=leaves,
            leaves_per_pod=leaves,
            spines_per_pod=S,
            cores_per_plane=0,
            access_Bps=access,
            uplink_Bps=up,
            core_Bps=up,
            link_latency_s=lat,
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
    up_Bps = (
        opts.uplink_rate_bps / 8 if opts.uplink_rate_bps else (down * nic_Bps / (X * S) if S else nic_Bps)
    )
    K = k // 2 if tiers == 3 else 0
    fabric = ClosFabric(
        leaf_of_nic=leaf_of_nic,
        n_leaves=leaves,
        leaves_per_pod=lpp,
        spines_per_pod=S,
        cores_per_plane=K,
        access_Bps=access,
        uplink_Bps=up_Bps,
        core_Bps=up_Bps,
        link_latency_s=opts.link_latency_s,
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


def _dragonfly(
    opts: TopologyOptions, E: int, access: np.ndarray, nic_Bps: float
) -> tuple[Fabric, dict[str, Any]]:
    p, a, h = opts.hosts_per_router, opts.routers_per_group, opts.global_links_per_router
    if p is None or a is None or h is None:
        for pp in (2, 4, 8, 16, 32, 64):
            ap, hp = a or 2 * pp, h or pp
            pp2 = p or pp
            if (ap * hp + 1) * ap * pp2 >= E:
                p, a, h = pp2, ap, hp
                break
        else:
            raise FabricscopeError(
                "dragonfly too large for the automatic sizes; give --hosts-per-router etc."
            )
    glob = (opts.global_rate_bps or opts.nic_rate_bps) / 8
    fabric = DragonflyFabric(
        n_nics=E,
        hosts_per_router=p,
        routers_per_group=a,
        global_per_router=h,
        access_Bps=access,
        local_Bps=nic_Bps,
        global_Bps=glob,
        link_latency_s=opts.link_latency_s,
        global_latency_s=opts.global_latency_s,
    )
    return fabric, {}
