"""Link health: error counters, congestion signals and transceiver alarms."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import partial

from fabricscope.checks.registry import CheckContext, Rates, check, not_evaluated, not_evaluated_on
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
STILL_RISING = "; run `fabricscope doctor --interval 30` to see whether they still rise"


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
        finding = _error_counters("link.errors", port.name, rising, nonzero, rates, _fix_for)
        if finding:
            yield finding
        else:
            clean += 1
    if unknown:
        yield not_evaluated_on(
            "link.errors",
            "no error counters readable under counters/ or hw_counters/ of",
            unknown,
            "ports",
            "read /sys/class/infiniband/<dev>/ports/<n>/counters as root; `perfquery` shows them too",
        )
    if clean and clean == len(ctx.inventory.ports) - len(unknown):
        yield Finding("link.errors", Severity.PASS, "ports", f"no link errors on {clean} port(s)")


def rising_text(rates: Rates, rising: dict[str, int]) -> str:
    """ "name +increase (rate/s)" for each counter that rose during --interval."""
    return ", ".join(f"{k} +{v} ({rates.per_second(v):.2f}/s)" for k, v in rising.items())


def _error_counters(
    check_id: str,
    subject: str,
    rising: dict[str, int],
    nonzero: dict[str, int],
    rates: Rates | None,
    fix_for: Callable[[dict[str, int]], str],
) -> Finding | None:
    """One port's error counters, link.errors' and link.phy_errors' policy: rising during
    --interval fails (a fault now), non-zero totals warn (they may be old), else None (clean)."""
    if rising and rates is not None:
        return Finding(
            check_id,
            Severity.FAIL,
            subject,
            "error counters rising: " + rising_text(rates, rising),
            {"increase": rising, "interval_s": rates.interval_s, "totals": nonzero},
            fix_for(rising),
        )
    if nonzero:
        return Finding(
            check_id,
            Severity.WARN,
            subject,
            "error counters non-zero: " + ", ".join(f"{k}={v:,}" for k, v in nonzero.items()),
            {"totals": nonzero},
            fix_for(nonzero) + STILL_RISING,
        )
    return None


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
        finding = _error_counters(
            "link.phy_errors", netdev, rising, nonzero, rates, partial(_phy_fix, netdev)
        )
        if finding:
            flagged += 1
            yield finding
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
            yield _congestion(rates, port.name, "congestion signals", rising)
    for netdev, deltas in rates.ethtool.items():
        rising = {k: v for k, v in deltas.items() if _PAUSE.match(k) and v}
        if rising:
            quiet = False
            yield _congestion(rates, netdev, "PFC pause frames", rising)
    if quiet:
        yield Finding(
            "link.congestion", Severity.PASS, "ports", f"no congestion signals during {rates.interval_s:g} s"
        )


def _congestion(rates: Rates, subject: str, what: str, rising: dict[str, int]) -> Finding:
    """The congestion counters that rose on one port or netdev, as rates for the operator to judge."""
    per_s = {k: round(rates.per_second(v), 2) for k, v in rising.items()}
    return Finding(
        "link.congestion",
        Severity.INFO,
        subject,
        f"{what}: " + ", ".join(f"{k} {v:,}/s" for k, v in per_s.items()),
        {"per_second": per_s, "increase": rising, "interval_s": rates.interval_s},
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
