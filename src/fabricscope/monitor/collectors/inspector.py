"""NCCL communication time from the NCCL Inspector, judged against what the fabric should deliver:
per communicator, collective and size bucket the execution-time histogram, bandwidths, the
simulator's expected bus bandwidth and the ratio; per rank (with its node, GPU, NIC and rail) the
ratio and the seconds since its last collective, which is where a stalled job shows first.

The per-key families are many (64 communicators x 16 collectives x 8 buckets is 8,192 keys), so
they are written as exposition text directly, each key's label set built once, instead of going
through prometheus-client's per-sample formatting (50x slower at that size: benchmarks/exporter_scrape.py).
"""

from __future__ import annotations

import math
import statistics
import time

from fabricscope.host.sysfs import printable_name
from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Families, ScrapeContext
from fabricscope.monitor.inspector_tail import DURATION_BUCKETS, CommStats, InspectorCounts, InspectorFollower
from fabricscope.monitor.names import PREFIX
from fabricscope.monitor.topology import Topology

GB = 1e9
COLLECTIVES_HELP = "Collectives completed (rate() is collectives per second)."
BUSBW_HELP = "Bus bandwidth of recent collectives (mean of the last 64), bytes per second."
ALGBW_HELP = (
    "Algorithm bandwidth (size over time) of recent collectives (mean of the last 64), bytes per second."
)
EXPECTED_HELP = (
    "Bus bandwidth the fabric should deliver for this communicator's shape (ranks, nodes, this node's NIC "
    "count and rate), collective and message size, from fabricscope's simulator, in bytes per second."
)
RATIO_HELP = "Measured bus bandwidth over the expected one (1 = what the fabric should deliver; 0.5 = half)."
DURATION_HELP = "Execution time of NCCL collectives (Inspector)."
RANK_RATIO_HELP = (
    "Median over this rank's recent collectives of measured over expected bus bandwidth; labelled with "
    "the node, the GPU (rank modulo ranks per node unless the Inspector names it) and its nearest NIC and rail."
)
SINCE_HELP = "Seconds since this rank's last completed collective (Inspector dump time): a stalled job rises here first."
_BOUNDS = [f"{b:g}" for b in DURATION_BUCKETS]
_KEY_FAMILIES = (
    "nccl_collectives_total",
    "nccl_busbw_bytes_per_second",
    "nccl_algbw_bytes_per_second",
    "nccl_busbw_expected_bytes_per_second",
    "nccl_busbw_ratio",
)


def _esc(value: str) -> str:
    """A label value as the text format wants it (backslash, quote and newline escaped)."""
    value = printable_name(value)
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _histogram_prefixes(comm: str, op: str) -> tuple[str, ...]:
    name = f"{PREFIX}nccl_collective_duration_seconds"
    labels = f'comm="{_esc(comm)}",collective="{_esc(op)}"'
    return (
        *(f'{name}_bucket{{{labels},le="{bound}"}} ' for bound in (*_BOUNDS, "+Inf")),
        f"{name}_count{{{labels}}} ",
        f"{name}_sum{{{labels}}} ",
    )


def _rank_place(comm: CommStats, rank: int, gpu: int | None, topo: Topology) -> dict[str, str]:
    per_node = max(1, math.ceil(comm.n_ranks / max(comm.n_nodes, 1)))
    index = gpu if gpu is not None else rank % per_node
    nic = topo.gpu_nic.get(index, "")
    rail = str(topo.nics.index(nic)) if nic in topo.nics else ""
    return {"gpu": str(index), "nic": nic, "rail": rail}


class InspectorCollector:
    name = "nccl_inspector"
    uses_topology = True

    def __init__(self, follower: InspectorFollower, task: Periodic[InspectorCounts]) -> None:
        self.follower = follower
        self.task = task

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        outcome = self.task.outcome
        if outcome.error is not None:
            ctx.root.note("nccl inspector", f"last poll failed: {outcome.error}")
        if self.task.is_stale():
            ctx.root.note("nccl inspector", f"not polled for {self.task.age_s():.0f} s")
        counts = self.follower.counts()
        for source, reason in counts.problems:
            ctx.root.note(source, reason)
        now = time.time()
        families: dict[str, list[str]] = {k: [] for k, *_rest in _FAMILIES}
        with self.follower.locked() as comms:
            for comm in comms.values():
                self._keys(comm, families)
                self._ranks(ctx.topology, comm, families, now)
        out.raw.append(_text(families))
        _own(counts, out)

    @staticmethod
    def _keys(comm: CommStats, fam: dict[str, list[str]]) -> None:
        collectives, busbw_lines, algbw_lines = fam["collectives"], fam["busbw"], fam["algbw"]
        expected_lines, ratio_lines = fam["expected"], fam["ratio"]
        for (op, bucket), key in comm.keys.items():
            prefixes = key.labels
            if not prefixes:  # each family's "name{labels} " once per key: the scrape only adds numbers
                labels = (
                    f'{{comm="{_esc(comm.label)}",collective="{_esc(op)}",size_bucket="{_esc(bucket)}"}} '
                )
                prefixes = key.labels = tuple(f"{PREFIX}{name}{labels}" for name in _KEY_FAMILIES)
            collectives.append(f"{prefixes[0]}{key.count}\n")
            window = key.busbw
            busbw = key.bus_sum / len(window) * GB if window else None
            if busbw is not None:
                busbw_lines.append(f"{prefixes[1]}{busbw!r}\n")
            if key.algbw:
                algbw_lines.append(f"{prefixes[2]}{key.alg_sum / len(key.algbw) * GB!r}\n")
            expected = key.expected
            if expected:
                line = key.expected_line  # changes only when the background poll sets a new value
                if not line:
                    line = key.expected_line = f"{prefixes[3]}{expected!r}\n"
                expected_lines.append(line)
                if busbw is not None:
                    ratio_lines.append(f"{prefixes[4]}{busbw / expected!r}\n")
        lines = fam["duration"]
        for op, agg in comm.ops.items():
            count, total, counts = agg[0], agg[1], agg[2]
            if len(agg) < 4:  # "name{labels,le=...} " for every bucket, +Inf, count and sum: built once
                agg.append(_histogram_prefixes(comm.label, op))
            prefixes = agg[3]
            cumulative = 0
            for prefix, n in zip(prefixes, counts):
                cumulative += n
                lines.append(f"{prefix}{cumulative}\n")
            lines.append(f"{prefixes[-3]}{count}\n{prefixes[-2]}{count}\n{prefixes[-1]}{float(total)!r}\n")

    @staticmethod
    def _ranks(topo: Topology, comm: CommStats, fam: dict[str, list[str]], now: float) -> None:
        fam["info"].append(
            f'{PREFIX}nccl_communicator_info{{comm="{_esc(comm.label)}",comm_id="{_esc(comm.comm_id[:32])}",'
            f'comm_name="{_esc(comm.name[:64])}",n_ranks="{comm.n_ranks}",n_nodes="{comm.n_nodes}"}} 1.0\n'
        )
        for rank, view in comm.ranks.items():
            place = _rank_place(comm, rank, view.gpu, topo)
            labels = (
                f'{{comm="{_esc(comm.label)}",rank="{rank}",node="{_esc(view.hostname)}",gpu="{place["gpu"]}",'
                f'nic="{_esc(place["nic"])}",rail="{place["rail"]}"}}'
            )
            fam["since"].append(
                f"{PREFIX}nccl_seconds_since_last_collective{labels} {max(0.0, now - view.last_s)!r}\n"
            )
            ratios = [bw * GB / key.expected for key, bw in view.recent if key.expected]
            if ratios:
                fam["rank_ratio"].append(
                    f"{PREFIX}nccl_rank_busbw_ratio{labels} {float(statistics.median(ratios))!r}\n"
                )


_FAMILIES = (
    (
        "info",
        "nccl_communicator_info",
        "gauge",
        "NCCL communicator seen by the Inspector; value is always 1.",
    ),
    ("collectives", "nccl_collectives_total", "counter", COLLECTIVES_HELP),
    ("busbw", "nccl_busbw_bytes_per_second", "gauge", BUSBW_HELP),
    ("algbw", "nccl_algbw_bytes_per_second", "gauge", ALGBW_HELP),
    ("expected", "nccl_busbw_expected_bytes_per_second", "gauge", EXPECTED_HELP),
    ("ratio", "nccl_busbw_ratio", "gauge", RATIO_HELP),
    ("duration", "nccl_collective_duration_seconds", "histogram", DURATION_HELP),
    ("rank_ratio", "nccl_rank_busbw_ratio", "gauge", RANK_RATIO_HELP),
    ("since", "nccl_seconds_since_last_collective", "gauge", SINCE_HELP),
)


def _text(fam: dict[str, list[str]]) -> str:
    parts = []
    for key, name, kind, help_text in _FAMILIES:
        if fam[key]:
            parts.append(f"# HELP {PREFIX}{name} {help_text}\n# TYPE {PREFIX}{name} {kind}\n")
            parts.append("".join(fam[key]))
    return "".join(parts)


def _own(counts: InspectorCounts, out: Families) -> None:
    out.counter(
        "nccl_inspector_records_total",
        "Inspector records (collectives, P2P operations, textfile samples) read.",
        {},
        counts.records,
    )
    out.counter(
        "nccl_inspector_bad_lines_total",
        "Lines of Inspector files that were not records (skipped).",
        {},
        counts.bad_lines,
    )
    out.counter(
        "nccl_inspector_dropped_records_total",
        "Inspector records beyond the caps on communicators, operations or size buckets.",
        {},
        counts.dropped_records,
    )
    out.counter(
        "nccl_inspector_read_bytes_total",
        "Bytes read from the Inspector's dump files.",
        {},
        counts.read_bytes,
    )
    out.counter(
        "nccl_inspector_skipped_bytes_total",
        "Bytes of Inspector dumps skipped unread (a file more than 64 MiB behind).",
        {},
        counts.skipped_bytes,
    )
    out.gauge(
        "nccl_inspector_files",
        "Inspector dump files and textfiles being read now.",
        {},
        counts.files + counts.prom_files,
    )
