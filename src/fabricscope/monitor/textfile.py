"""Bench results for Prometheus: the latest run of each kind/peer/parameters as a node_exporter
textfile-collector file (``fabricscope_bench.prom``, replaced atomically).

Metric names follow the bench result's unit suffixes converted to Prometheus base units:
``throughput_gbps`` -> ``fabricscope_bench_throughput_bytes_per_second`` (x 1e9 / 8),
``rtt_p99_us`` -> ``fabricscope_bench_rtt_p99_seconds`` (x 1e-6), ``loss_pct`` -> ``..._loss_ratio``
(x 0.01), ``retransmits_count`` -> ``..._retransmits``. Labels: ``kind``, ``peer`` and
``params_id`` (a short hash of the parameters; ``fabricscope_bench_info`` carries them in full).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import GaugeMetricFamily, Metric

from fabricscope.bench.results.schema import BenchResult, params_key
from fabricscope.errors import FabricscopeError

FILENAME = "fabricscope_bench.prom"
MAX_RUNS = 10000
MAX_PARAMS_LABEL = 200
PREFIX = "fabricscope_bench_"

# Longest suffix first: "_per_s" before "_s", "_ms" before "_s".
UNIT_CONVERSIONS: tuple[tuple[str, str, float], ...] = (
    ("_per_s", "_per_second", 1.0),
    ("_gbps", "_bytes_per_second", 1e9 / 8),  # Prometheus base unit is bytes
    ("_GBps", "_bytes_per_second", 1e9),
    ("_mpps", "_packets_per_second", 1e6),
    ("_bytes", "_bytes", 1.0),
    ("_ratio", "_ratio", 1.0),
    ("_count", "", 1.0),
    ("_pct", "_ratio", 0.01),
    ("_ms", "_seconds", 1e-3),
    ("_us", "_seconds", 1e-6),
    ("_ns", "_seconds", 1e-9),
    ("_s", "_seconds", 1.0),
)
_UNSAFE = re.compile(r"[^a-z0-9_]")


@dataclass(frozen=True)
class TextfileReport:
    path: Path
    groups: int
    runs_considered: int


def prometheus_name(metric: str) -> tuple[str, float] | None:
    """``"rtt_p99_us"`` -> ``("fabricscope_bench_rtt_p99_seconds", 1e-6)``; None without a known unit."""
    for suffix, new_suffix, scale in UNIT_CONVERSIONS:
        if metric.endswith(suffix) and len(metric) > len(suffix):
            base = _UNSAFE.sub("_", metric[: -len(suffix)].lower()).strip("_")
            if not base:
                return None
            return f"{PREFIX}{base}{new_suffix}", scale
    return None


def latest_per_group(results: Iterable[BenchResult]) -> list[BenchResult]:
    """Newest run of each (kind, peer, parameters); ``results`` must be newest first."""
    chosen: dict[tuple[str, str, str], BenchResult] = {}
    for result in results:
        chosen.setdefault((result.kind, result.peer or "", params_key(result.params)), result)
    return list(chosen.values())


def bench_families(results: Iterable[BenchResult]) -> list[Metric]:
    base_labels = ["kind", "peer", "params_id"]
    info = GaugeMetricFamily(
        "fabricscope_bench_info",
        "The latest stored bench run of this kind, peer and parameters; value is always 1.",
        labels=[*base_labels, "status", "params"],
    )
    run_id = GaugeMetricFamily("fabricscope_bench_run_id", "History id of that run.", labels=base_labels)
    ok = GaugeMetricFamily(
        "fabricscope_bench_ok", "1 when that run completed (status ok), 0 otherwise.", labels=base_labels
    )
    started = GaugeMetricFamily(
        "fabricscope_bench_run_started_timestamp_seconds",
        "When that run started (Unix time).",
        labels=base_labels,
    )
    duration = GaugeMetricFamily(
        "fabricscope_bench_run_duration_seconds", "How long that run took.", labels=base_labels
    )
    reserved = {f.name for f in (info, run_id, ok, started, duration)}
    metrics: dict[str, GaugeMetricFamily] = {}
    for result in results:
        key = params_key(result.params)
        labels = [result.kind, result.peer or "", hashlib.sha256(key.encode()).hexdigest()[:12]]
        info.add_metric([*labels, result.status.value, key[:MAX_PARAMS_LABEL]], 1.0)
        run_id.add_metric(labels, float(result.run_id or 0))
        ok.add_metric(labels, 1.0 if result.status.value == "ok" else 0.0)
        started.add_metric(labels, result.started.timestamp())
        duration.add_metric(labels, float(result.duration_s))
        done: set[str] = set()
        for name, value in sorted(result.metrics.items()):
            converted = prometheus_name(name)
            if value is None or converted is None:
                continue
            prom_name, scale = converted
            if prom_name in done or prom_name in reserved:
                continue  # two source metrics with one Prometheus name: keep the first
            done.add(prom_name)
            family = metrics.get(prom_name)
            if family is None:
                family = GaugeMetricFamily(
                    prom_name, f"Bench metric {name} of the latest run, in base units.", labels=base_labels
                )
                metrics[prom_name] = family
            family.add_metric(labels, float(value) * scale)
    families: list[Metric] = [info, run_id, ok, started, duration]
    families.extend(metrics[name] for name in sorted(metrics))
    return [f for f in families if f.samples]


class _Static:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def export_textfile(results: Sequence[BenchResult], directory: Path) -> TextfileReport:
    """Write ``directory/fabricscope_bench.prom`` from stored results, newest first (at most
    ``MAX_RUNS`` are worth reading), replacing the file atomically."""
    if not directory.is_dir():
        raise FabricscopeError(f"{directory}: no such directory (give node_exporter's textfile directory)")
    latest = latest_per_group(results)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Static(bench_families(latest)))
    path = directory / FILENAME
    try:
        write_to_textfile(str(path), registry)
    except OSError as exc:
        raise FabricscopeError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return TextfileReport(path=path, groups=len(latest), runs_considered=len(results))
