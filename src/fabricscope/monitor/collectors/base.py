"""What every collector shares: the scrape context and a builder of metric families."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from fabricscope.host import Root
from fabricscope.host.sysfs import printable_name
from fabricscope.monitor.background import Periodic
from fabricscope.monitor.names import PREFIX
from fabricscope.monitor.topology import Topology


@dataclass(frozen=True)
class ScrapeContext:
    """One collector's view of one scrape. ``root`` is private to this collector and this scrape:
    every problem noted on it (a vanished or garbled file) turns the collector's success to 0."""

    root: Root
    topology: Topology


class Families:
    """Collects samples into metric families, creating each family on first use, so collectors
    write ``out.gauge(name, help, labels, value)`` and never emit a family twice. Label values
    go through :func:`printable_name`: a file name that is not UTF-8 (an interface named with
    byte 0xff) is shown escaped instead of failing every scrape when the exposition is encoded."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[Metric, tuple[str, ...]]] = {}
        # Exposition a collector wrote itself, encoded (families too large to format per sample).
        self.raw: list[bytes] = []

    def _family(
        self, kind: str, name: str, help_text: str, labels: dict[str, str]
    ) -> tuple[Metric, tuple[str, ...]]:
        full = PREFIX + name
        entry = self._families.get(full)
        if entry is None:
            keys = tuple(labels)
            cls = {"counter": CounterMetricFamily, "histogram": HistogramMetricFamily}.get(
                kind, GaugeMetricFamily
            )
            entry = (cls(full, help_text, labels=list(keys)), keys)
            self._families[full] = entry
        return entry

    def gauge(self, name: str, help_text: str, labels: dict[str, str], value: float | None) -> None:
        family, keys = self._family("gauge", name, help_text, labels)
        if value is not None:
            family.add_metric([printable_name(labels[k]) for k in keys], float(value))

    def counter(self, name: str, help_text: str, labels: dict[str, str], value: float | None) -> None:
        if not name.endswith("_total"):
            raise ValueError(f"counter {name} must end in _total")
        family, keys = self._family("counter", name, help_text, labels)
        if value is not None:
            family.add_metric([printable_name(labels[k]) for k in keys], float(value))

    def histogram(
        self,
        name: str,
        help_text: str,
        labels: dict[str, str],
        buckets: list[tuple[str, float]],
        sum_value: float,
    ) -> None:
        """``buckets``: (upper bound, cumulative count) pairs ending with ``+Inf``."""
        family, keys = self._family("histogram", name, help_text, labels)
        assert isinstance(family, HistogramMetricFamily)
        family.add_metric([printable_name(labels[k]) for k in keys], buckets, sum_value)

    def __iter__(self) -> Iterator[Metric]:
        for family, _keys in self._families.values():
            if family.samples:
                yield family

    def names(self) -> list[str]:
        return list(self._families)


class Collector(Protocol):
    """A source of metrics. ``collect`` may raise; the exporter turns that into success 0."""

    name: str

    def collect(self, ctx: ScrapeContext, out: Families) -> None: ...


def note_task(
    ctx: ScrapeContext,
    source: str,
    task: Periodic[Any],
    *,
    failed: str = "last poll failed",
    stale: str = "not polled for {age:.0f} s",
    problems: tuple[tuple[str, str], ...] = (),
) -> None:
    """Note on the scrape's root what makes a collector's background data doubtful: the task's last
    run failed, it is stale (``stale`` formatted with its age in seconds), or its sources had
    ``problems`` ((source, reason) pairs); each turns the collector's success to 0."""
    error = task.outcome.error
    if error is not None:
        ctx.root.note(source, f"{failed}: {error}")
    if task.is_stale():
        ctx.root.note(source, stale.format(age=task.age_s()))
    for where, reason in problems:
        ctx.root.note(where, reason)
