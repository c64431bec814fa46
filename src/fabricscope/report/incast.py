"""Incast results as text and as plots: goodput and p99 round time against the number of senders.

One renderer for a measured run (``bench incast``, live or from the history) and one for the
model's curve (``sim incast``).
"""

from __future__ import annotations

from typing import Any

from fabricscope.bench.results.schema import BenchResult
from fabricscope.report.plots import Series, line_chart


def incast_lines(result: BenchResult) -> list[str]:
    """The table a user reads after ``bench incast`` (and ``history show``): one row per sender
    count, and the verdict."""
    points = result.incast or []
    size = result.params.get("size_bytes")
    lines = [
        f"incast: {size} bytes per sender per round, {result.params.get('rounds')} rounds per point, "
        f"receiver {(result.hosts or ['?'])[0].removeprefix('receiver:')}, TCP {result.detail.get('congestion') or 'default'}",
        f"{'senders':>7}  {'goodput':>12}  {'p50 round':>10}  {'p99 round':>10}  {'max round':>10}  {'retrans':>8}  {'timeouts':>8}",
    ]
    for p in points:
        lines.append(
            f"{p.senders:>7}  {p.goodput_gbps:>8.3f} Gb/s  {p.round_p50_ms:>7.2f} ms  {p.round_p99_ms:>7.2f} ms"
            f"  {p.round_max_ms:>7.2f} ms  {p.retransmits:>8}  {p.timeouts:>8}"
        )
    verdict = collapse_verdict(points)
    if verdict:
        lines.append(verdict)
    return lines


def collapse_verdict(points: list[Any]) -> str:
    """Name the collapse when goodput falls to under half of its best as senders are added."""
    if len(points) < 2:
        return ""
    best = max(points, key=lambda p: p.goodput_gbps)
    later = [p for p in points if p.senders > best.senders and p.goodput_gbps < 0.5 * best.goodput_gbps]
    if not later:
        return f"no collapse: goodput stays within half of its best ({best.goodput_gbps:.3f} Gb/s at {best.senders} senders)"
    first = later[0]
    cause = (
        f"{first.timeouts} retransmission timeouts" if first.timeouts else f"{first.retransmits} retransmits"
    )
    return (
        f"incast collapse from {first.senders} senders: goodput {first.goodput_gbps:.3f} Gb/s against "
        f"{best.goodput_gbps:.3f} at {best.senders}, p99 round {first.round_p99_ms:.1f} ms ({cause}); "
        "a deeper queue on the receiver's switch port, ECN, or fewer concurrent senders per receiver fix it"
    )


def incast_svg(result: BenchResult, name: str = "incast") -> str:
    """Two charts: goodput against senders, and p99 round completion time against senders."""
    points = result.incast or []
    if not points:
        return ""
    goodput = line_chart(
        [Series("goodput", [(p.senders, p.goodput_gbps) for p in points])],
        f"Incast goodput, run {result.run_id or ''}".strip(", "),
        "senders",
        "Gb/s",
        name=f"{name}-goodput",
    )
    p99 = line_chart(
        [
            Series("p99 round", [(p.senders, p.round_p99_ms) for p in points]),
            Series("p50 round", [(p.senders, p.round_p50_ms) for p in points]),
        ],
        "Round completion time",
        "senders",
        "milliseconds",
        name=f"{name}-rounds",
        log_y=True,
    )
    return goodput + p99


def sim_incast_text(doc: dict[str, Any]) -> str:
    fab = doc["fabric"]
    lines = [
        f"incast model: {doc['size_bytes']} bytes per sender per round, links {fab['link_bps'] / 1e9:g} Gb/s, "
        f"receiver port queue {fab['queue_bytes']} bytes, MTU {fab['mtu']}, base RTT {fab['base_rtt_s'] * 1e6:g} us",
        f"{'transport':>9}  {'senders':>7}  {'goodput':>12}  {'p50 round':>10}  {'p99 round':>10}  {'timeouts':>8}  {'drops':>7}",
    ]
    for row in doc["points"]:
        lines.append(
            f"{row['transport']:>9}  {row['senders']:>7}  {row['goodput_gbps']:>8.3f} Gb/s  {row['round_p50_ms']:>7.2f} ms"
            f"  {row['round_p99_ms']:>7.2f} ms  {row['timeouts']:>8}  {row['drops']:>7}"
        )
    return "\n".join(lines) + "\n"
