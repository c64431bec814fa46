"""NIC firmware settings for GPUDirect RDMA (`mlxconfig -d <pci> q`), against NVIDIA's recommendations.

Sources, per rule:
* ATS_ENABLED: NVIDIA's NIC Configuration Operator (Mellanox/nic-configuration-operator README,
  `gpuDirectOptimized`) sets ATS_ENABLED=0 for bare-metal GPUDirect: with ATS the NIC asks the
  IOMMU to translate and peer-to-peer writes to GPU memory detour through the root complex.
* ADVANCED_PCI_SETTINGS / MAX_ACC_OUT_READ: the same operator's `pciPerformanceOptimized` sets
  MAX_ACC_OUT_READ (0 = automatic per the PRM; its example uses 44), a parameter that exists only
  with ADVANCED_PCI_SETTINGS=1; DGX H100 guidance (DGX OS 6, CX-7 bandwidth) accepts 0, 44 or 128.
* PCI_WR_ORDERING: per_mkey(0) lets each memory registration choose relaxed ordering, which NCCL
  does (NCCL_IB_PCI_RELAXED_ORDERING, IBV_ACCESS_RELAXED_ORDERING in NCCL v2.30.7-1
  src/transport/net_ib); forcing it for all writes takes that choice away.
ACS has no NIC-side parameter: it is a PCIe switch/bridge setting, judged by pcie.acs.
"""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated
from fabricscope.findings import Finding, Severity
from fabricscope.host.mlxconfig import value_code

MAX_ACC_OUT_READ_OK = (0, 44, 128)


def _problems(params: dict[str, str]) -> list[tuple[str, str]]:
    """(parameter, why) for every setting that departs from the recommendation."""
    out = []
    if value_code(params.get("ATS_ENABLED")) == 1:
        out.append(
            (
                "ATS_ENABLED=0",
                "ATS is on: peer-to-peer DMA to GPU memory goes through IOMMU translation (NVIDIA's operator turns it off on bare metal)",
            )
        )
    if value_code(params.get("ADVANCED_PCI_SETTINGS")) == 0:
        out.append(
            (
                "ADVANCED_PCI_SETTINGS=1",
                "ADVANCED_PCI_SETTINGS is off, so MAX_ACC_OUT_READ stays at the firmware default (too low for CX-7 on DGX H100)",
            )
        )
    acc = value_code(params.get("MAX_ACC_OUT_READ"))
    if acc is not None and acc not in MAX_ACC_OUT_READ_OK:
        out.append(
            (
                "MAX_ACC_OUT_READ=0",
                f"MAX_ACC_OUT_READ is {acc}: NVIDIA's recommended values are 0 (automatic), 44 or 128",
            )
        )
    order = params.get("PCI_WR_ORDERING")
    if order is not None and value_code(order) not in (0, None):
        out.append(
            (
                "PCI_WR_ORDERING=per_mkey",
                f"PCI_WR_ORDERING is {order}: relaxed ordering is forced for all writes instead of chosen per memory region (NCCL chooses it)",
            )
        )
    return out


@check("rdma.nic_config", "NIC firmware settings for GPUDirect")
def nic_config(ctx: CheckContext) -> Iterator[Finding]:
    """Reads `mlxconfig -d <pci> q` of every ConnectX HCA and compares the PCIe settings that
    matter for GPUDirect RDMA with NVIDIA's recommendations: ATS_ENABLED off on bare metal,
    ADVANCED_PCI_SETTINGS on with MAX_ACC_OUT_READ 0, 44 or 128, PCI_WR_ORDERING per_mkey. Each
    departure warns (firmware settings take effect after a reboot or mlxfwreset)."""
    inv = ctx.inventory
    mlx5 = {d.name: d.pci_address for d in inv.rdma_devices if d.driver == "mlx5_core" and d.pci_address}
    if not mlx5 or not inv.gpus:
        return
    if inv.mlxconfig is None:
        yield not_evaluated(
            "rdma.nic_config",
            "NICs",
            "`mlxconfig` (NVIDIA Firmware Tools) not available",
            fix="install MFT or mstflint (mstconfig) and run doctor as root",
        )
        return
    clean = 0
    for name, pci in sorted(mlx5.items()):
        params = inv.mlxconfig.get(name)
        if params is None:
            continue
        problems = _problems(params)
        if not problems:
            clean += 1
            continue
        evidence = {
            k: params.get(k)
            for k in ("ATS_ENABLED", "ADVANCED_PCI_SETTINGS", "MAX_ACC_OUT_READ", "PCI_WR_ORDERING")
        }
        yield Finding(
            "rdma.nic_config",
            Severity.WARN,
            f"{name} ({pci})",
            "; ".join(why for _s, why in problems),
            evidence,
            f"mlxconfig -d {pci} set {' '.join(s for s, _w in problems)}, then reboot (or mlxfwreset -d {pci} reset)",
        )
    if clean and clean == len(mlx5):
        yield Finding(
            "rdma.nic_config",
            Severity.PASS,
            "NICs",
            f"ATS, PCI ordering and outstanding reads as NVIDIA recommends on {clean} HCA(s)",
        )
