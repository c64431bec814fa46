"""NVLink and NVSwitch fabric state from nvidia-smi: per-link speeds (``nvidia-smi nvlink -s``) and
each GPU's fabric registration (the "Fabric" section of ``nvidia-smi -q``).

Formats (tests/data/samples/nvidia_smi_nvlink_s_*.txt, nvidia_smi_q_fabric_*.txt):
``GPU 3: Tesla V100-SXM2-32GB (UUID: ...)`` then ``Link 3: <inactive>`` / ``Link 0: 25.781 GB/s``;
``nvidia-smi -q`` prints ``GPU 00000000:17:00.0`` per GPU and, on NVSwitch systems, a ``Fabric``
block whose ``State`` (Not Started / In Progress / Completed / N/A) and ``Status`` (Success or
an error such as Insufficient Resources) follow NVML's nvmlGpuFabricInfo (state, status).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricscope.host.gpu import normalise_bus_id
from fabricscope.host.root import Root

NVLINK_STATUS = ("nvidia-smi", "nvlink", "-s")
NVIDIA_SMI_QUERY_ALL = ("nvidia-smi", "-q")

_GPU_LINE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: [^)]*\))?\s*$")
_LINK_LINE = re.compile(r"^\s*Link (\d+): (?:<inactive>|([\d.]+) GB/s)")
_Q_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*)\Z")


@dataclass(frozen=True)
class GpuLinks:
    index: int
    name: str
    links: dict[int, float | None] = field(default_factory=dict)  # link -> GB/s; None: <inactive>


@dataclass(frozen=True)
class GpuFabric:
    """The Fabric block of one GPU in ``nvidia-smi -q``."""

    pci: str  # sysfs form "0000:17:00.0"
    state: str | None
    status: str | None
    clique_id: str | None = None
    health: str | None = None  # Health / Summary


def parse_nvlink_status(text: str) -> list[GpuLinks]:
    gpus: list[GpuLinks] = []
    for line in text.splitlines():
        if (m := _GPU_LINE.match(line.strip())) is not None:
            gpus.append(GpuLinks(int(m.group(1)), m.group(2)))
        elif (m := _LINK_LINE.match(line)) is not None and gpus:
            gpus[-1].links[int(m.group(1))] = float(m.group(2)) if m.group(2) else None
    return gpus


def parse_fabric(text: str, pci: str = "") -> list[GpuFabric]:
    """Every Fabric block of ``nvidia-smi -q`` with the GPU it belongs to ("" when the text has no
    GPU header, as in an excerpt)."""
    out: list[GpuFabric] = []
    values: dict[str, str] | None = None
    indent = 0
    section = ""
    for line in text.splitlines():
        if (m := _Q_GPU.match(line.strip())) is not None and not line.startswith(" " * 8):
            pci = normalise_bus_id(m.group(1))
            continue
        if line.strip() == "Fabric":
            values, indent, section = {}, len(line) - len(line.lstrip()), ""
            out.append(GpuFabric(pci, None, None))
            continue
        if values is None:
            continue
        depth = len(line) - len(line.lstrip())
        if line.strip() and depth <= indent:
            values = None
            continue
        kv = _KV.match(line)
        if kv is None:
            section = line.strip()
            continue
        key = f"{section}/{kv.group(2)}" if section and depth > indent + 4 else kv.group(2)
        values[key] = kv.group(3).strip()
        out[-1] = GpuFabric(
            pci,
            values.get("State"),
            values.get("Status"),
            values.get("CliqueId"),
            values.get("Health/Summary"),
        )
    return out


@dataclass(frozen=True)
class NvlinkState:
    links: tuple[GpuLinks, ...] | None  # None: `nvidia-smi nvlink -s` not available
    fabric: tuple[GpuFabric, ...] | None  # None: `nvidia-smi -q` not available


def read_nvlink(root: Root) -> NvlinkState:
    status = root.run(list(NVLINK_STATUS))
    links = tuple(parse_nvlink_status(status.stdout)) if status.ok else None
    query = root.run(list(NVIDIA_SMI_QUERY_ALL))
    fabric = tuple(parse_fabric(query.stdout)) if query.ok else None
    return NvlinkState(links, fabric)
