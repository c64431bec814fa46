"""Real systems as presets (``--system``): GPUs per node, NVLink and NVSwitch generation, PCIe, NICs
and their rate, each figure from NVIDIA's datasheet or user guide (named per preset).

A preset only fills what the user did not give: ``--system dgx-h100 --nic-rate 200G`` is a DGX
H100 with 200G NICs. ``--gpu`` stays for a custom build. A multi-node NVLink domain (GB200 NVL72,
NVL36) is one *node* of the model: every GPU of the domain is on the same NVSwitch fabric;
``--nvlink-domain N`` sets its size in GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.registry import by_name


@dataclass(frozen=True)
class SystemPreset:
    name: str
    gpu: str
    gpus_per_node: int
    nvlink_GBps: float  # per GPU per direction; for PCIe servers the GPU's own x16 slot
    nvlink_gen: str
    nvswitch: str  # generation, or "none"
    pcie: str
    pcie_GBps: float  # effective per NIC slot per direction (~88% of raw after TLP/DLLP overhead)
    nics_per_node: int
    nic_rate: str
    nic: str
    source: str
    intra_link: str = "nvlink"
    nvlink_domain: bool = False  # the NVLink domain spans trays: --nvlink-domain sets its size
    transport: str | None = None  # the network the system is sold with (cloud instances), else the user's
    gpus_per_tray: int | None = None  # a multi-node NVLink domain cabled as trays (NVL72: 18 x 4)

    def params(self) -> dict[str, Any]:
        p = {
            "gpu": self.gpu,
            "gpus_per_node": self.gpus_per_node,
            "nvlink_GBps": self.nvlink_GBps,
            "pcie_GBps": self.pcie_GBps,
            "nics_per_node": self.nics_per_node,
            "nic_rate": self.nic_rate,
            "intra_link": self.intra_link,
            "nvswitch": self.nvswitch != "none",
        }
        if self.transport:
            p["transport"] = self.transport
        return p


# An 8-GPU HGX baseboard, by GPU: NVLink per GPU per direction, its generation, the NVSwitch
# (chips on the board), the NIC slots' PCIe and its effective rate. One board is one fact: the
# DGX/HGX presets and the clouds' instances of a GPU all use it (they differ in NICs only).
_HGX_BOARD: dict[str, tuple[float, str, str, str, float]] = {
    "a100": (
        300.0,
        "NVLink 3 (600 GB/s per GPU, both directions)",
        "NVSwitch gen 2 (6)",
        "PCIe Gen4 x16",
        27.7,
    ),
    "h100": (450.0, "NVLink 4 (900 GB/s per GPU)", "NVSwitch gen 3 (4)", "PCIe Gen5 x16", 55.4),
    "h200": (450.0, "NVLink 4 (900 GB/s per GPU)", "NVSwitch gen 3 (4)", "PCIe Gen5 x16", 55.4),
    "b200": (900.0, "NVLink 5 (1.8 TB/s per GPU)", "NVLink switch gen 5 (2)", "PCIe Gen5 x16", 55.4),
}


def _cloud(
    name: str, gpu: str, nics: int, nic_rate: str, nic: str, source: str, transport: str
) -> SystemPreset:
    """A cloud instance: one 8-GPU HGX board of ``gpu`` with the provider's NICs and network."""
    return SystemPreset(name, gpu, 8, *_HGX_BOARD[gpu], nics, nic_rate, nic, source, transport=transport)


SYSTEMS: dict[str, SystemPreset] = by_name(
    SystemPreset(
        "dgx-a100",
        "a100",
        8,
        *_HGX_BOARD["a100"],
        8,
        "200G",
        "8x ConnectX-6 HDR 200 Gb/s (compute)",
        "NVIDIA DGX A100 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/nvidia-dgx-a100-datasheet.pdf",
    ),
    SystemPreset(
        "dgx-h100",
        "h100",
        8,
        *_HGX_BOARD["h100"],
        8,
        "400G",
        "8x ConnectX-7 400 Gb/s (OSFP)",
        "NVIDIA DGX H100 user guide, https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html",
    ),
    SystemPreset(
        "hgx-h200",
        "h200",
        8,
        *_HGX_BOARD["h200"],
        8,
        "400G",
        "8x 400 Gb/s (ConnectX-7 or BlueField-3, one per GPU)",
        "NVIDIA H200 datasheet (NVLink 900 GB/s), https://www.nvidia.com/en-us/data-center/h200/; "
        "HGX platform, https://www.nvidia.com/en-us/data-center/hgx/",
    ),
    SystemPreset(
        "dgx-b200",
        "b200",
        8,
        *_HGX_BOARD["b200"],
        8,
        "400G",
        "8x single-port ConnectX-7 VPI 400 Gb/s",
        "NVIDIA DGX B200 datasheet, https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet",
    ),
    SystemPreset(
        "gb200-nvl72",
        "gb200",
        72,
        900.0,
        "NVLink 5 (1.8 TB/s per GPU; 130 TB/s per rack)",
        "NVLink switch gen 5 (9 switch trays)",
        "PCIe Gen5 x16",
        55.4,
        72,
        "400G",
        "4x ConnectX-7 400 Gb/s per compute tray (one per GPU), 18 trays",
        "NVIDIA GB200 NVL72, https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
        nvlink_domain=True,
        gpus_per_tray=4,
    ),
    SystemPreset(
        "pcie-server",
        "h100",
        8,
        55.4,
        "none (GPUs talk over PCIe)",
        "none",
        "PCIe Gen5 x16",
        55.4,
        2,
        "200G",
        "2x ConnectX-7 200 Gb/s",
        "NVIDIA H100 PCIe product brief (PCIe Gen5 128 GB/s, both directions), "
        "https://www.nvidia.com/en-us/data-center/h100/",
        intra_link="pci",
    ),
    # --- more NVIDIA systems (issue 23) ---
    SystemPreset(
        "dgx-1v",
        "v100",
        8,
        150.0,
        "NVLink 2 hybrid cube-mesh (300 GB/s per GPU, 6 links)",
        "none",
        "PCIe Gen3 x16",
        13.9,
        4,
        "100G",
        "4x ConnectX-4 100 Gb/s EDR InfiniBand",
        "NVIDIA DGX-1 with V100 datasheet, https://images.nvidia.com/content/pdf/dgx1-v100-system-architecture-whitepaper.pdf "
        "(the cube-mesh is modelled as a switch of the same per-GPU rate: no NVLS)",
    ),
    SystemPreset(
        "dgx-h800",
        "h800",
        8,
        200.0,
        "NVLink 4 cut to 400 GB/s per GPU",
        "NVSwitch gen 3",
        "PCIe Gen5 x16",
        55.4,
        8,
        "400G",
        "8x ConnectX-7 400 Gb/s InfiniBand (one per GPU, as DeepEP's H800 cluster)",
        "DeepSeek's H800 nodes (https://github.com/deepseek-ai/DeepEP README: 'each connected to a CX7 InfiniBand 400 Gb/s RDMA "
        "network card'); NVLink 400 GB/s from https://github.com/NVIDIA/nccl/issues/1374",
    ),
    SystemPreset(
        "hgx-h20",
        "h20",
        8,
        450.0,
        "NVLink 4 (900 GB/s per GPU)",
        "NVSwitch gen 3",
        "PCIe Gen5 x16",
        55.4,
        8,
        "400G",
        "8x 400 Gb/s (one per GPU; assumed, as HGX H100)",
        "H20 figures: sim/gpus.py (third-party listings, e.g. https://willitrunai.com/es/gpus/h20-96gb); the NIC layout is HGX H100's, assumed",
    ),
    # --- cloud instances: each figure from the provider's instance documentation ---
    _cloud(
        "aws-p4d",
        "a100",
        4,
        "100G",
        "4x 100 Gb/s EFA (400 Gbps)",
        "AWS EC2 P4 instances, https://aws.amazon.com/ec2/instance-types/p4/ (p4d.24xlarge: 8 A100, 400 Gbps EFA)",
        "efa",
    ),
    _cloud(
        "aws-p5",
        "h100",
        8,
        "400G",
        "32x 100 Gb/s EFAv2 (3200 Gbps), four per GPU, striped by aws-ofi-nccl: one 400G rail per GPU",
        "AWS EC2 P5 instances, https://aws.amazon.com/ec2/instance-types/p5/ (p5.48xlarge: 8 H100, 3200 Gbps EFAv2)",
        "efa",
    ),
    _cloud(
        "aws-p5en",
        "h200",
        8,
        "400G",
        "16x 200 Gb/s EFAv3 (3200 Gbps), two per GPU striped by aws-ofi-nccl: one 400G rail per GPU",
        "AWS EC2 P5 instances, https://aws.amazon.com/ec2/instance-types/p5/ (p5en.48xlarge: 8 H200, 3200 Gbps EFAv3)",
        "efa",
    ),
    _cloud(
        "aws-p6",
        "b200",
        8,
        "400G",
        "8x 400 Gb/s EFAv4 (3200 Gbps)",
        "AWS EC2 P6 instances, https://aws.amazon.com/ec2/instance-types/p6/ (p6-b200.48xlarge: 8 B200, 3200 Gbps EFAv4)",
        "efa",
    ),
    _cloud(
        "gcp-a3-high",
        "h100",
        4,
        "200G",
        "4x 200 Gb/s gVNIC for GPUDirect-TCPX (800 Gbps), one per 2 GPUs",
        "GCP accelerator-optimized machines, https://cloud.google.com/compute/docs/accelerator-optimized-machines "
        "(a3-highgpu-8g: 8 H100, 4 NICs of 200 Gbps with GPUDirect-TCPX)",
        "tcpx",
    ),
    _cloud(
        "gcp-a3-mega",
        "h100",
        8,
        "200G",
        "8x 200 Gb/s gVNIC for GPUDirect-TCPXO (1600 Gbps)",
        "GCP accelerator-optimized machines, https://cloud.google.com/compute/docs/accelerator-optimized-machines "
        "(a3-megagpu-8g: 8 H100, 8 NICs of 200 Gbps with GPUDirect-TCPXO)",
        "tcpxo",
    ),
    _cloud(
        "gcp-a3-ultra",
        "h200",
        8,
        "400G",
        "8x ConnectX-7 400 Gb/s RoCE (3200 Gbps, GPUDirect-RDMA)",
        "GCP accelerator-optimized machines, https://cloud.google.com/compute/docs/accelerator-optimized-machines "
        "(a3-ultragpu-8g: 8 H200, 8 ConnectX-7 of 400 Gbps, RDMA over Converged Ethernet)",
        "roce",
    ),
    _cloud(
        "gcp-a4",
        "b200",
        8,
        "400G",
        "8x ConnectX-7 400 Gb/s RoCE (3200 Gbps)",
        "GCP accelerator-optimized machines, https://cloud.google.com/compute/docs/accelerator-optimized-machines "
        "(a4-highgpu-8g: 8 B200, 8 ConnectX-7 of 400 Gbps, RoCE)",
        "roce",
    ),
    _cloud(
        "azure-nd-a100-v4",
        "a100",
        8,
        "200G",
        "8x 200 Gb/s HDR InfiniBand (1.6 Tb/s)",
        "Azure ND A100 v4 series, https://learn.microsoft.com/azure/virtual-machines/nda100-v4-series",
        "ib",
    ),
    _cloud(
        "azure-nd-h100-v5",
        "h100",
        8,
        "400G",
        "8x 400 Gb/s NDR InfiniBand (3.2 Tb/s)",
        "Azure ND H100 v5 series, https://learn.microsoft.com/azure/virtual-machines/nd-h100-v5-series",
        "ib",
    ),
    _cloud(
        "azure-nd-h200-v5",
        "h200",
        8,
        "400G",
        "8x 400 Gb/s NDR InfiniBand (3.2 Tb/s)",
        "Azure ND H200 v5 series, https://learn.microsoft.com/azure/virtual-machines/nd-h200-v5-series",
        "ib",
    ),
    SystemPreset(
        "azure-nd-gb200-v6",
        "gb200",
        72,
        900.0,
        "NVLink 5 (1.8 TB/s per GPU), NVL72 rack",
        "NVLink switch gen 5",
        "PCIe Gen5 x16",
        55.4,
        72,
        "400G",
        "one 400 Gb/s NDR InfiniBand per GPU; a VM is one 4-GPU tray of an NVL72 rack",
        "Azure ND GB200 v6 series, https://learn.microsoft.com/azure/virtual-machines/nd-gb200-v6-series",
        nvlink_domain=True,
        transport="ib",
        gpus_per_tray=4,
    ),
)


def system_params(name: str, nvlink_domain: int | None) -> dict[str, Any]:
    """The preset's parameters; ``nvlink_domain`` resizes a multi-node NVLink domain (NVL36: 36)."""
    key = str(name).lower()
    if key not in SYSTEMS:
        raise FabricscopeError(f"unknown system {name!r} (choose from {', '.join(SYSTEMS)})")
    s = SYSTEMS[key]
    p = s.params()
    if nvlink_domain is not None:
        if not s.nvlink_domain:
            raise FabricscopeError(
                f"--nvlink-domain applies to systems whose NVLink spans trays (gb200-nvl72), not {key}"
            )
        if not 2 <= int(nvlink_domain) <= 576:
            raise FabricscopeError("--nvlink-domain must be between 2 and 576 GPUs")
        p["gpus_per_node"] = p["nics_per_node"] = int(nvlink_domain)
    if s.nvlink_domain:
        p["nvlink_domain_gpus"] = p[
            "gpus_per_node"
        ]  # trays given as nodes fold into this domain (scenario.py)
    return p


def describe(name: str) -> dict[str, Any]:
    s = SYSTEMS[name]
    return {
        "system": s.name,
        "nvlink": s.nvlink_gen,
        "nvswitch": s.nvswitch,
        "pcie": s.pcie,
        "nics": s.nic,
        "source": s.source,
    }
