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

    def params(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "gpus_per_node": self.gpus_per_node, "nvlink_GBps": self.nvlink_GBps,
                "pcie_GBps": self.pcie_GBps, "nics_per_node": self.nics_per_node, "nic_rate": self.nic_rate,
                "intra_link": self.intra_link, "nvswitch": self.nvswitch != "none"}


SYSTEMS: dict[str, SystemPreset] = {s.name: s for s in (
    SystemPreset(
        "dgx-a100", "a100", 8, 300.0, "NVLink 3 (600 GB/s per GPU, both directions)", "NVSwitch gen 2 (6)",
        "PCIe Gen4 x16", 27.7, 8, "200G", "8x ConnectX-6 HDR 200 Gb/s (compute)",
        "NVIDIA DGX A100 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/nvidia-dgx-a100-datasheet.pdf"),
    SystemPreset(
        "dgx-h100", "h100", 8, 450.0, "NVLink 4 (900 GB/s per GPU)", "NVSwitch gen 3 (4)", "PCIe Gen5 x16", 55.4,
        8, "400G", "8x ConnectX-7 400 Gb/s (OSFP)",
        "NVIDIA DGX H100 user guide, https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html"),
    SystemPreset(
        "hgx-h200", "h200", 8, 450.0, "NVLink 4 (900 GB/s per GPU)", "NVSwitch gen 3 (4)", "PCIe Gen5 x16", 55.4,
        8, "400G", "8x 400 Gb/s (ConnectX-7 or BlueField-3, one per GPU)",
        "NVIDIA H200 datasheet (NVLink 900 GB/s), https://www.nvidia.com/en-us/data-center/h200/; "
        "HGX platform, https://www.nvidia.com/en-us/data-center/hgx/"),
    SystemPreset(
        "dgx-b200", "b200", 8, 900.0, "NVLink 5 (1.8 TB/s per GPU)", "NVLink switch gen 5 (2)", "PCIe Gen5 x16",
        55.4, 8, "400G", "8x single-port ConnectX-7 VPI 400 Gb/s",
        "NVIDIA DGX B200 datasheet, https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet"),
    SystemPreset(
        "gb200-nvl72", "gb200", 72, 900.0, "NVLink 5 (1.8 TB/s per GPU; 130 TB/s per rack)",
        "NVLink switch gen 5 (9 switch trays)", "PCIe Gen5 x16", 55.4, 72, "400G",
        "4x ConnectX-7 400 Gb/s per compute tray (one per GPU), 18 trays",
        "NVIDIA GB200 NVL72, https://www.nvidia.com/en-us/data-center/gb200-nvl72/", nvlink_domain=True),
    SystemPreset(
        "pcie-server", "h100", 8, 55.4, "none (GPUs talk over PCIe)", "none", "PCIe Gen5 x16", 55.4, 2, "200G",
        "2x ConnectX-7 200 Gb/s", "NVIDIA H100 PCIe product brief (PCIe Gen5 128 GB/s, both directions), "
        "https://www.nvidia.com/en-us/data-center/h100/", intra_link="pci"),
)}


def system_params(name: str, nvlink_domain: int | None) -> dict[str, Any]:
    """The preset's parameters; ``nvlink_domain`` resizes a multi-node NVLink domain (NVL36: 36)."""
    key = str(name).lower()
    if key not in SYSTEMS:
        raise FabricscopeError(f"unknown system {name!r} (choose from {', '.join(SYSTEMS)})")
    s = SYSTEMS[key]
    p = s.params()
    if nvlink_domain is not None:
        if not s.nvlink_domain:
            raise FabricscopeError(f"--nvlink-domain applies to systems whose NVLink spans trays (gb200-nvl72), not {key}")
        if not 2 <= int(nvlink_domain) <= 576:
            raise FabricscopeError("--nvlink-domain must be between 2 and 576 GPUs")
        p["gpus_per_node"] = p["nics_per_node"] = int(nvlink_domain)
    return p


def describe(name: str) -> dict[str, Any]:
    s = SYSTEMS[name]
    return {"system": s.name, "nvlink": s.nvlink_gen, "nvswitch": s.nvswitch, "pcie": s.pcie, "nics": s.nic,
            "source": s.source}
