"""Baselines and comparisons of stored results: median and MAD per metric, regression flags.

A baseline is the per-metric median of chosen runs with the median absolute deviation (MAD) as
its spread: one bad run among five moves neither. A metric regresses when it is worse than the
baseline median by more than ``threshold_pct`` percent *and* by more than ``mad_k`` robust
standard deviations (``1.4826 * MAD``, the normal-consistent scale); with a spread of zero (one
run, or identical runs) only the percentage applies. "Worse" depends on the metric: lower is
better for times, loss, errors and CPU; higher is better for rates.

Collective runs are judged per message size through their ``size_<N>_busbw_GBps`` metrics
(:func:`size_changes` groups them by size); matrix runs also by their suspects
(:func:`suspect_changes`: a host or link that is a confirmed suspect now and was none in any
baseline run is a regression).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from fabricscope.bench.results.kinds import kind_of
from fabricscope.bench.results.schema import BenchResult, MatrixSuspect, Status
from fabricscope.bench.results.stats import MAD_SCALE, mad, median

DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_MAD_K = 3.0

Better = Literal["higher", "lower"]

HIGHER_IS_BETTER = ("_gbps", "_GBps", "_per_s", "_mpps", "speedup_ratio", "_utilization_pct")
LOWER_IS_BETTER = ("_us", "_ms", "_ns", "loss_pct", "cpu_pct", "_count")
NEUTRAL = (
    "_bytes",
    "hosts_count",
    "ranks_count",
    "samples_count",
    "requests_count",
    "connections_count",
    "datagrams_sent_count",
    "datagrams_received_count",
)


_SIZE_NAME = re.compile(r"^size_(\d+)_([A-Za-z_]+)\Z")


def better_direction(metric: str) -> Better | None:
    """Which way is good for ``metric``; None for descriptive numbers (sizes, sample counts)."""
    if metric.endswith(NEUTRAL) or metric.endswith("_samples_count"):
        return None
    if (m := _SIZE_NAME.match(metric)) and m.group(2) in ("algbw_GBps", "max_rank_time_s"):
        return None  # older runs stored these per size; busbw of the same size judges it
    if metric.endswith(HIGHER_IS_BETTER):
        return "higher"
    if metric.endswith(LOWER_IS_BETTER):
        return "lower"
    return None


def headline(result: BenchResult) -> list[tuple[str, float | int | None]]:
    kind = kind_of(result.kind)  # the number people quote for each kind (first present wins)
    names = kind.headline if kind is not None else tuple(list(result.metrics)[:2])
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


@dataclass(frozen=True)
class SizeChange:
    """busbw at one message size against the baseline's median at that size."""

    size_bytes: int
    change: MetricChange


def size_changes(changes: Sequence[MetricChange]) -> tuple[list[SizeChange], list[MetricChange]]:
    """Split a collective comparison into busbw per size (by size) and every other metric.

    Other per-size metrics (times; algbw and #wrong of older runs) are left out unless they
    regressed: the per-size busbw says the same, and ``compare``'s full list still has them.
    """
    sizes, others = [], []
    for c in changes:
        m = _SIZE_NAME.match(c.name)
        if m is None:
            others.append(c)
        elif m.group(2) == "busbw_GBps":
            sizes.append(SizeChange(int(m.group(1)), c))
        elif c.verdict == "regression":  # e.g. #wrong at one size of an older run: never hidden
            others.append(c)
    return sorted(sizes, key=lambda s: s.size_bytes), others


SuspectStatus = Literal["new", "persisting", "resolved", "unknown"]


@dataclass(frozen=True)
class SuspectChange:
    """A suspect of the run or of its baseline, and how it changed."""

    transport: str
    kind: str
    host: str
    peer: str | None
    reason: str | None
    confirmed: bool | None
    status: SuspectStatus  # unknown: no baseline run recorded its suspects
    baseline_runs: int  # in how many baseline runs it was a suspect
    regression: bool  # a confirmed (or unretested) suspect that no baseline run had

    @property
    def label(self) -> str:
        return self.host if self.kind == "host" else f"{self.host} <-> {self.peer}"


def suspect_changes(run: BenchResult, baseline: Sequence[BenchResult]) -> list[SuspectChange]:
    """The run's matrix suspects against the baseline runs' (same transport, host or link).

    Baseline runs that recorded no suspects (stored before they were kept) do not count. A
    link is the same link whichever end is named first.
    """

    def key(s: MatrixSuspect) -> tuple[str, str, str, str | None]:
        transport, kind, host, peer = s.transport, s.kind, s.host, s.peer
        if kind == "link" and peer is not None and peer < host:
            host, peer = peer, host
        return transport, kind, host, peer

    known = [b for b in baseline if b.status == Status.OK and b.suspects is not None]
    seen: dict[tuple[str, str, str, str | None], int] = {}
    for b in known:
        for k in {key(s) for s in b.suspects or []}:
            seen[k] = seen.get(k, 0) + 1
    out: list[SuspectChange] = []
    current = set()
    for s in run.suspects or []:
        k = key(s)
        current.add(k)
        count = seen.get(k, 0)
        if not known:
            status: SuspectStatus = "unknown"
        else:
            status = "persisting" if count else "new"
        out.append(
            SuspectChange(
                s.transport, s.kind, s.host, s.peer, s.reason, s.confirmed, status, count,
                regression=status == "new" and s.confirmed is not False,
            )
        )  # fmt: skip
    for k, count in sorted(seen.items()):
        if k not in current and run.suspects is not None:
            transport, kind, host, peer = k
            out.append(SuspectChange(transport, kind, host, peer, None, None, "resolved", count, False))
    order = {"new": 0, "persisting": 1, "unknown": 2, "resolved": 3}
    return sorted(out, key=lambda c: (order[c.status], c.transport, c.host))


def _f(value: float | int | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class Comparison:
    """A run judged against its baseline: every metric, busbw per size, matrix suspects, the regressions."""

    run_id: int
    result: BenchResult
    baseline_label: str
    threshold_pct: float
    mad_k: float
    changes: list[MetricChange]
    sizes: list[SizeChange]  # collective runs: busbw per message size
    others: list[MetricChange]  # every other metric (all of them for other kinds)
    suspects: list[SuspectChange]  # matrix runs

    @property
    def regressions(self) -> list[str]:
        names = [c.name for c in self.changes if c.verdict == "regression"]
        return names + [
            f"new suspect {s.label}" + (" (rdma)" if s.transport == "rdma" else "")
            for s in self.suspects
            if s.regression
        ]


def judge(
    run_id: int,
    result: BenchResult,
    baseline: Sequence[BenchResult],
    label: str,
    *,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    mad_k: float = DEFAULT_MAD_K,
) -> Comparison:
    """``history compare``: the run's metrics against the baseline runs' median and MAD (and suspects)."""
    changes = compare(result, baseline_stats(baseline), threshold_pct=threshold_pct, mad_k=mad_k)
    sizes, others = size_changes(changes) if result.kind == "collective" else ([], changes)
    suspects = suspect_changes(result, baseline) if result.kind == "matrix" else []
    return Comparison(run_id, result, label, threshold_pct, mad_k, changes, sizes, others, suspects)
