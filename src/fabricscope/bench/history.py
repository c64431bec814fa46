"""Baselines and comparisons of stored results: median and MAD per metric, regression flags.

A baseline is the per-metric median of chosen runs with the median absolute deviation (MAD) as
its spread: one bad run among five moves neither. A metric regresses when it is worse than the
baseline median by more than ``threshold_pct`` percent *and* by more than ``mad_k`` robust
standard deviations (``1.4826 * MAD``, the normal-consistent scale); with a spread of zero (one
run, or identical runs) only the percentage applies. "Worse" depends on the metric: lower is
better for times, loss, errors and CPU; higher is better for rates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from fabricscope.bench.result import BenchResult, Status
from fabricscope.bench.stats import mad, median

MAD_SCALE = 1.4826
DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_MAD_K = 3.0

Better = Literal["higher", "lower"]

HIGHER_IS_BETTER = ("_gbps", "_GBps", "_per_s", "_mpps", "speedup_ratio", "_utilization_pct")
LOWER_IS_BETTER = ("_us", "_ms", "_ns", "loss_pct", "cpu_pct", "_count")
NEUTRAL = (
    "_bytes",
    "samples_count",
    "requests_count",
    "connections_count",
    "datagrams_sent_count",
    "datagrams_received_count",
)

# The number people quote for each kind (first present wins).
HEADLINE: dict[str, tuple[str, ...]] = {
    "tcp": ("throughput_gbps", "retransmits_count"),
    "udp": ("throughput_gbps", "loss_pct", "jitter_us"),
    "latency": ("rtt_p50_us", "rtt_p99_us"),
    "connect": ("connect_per_s", "pooled_requests_per_s"),
    "rdma": ("throughput_gbps", "lat_typical_us"),
}


def better_direction(metric: str) -> Better | None:
    """Which way is good for ``metric``; None for descriptive numbers (sizes, sample counts)."""
    if metric.endswith(NEUTRAL) or metric.endswith("_samples_count"):
        return None
    if metric.endswith(HIGHER_IS_BETTER):
        return "higher"
    if metric.endswith(LOWER_IS_BETTER):
        return "lower"
    return None


def headline(result: BenchResult) -> list[tuple[str, float | int | None]]:
    names = HEADLINE.get(result.kind) or tuple(list(result.metrics)[:2])
    return [(n, result.metrics[n]) for n in names if n in result.metrics]


@dataclass(frozen=True)
class MetricStat:
    """One metric over the baseline runs."""

    name: str
    median: float
    mad: float
    n: int
    values: tuple[float, ...] = field(default=())

    @property
    def sigma(self) -> float:
        return MAD_SCALE * self.mad


def baseline_stats(results: Sequence[BenchResult]) -> dict[str, MetricStat]:
    """Median and MAD of every metric over completed runs (failed/skipped runs are ignored)."""
    values: dict[str, list[float]] = {}
    for result in results:
        if result.status != Status.OK:
            continue
        for name, value in result.metrics.items():
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                continue
            values.setdefault(name, []).append(float(value))
    return {
        name: MetricStat(name, median(vals), mad(vals), len(vals), tuple(vals))
        for name, vals in values.items()
    }


@dataclass(frozen=True)
class MetricChange:
    name: str
    baseline: float | None
    spread: float | None  # MAD of the baseline
    value: float | None
    change_pct: float | None
    robust_z: float | None  # (value - median) / (1.4826 * MAD); None with zero spread
    better: Better | None
    verdict: Literal["regression", "improvement", "same", "new", "missing", "info"]


def compare(
    run: BenchResult,
    stats: dict[str, MetricStat],
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    mad_k: float = DEFAULT_MAD_K,
) -> list[MetricChange]:
    """Each metric of ``run`` against the baseline; ordered with regressions first."""
    changes = []
    for name in sorted(set(run.metrics) | set(stats)):
        value = run.metrics.get(name)
        stat = stats.get(name)
        better = better_direction(name)
        if stat is None:
            changes.append(MetricChange(name, None, None, _f(value), None, None, better, "new"))
            continue
        if value is None:
            changes.append(MetricChange(name, stat.median, stat.mad, None, None, None, better, "missing"))
            continue
        value = float(value)
        delta = value - stat.median
        change_pct = (
            delta / abs(stat.median) * 100.0
            if stat.median != 0
            else (0.0 if delta == 0 else math.copysign(math.inf, delta))
        )
        z = delta / stat.sigma if stat.sigma > 0 else None
        beyond_spread = z is None or abs(z) > mad_k
        beyond_threshold = abs(change_pct) > threshold_pct
        if better is None:
            verdict = "info"
        elif beyond_spread and beyond_threshold:
            worse = delta < 0 if better == "higher" else delta > 0
            verdict = "regression" if worse else "improvement"
        else:
            verdict = "same"
        changes.append(
            MetricChange(
                name,
                stat.median,
                stat.mad,
                value,
                None if math.isinf(change_pct) else round(change_pct, 3),
                None if z is None else round(z, 3),
                better,
                verdict,
            )
        )
    order = {"regression": 0, "improvement": 1, "same": 2, "info": 3, "new": 4, "missing": 5}
    return sorted(changes, key=lambda c: (order[c.verdict], c.name))


def _f(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def format_metric(name: str, value: float | int | None) -> str:
    """``12.3 Gb/s``, ``41 us``, ``0.5 %``: a value with the unit its name carries."""
    if value is None:
        return "-"
    units = (
        ("_gbps", "Gb/s"),
        ("_GBps", "GB/s"),
        ("_per_s", "/s"),
        ("_mpps", "Mpps"),
        ("_us", "us"),
        ("_ms", "ms"),
        ("_pct", "%"),
    )
    for suffix, unit in units:
        if name.endswith(suffix):
            return f"{_num(value)} {unit}"
    if name.endswith("_count"):
        return f"{value:,.0f} {name.removesuffix('_count').replace('_', ' ')}"
    return _num(value)


def _num(value: float | int) -> str:
    if isinstance(value, float) and abs(value) < 1000:
        return f"{value:.4g}"
    return f"{value:,.0f}"


def headline_text(result: BenchResult) -> str:
    """The one or two numbers ``history list`` shows for a completed run."""
    return ", ".join(format_metric(n, v) for n, v in headline(result)[:2])
