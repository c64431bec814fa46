"""Link health: error counters, congestion signals and transceiver alarms."""

from __future__ import annotations

import re
from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated
from fabricscope.findings import Finding, Severity

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
)
CONGESTION_PORT_COUNTERS = ("port_xmit_wait", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
_PAUSE = re.compile(r"^(rx|tx)_prio(\d)_pause$")


@check("link.errors", "Link error counters")
def link_errors(ctx: CheckContext) -> Iterator[Finding]:
    """Symbol errors, link downs and recoveries point at cables, transceivers and switch ports;
    ACK timeouts and retry exhaustion point at loss in the fabric. Non-zero totals are a warning
    (they may be old); counters rising during `--interval` are a failure happening now."""
    rates = ctx.rates
    clean = 0
    unknown = []
    for port in ctx.inventory.ports:
        counters = {**port.counters, **port.hw_counters}
        if not any(name in counters for name in ERROR_COUNTERS):
            unknown.append(port.name)
            continue
        nonzero = {name: counters[name] for name in ERROR_COUNTERS if counters.get(name)}
        rising = {}
        if rates is not None:
            deltas = rates.ports.get(port.name, {})
            rising = {name: deltas[name] for name in ERROR_COUNTERS if deltas.get(name)}
        if rising:
            yield Finding(
                "link.errors", Severity.FAIL, port.name,
                "error counters rising: " + ", ".join(f"{k} +{v} ({rates.per_second(v):.2f}/s)" for k, v in rising.items()),
                {"increase": rising, "interval_s": rates.interval_s, "totals": nonzero},
                _fix_for(rising),
            )
        elif nonzero:
            yield Finding(
                "link.errors", Severity.WARN, port.name,
                "error counters non-zero: " + ", ".join(f"{k}={v:,}" for k, v in nonzero.items()),
                {"totals": nonzero},
                _fix_for(nonzero) + "; run `fabricscope doctor --interval 30` to see whether they still rise",
            )
        else:
            clean += 1
    if unknown:
        yield not_evaluated(
            "link.errors", ",".join(unknown), "no error counters readable under counters/ or hw_counters/ of " + ", ".join(unknown),
            {"ports": unknown}, "read /sys/class/infiniband/<dev>/ports/<n>/counters as root; `perfquery` shows them too",
        )
    if clean and clean == len(ctx.inventory.ports) - len(unknown):
        yield Finding("link.errors", Severity.PASS, "ports", f"no link errors on {clean} port(s)")


def _fix_for(counters: dict[str, int]) -> str:
    physical = {"symbol_error", "link_downed", "link_error_recovery", "local_link_integrity_errors", "port_rcv_errors"}
    if physical & counters.keys():
        return "reseat or replace the cable/transceiver on both ends; check `mlxlink -d <dev> -c` for BER and the switch port counters"
    return "loss or timeouts in the fabric: check PFC/ECN on the path, GID/TC settings and NCCL_IB_TIMEOUT"


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
                "link.congestion", Severity.INFO, port.name,
                "congestion signals: " + ", ".join(f"{k} {v:,}/s" for k, v in per_s.items()),
                {"per_second": per_s, "increase": rising, "interval_s": rates.interval_s},
            )
    for netdev, deltas in rates.ethtool.items():
        rising = {k: v for k, v in deltas.items() if _PAUSE.match(k) and v}
        if rising:
            quiet = False
            per_s = {k: round(rates.per_second(v), 2) for k, v in rising.items()}
            yield Finding(
                "link.congestion", Severity.INFO, netdev,
                "PFC pause frames: " + ", ".join(f"{k} {v:,}/s" for k, v in per_s.items()),
                {"per_second": per_s, "increase": rising, "interval_s": rates.interval_s},
            )
    if quiet:
        yield Finding("link.congestion", Severity.PASS, "ports", f"no congestion signals during {rates.interval_s:g} s")


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
                "link.transceiver", Severity.WARN, netdev,
                f"transceiver flags raised: {', '.join(module.alarms)}",
                {"alarms": list(module.alarms), "temperature_c": module.temperature_c, "identifier": module.identifier},
                "check airflow and the module; replace the transceiver/cable if the flags persist",
            )
        else:
            temp = f", {module.temperature_c:g} C" if module.temperature_c is not None else ""
            yield Finding("link.transceiver", Severity.PASS, netdev, f"transceiver without alarms{temp}")
