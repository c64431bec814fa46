"""The exporter: collectors over one root, background refreshers, and per-collector health.

A scrape runs every collector in turn, each on a private view of the root so that the problems it
meets (a vanished or garbled file, a failed background refresh) are its own; it reports
``fabricscope_collector_success{collector}`` 0 for those and still returns everything else, so a
broken source is a metric, never a failed scrape. Slow things (commands, the doctor, log
following) run in background threads (:mod:`.background`); a scrape only reads sysfs/procfs
through the host model and the latest background results.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from fabricscope import __version__
from fabricscope.host import Root
from fabricscope.host.root import Problem
from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Collector, Families, ScrapeContext
from fabricscope.monitor.collectors.doctor import DoctorCollector, DoctorResult, run_doctor_once
from fabricscope.monitor.collectors.ethtool import EthtoolCollector, EthtoolSnapshot, poll_ethtool
from fabricscope.monitor.collectors.inspector import InspectorCollector
from fabricscope.monitor.collectors.nccl import NcclCollector
from fabricscope.monitor.collectors.netdev import NetdevCollector
from fabricscope.monitor.collectors.pcie import GpuThroughput, PcieCollector, poll_gpu_pcie
from fabricscope.monitor.collectors.rdma import RdmaCollector
from fabricscope.monitor.collectors.tcp import TcpCollector
from fabricscope.monitor.inspector_tail import InspectorCounts, InspectorFollower
from fabricscope.monitor.intervals import INTERVAL_BOUNDS, option_name
from fabricscope.monitor.nccl_expected import ExpectedBusbw, load_fabric, shape_of
from fabricscope.monitor.nccl_tail import NcclCounts, NcclLogTailer
from fabricscope.monitor.topology import Topology, read_topology

log = logging.getLogger("fabricscope.exporter")

DEFAULT_PORT = 9731
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
PROBLEM_LOG_INTERVAL_S = 600.0


@dataclass(frozen=True)
class ExporterOptions:
    nccl_globs: tuple[str, ...] = ()
    nccl_from_start: bool = False
    doctor_interval_s: float = 300.0  # 0 disables the doctor
    ethtool_interval_s: float = 5.0
    topology_interval_s: float = 60.0
    nccl_poll_interval_s: float = 1.0
    inspector_dirs: tuple[str, ...] = ()  # NCCL_INSPECTOR_DUMP_DIR directories to follow
    topology_file: str | None = None  # the fabric communicators are judged against (nccl_expected)

    def __post_init__(self) -> None:
        for name, bounds in INTERVAL_BOUNDS.items():
            bounds.check(getattr(self, name), option_name(name))  # monitor/intervals.py: one declaration


@dataclass(frozen=True)
class CollectorHealth:
    success: bool
    duration_s: float
    problems: tuple[str, ...]
    dropped: dict[str, int] = dataclasses.field(default_factory=dict)  # kind -> objects left unread by a cap


def dropped_by_kind(problems: tuple[Problem, ...] | list[Problem]) -> dict[str, int]:
    """Objects left unread by the caps on how many of a kind are read (host.sysfs.capped)."""
    out: dict[str, int] = {}
    for problem in problems:
        if problem.dropped:
            out[problem.kind] = out.get(problem.kind, 0) + problem.dropped
    return out


class Exporter:
    """Build with a root and options; :meth:`start` before serving, :meth:`render` per scrape."""

    def __init__(self, root: Root, options: ExporterOptions | None = None) -> None:
        self.root = root
        self.options = options or ExporterOptions()
        opts = self.options
        self.topology_task: Periodic[Topology] = Periodic(
            "topology", self._read_topology, opts.topology_interval_s
        )
        self._topology_problems: tuple[str, ...] = ()
        self.ethtool_task: Periodic[EthtoolSnapshot] = Periodic(
            "ethtool",
            lambda: poll_ethtool(self.root, lambda: self.topology_task.outcome.value),
            opts.ethtool_interval_s,
        )
        self.gpu_pcie_task: Periodic[GpuThroughput] = Periodic(
            "gpu_pcie", lambda: poll_gpu_pcie(self.root), opts.ethtool_interval_s
        )
        self.doctor_task: Periodic[DoctorResult] | None = None
        if opts.doctor_interval_s:
            self.doctor_task = Periodic("doctor", lambda: run_doctor_once(self.root), opts.doctor_interval_s)
        self.tailer: NcclLogTailer | None = None
        self.nccl_task: Periodic[NcclCounts] | None = None
        if opts.nccl_globs:
            self.tailer = NcclLogTailer(opts.nccl_globs, from_start=opts.nccl_from_start)
            self.nccl_task = Periodic("nccl", self.tailer.poll, opts.nccl_poll_interval_s)
        self.inspector: InspectorFollower | None = None
        self.inspector_task: Periodic[InspectorCounts] | None = None
        self.expected = ExpectedBusbw()
        self.fabric = (
            load_fabric(opts.topology_file) if opts.topology_file else None
        )  # FabricscopeError: bad file
        self._inspector_fabric: tuple[object, ...] | None = None
        if opts.inspector_dirs:
            self.inspector = InspectorFollower(opts.inspector_dirs, from_start=opts.nccl_from_start)
            self.inspector_task = Periodic("nccl_inspector", self._poll_inspector, opts.nccl_poll_interval_s)

        self.collectors: list[Collector] = [
            RdmaCollector(),
            NetdevCollector(),
            EthtoolCollector(self.ethtool_task),
            PcieCollector(self.gpu_pcie_task),
            TcpCollector(),
        ]
        if self.doctor_task is not None:
            self.collectors.append(DoctorCollector(self.doctor_task))
        if self.tailer is not None and self.nccl_task is not None:
            self.collectors.append(NcclCollector(self.tailer, self.nccl_task))
        self.inspector_collector: InspectorCollector | None = None
        if self.inspector is not None and self.inspector_task is not None:
            placer = self.tailer.placement if self.tailer is not None else None
            self.inspector_collector = InspectorCollector(self.inspector, self.inspector_task, placer)
            self.collectors.append(self.inspector_collector)

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_RegistryAdapter(self))
        self._logged: dict[str, tuple[float, tuple[str, ...]]] = {}
        self._started = False

    # ----- lifecycle ------------------------------------------------------------------------
    def prime(self, *, doctor: bool = False) -> None:
        """Run the background refreshers once in this thread, so the first scrape is complete.
        The doctor is only primed when asked (it can take seconds on a live node)."""
        self.topology_task.run_once()
        self.ethtool_task.run_once()
        self.gpu_pcie_task.run_once()
        for task in (self.nccl_task, self.inspector_task):
            if task is not None:
                task.run_once()
        if doctor and self.doctor_task is not None:
            self.doctor_task.run_once()

    def start(self) -> None:
        """Prime topology, ethtool and log positions, then start the background threads."""
        if self._started:
            return
        self._started = True
        self.prime()
        self.topology_task.start(run_first=False)
        self.ethtool_task.start(run_first=False)
        self.gpu_pcie_task.start(run_first=False)
        for task in (self.nccl_task, self.inspector_task):
            if task is not None:
                task.start(run_first=False)
        if self.doctor_task is not None:
            self.doctor_task.start(run_first=True)

    def stop(self) -> None:
        for task in self.tasks():
            task.stop()
        if self.tailer is not None:
            self.tailer.close()
        if self.inspector is not None:
            self.inspector.close()

    def tasks(self) -> list[Periodic]:
        return [
            t
            for t in (
                self.topology_task,
                self.ethtool_task,
                self.gpu_pcie_task,
                self.doctor_task,
                self.nccl_task,
                self.inspector_task,
            )
            if t is not None
        ]

    def _poll_inspector(self) -> InspectorCounts:
        """Follow the Inspector's files, then simulate the expected bandwidth of any new shape here,
        in the background, so that a scrape only looks it up."""
        assert self.inspector is not None
        counts = self.inspector.poll()
        topology = self.topology_task.outcome.value
        if topology is not None:
            fabric = (topology.nics, topology.nic_rate_gbps, topology.roce, topology.gpu_model)
            reset, self._inspector_fabric = fabric != self._inspector_fabric, fabric
            self.inspector.update_expected(
                lambda op, size, ranks, nodes, host: self.expected(
                    shape_of(op, size, ranks, nodes, topology, self.fabric, host)
                ),
                reset=reset,
            )
        if self.inspector_collector is not None:
            self.inspector_collector.prepare(self.options.nccl_poll_interval_s)
        return counts

    def _read_topology(self) -> Topology:
        topology = read_topology(self.root)
        problems = tuple(f"{p.source}: {p.reason}" for p in topology.problems)
        if problems != self._topology_problems:
            # Reported once per change: the doctor's host.sources finding lists them too.
            if problems:
                log.warning("topology: %d source(s) unreadable: %s", len(problems), "; ".join(problems[:5]))
            self._topology_problems = problems
        return topology

    # ----- scraping ---------------------------------------------------------------------------
    def render(self) -> bytes:
        """The exposition (Prometheus text format 0.0.4) of one scrape: prometheus-client's
        formatting of the families, then the text collectors wrote themselves."""
        families, raw = self._collect()
        return b"".join([generate_latest(_Static(families)), *raw])  # the large families copied once

    def collect(self) -> Iterator[Metric]:
        yield from self._collect()[0]

    def _collect(self) -> tuple[list[Metric], list[bytes]]:
        topology = self.topology_task.outcome.value or Topology()
        health: dict[str, CollectorHealth] = {}
        families: list[Metric] = []
        raw: list[bytes] = []
        for collector in self.collectors:
            out, health[collector.name], text = self._run(collector, topology)
            families.extend(out)
            raw.extend(text)
        families.extend(self._meta(health, dropped_by_kind(topology.problems)))
        return families, raw

    def _run(
        self, collector: Collector, topology: Topology
    ) -> tuple[list[Metric], CollectorHealth, list[bytes]]:
        scoped = dataclasses.replace(self.root, problems=[])
        out = Families()
        started = time.perf_counter()
        crashed: str | None = None
        if getattr(collector, "uses_topology", False):
            # Labels and the list of netdevs/PCI functions come from the topology: if its refresh
            # fails or hangs, what this collector shows is stale.
            task = self.topology_task
            if task.outcome.error is not None:
                scoped.note("topology", f"last refresh failed: {task.outcome.error}")
            elif task.is_stale():
                scoped.note("topology", f"last refreshed {task.age_s():.0f} s ago")
        try:
            collector.collect(ScrapeContext(scoped, topology), out)
        except Exception as exc:  # a bug or a surprise in one source must not fail the scrape
            crashed = f"collector crashed: {type(exc).__name__}: {exc}"
            log.exception("collector %s crashed", collector.name)
        duration = time.perf_counter() - started
        problems = tuple(f"{p.source}: {p.reason}" for p in scoped.problems)
        if crashed:
            problems = (*problems, crashed)
        self._log_problems(collector.name, problems)
        health = CollectorHealth(not problems, duration, problems, dropped_by_kind(scoped.problems))
        return list(out), health, out.raw

    def _meta(self, health: dict[str, CollectorHealth], topology_dropped: dict[str, int]) -> Iterator[Metric]:
        success = GaugeMetricFamily(
            "fabricscope_collector_success",
            "1 when the collector read all its sources; 0 when one was missing, garbled or stale.",
            labels=["collector"],
        )
        duration = GaugeMetricFamily(
            "fabricscope_collector_duration_seconds",
            "Time the collector took in this scrape.",
            labels=["collector"],
        )
        problems = GaugeMetricFamily(
            "fabricscope_collector_problems",
            "Sources the collector could not read in this scrape (see the exporter's log for which).",
            labels=["collector"],
        )
        for name, item in health.items():
            success.add_metric([name], 1.0 if item.success else 0.0)
            duration.add_metric([name], item.duration_s)
            problems.add_metric([name], float(len(item.problems)))
        yield success
        yield duration
        yield problems
        dropped = GaugeMetricFamily(
            "fabricscope_objects_dropped",
            "Objects of a kind (rdma ports, netdevs, counter files...) left unread in this scrape because "
            "there were more than the exporter reads at most: a hostile or broken source, never a real node.",
            labels=["collector", "kind"],
        )
        for name, counts in [*((n, h.dropped) for n, h in health.items()), ("topology", topology_dropped)]:
            for kind, count in sorted(counts.items()):
                dropped.add_metric([name, kind], float(count))
        if dropped.samples:
            yield dropped
        age = GaugeMetricFamily(
            "fabricscope_refresh_age_seconds",
            "Seconds since the background task last completed successfully.",
            labels=["task"],
        )
        for task in self.tasks():
            value = task.age_s()
            if value is not None:
                age.add_metric([task.name], value)
        if age.samples:
            yield age
        info = GaugeMetricFamily(
            "fabricscope_exporter_build_info",
            "The exporter's version; value is always 1.",
            labels=["version"],
        )
        info.add_metric([__version__], 1.0)
        yield info

    def _log_problems(self, name: str, problems: tuple[str, ...]) -> None:
        """Log a collector's problems when they change, and again every 10 minutes while they last."""
        now = time.monotonic()
        last = self._logged.get(name)
        if not problems:
            if last is not None and last[1]:
                log.info("collector %s: sources readable again", name)
                self._logged[name] = (now, ())
            return
        if last is None or last[1] != problems or now - last[0] > PROBLEM_LOG_INTERVAL_S:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            log.warning("collector %s: %s", name, shown)
            self._logged[name] = (now, problems)

    def health(self) -> dict[str, CollectorHealth]:
        """Run every collector once and return only their health (for tests and ``--once``)."""
        topology = self.topology_task.outcome.value or Topology()
        return {c.name: self._run(c, topology)[1] for c in self.collectors}


class _Static:
    """Families already collected, in the shape generate_latest() reads."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


class _RegistryAdapter:
    """prometheus-client calls ``collect()``; the exporter does the work."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter

    def collect(self) -> Iterator[Metric]:
        return self.exporter.collect()
