"""One table of GPU models: every figure the simulator takes from a GPU, in one place.

Before this table the same GPUs lived in three (NVLink/PCIe in the topology, TFLOP/s and HBM in
the training model, the generation in NCCL's tuning) and drifted: ``h800`` was in two and
refused by the third, and a GPU missing from the training table silently got H100 compute. Now a
GPU is known everywhere or nowhere, and an unknown name is refused with the list of known ones.

Figures are the datasheet's (named per GPU): NVLink per GPU per direction (half the
"bidirectional" figure NVIDIA prints), the effective PCIe rate of the GPU's x16 host interface
per direction (~88% of the raw rate after TLP/DLLP overhead: Gen3 15.75, Gen4 31.5, Gen5 63,
Gen6 126 GB/s raw), dense (not 2:4 sparse) tensor-core TFLOP/s in 16-bit and FP8 (None where the
part has no FP8 tensor cores), HBM capacity and bandwidth, SM count, and the architecture
(NCCL's tuning constants are per generation). A system preset (sim/systems.py) may give a NIC
slot its own PCIe rate (a B200 behind a Gen5 switch); the GPU's figure is the default.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

from fabricscope.errors import FabricscopeError
from fabricscope.registry import by_name

ARCHS = ("volta", "ampere", "hopper", "blackwell")
CPU_HOST = "none"  # hosts without GPUs (the lab): no NVLink, no NCCL, no tensor cores


@dataclass(frozen=True)
class GpuModel:
    """One GPU part as the simulator sees it."""

    name: str
    arch: str  # one of ARCHS
    nvlink_GBps: float  # per GPU per direction into its NVLink domain
    pcie_GBps: float  # effective, per direction, x16 host interface
    bf16_tflops: float  # dense 16-bit tensor core (V100: FP16; it has no BF16)
    fp8_tflops: float | None  # dense FP8 tensor core; None before Hopper
    hbm_GB: float
    hbm_GBps: float
    sms: int
    source: str


_A100 = "NVIDIA A100 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf; SMs: A100 architecture whitepaper"
_H100 = "NVIDIA H100 datasheet (SXM), https://www.nvidia.com/en-us/data-center/h100/; SMs: H100 architecture whitepaper"

GPUS: dict[str, GpuModel] = by_name(
    GpuModel(
        "v100",
        "volta",
        150.0,
        13.9,
        125.0,
        None,
        32.0,
        900.0,
        80,
        "NVIDIA V100 datasheet (SXM2: NVLink 300 GB/s, 125 TFLOPS tensor, 32 GB HBM2 at 900 GB/s, PCIe Gen3), "
        "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
    ),
    GpuModel("a100", "ampere", 300.0, 27.7, 312.0, None, 80.0, 2039.0, 108, _A100),
    GpuModel("h100", "hopper", 450.0, 55.4, 989.0, 1979.0, 80.0, 3350.0, 132, _H100),
    GpuModel(
        "h800",
        "hopper",
        200.0,
        55.4,
        989.0,
        1979.0,
        80.0,
        3350.0,
        132,
        "H100's compute and HBM with NVLink cut to 400 GB/s (both directions); 8x H800 all_reduce 215 GB/s in "
        "https://github.com/NVIDIA/nccl/issues/1374; " + _H100,
    ),
    GpuModel(
        "h20",
        "hopper",
        450.0,
        55.4,
        148.0,
        296.0,
        96.0,
        4000.0,
        78,
        "NVIDIA does not publish an H20 datasheet; third-party listings (e.g. https://willitrunai.com/es/gpus/h20-96gb): "
        "96 GB HBM3 at 4.0 TB/s, 148 TFLOPS FP16, NVLink 900 GB/s; SM count 78 as reported, unverified",
    ),
    GpuModel(
        "h200",
        "hopper",
        450.0,
        55.4,
        989.0,
        1979.0,
        141.0,
        4800.0,
        132,
        "NVIDIA H200 datasheet, https://www.nvidia.com/en-us/data-center/h200/",
    ),
    GpuModel(
        "b200",
        "blackwell",
        900.0,
        110.9,
        2250.0,
        4500.0,
        180.0,
        8000.0,
        148,
        "NVIDIA DGX B200 datasheet (72 PF FP8 / 1,440 GB / 64 TB/s for 8 GPUs, halved for dense), "
        "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet",
    ),
    GpuModel(
        "gb200",
        "blackwell",
        900.0,
        55.4,
        2500.0,
        5000.0,
        186.0,
        8000.0,
        148,
        "NVIDIA GB200 NVL72 (per rack 180 PF dense FP16, 13.4 TB HBM3e at 576 TB/s, over 72 GPUs), "
        "https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
    ),
)


def known() -> str:
    """The names a user may give, for error messages and help."""
    return ", ".join([*GPUS, CPU_HOST])


def lookup(name: str) -> GpuModel:
    """The GPU model, or a clear error listing the known ones (never a silent stand-in)."""
    key = str(name).lower()
    if key not in GPUS:
        if key == CPU_HOST:
            raise FabricscopeError("this model needs GPUs; --gpu none describes CPU hosts")
        raise FabricscopeError(f"unknown GPU {name!r} (known: {known()})")
    return GPUS[key]


# The part number as nvidia-smi's ``name`` prints it ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
# "Tesla V100-SXM2-32GB", "NVIDIA GB200"), then what follows it.
_PRODUCT = re.compile(r"(?:nvidia |tesla )?(gb200|b200|h200|h800|h100|h20|a100|v100)(?![0-9a-z])(.*)\Z")
_NOT_SXM = re.compile(r".*(?:pcie|\bnvl\b).*\Z")  # a PCIe card, or an NVL pair: not the table's NVLink


def from_product_name(name: str | None) -> GpuModel | None:
    """The table's model for a GPU as nvidia-smi names it, or None when the table has no such part:
    an unknown GPU, or a PCIe or NVL card of a known one (the table's figures are the SXM part's,
    whose NVLink such a card does not have). Never a stand-in."""
    match = _PRODUCT.match(" ".join(str(name or "").lower().split()))
    if match is None or _NOT_SXM.match(match.group(2)):
        return None
    return GPUS[match.group(1)]


def node_bandwidths(name: str) -> dict[str, float]:
    """NVLink and PCIe rates of a node built from this GPU (CPU hosts: no limit inside the host)."""
    if str(name).lower() == CPU_HOST:
        return {"nvlink_GBps": math.inf, "pcie_GBps": math.inf}
    g = lookup(name)
    return {"nvlink_GBps": g.nvlink_GBps, "pcie_GBps": g.pcie_GBps}


def arch_of(name: str) -> str | None:
    """The generation NCCL's tuning constants are indexed by; None for CPU hosts (no NCCL)."""
    if str(name).lower() == CPU_HOST:
        return None
    return lookup(name).arch


def missing_fields(g: GpuModel) -> list[str]:
    """Fields a GPU model leaves empty (FP8 may be None before Hopper): the completeness test's check."""
    out = []
    for f in fields(g):
        v = getattr(g, f.name)
        if f.name == "fp8_tflops" and v is None and g.arch in ("volta", "ampere"):
            continue
        if v is None or v == "" or (isinstance(v, float) and not (math.isfinite(v) and v > 0)):
            out.append(f.name)
    if g.arch not in ARCHS:
        out.append("arch")
    return out
