"""GPUs: from nvidia-smi when present, otherwise from PCI class and vendor."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabricscope.host.pci import PciDevice
from fabricscope.host.root import Root

NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=index,pci.bus_id,name", "--format=csv,noheader"]
# The whole `nvidia-smi -q`: its PCI block carries "Tx/Rx Throughput". `-q -d PCI` is not a display
# type nvidia-smi accepts ("Failed to parse --display/-d flags", driver 580.159 on an H200).
NVIDIA_SMI_PCI = ("nvidia-smi", "-q")
_GPU_HEADER = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*\Z")
_THROUGHPUT = re.compile(r"\s*(Tx|Rx) Throughput\s*:\s*(\d+) KB/s\s*\Z")
# NVIDIA states the unit as "KB/s": nvmlDeviceGetPcieThroughput "Reference in which to return
# throughput in KB/s" (NVML API reference, Device Queries,
# https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html; nvml.h, which nvidia-smi's
# "Tx/Rx Throughput ... KB/s" prints). The same header writes "KiB" where it means 1,024 bytes
# (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX "NVLink TX Data throughput in KiB"), so KB is read as the
# SI 1,000 bytes. NVIDIA does not define KB further (a question to it, NVIDIA/nvidia-settings#114,
# is unanswered): if it meant 1,024, the figures here are 2.4% low.
KB = 1000


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
        gpus.append(
            Gpu(index=int(fields[0]), pci_address=normalise_bus_id(fields[1]), name=",".join(fields[2:]))
        )
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


def parse_pcie_throughput(text: str) -> dict[str, tuple[float, float]]:
    """The PCI blocks of ``nvidia-smi -q``: ``{pci address: (tx, rx)}``
    in bytes per second, for each GPU that reports both (``N/A`` ones are left out)."""
    out: dict[str, tuple[float, float]] = {}
    current: str | None = None
    seen: dict[str, float] = {}
    for line in text.splitlines():
        header = _GPU_HEADER.match(line)
        if header is not None:
            current, seen = normalise_bus_id(header.group(1)), {}
            continue
        match = _THROUGHPUT.match(line)
        if match is not None and current is not None:
            seen[match.group(1)] = int(match.group(2)) * KB
            if "Tx" in seen and "Rx" in seen:
                out[current] = (seen["Tx"], seen["Rx"])
    return out


def read_pcie_throughput(root: Root) -> dict[str, tuple[float, float]] | None:
    """GPU PCIe throughput from nvidia-smi; None when nvidia-smi is not there (or says nothing).
    Runs a command: an exporter calls it from a background thread."""
    result = root.run(NVIDIA_SMI_PCI)
    if not result.ok:
        return None
    return parse_pcie_throughput(result.stdout) or None
