"""The node as one typed object: everything the checks, NCCL tools and exporter look at."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from fabricscope.host.aer import read_aer
from fabricscope.host.ethtool import EthtoolData, ethtool_commands, read_ethtool, read_ethtool_stats
from fabricscope.host.gpu import NVIDIA_SMI_QUERY, Gpu, read_gpus, read_pcie_throughput
from fabricscope.host.infiniband import (
    RdmaDevice,
    RdmaPort,
    read_char_devices,
    read_port_counters,
    read_rdma_devices,
)
from fabricscope.host.iommu import IommuGroups, read_iommu_groups
from fabricscope.host.kernel_log import KERNEL_LOG_COMMANDS, KernelLog, read_kernel_log
from fabricscope.host.lldp import LldpNeighbor, lldpctl_argv, read_lldp
from fabricscope.host.mlxconfig import mlxconfig_argv, read_mlxconfig
from fabricscope.host.netclass import IP_ADDR, NetDevice, physical_netdev_names, read_net_devices
from fabricscope.host.nvlink import NVIDIA_SMI_QUERY_ALL, NVLINK_STATUS, NvlinkState, read_nvlink
from fabricscope.host.pci import DISTANCES, PCI_DEVICES, PciDevice, pcie_distance, read_pci_devices
from fabricscope.host.procfs import KernelState, read_kernel_state, read_netstat
from fabricscope.host.qos import QosConfig, qos_commands, read_qos
from fabricscope.host.root import Problem, Root
from fabricscope.host.subnet import SMINFO, SmQuery, read_sminfo
from fabricscope.host.verbs import IBV_DEVINFO, VerbsPort, read_verbs_ports
from fabricscope.host.versions import DPKG_QUERY, RPM_QUERY, SoftwareVersions, read_versions

NCCL_CONF = "etc/nccl.conf"


@dataclass(frozen=True)
class GpuAffinity:
    gpu_index: int
    gpu_pci: str
    nic: str | None  # RDMA device (or netdev on a TCP-only node) nearest to the GPU
    distance: str | None  # PIX, PXB, PHB, NODE, SYS
    gpu_numa: int | None
    nic_numa: int | None


@dataclass(frozen=True)
class Inventory:
    hostname: str | None
    root_label: str
    rdma_devices: tuple[RdmaDevice, ...]
    net_devices: tuple[NetDevice, ...]
    pci: dict[str, PciDevice]
    gpus: tuple[Gpu, ...]
    gpu_source: str
    affinity: tuple[GpuAffinity, ...]
    kernel: KernelState
    ethtool: dict[str, EthtoolData]  # per netdev of interest
    qos: dict[str, QosConfig]  # per RoCE netdev where mlnx_qos/dcb answered
    nccl_conf: str | None
    problems: tuple[Problem, ...] = field(default=())
    versions: SoftwareVersions = field(default_factory=SoftwareVersions)  # kernel, drivers, rdma-core, NCCL
    lldp: tuple[LldpNeighbor, ...] | None = None  # None: no lldpd answered on this node
    iommu: IommuGroups = field(default_factory=IommuGroups)  # /sys/kernel/iommu_groups
    verbs: dict[str, VerbsPort] | None = None  # "mlx5_0/1" -> ibv_devinfo -v; None: not available
    char_devices: tuple[str, ...] | None = None  # names under /dev/infiniband; None: /dev not visible
    kernel_log: KernelLog | None = None  # dmesg (else journalctl -k) as events; None: neither answered
    kernel_log_problem: str | None = None  # why kernel_log is None
    mlxconfig: dict[str, dict[str, str]] | None = None  # RDMA device -> `mlxconfig q`; None: mlxconfig absent
    sminfo: SmQuery | None = None  # `sminfo`; None: no InfiniBand port
    nvlink: NvlinkState | None = (
        None  # nvidia-smi nvlink -s and -q (Fabric); None: no GPU found by nvidia-smi
    )
    gpu_pcie: dict[str, tuple[float, float]] | None = (
        None  # nvidia-smi -q's PCI blocks: pci address -> (tx, rx) bytes/s
    )

    # ----- lookups -----------------------------------------------------------------------
    @property
    def ports(self) -> list[RdmaPort]:
        return [p for d in self.rdma_devices for p in d.ports]

    def device(self, name: str) -> RdmaDevice | None:
        return next((d for d in self.rdma_devices if d.name == name), None)

    def netdev(self, name: str | None) -> NetDevice | None:
        return next((n for n in self.net_devices if n.name == name), None)

    def port_netdev(self, port: RdmaPort) -> str | None:
        """The netdev behind a port: GID table first, else the PCI function's netdev."""
        for gid in port.gids:
            if gid.netdev:
                return gid.netdev
        dev = self.device(port.device)
        if dev is not None and len(dev.netdevs) >= 1:
            return dev.netdevs[min(port.port - 1, len(dev.netdevs) - 1)]
        return None

    def pci_device(self, address: str | None) -> PciDevice | None:
        return self.pci.get(address) if address else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form; ports also carry their netdev and GIDs their IPv4 (derived, as show_gids prints)."""
        doc = _jsonable(self)
        for dev_doc, dev in zip(doc["rdma_devices"], self.rdma_devices):
            for port_doc, port in zip(dev_doc["ports"], dev.ports):
                port_doc["netdev"] = self.port_netdev(port)
                for gid_doc, gid in zip(port_doc["gids"], port.gids):
                    gid_doc["ipv4"] = gid.ipv4
                    gid_doc["roce_version"] = gid.roce_version
        return doc


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return out
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items) if isinstance(value, (set, frozenset)) else items
    return value


def gpu_affinity(
    gpus: list[Gpu], rdma: list[RdmaDevice], netdevs: list[NetDevice], pci: dict[str, PciDevice]
) -> list[GpuAffinity]:
    """Each GPU's nearest NIC by PCIe distance (an RDMA device, else a physical netdev): the NIC
    NCCL picks for the GPU's rank on a rail-optimised node."""
    nics = [(d.name, d.pci_address) for d in rdma if d.pci_address]
    if not nics:
        nics = [(n.name, n.pci_address) for n in netdevs if n.pci_address and not n.is_loopback]
    result = []
    for gpu in gpus:
        gdev = pci.get(gpu.pci_address)
        best: tuple[int, str, str, PciDevice] | None = None
        if gdev is not None:
            for name, addr in nics:
                ndev = pci.get(addr)
                if ndev is None:
                    continue
                dist = pcie_distance(gdev, ndev, pci)
                rank = DISTANCES.index(dist)
                if best is None or rank < best[0]:
                    best = (rank, name, dist, ndev)
        result.append(
            GpuAffinity(
                gpu_index=gpu.index,
                gpu_pci=gpu.pci_address,
                nic=best[1] if best else None,
                distance=best[2] if best else None,
                gpu_numa=gdev.numa_node if gdev else None,
                nic_numa=best[3].numa_node if best else None,
            )
        )
    return result


def _ethtool_netdevs(rdma: list[RdmaDevice], physical: list[str]) -> set[str]:
    """Netdevs worth ethtool's time: those of RDMA devices and their GIDs, and every PCI one."""
    names = {n for d in rdma for n in d.netdevs}
    names |= {g.netdev for d in rdma for p in d.ports for g in p.gids if g.netdev}
    return names | set(physical)


def _roce_netdevs(rdma: list[RdmaDevice]) -> set[str]:
    names = {g.netdev for d in rdma for p in d.ports if p.is_roce for g in p.gids if g.netdev}
    return names | {n for d in rdma if any(p.is_roce for p in d.ports) for n in d.netdevs}


def _mlx5_pcis(rdma: list[RdmaDevice]) -> dict[str, str]:
    """ConnectX HCAs (mlx5_core) and their PCI functions: what `mlxconfig` is asked about."""
    return {d.name: d.pci_address for d in rdma if d.driver == "mlx5_core" and d.pci_address}


def _commands_ahead(root: Root, rdma: list[RdmaDevice]) -> list[list[str]]:
    """Every command :func:`read_inventory` will (or may) run, known from sysfs before any runs."""
    if not root.is_live:
        return []
    commands = [list(c) for c in (IP_ADDR, NVIDIA_SMI_QUERY, DPKG_QUERY, RPM_QUERY, lldpctl_argv())]
    if rdma:
        commands.append(list(IBV_DEVINFO))
    if any(p.is_ib for d in rdma for p in d.ports):
        commands.append(list(SMINFO))
    commands += [mlxconfig_argv(pci) for pci in sorted(_mlx5_pcis(rdma).values())]
    commands += [list(c) for c in KERNEL_LOG_COMMANDS] + [
        list(NVLINK_STATUS),
        list(NVIDIA_SMI_QUERY_ALL),
    ]  # also NVIDIA_SMI_PCI's
    commands += [
        c for n in sorted(_ethtool_netdevs(rdma, physical_netdev_names(root))) for c in ethtool_commands(n)
    ]
    return commands + [c for n in sorted(_roce_netdevs(rdma)) for c in qos_commands(n)]


def read_inventory(root: Root, command_timeout_s: float | None = None) -> Inventory:
    """Read everything once. Never raises for bad data; problems are listed in the result.

    On a live node the optional commands (ip, nvidia-smi, ethtool, mlnx_qos/dcb, dpkg-query/rpm,
    lldpctl) start at once and share one deadline (``command_timeout_s``, default the root's), so
    hung tools cost one timeout, not one each.
    """
    rdma = read_rdma_devices(root)
    with root.commands_ahead(_commands_ahead(root, rdma), command_timeout_s):
        netdevs = read_net_devices(root)
        pci = read_pci_devices(root)
        gpus, gpu_source = read_gpus(root, pci)
        physical = [n.name for n in netdevs if n.is_physical]
        ethtool = {name: read_ethtool(root, name) for name in sorted(_ethtool_netdevs(rdma, physical))}
        qos = {}
        for name in sorted(_roce_netdevs(rdma)):
            cfg = read_qos(root, name)
            if cfg is not None:
                qos[name] = cfg
        drivers = tuple(sorted({n.driver for n in netdevs if n.driver and n.is_physical}))
        versions = read_versions(root, drivers)
        lldp = read_lldp(
            root, quiet=True
        )  # recorded by snapshots, read back by `topology discover lldp --root`
        verbs = read_verbs_ports(root) if rdma else None
        kernel_log, kernel_log_problem = read_kernel_log(root)
        nvlink = read_nvlink(root) if gpu_source == "nvidia-smi" else None
        # read here too, so that a snapshot holds what the exporter's GPU PCIe throughput reads
        gpu_pcie = read_pcie_throughput(root) if gpu_source == "nvidia-smi" else None
        mlxconfig = read_mlxconfig(root, _mlx5_pcis(rdma)) if _mlx5_pcis(rdma) else None
        sminfo = read_sminfo(root) if any(p.is_ib for d in rdma for p in d.ports) else None
    hostname = root.read("proc/sys/kernel/hostname")
    return Inventory(
        hostname=hostname.strip() if hostname else None,
        root_label=root.label,
        rdma_devices=tuple(rdma),
        net_devices=tuple(netdevs),
        pci=pci,
        gpus=tuple(gpus),
        gpu_source=gpu_source,
        affinity=tuple(gpu_affinity(gpus, rdma, netdevs, pci)),
        kernel=read_kernel_state(root),
        iommu=read_iommu_groups(root),
        verbs=verbs,
        char_devices=read_char_devices(root) if rdma else None,
        kernel_log=kernel_log,
        kernel_log_problem=kernel_log_problem,
        nvlink=nvlink,
        gpu_pcie=gpu_pcie,
        sminfo=sminfo,
        mlxconfig=mlxconfig,
        ethtool=ethtool,
        qos=qos,
        nccl_conf=root.read(NCCL_CONF),
        problems=tuple(root.problems),
        versions=versions,
        lldp=lldp,
    )


@dataclass(frozen=True)
class CounterSample:
    """Counters read at one instant; two samples give rates."""

    taken_s: float
    ports: dict[str, dict[str, int]]  # "mlx5_0/1" -> counters + hw_counters
    ethtool: dict[str, dict[str, int]]  # netdev -> ethtool -S
    netstat: dict[str, int]
    aer: dict[str, dict[str, int]] = field(default_factory=dict)  # PCI address -> AER totals by severity


def read_counter_sample(
    root: Root, netdevs: list[str] | None = None, pci_addresses: list[str] | None = None
) -> CounterSample:
    stats: dict[str, dict[str, int]] = {}
    with root.commands_ahead([ethtool_commands(name)[0] for name in netdevs or []]):
        for name in netdevs or []:
            values = read_ethtool_stats(root, name)
            if values is not None:
                stats[name] = values
    return CounterSample(
        taken_s=time.monotonic(),
        ports=read_port_counters(root),
        ethtool=stats,
        netstat=read_netstat(root),
        aer={
            a: stats.totals()
            for a in pci_addresses or []
            if (stats := read_aer(root, f"{PCI_DEVICES}/{a}")) is not None
        },
    )


def counter_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Increase of each counter present in both samples (a reset or wrap gives the new value)."""
    out = {}
    for name, new in after.items():
        old = before.get(name)
        if old is None:
            continue
        out[name] = new - old if new >= old else new
    return out
