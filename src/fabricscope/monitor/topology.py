"""What the node is made of, refreshed in the background: which netdev sits behind each RDMA port,
which PCI functions are NICs and GPUs, each device's model, and the QoS configuration that only
commands (mlnx_qos, dcb) can tell. Scrapes label their fresh readings with this; reading it per
scrape would mean hundreds of GID files, PCI config space and subprocesses every time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from fabricscope.host import Root
from fabricscope.host.gpu import Gpu, read_gpus
from fabricscope.host.infiniband import natural_key, read_rdma_devices
from fabricscope.host.inventory import gpu_affinity
from fabricscope.host.netclass import read_net_devices
from fabricscope.host.pci import read_pci_devices
from fabricscope.host.qos import QosConfig, read_qos
from fabricscope.host.root import Problem
from fabricscope.sim.gpus import from_product_name


@dataclass(frozen=True)
class DeviceMeta:
    name: str
    model: str | None  # hca_type, else board_id: "the same model" for sibling rate comparison
    hca_type: str | None
    board_id: str | None
    fw_ver: str | None
    pci_address: str | None


@dataclass(frozen=True)
class PcieTarget:
    address: str
    kind: str  # "nic" or "gpu"
    device: str  # RDMA device, netdev, or "gpu<index>"


@dataclass(frozen=True)
class Topology:
    devices: dict[str, DeviceMeta] = field(default_factory=dict)
    port_netdev: dict[tuple[str, int], str] = field(default_factory=dict)
    roce_netdevs: tuple[str, ...] = ()  # netdevs behind Ethernet-link-layer RDMA ports
    netdevs: tuple[str, ...] = ()  # every netdev the exporter reports on (RDMA-backed + physical)
    pcie: tuple[PcieTarget, ...] = ()
    qos: dict[str, QosConfig] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    # What the NCCL Inspector collector judges a communicator against: the node's NICs (RDMA
    # devices with an ACTIVE port), their best rate, RoCE or InfiniBand, and each GPU's nearest NIC.
    nics: tuple[str, ...] = ()
    nic_rate_gbps: float | None = None
    roce: bool = False
    gpu_nic: dict[int, str] = field(
        default_factory=dict
    )  # GPU index -> nearest NIC (rail = its index in nics)
    gpus: int = 0
    gpu_pci: dict[str, int] = field(default_factory=dict)  # a GPU's PCI address -> its index
    # The simulator's name for the node's GPUs (sim/gpus.py), None when nvidia-smi does not name
    # one model the table knows (no nvidia-smi, an unknown part, or mixed parts): "not available".
    gpu_model: str | None = None
    gpu_product: str = ""  # as nvidia-smi names it ("" when it does not)

    def netdev_of(self, device: str, port: int) -> str:
        return self.port_netdev.get((device, port), "")


def read_topology(root: Root) -> Topology:
    """Read the slow-changing structure of the node. Runs commands (ip, nvidia-smi, mlnx_qos/dcb):
    call it from a background thread."""
    scoped = dataclasses.replace(root, problems=[])
    rdma = read_rdma_devices(scoped)
    netdevs = read_net_devices(scoped)
    pci = read_pci_devices(scoped)
    gpus, _source = read_gpus(scoped, pci)

    devices: dict[str, DeviceMeta] = {}
    port_netdev: dict[tuple[str, int], str] = {}
    roce: set[str] = set()
    for dev in rdma:
        devices[dev.name] = DeviceMeta(
            name=dev.name,
            model=dev.model,
            hca_type=dev.hca_type,
            board_id=dev.board_id,
            fw_ver=dev.fw_ver,
            pci_address=dev.pci_address,
        )
        for port in dev.ports:
            netdev = next((g.netdev for g in port.gids if g.netdev), None)
            if netdev is None and dev.netdevs:
                netdev = dev.netdevs[min(port.port - 1, len(dev.netdevs) - 1)]
            if netdev:
                port_netdev[(dev.name, port.port)] = netdev
                if port.is_roce:
                    roce.add(netdev)

    physical = {n.name for n in netdevs if n.pci_address is not None and not n.is_loopback}
    reported = sorted(set(port_netdev.values()) | physical, key=natural_key)

    targets: list[PcieTarget] = []
    seen: set[str] = set()
    for dev in rdma:
        if dev.pci_address and dev.pci_address not in seen:
            seen.add(dev.pci_address)
            targets.append(PcieTarget(dev.pci_address, "nic", dev.name))
    for net in sorted(netdevs, key=lambda n: natural_key(n.name)):
        if net.name in physical and net.pci_address and net.pci_address not in seen:
            seen.add(net.pci_address)
            targets.append(PcieTarget(net.pci_address, "nic", net.name))
    for gpu in gpus:
        if gpu.pci_address not in seen:
            seen.add(gpu.pci_address)
            targets.append(PcieTarget(gpu.pci_address, "gpu", f"gpu{gpu.index}"))

    qos: dict[str, QosConfig] = {}
    for name in sorted(roce, key=natural_key):
        cfg = read_qos(scoped, name)
        if cfg is not None:
            qos[name] = cfg

    active = [d for d in rdma if any(p.is_active for p in d.ports)]
    rates = [p.rate_gbps for d in active for p in d.ports if p.is_active and p.rate_gbps]
    affinity = gpu_affinity(gpus, rdma, netdevs, pci)
    return Topology(
        nics=tuple(d.name for d in active),
        nic_rate_gbps=max(rates) if rates else None,
        roce=any(p.is_roce for d in active for p in d.ports if p.is_active),
        gpu_nic={a.gpu_index: a.nic for a in affinity if a.nic},
        gpus=len(gpus),
        gpu_pci={g.pci_address: g.index for g in gpus},
        gpu_model=_gpu_model(gpus),
        gpu_product=", ".join(sorted({g.name for g in gpus if g.name})),
        devices=devices,
        port_netdev=port_netdev,
        roce_netdevs=tuple(sorted(roce, key=natural_key)),
        netdevs=tuple(reported),
        pcie=tuple(targets),
        qos=qos,
        problems=tuple(scoped.problems),
    )


def _gpu_model(gpus: list[Gpu]) -> str | None:
    """The one model every GPU of the node is, as the simulator names it; None otherwise."""
    models = {from_product_name(g.name) for g in gpus}
    if len(models) != 1:
        return None
    model = models.pop()
    return model.name if model is not None else None
