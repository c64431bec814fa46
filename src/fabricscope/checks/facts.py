"""The facts of one node that must agree across a fleet, as a JSON-ready block.

``doctor --json`` carries this block (``"facts"``), so a fleet can be judged from the documents
alone. Devices are listed by their position, not their name: RDMA devices sorted by PCI address
with their rail index (the order NCCL's topology and a rail-optimised fabric follow), GPUs by PCI
address. Unknown values are ``null``, never 0.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fabricscope.checks.tcp import CHECKED_SYSCTLS
from fabricscope.host.inventory import Inventory
from fabricscope.host.netclass import NetDevice
from fabricscope.host.pci import PciDevice
from fabricscope.host.procfs import GPUDIRECT_MODULES
from fabricscope.host.qos import QosConfig
from fabricscope.nccl.node import best_roce_gid
from fabricscope.nccl.settings import parse_conf_file


def _pcie(dev: PciDevice | None) -> dict[str, Any]:
    if dev is None:
        return {"width": None, "speed_gts": None, "max_width": None, "max_speed_gts": None}
    return {
        "width": dev.current_link_width,
        "speed_gts": dev.current_link_speed_gts,
        "max_width": dev.max_link_width,
        "max_speed_gts": dev.max_link_speed_gts,
    }


def _aer(dev: PciDevice | None) -> dict[str, int] | None:
    """AER error totals by severity (added by issue 13); null when the device has no AER statistics."""
    return dev.aer.totals() if dev is not None and dev.aer is not None else None


def _ecn_priorities(netdev: NetDevice | None) -> list[int] | None:
    """Priorities with DCQCN on as both notification and reaction point; None when not visible."""
    if netdev is None or not netdev.ecn_np_enabled or not netdev.ecn_rp_enabled:
        return None
    return sorted(p for p, on in netdev.ecn_np_enabled.items() if on and netdev.ecn_rp_enabled.get(p))


def _trust(qos: QosConfig | None, netdev: NetDevice | None) -> str | None:
    if qos is not None and qos.trust is not None:
        return qos.trust
    return netdev.qos_trust if netdev is not None else None


def _nic_facts(inv: Inventory) -> list[dict[str, Any]]:
    devices = sorted(inv.rdma_devices, key=lambda d: (d.pci_address is None, d.pci_address or "", d.name))
    nics = []
    for rail, dev in enumerate(devices):
        ports = []
        for port in sorted(dev.ports, key=lambda p: p.port):
            netdev_name = inv.port_netdev(port)
            netdev = inv.netdev(netdev_name)
            qos = inv.qos.get(netdev_name) if netdev_name else None
            gid = best_roce_gid(port) if port.is_roce else None
            ports.append(
                {
                    "port": port.port,
                    "link_layer": port.link_layer,
                    "state": port.state,
                    "rate_gbps": port.rate_gbps,
                    "netdev": netdev_name,
                    "mtu_bytes": netdev.mtu_bytes if netdev else None,
                    "roce_v2_ipv4_gid_index": gid.index if gid else None,
                    "pfc_priorities": qos.pfc_priorities if qos and qos.pfc_enabled is not None else None,
                    "trust": _trust(qos, netdev) if port.is_roce else None,
                    "ecn_priorities": _ecn_priorities(netdev) if port.is_roce else None,
                }
            )
        nics.append(
            {
                "rail": rail,
                "pci": dev.pci_address,
                "device": dev.name,
                "model": dev.model,
                "fw": dev.fw_ver,
                "pcie": _pcie(inv.pci_device(dev.pci_address)),
                "aer": _aer(inv.pci_device(dev.pci_address)),
                "ports": ports,
            }
        )
    return nics


def _other_netdevs(inv: Inventory) -> list[dict[str, Any]]:
    """Physical interfaces that are not behind an RDMA device (management NICs, cloud ENA/gVNIC)."""
    rdma_pci = {d.pci_address for d in inv.rdma_devices}
    out = []
    for nd in sorted(inv.net_devices, key=lambda n: (n.pci_address or "", n.name)):
        if nd.is_physical and nd.pci_address not in rdma_pci:
            out.append(
                {
                    "pci": nd.pci_address,
                    "name": nd.name,
                    "driver": nd.driver,
                    "mtu_bytes": nd.mtu_bytes,
                    "speed_mbps": nd.speed_mbps,
                }
            )
    return out


def _nccl_conf(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    # As NCCL reads it (setEnvFile), so two nodes that NCCL sees the same way never differ here.
    settings, _skipped, _misread = parse_conf_file(text, "/etc/nccl.conf", origin="/etc/nccl.conf")
    meaningful = "\n".join(
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")
    )
    return {
        "settings": {s.name: s.value for s in settings},
        "sha256": hashlib.sha256(meaningful.encode("utf-8")).hexdigest(),
    }


def node_facts(inv: Inventory) -> dict[str, Any]:
    """What the fleet compares: versions, GPUs, NICs and their ports, sysctls, /etc/nccl.conf."""
    kernel = inv.kernel
    gpudirect = [m for m in GPUDIRECT_MODULES if m in kernel.modules]
    models = sorted({g.name for g in inv.gpus if g.name})
    return {
        "kernel": inv.versions.kernel,
        "drivers": dict(sorted(inv.versions.modules.items())),
        "rdma_core": inv.versions.rdma_core,
        "nccl_version": inv.versions.nccl,
        "gpus": {
            "count": len(inv.gpus),
            "model": models[0] if len(models) == 1 else (", ".join(models) if models else None),
            "gpudirect_module": (gpudirect[0] if gpudirect else "none") if kernel.modules_known else None,
            "devices": [
                {
                    "pci": g.pci_address,
                    "model": g.name,
                    "pcie": _pcie(inv.pci_device(g.pci_address)),
                    "aer": _aer(inv.pci_device(g.pci_address)),
                }
                for g in sorted(inv.gpus, key=lambda g: g.pci_address)
            ],
        },
        "nics": _nic_facts(inv),
        "netdevs": _other_netdevs(inv),
        "sysctls": {name: kernel.sysctls.get(name) for name in CHECKED_SYSCTLS},
        "nccl_conf": _nccl_conf(inv.nccl_conf),
        # Added by issue 13 (additive): how the IOMMU handles GPU and RDMA NIC DMA.
        "iommu": _iommu(inv),
    }


def _iommu(inv: Inventory) -> dict[str, Any] | None:
    """The IOMMU group types of the GPUs and RDMA NICs ("identity", "DMA-FQ", ...); null when not visible."""
    if not inv.iommu.visible:
        return None
    addresses = [g.pci_address for g in inv.gpus] + [d.pci_address for d in inv.rdma_devices if d.pci_address]
    types = {inv.iommu.type_of(dev.iommu_group) if (dev := inv.pci.get(a)) else None for a in addresses}
    return {
        "groups": len(inv.iommu.types),
        "gpu_nic_types": sorted(t or "none" for t in types) if addresses else [],
    }
