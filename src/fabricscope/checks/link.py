"""Link health: error counters, congestion signals and transceiver alarms."""

from __future__ import annotations

import re
from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated
from fabricscope.checks.roce import roce_netdevs
from fabricscope.findings import Finding, Severity
from fabricscope.host.ethtool import link_error_stats

# Counters that should stay at zero on a healthy link (port counters and mlx5 hw_counters).
ERROR_COUNTERS = (
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_remote_physical_errors",
    "local_ack_timeout_err",
    "req_transport_retries_exceeded",
    "roce_adp_retrans_to",
    "packet_seq_err",
    "implied_nak_seq_err",
    "rx_icrc_encapsulated",
    "port_xmit_discards",
)
# The error statistics of the efa driver's port hw_counters (drivers/infiniband/hw/efa/efa_verbs.c).
EFA_ERROR_COUNTERS = ("rx_drops", "rdma_read_wr_err")
CONGESTION_PORT_COUNTERS = ("port_xmit_wait", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
_PAUSE = re.compile(r"^(rx|tx)_prio(\d)_pause\Z")


@check("link.errors", "Link error counters")
def link_errors(ctx: CheckContext) -> Iterator[Finding]:
    """Symbol errors, link downs and recoveries point at cables, transceivers and switch ports;
    ACK timeouts and retry exhaustion point at loss in the fabric. Non-zero totals are a warning
    (they may be old); counters rising during `--interval` are a failure happening now. EFA ports
    have no IB port counters; their driver's rx_drops and rdma_read_wr_err are read instead."""
    rates = ctx.rates
    clean = 0
    unknown = []
    for port in ctx.inventory.ports:
        counters = {**port.counters, **port.hw_counters}
        names = EFA_ERROR_COUNTERS if port.is_unspecified else ERROR_COUNTERS
        if not any(name in counters for name in names):
            unknown.append(port.name)
            continue
        nonzero = {name: counters[name] for name in names if counters.get(name)}
        rising = {}
        if rates is not None:
            deltas = rates.ports.get(port.name, {})
            rising = {name: deltas[name] for name in names if deltas.get(name)}
        if rising:
            yield Finding(
                "link.errors",
                Severity.FAIL,
                port.name,
                "error counters rising: "
                + ", ".join(f"{k} +{v} ({rates.per_second(v):.2f}/s)" for k, v in rising.items()),
                {"increase": rising, "interval_s": rates.interval_s, "totals": nonzero},
                _fix_for(rising),
            )
        elif nonzero:
            yield Finding(
                "link.errors",
                Severity.WARN,
                port.name,
                "error counters non-zero: " + ", ".join(f"{k}={v:,}" for k, v in nonzero.items()),
                {"totals": nonzero},
                _fix_for(nonzero) + "; run `fabricscope doctor --interval 30` to see whether they still rise",
            )
        else:
            clean += 1
    if unknown:
        yield not_evaluated(
            "link.errors",
            ",".join(unknown),
            "no error counters readable under counters/ or hw_counters/ of " + ", ".join(unknown),
            {"ports": unknown},
            "read /sys/class/infiniband/<dev>/ports/<n>/counters as root; `perfquery` shows them too",
        )
    if clean and clean == len(ctx.inventory.ports) - len(unknown):
        yield Finding("link.errors", Severity.PASS, "ports", f"no link errors on {clean} port(s)")


def _fix_for(counters: dict[str, int]) -> str:
    physical = {
        "symbol_error",
        "link_downed",
        "link_error_recovery",
        "local_link_integrity_errors",
        "port_rcv_errors",
    }
    if physical & counters.keys():
        return "reseat or replace the cable/transceiver on both ends; check `mlxlink -d <dev> -c` for BER and the switch port counters"
    return "loss or timeouts in the fabric: check PFC/ECN on the path, GID/TC settings and NCCL_IB_TIMEOUT"


@check("link.phy_errors", "Ethernet port error counters (ethtool -S)")
def phy_errors(ctx: CheckContext) -> Iterator[Finding]:
    """On an Ethernet (RoCE) port the physical link's faults are counted by the NIC, not in the
    RDMA port counters: CRC and symbol errors, link-down events, discards (per port and per
    priority), receive-buffer drops and PFC pause storms (`ethtool -S`, mlx5 names; the kernel's
    mlx5 counters.rst calls them errors). Same policy as link.errors: non-zero totals warn (they
    may be old), counters rising during `--interval` fail."""
    inv = ctx.inventory
    rates = ctx.rates
    roce = set(roce_netdevs(inv))
    clean = flagged = 0
    for netdev, data in sorted(inv.ethtool.items()):
        if data.stats is None:
            if netdev in roce:
                yield not_evaluated(
                    "link.phy_errors",
                    netdev,
                    "`ethtool -S` not available",
                    fix="install ethtool (Debian/Ubuntu: apt-get install ethtool)",
                )
            continue
        totals = link_error_stats(data.stats)
        if not totals:
            continue  # a driver without these counters (ENA, virtio): nothing to judge
        nonzero = {k: v for k, v in totals.items() if v}
        rising = {}
        if rates is not None:
            deltas = rates.ethtool.get(netdev, {})
            rising = {k: deltas[k] for k in totals if deltas.get(k)}
        flagged += bool(rising or nonzero)
        if rising:
            yield Finding(
                "link.phy_errors",
                Severity.FAIL,
                netdev,
                "error counters rising: "
                + ", ".join(f"{k} +{v} ({rates.per_second(v):.2f}/s)" for k, v in rising.items()),
                {"increase": rising, "interval_s": rates.interval_s, "totals": nonzero},
                _phy_fix(netdev, rising),
            )
        elif nonzero:
            yield Finding(
                "link.phy_errors",
                Severity.WARN,
                netdev,
                "error counters non-zero: " + ", ".join(f"{k}={v:,}" for k, v in nonzero.items()),
                {"totals": nonzero},
                _phy_fix(netdev, nonzero)
                + "; run `fabricscope doctor --interval 30` to see whether they still rise",
            )
        else:
            clean += 1
    if clean and not flagged:
        yield Finding(
            "link.phy_errors", Severity.PASS, "ethernet", f"no physical-port errors on {clean} netdev(s)"
        )


def _phy_fix(netdev: str, counters: dict[str, int]) -> str:
    if counters.keys() & {"rx_crc_errors_phy", "rx_symbol_err_phy", "link_down_events_phy"}:
        return (
            f"reseat or replace the cable/transceiver of {netdev} and its switch port; `ethtool -m {netdev}` for optics levels, "
            "`mlxlink -d <pci> -c -e` for BER and FEC"
        )
    if counters.keys() & {"tx_pause_storm_warning_events", "tx_pause_storm_error_events"}:
        return f"a receiver behind {netdev} stopped draining (a hung host or GPU process): find it; the storm guard disabled pause, so drops follow"
    return f"drops for lack of buffers on {netdev}: check PFC on the lossless priority and the receive ring size (`ethtool -g {netdev}`)"


@check("link.congestion", "Congestion signals")
def congestion(ctx: CheckContext) -> Iterator[Finding]:
    """port_xmit_wait (no credits to send), PFC pause frames and CNPs show congestion; they are
    normal in moderation, so with `--interval` they are reported with their rates for the operator
    to judge (totals since boot say little about now)."""
    rates = ctx.rates
    if rates is None:
        return
    quiet = True
    for port in ctx.inventory.ports:
        deltas = rates.ports.get(port.name, {})
        rising = {k: deltas[k] for k in CONGESTION_PORT_COUNTERS if deltas.get(k)}
        if rising:
            quiet = False
            per_s = {k: round(rates.per_second(v), 2) for k, v in rising.items()}
            yield Finding(
                "link.congestion",
                Severity.INFO,
                port.name,
                "congestion signals: " + ", ".join(f"{k} {v:,}/s" for k, v in per_s.items()),
                {"per_second": per_s, "increase": rising, "interval_s": rates.interval_s},
            )
    for netdev, deltas in rates.ethtool.items():
        rising = {k: v for k, v in deltas.items() if _PAUSE.match(k) and v}
        if rising:
            quiet = False
            per_s = {k: round(rates.per_second(v), 2) for k, v in rising.items()}
            yield Finding(
                "link.congestion",
                Severity.INFO,
                netdev,
                "PFC pause frames: " + ", ".join(f"{k} {v:,}/s" for k, v in per_s.items()),
                {"per_second": per_s, "increase": rising, "interval_s": rates.interval_s},
            )
    if quiet:
        yield Finding(
            "link.congestion", Severity.PASS, "ports", f"no congestion signals during {rates.interval_s:g} s"
        )


@check("link.transceiver", "Transceiver alarms")
def transceiver(ctx: CheckContext) -> Iterator[Finding]:
    """`ethtool -m` reads the transceiver's own diagnostics; a raised temperature, voltage, bias
    or power alarm or warning flag predicts link errors and flaps."""
    for netdev, data in ctx.inventory.ethtool.items():
        module = data.module
        if module is None:
            continue
        if module.alarms:
            yield Finding(
                "link.transceiver",
                Severity.WARN,
                netdev,
                f"transceiver flags raised: {', '.join(module.alarms)}",
                {
                    "alarms": list(module.alarms),
                    "temperature_c": module.temperature_c,
                    "identifier": module.identifier,
                },
                "check airflow and the module; replace the transceiver/cable if the flags persist",
            )
        else:
            temp = f", {module.temperature_c:g} C" if module.temperature_c is not None else ""
            yield Finding("link.transceiver", Severity.PASS, netdev, f"transceiver without alarms{temp}")
