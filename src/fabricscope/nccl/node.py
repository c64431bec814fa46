"""What NCCL will find on this node, computed from the host inventory: ports, GIDs, QoS, distances.

Shared by ``nccl env`` (what to set) and ``nccl lint`` (whether what is set fits).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabricscope.host.infiniband import Gid, RdmaPort, natural_key
from fabricscope.host.inventory import Inventory
from fabricscope.host.netclass import NetDevice
from fabricscope.host.versions import DMABUF_KERNEL
from fabricscope.nccl.gid import AF_INET, GidPolicy, select_gid

DEFAULT_GID_POLICY = GidPolicy()
# Interfaces NCCL itself avoids by default, and that make poor bootstrap/socket interfaces.
VIRTUAL_PREFIXES = (
    "lo",
    "docker",
    "virbr",
    "veth",
    "br-",
    "cni",
    "flannel",
    "cali",
    "tun",
    "tap",
    "vxlan",
    "kube",
    "weave",
)
# NCCL's GDR level order; nvidia-smi's NODE is NCCL's PHB (same NUMA node, through the CPU).
LEVEL_RANK = {
    "LOC": 0,
    "NVL": 0,
    "NVB": 0,
    "C2C": 0,
    "PIX": 1,
    "PXB": 2,
    "P2C": 2,
    "PXN": 2,
    "PHB": 3,
    "NODE": 3,
    "SYS": 4,
}


@dataclass(frozen=True)
class NicPort:
    device: str
    port: int
    link: str | None  # "IB", "RoCE" or None (unknown link layer)
    active: bool
    state: str | None
    netdev: str | None
    rate_gbps: float | None
    raw: RdmaPort

    @property
    def label(self) -> str:
        return f"{self.device}:{self.port}"


def nic_ports(inv: Inventory) -> list[NicPort]:
    out = []
    for dev in sorted(inv.rdma_devices, key=lambda d: natural_key(d.name)):
        for p in sorted(dev.ports, key=lambda p: p.port):
            link = "IB" if p.is_ib else "RoCE" if p.is_roce else None
            out.append(
                NicPort(dev.name, p.port, link, p.is_active, p.state, inv.port_netdev(p), p.rate_gbps, p)
            )
    return out


def active_ports(inv: Inventory) -> list[NicPort]:
    return [p for p in nic_ports(inv) if p.active and p.link is not None]


def has_working_rdma(inv: Inventory) -> bool:
    return bool(active_ports(inv))


def main_link_layer(inv: Inventory) -> str | None:
    """The link layer with the most active ports (InfiniBand on a tie)."""
    ports = active_ports(inv)
    if not ports:
        return None
    ib = sum(1 for p in ports if p.link == "IB")
    roce = len(ports) - ib
    return "IB" if ib >= roce else "RoCE"


def gid_at(port: RdmaPort, index: int) -> Gid | None:
    return next((g for g in port.gids if g.index == index), None)


def best_roce_gid(port: RdmaPort) -> Gid | None:
    """The entry NCCL >= 2.21 picks with its defaults when that is a RoCE v2 IPv4 one, else None."""
    choice = select_gid(port.gids, port.gid_table_len, DEFAULT_GID_POLICY)
    if not choice.routable_v2 or choice.family != AF_INET:
        return None
    return gid_at(port, choice.index)


def usable_interface(dev: NetDevice) -> bool:
    return dev.is_up and bool(dev.ipv4 or [a for a in dev.ipv6 if not a.lower().startswith("fe80")])


def is_virtual_name(name: str) -> bool:
    return name.startswith(VIRTUAL_PREFIXES)


# Grace Hopper / Grace Blackwell superchips: the GPU reaches the CPU (and NICs behind it) over
# NVLink-C2C. nvidia-smi names them "NVIDIA GH200 480GB", "NVIDIA GB200", "NVIDIA GB300".
_C2C_GPU = re.compile(r"\bG[BH]\d{3}\b")


def c2c_gpus(inv: Inventory) -> list[str]:
    """GPUs on a Grace/C2C superchip, by the name nvidia-smi reports ("GPU0 NVIDIA GH200 480GB")."""
    return [f"GPU{g.index} {g.name}" for g in inv.gpus if g.name and _C2C_GPU.search(g.name)]


def gdr_module_state(inv: Inventory) -> bool | None:
    """True when a peer-memory module is loaded, False when modules are known and none is, else None."""
    if not inv.kernel.modules_known:
        return None
    return bool({"nvidia_peermem", "nv_peer_mem"} & set(inv.kernel.modules))


def gpudirect_without_module(inv: Inventory) -> tuple[bool | None, str]:
    """No peer-memory module is loaded: can GPUDirect RDMA still work, and what to do.

    DMA-BUF carries it since NCCL 2.13 (NCCL_DMABUF_ENABLE; NVIDIA/nccl v2.30.7-1 env.rst) with the
    open GPU kernel module and kernel >= 5.12 (host.versions.dmabuf_capable). nvidia-peermem needs
    the peer-memory API of MLNX_OFED/DOCA's ib_core, which upstream ib_core lacks (ib_core then has no
    /sys/module/ib_core/version): there it does not load at all."""
    versions = inv.versions
    capable = versions.dmabuf_capable
    kernel = versions.kernel or "?"
    if capable is None and versions.kernel_release is not None and versions.kernel_release < DMABUF_KERNEL:
        capable = False  # a 3.10 kernel has no DMA-BUF whichever GPU module runs
    if capable:
        return (
            True,
            f"DMA-BUF carries GPUDirect RDMA here (open GPU kernel module, kernel {kernel} >= 5.12; NCCL >= 2.13): nvidia-peermem is not needed",
        )
    upstream = "ib_core" not in versions.modules
    if capable is False:
        why = (
            f"kernel {kernel} < 5.12"
            if versions.kernel_release is not None and versions.kernel_release < DMABUF_KERNEL
            else "the proprietary GPU kernel module"
        )
        fix = "switch to the open GPU kernel module (kernel >= 5.12) so NCCL >= 2.13 uses DMA-BUF"
        if upstream:
            return (
                False,
                f"no DMA-BUF ({why}) and nvidia-peermem cannot load on upstream ib_core: {fix}, or install MLNX_OFED/DOCA and load nvidia-peermem",
            )
        return (
            False,
            f"no DMA-BUF ({why}): `modprobe nvidia-peermem` (and list it in /etc/modules-load.d/), or {fix}",
        )
    return (
        None,
        "DMA-BUF (NCCL >= 2.13, kernel >= 5.12, open GPU kernel module) needs no module; otherwise `modprobe nvidia-peermem` (MLNX_OFED/DOCA ib_core only)",
    )
