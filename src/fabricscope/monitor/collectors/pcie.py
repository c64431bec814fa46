"""PCIe link speed and width of every NIC and GPU, against the maximum the link supports."""

from __future__ import annotations

from fabricscope.host.pci import read_pci_device
from fabricscope.monitor.collectors.base import Families, ScrapeContext

GTS = 1e9


class PcieCollector:
    name = "pcie"
    uses_topology = True

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
                    "pcie_link_width_lanes", "Current PCIe link width in lanes.", labels, link.current_link_width
                )
            if link.max_link_width is not None:
                out.gauge(
                    "pcie_max_link_width_lanes", "Maximum PCIe link width in lanes.", labels, link.max_link_width
                )
