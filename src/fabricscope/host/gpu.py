"""GPUs: from nvidia-smi when present, otherwise from PCI class and vendor."""

from __future__ import annotations

from dataclasses import dataclass

from fabricscope.host.pci import PciDevice
from fabricscope.host.root import Root

NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=index,pci.bus_id,name", "--format=csv,noheader"]


@dataclass(frozen=True)
class Gpu:
    index: int
    pci_address: str  # normalised to sysfs form "0000:17:00.0"
    name: str | None


def normalise_bus_id(bus_id: str) -> str:
    """nvidia-smi prints "00000000:17:00.0"; sysfs uses "0000:17:00.0"."""
    bus_id = bus_id.strip().lower()
    domain, _, rest = bus_id.partition(":")
    if rest and len(domain) > 4:
        domain = domain[-4:]
    return f"{domain}:{rest}" if rest else bus_id


def parse_nvidia_smi(text: str) -> list[Gpu]:
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not (fields[0].isascii() and fields[0].isdigit()) or ":" not in fields[1]:
            continue
        gpus.append(Gpu(index=int(fields[0]), pci_address=normalise_bus_id(fields[1]), name=",".join(fields[2:])))
    return gpus


def read_gpus(root: Root, pci: dict[str, PciDevice]) -> tuple[list[Gpu], str]:
    """GPUs and where they were found ("nvidia-smi" or "pci")."""
    result = root.run(NVIDIA_SMI_QUERY)
    if result.ok:
        gpus = parse_nvidia_smi(result.stdout)
        if gpus:
            return gpus, "nvidia-smi"
        root.note("nvidia-smi", "no GPU lines recognised in output")
    found = sorted(addr for addr, dev in pci.items() if dev.is_nvidia_gpu)
    return [Gpu(index=i, pci_address=addr, name=None) for i, addr in enumerate(found)], "pci"
