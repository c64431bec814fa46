"""RDMA ports: state, rate against the best sibling's, every port counter and hw_counter."""

from __future__ import annotations

import re

from fabricscope.host.infiniband import RdmaPort, list_rdma_ports, read_port
from fabricscope.host.sysfs import MAX_COUNTER_FILES_PER_SCRAPE, Budget
from fabricscope.monitor.collectors.base import Families, ScrapeContext
from fabricscope.monitor.names import HW_COUNTERS, OTHER_HW_COUNTER, OTHER_PORT_COUNTER, PORT_COUNTERS

GBPS_TO_BYTES_PER_S = 1e9 / 8
_TRAILING_DIGITS = re.compile(r"\d+$")

STATE_HELP = "Port state (1 down, 2 init, 3 armed, 4 active, 5 active defer); 4 is the only usable state."
PHYS_HELP = "Physical port state (1 sleep, 2 polling, 3 disabled, 4 training, 5 link up, 6 error recovery, 7 PHY test)."
RATE_HELP = "Port rate (active width times lane speed) in bytes per second, as the port reports it."
EXPECTED_HELP = (
    "The best rate among ports of the same model and link layer on this node, in bytes per second: "
    "a port below it is degraded (fewer lanes or a lower speed)."
)


def _model_key(ctx: ScrapeContext, status: RdmaPort) -> tuple[str, str]:
    meta = ctx.topology.devices.get(status.device)
    model = meta.model if meta is not None and meta.model else _TRAILING_DIGITS.sub("", status.device)
    return model, status.link_layer or ""


class RdmaCollector:
    name = "rdma"
    uses_topology = True

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        ports = list_rdma_ports(ctx.root)
        _note_vanished(ctx, {dev for dev, _port in ports})
        budget = Budget("counter files", MAX_COUNTER_FILES_PER_SCRAPE)
        statuses = [
            s
            for dev, port in ports
            if (s := read_port(ctx.root, dev, port, gids=False, budget=budget)) is not None
        ]
        budget.report(ctx.root, "sys/class/infiniband")
        best = _best_rates(ctx, statuses)
        for dev in dict.fromkeys(s.device for s in statuses):
            _device_info(ctx, out, dev)
        for status in statuses:
            _port(ctx, out, status, best.get(_model_key(ctx, status)))


def _note_vanished(ctx: ScrapeContext, present: set[str]) -> None:
    """Known a moment ago, gone now: a hot-unplug, a driver reload or a fatal firmware error.
    Reported until the next topology refresh forgets the device."""
    for dev in ctx.topology.devices:
        if dev not in present:
            ctx.root.note(
                f"sys/class/infiniband/{dev}", "RDMA device vanished since the last topology refresh"
            )


def _best_rates(ctx: ScrapeContext, statuses: list[RdmaPort]) -> dict[tuple[str, str], float]:
    """The best rate per (model, link layer): what a healthy sibling shows a degraded port should reach."""
    best: dict[tuple[str, str], float] = {}
    for status in statuses:
        if status.rate_gbps is not None:
            key = _model_key(ctx, status)
            best[key] = max(best.get(key, 0.0), status.rate_gbps)
    return best


def _device_info(ctx: ScrapeContext, out: Families, dev: str) -> None:
    meta = ctx.topology.devices.get(dev)
    out.gauge(
        "rdma_device_info",
        "RDMA device identity; value is always 1.",
        {
            "device": dev,
            "hca_type": (meta.hca_type if meta else None) or "",
            "board_id": (meta.board_id if meta else None) or "",
            "fw_ver": (meta.fw_ver if meta else None) or "",
            "pci_address": (meta.pci_address if meta else None) or "",
        },
        1,
    )


def _port(ctx: ScrapeContext, out: Families, status: RdmaPort, expected: float | None) -> None:
    """One port: identity, states, rate against ``expected`` (its best sibling's), every counter."""
    labels = {"device": status.device, "port": str(status.port)}
    out.gauge(
        "rdma_port_info",
        "RDMA port identity: the netdev behind it and its link layer; value is always 1.",
        {
            **labels,
            "netdev": ctx.topology.netdev_of(status.device, status.port),
            "link_layer": status.link_layer or "",
        },
        1,
    )
    out.gauge("rdma_port_state_id", STATE_HELP, labels, status.state_id)
    out.gauge("rdma_port_physical_state_id", PHYS_HELP, labels, status.phys_state_id)
    if status.rate_gbps is not None:
        out.gauge(
            "rdma_port_rate_bytes_per_second",
            RATE_HELP,
            labels,
            status.rate_gbps * GBPS_TO_BYTES_PER_S,
        )
        out.gauge(
            "rdma_port_expected_rate_bytes_per_second",
            EXPECTED_HELP,
            labels,
            expected * GBPS_TO_BYTES_PER_S if expected is not None else None,
        )
    if status.hw_lifespan_ms is not None:
        out.gauge(
            "rdma_hw_counters_lifespan_seconds",
            "How long the driver caches hw_counters values between refreshes.",
            labels,
            status.hw_lifespan_ms / 1000.0,
        )
    _counters(
        out,
        labels,
        status.counters,
        PORT_COUNTERS,
        OTHER_PORT_COUNTER,
        "Port counters without a dedicated metric, by sysfs file name.",
    )
    _counters(
        out,
        labels,
        status.hw_counters,
        HW_COUNTERS,
        OTHER_HW_COUNTER,
        "Driver hw_counters without a dedicated metric, by sysfs file name.",
    )


def _counters(
    out: Families, labels: dict[str, str], values: dict[str, int], table: dict, other: str, other_help: str
) -> None:
    """One sysfs counter directory: mapped names get their own metric, the rest one labelled family."""
    for name, value in values.items():
        mapped = table.get(name)
        if mapped is not None:
            out.counter(mapped.name, mapped.help, labels, value * mapped.scale)
        else:
            out.counter(other, other_help, {**labels, "counter": name}, value)
