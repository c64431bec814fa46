"""TCP: the fallback path for NCCL, the bootstrap path, and the inference-serving path."""

from __future__ import annotations

import re
from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated
from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import Inventory
from fabricscope.host.netclass import NetDevice

MIN_SOMAXCONN = 4096
# Round-trip time used for the bandwidth-delay product: a loaded intra-datacenter path.
BDP_RTT_S = 0.5e-3
RETRANS_WARN_PCT = 0.5
OFFLOADS = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")
# The sysctls these checks read; a fleet compares them across nodes (fabricscope.checks.facts).
CHECKED_SYSCTLS = (
    "net.core.somaxconn",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
)


def tcp_interfaces(inv: Inventory) -> list[NetDevice]:
    """Interfaces that carry TCP: up, with an address, not loopback."""
    return [n for n in inv.net_devices if n.is_up and n.has_address and not n.is_loopback]


@check("tcp.somaxconn", "Listen backlog")
def somaxconn(ctx: CheckContext) -> Iterator[Finding]:
    """net.core.somaxconn caps every listen backlog: inference servers and NCCL/torch bootstrap
    under a burst of connections drop SYNs and stall for a retransmit timeout when it is small."""
    value = ctx.inventory.kernel.sysctl_int("net.core.somaxconn")
    if value is None:
        yield not_evaluated(
            "tcp.somaxconn",
            "net.core.somaxconn",
            "/proc/sys/net/core/somaxconn unreadable",
            fix="sysctl net.core.somaxconn",
        )
        return
    if value < MIN_SOMAXCONN:
        yield Finding(
            "tcp.somaxconn",
            Severity.WARN,
            "net.core.somaxconn",
            f"listen backlog capped at {value}",
            {"value": value, "recommended": MIN_SOMAXCONN},
            f"sysctl -w net.core.somaxconn={MIN_SOMAXCONN} (persist in /etc/sysctl.d/90-fabricscope.conf)",
        )
    else:
        yield Finding("tcp.somaxconn", Severity.PASS, "net.core.somaxconn", f"{value}", {"value": value})


@check("tcp.buffers", "Socket buffers cover the bandwidth-delay product")
def buffers(ctx: CheckContext) -> Iterator[Finding]:
    """TCP autotuning cannot grow a socket buffer past the third value of tcp_rmem/tcp_wmem; below
    the bandwidth-delay product of the fastest interface (at 0.5 ms RTT) a single stream cannot
    fill the link."""
    inv = ctx.inventory
    interfaces = tcp_interfaces(inv)
    speeds = [n.speed_mbps for n in interfaces if n.speed_mbps]
    if not speeds:
        if interfaces:
            names = [n.name for n in interfaces]
            yield not_evaluated(
                "tcp.buffers",
                ",".join(names),
                f"link speed of {', '.join(names)} unknown (virtual NICs report none), so the bandwidth-delay product is too",
                {"netdevs": names},
                "make the third value of net.ipv4.tcp_rmem/tcp_wmem at least the instance bandwidth (bytes/s) x 0.5 ms",
            )
        return
    link_mbps = max(speeds)
    bdp = int(link_mbps * 1e6 / 8 * BDP_RTT_S)
    for name in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        values = inv.kernel.sysctl_ints(name)
        if not values or len(values) != 3:
            continue
        if values[2] < bdp:
            yield Finding(
                "tcp.buffers",
                Severity.WARN,
                name,
                f"maximum {values[2]:,} bytes is below the {bdp:,}-byte BDP of a {link_mbps / 1000:g} Gb/s link at 0.5 ms",
                {"max_bytes": values[2], "bdp_bytes": bdp, "link_gbps": link_mbps / 1000},
                f"sysctl -w {name}='{values[0]} {values[1]} {max(bdp * 2, values[2]):d}' (and net.core.{'rmem' if 'rmem' in name else 'wmem'}_max)",
            )
        else:
            yield Finding(
                "tcp.buffers",
                Severity.PASS,
                name,
                f"maximum {values[2]:,} bytes >= BDP {bdp:,}",
                {"max_bytes": values[2], "bdp_bytes": bdp},
            )


@check("tcp.congestion_control", "Congestion control algorithm")
def congestion_control(ctx: CheckContext) -> Iterator[Finding]:
    """Reno halves its window on every loss and recovers slowly on high-BDP paths; cubic (the
    Linux default) or bbr are the sensible choices."""
    algo = ctx.inventory.kernel.sysctls.get("net.ipv4.tcp_congestion_control")
    if algo is None:
        yield not_evaluated(
            "tcp.congestion_control",
            "net.ipv4.tcp_congestion_control",
            "/proc/sys/net/ipv4/tcp_congestion_control unreadable",
            fix="sysctl net.ipv4.tcp_congestion_control",
        )
        return
    if not re.fullmatch(r"[a-z][a-z0-9_]*", algo):
        yield not_evaluated(
            "tcp.congestion_control",
            "net.ipv4.tcp_congestion_control",
            f"unrecognised value {algo[:40]!r}",
            {"value": algo},
        )
        return
    if algo == "reno":
        yield Finding(
            "tcp.congestion_control",
            Severity.WARN,
            "net.ipv4.tcp_congestion_control",
            "reno recovers slowly on fast links",
            {"value": algo},
            "sysctl -w net.ipv4.tcp_congestion_control=cubic (or bbr after modprobe tcp_bbr)",
        )
    else:
        yield Finding(
            "tcp.congestion_control", Severity.PASS, "net.ipv4.tcp_congestion_control", algo, {"value": algo}
        )


@check("tcp.offloads", "Segmentation and receive offloads")
def offloads(ctx: CheckContext) -> Iterator[Finding]:
    """Without TSO/GSO/GRO the kernel handles every MTU-sized packet on its own, and one core can
    no longer push more than a few Gb/s of TCP."""
    inv = ctx.inventory
    unknown = []
    for netdev in tcp_interfaces(inv):
        data = inv.ethtool.get(netdev.name)
        if data is None or data.features is None:
            if netdev.is_physical:
                unknown.append(netdev.name)
            continue
        off = [f for f in OFFLOADS if data.features.get(f) is False]
        if off:
            yield Finding(
                "tcp.offloads",
                Severity.WARN,
                netdev.name,
                f"offloads off: {', '.join(off)}",
                {"off": off},
                f"ethtool -K {netdev.name} " + " ".join(f"{_short(f)} on" for f in off),
            )
        else:
            yield Finding("tcp.offloads", Severity.PASS, netdev.name, "TSO, GSO and GRO on")
    if unknown:
        yield Finding(
            "tcp.offloads",
            Severity.INFO,
            ",".join(unknown),
            "offloads not checked: `ethtool -k` not available",
            {"netdevs": unknown},
            "install ethtool (Debian/Ubuntu: apt-get install ethtool) to check TSO/GSO/GRO",
        )


def _short(feature: str) -> str:
    return {
        "tcp-segmentation-offload": "tso",
        "generic-segmentation-offload": "gso",
        "generic-receive-offload": "gro",
    }[feature]


@check("tcp.retransmits", "TCP retransmission rate")
def retransmits(ctx: CheckContext) -> Iterator[Finding]:
    """Retransmitted segments as a share of segments sent (Tcp RetransSegs / OutSegs from
    /proc/net/snmp); above 0.5% TCP throughput suffers (the Mathis bound falls with the square root
    of the loss rate). With --interval the rate is measured over the interval, otherwise since boot."""
    inv = ctx.inventory
    if ctx.rates is not None and "Tcp.OutSegs" in ctx.rates.netstat:
        retrans, out = ctx.rates.netstat.get("Tcp.RetransSegs", 0), ctx.rates.netstat.get("Tcp.OutSegs", 0)
        window = f"over {ctx.rates.interval_s:.0f} s"
    else:
        retrans, out = inv.kernel.netstat.get("Tcp.RetransSegs"), inv.kernel.netstat.get("Tcp.OutSegs")
        window = "since boot"
    if retrans is None or out is None:
        yield not_evaluated(
            "tcp.retransmits",
            "tcp",
            "Tcp RetransSegs/OutSegs not readable from /proc/net/snmp",
            fix="nstat -az TcpRetransSegs TcpOutSegs",
        )
        return
    if not out:
        yield not_evaluated("tcp.retransmits", "tcp", f"no TCP segments sent {window}")
        return
    pct = 100.0 * retrans / out
    evidence = {"retrans_segs": retrans, "out_segs": out, "retrans_pct": round(pct, 4), "window": window}
    if pct > RETRANS_WARN_PCT:
        yield Finding(
            "tcp.retransmits",
            Severity.WARN,
            "tcp",
            f"{pct:.2f}% of TCP segments retransmitted {window} ({retrans:,} of {out:,})",
            evidence,
            "look for drops: `ethtool -S <if> | grep -i -E 'drop|discard|err'`, `nstat -az TcpExt*`, switch port counters",
        )
    else:
        yield Finding("tcp.retransmits", Severity.PASS, "tcp", f"{pct:.3f}% retransmitted {window}", evidence)
