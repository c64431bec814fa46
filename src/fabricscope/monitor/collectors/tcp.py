"""TCP retransmissions, timeouts and resets from /proc/net/snmp and /proc/net/netstat."""

from __future__ import annotations

from fabricscope.host.procfs import read_netstat
from fabricscope.monitor.collectors.base import Families, ScrapeContext
from fabricscope.monitor.names import TCP_COUNTERS, TCP_REQUIRED


class TcpCollector:
    name = "tcp"

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        problems_before = len(ctx.root.problems)
        counters = read_netstat(ctx.root, required=True)
        if TCP_REQUIRED not in counters and len(ctx.root.problems) == problems_before:
            ctx.root.note("proc/net/snmp", f"no {TCP_REQUIRED} counter")
        for key, mapped in TCP_COUNTERS.items():
            if key in counters:
                out.counter(mapped.name, mapped.help, {}, counters[key] * mapped.scale)
        if "Tcp.CurrEstab" in counters:
            out.gauge(
                "tcp_established_connections",
                "TCP connections currently established.",
                {},
                counters["Tcp.CurrEstab"],
            )
