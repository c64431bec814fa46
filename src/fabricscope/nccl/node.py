"""What NCCL will find on this node, computed from the host inventory: ports, GIDs, QoS, distances.

Shared by ``nccl env`` (what to set) and ``nccl lint`` (whether what is set fits).
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricscope.host.infiniband import Gid, RdmaPort, natural_key
from fabricscope.host.inventory import Inventory
from fabricscope.host.netclass import NetDevice
from fabricscope.nccl_gid import AF_INET, GidPolicy, select_gid

DEFAULT_GID_POLICY = GidPolicy()
# Interfaces NCCL itself avoids by default, and that make poor bootstrap/socket interfaces.
VIRTUAL_PREFIXES = ("lo", "docker", "virbr", "veth", "br-", "cni", "flannel", "cali", "tun", "tap", "vxlan", "kube", "weave")
# NCCL's GDR level order; nvidia-smi's NODE is NCCL's PHB (same NUMA node, through the CPU).
LEVEL_RANK = {"LOC": 0, "NVL": 0, "NVB": 0, "C2C": 0, "PIX": 1, "PXB": 2, "P2C": 2, "PXN": 2, "PHB": 3, "NODE": 3, "SYS": 4}


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
            out.append(NicPort(dev.name, p.port, link, p.is_active, p.state, inv.port_netdev(p), p.rate_gbps, p))
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


def gpu_nic_distances(inv: Inventory) -> dict[int, tuple[str | None, str | None]]:
    """GPU index -> (nearest NIC, nvidia-smi style distance)."""
    return {a.gpu_index: (a.nic, a.distance) for a in inv.affinity}


def gdr_module_state(inv: Inventory) -> bool | None:
    """True when a peer-memory module is loaded, False when modules are known and none is, else None.

    DMA-BUF (kernel >= 5.12, open GPU driver, NCCL >= 2.19) also gives GPUDirect RDMA without the
    module, which the inventory cannot see; callers word their findings accordingly."""
    if not inv.kernel.modules_known:
        return None
    return bool({"nvidia_peermem", "nv_peer_mem"} & set(inv.kernel.modules))
