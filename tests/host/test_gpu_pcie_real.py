"""GPU PCIe throughput from a real `nvidia-smi -q` (an H200 under host<->device copies)."""

from __future__ import annotations

import re

from fabricscope.host.gpu import NVIDIA_SMI_PCI, parse_pcie_throughput
from tests.conftest import samples_dir

KB = 1000  # nvidia-smi's "KB/s" as NVML states it, read as SI kilobytes (docs/monitoring.md)


def test_the_whole_query_carries_the_throughput_and_is_what_we_run() -> None:
    text = (samples_dir() / "nvidia_smi_q_h200_pcie_copy.txt").read_text()
    tx, rx = (int(v) for v in re.findall(r"[TR]x Throughput\s+: (\d+) KB/s", text))
    assert parse_pcie_throughput(text) == {"0000:00:06.0": (tx * KB, rx * KB)}
    assert tx > 1_000_000  # the copies moved over a GB/s; the reverse direction idled
    # `-q -d PCI` is refused by this nvidia-smi ("Failed to parse --display/-d flags"): the whole query
    assert NVIDIA_SMI_PCI == ("nvidia-smi", "-q")
