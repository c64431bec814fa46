"""PCIe link speed and width of every NIC and GPU against their maximum, the link's capacity in
bytes per second (what saturation is measured against), and the GPUs' PCIe throughput from
nvidia-smi where it is there (refreshed in the background)."""

from __future__ import annotations

from fabricscope.host import Root
from fabricscope.host.gpu import read_pcie_throughput
from fabricscope.host.pci import read_pci_device
from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Families, ScrapeContext

GTS = 1e9
GpuThroughput = dict[str, tuple[float, float]] | None  # pci address -> (tx, rx) bytes/s; None: not available

CAPACITY_HELP = (
    "What the PCIe link carries each way at its current speed and width, after line encoding (8b/10b up to "
    "5 GT/s, 128b/130b for 8-32 GT/s, 242/256 FLIT at 64 GT/s), in bytes per second; TLP headers cost another "
    "5-20%, so a NIC near 0.8 of this is saturated."
)


def encoding_efficiency(gts: float) -> float:
    """Payload bits per transferred bit of a PCIe lane at ``gts`` GT/s (PCIe base spec: Gen1-2
    8b/10b, Gen3-5 128b/130b, Gen6 FLIT mode 242 of 256 bytes)."""
    if gts <= 5.0:
        return 0.8
    if gts <= 32.0:
        return 128 / 130
    return 242 / 256


def link_capacity_bytes_per_second(gts: float, width: int) -> float:
    return gts * GTS * width * encoding_efficiency(gts) / 8


def poll_gpu_pcie(root: Root) -> GpuThroughput:
    """``nvidia-smi -q`` (a command: background thread only)."""
    return read_pcie_throughput(root)


class PcieCollector:
    name = "pcie"
    uses_topology = True

    def __init__(self, gpu_task: Periodic[GpuThroughput] | None = None) -> None:
        self.gpu_task = gpu_task

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        for target in ctx.topology.pcie:
            link = read_pci_device(ctx.root, target.address, link_only=True)
            if link is None:
                continue
            labels = {"pci_address": target.address, "kind": target.kind, "device": target.device}
            if link.current_link_speed_gts is not None:
                out.gauge(
                    "pcie_link_speed_transfers_per_second",
                    "Current PCIe link speed per lane in transfers per second (GPUs lower it when idle).",
                    labels,
                    link.current_link_speed_gts * GTS,
                )
            if link.max_link_speed_gts is not None:
                out.gauge(
                    "pcie_max_link_speed_transfers_per_second",
                    "Maximum PCIe link speed per lane the device supports, in transfers per second.",
                    labels,
                    link.max_link_speed_gts * GTS,
                )
            if link.current_link_width is not None:
                out.gauge(
                    "pcie_link_width_lanes",
                    "Current PCIe link width in lanes.",
                    labels,
                    link.current_link_width,
                )
            if link.max_link_width is not None:
                out.gauge(
                    "pcie_max_link_width_lanes",
                    "Maximum PCIe link width in lanes.",
                    labels,
                    link.max_link_width,
                )
            if link.current_link_speed_gts and link.current_link_width:
                out.gauge(
                    "pcie_link_capacity_bytes_per_second",
                    CAPACITY_HELP,
                    labels,
                    link_capacity_bytes_per_second(link.current_link_speed_gts, link.current_link_width),
                )
        self._gpu_throughput(ctx, out)

    def _gpu_throughput(self, ctx: ScrapeContext, out: Families) -> None:
        gpus = [t for t in ctx.topology.pcie if t.kind == "gpu"]
        if self.gpu_task is None or not gpus:
            return
        values = self.gpu_task.outcome.value
        out.gauge(
            "pcie_throughput_available",
            "1 when the GPUs' PCIe throughput is read (nvidia-smi -q); 0: not available here "
            "(no nvidia-smi, or it reports N/A). DCGM's PCIe byte counters, where dcgm-exporter runs, cover "
            "the GPU's own slot only, never the NIC's traffic.",
            {"kind": "gpu", "source": "nvidia-smi"},
            1 if values else 0,
        )
        for target in gpus:
            pair = (values or {}).get(target.address)
            if pair is None:
                continue
            for direction, value in zip(("transmit", "receive"), pair):
                out.gauge(
                    "pcie_throughput_bytes_per_second",
                    "GPU PCIe throughput each way over nvidia-smi's 20 ms sample, in bytes per second.",
                    {
                        "pci_address": target.address,
                        "kind": "gpu",
                        "device": target.device,
                        "direction": direction,
                    },
                    value,
                )
