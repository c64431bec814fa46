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
from collections.abc import Callable, Sequence
from itertools import accumulate

from fabricscope.host.sysfs import printable_name
from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Families, ScrapeContext, note_task
from fabricscope.monitor.inspector_tail import (
    DURATION_BUCKETS,
    CommStats,
    InspectorCounts,
    InspectorFollower,
    KeyStats,
    OpHistogram,
    RankStats,
)
from fabricscope.monitor.names import PREFIX
from fabricscope.monitor.nccl_tail import Placement
from fabricscope.monitor.topology import Topology

GB = 1e9
COLLECTIVES_HELP = "Collectives completed (rate() is collectives per second)."
BUSBW_HELP = "Bus bandwidth of recent collectives (mean of the last 64), bytes per second."
ALGBW_HELP = (
    "Algorithm bandwidth (size over time) of recent collectives (mean of the last 64), bytes per second."
)
EXPECTED_HELP = (
    "Bus bandwidth the fabric should deliver for this communicator's shape (ranks, nodes, this node's GPU "
    "model, NIC count and rate, the --topology fabric when given), collective and message size, from "
    "fabricscope's simulator, in bytes per second; absent for a GPU the simulator does not know."
)
RATIO_HELP = "Measured bus bandwidth over the expected one (1 = what the fabric should deliver; 0.5 = half)."
DURATION_HELP = "Execution time of NCCL collectives (Inspector)."
RANK_RATIO_HELP = (
    "Median over this rank's recent collectives of measured over expected bus bandwidth; labelled with "
    "the node, the GPU (placement: named by the Inspector, by the NCCL log's busId or cudaDev, or assumed "
    "rank modulo ranks per node) and its nearest NIC and rail."
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


def _histogram_labels(comm: str, op: str) -> tuple[str, ...]:
    name = f"{PREFIX}nccl_collective_duration_seconds"
    labels = f'comm="{_esc(comm)}",collective="{_esc(op)}"'
    return (
        *(f'{name}_bucket{{{labels},le="{bound}"}} ' for bound in (*_BOUNDS, "+Inf")),
        f"{name}_count{{{labels}}} ",
        f"{name}_sum{{{labels}}} ",
    )


def _key_text(comm: CommStats, op: str, bucket: str, key: KeyStats) -> tuple[str, ...]:
    """One key's lines of the five per-key families ("" where it has no value)."""
    prefixes = key.labels
    if not prefixes:  # each family's "name{labels} " once per key: later only the numbers change
        labels = f'{{comm="{_esc(comm.label)}",collective="{_esc(op)}",size_bucket="{_esc(bucket)}"}} '
        prefixes = key.labels = tuple(f"{PREFIX}{name}{labels}" for name in _KEY_FAMILIES)
    window, expected = key.busbw, key.expected
    busbw = key.bus_sum / len(window) * GB if window else None
    expected_line = key.expected_line  # changes only when the background poll sets a new value
    if expected and not expected_line:
        expected_line = key.expected_line = f"{prefixes[3]}{expected!r}\n"
    return (
        f"{prefixes[0]}{key.count}\n",
        "" if busbw is None else f"{prefixes[1]}{busbw!r}\n",
        f"{prefixes[2]}{key.alg_sum / len(key.algbw) * GB!r}\n" if key.algbw else "",
        expected_line if expected else "",
        f"{prefixes[4]}{busbw / expected!r}\n" if expected and busbw is not None else "",
    )


def _histogram_text(comm: CommStats, op: str, hist: OpHistogram) -> str:
    """An operation's duration histogram: cumulative bucket counts, +Inf, count, then sum."""
    labels = hist.labels
    if not labels:
        labels = hist.labels = _histogram_labels(comm.label, op)
    values = (*accumulate(hist.buckets), hist.count, hist.count)
    lines = [f"{label}{n}\n" for label, n in zip(labels, values)]
    return "".join(lines) + f"{labels[-1]}{float(hist.seconds)!r}\n"


def _comm_text(comm: CommStats) -> tuple[bytes, ...]:
    """The communicator's exposition of each family before the per-rank ones (_FAMILIES' order),
    encoded, from each key's and each histogram's text, kept until that key or histogram changes."""
    info = (
        f'{PREFIX}nccl_communicator_info{{comm="{_esc(comm.label)}",comm_id="{_esc(comm.comm_id[:32])}",'
        f'comm_name="{_esc(comm.name[:64])}",n_ranks="{comm.n_ranks}",n_nodes="{comm.n_nodes}"}} 1.0\n'
    )
    texts = []
    for (op, bucket), key in comm.keys.items():
        text = key.text
        if text is None:
            text = key.text = _key_text(comm, op, bucket, key)
        texts.append(text)
    histograms = []
    for op, hist in comm.ops.items():
        lines = hist.text
        if lines is None:
            lines = hist.text = _histogram_text(comm, op, hist)
        histograms.append(lines)
    columns = ["".join(column) for column in zip(*texts)] if texts else [""] * len(_KEY_FAMILIES)
    return tuple(_encode(text) for text in (info, *columns, "".join(histograms)))


def prerender(follower: InspectorFollower) -> int:
    """Format the communicators whose records or expectations changed, under the follower's lock.
    Returns the communicators formatted."""
    done = 0
    with follower.locked() as comms:
        for comm in comms.values():
            if comm.text is None:
                comm.text = _comm_text(comm)
                done += 1
    return done


Placer = Callable[[str, int | None], Placement | None]  # NcclLogTailer.placement


def _rank_place(
    comm: CommStats, rank: int, view: RankStats, topo: Topology, where: Placement | None
) -> dict[str, str]:
    """The rank's GPU, its nearest NIC and rail, and how the GPU was found: named by the
    Inspector's textfile; by the NCCL log's busId (mapped to the inventory's GPU) or, without one
    the inventory knows, its cudaDev; else assumed, rank modulo ranks per node."""
    if view.gpu is not None:
        index, how = view.gpu, "inspector"
    elif where is not None and where.pci_address in topo.gpu_pci:
        index, how = topo.gpu_pci[where.pci_address or ""], "nccl_log_bus_id"
    elif where is not None and where.cuda_dev is not None:
        index, how = where.cuda_dev, "nccl_log_cuda_dev"
    else:
        index, how = rank % max(1, math.ceil(comm.n_ranks / max(comm.n_nodes, 1))), "rank_modulo"
    nic = topo.gpu_nic.get(index, "")
    rail = str(topo.nics.index(nic)) if nic in topo.nics else ""
    return {"gpu": str(index), "nic": nic, "rail": rail, "placement": how}


def _rank_labels(topo: Topology, comm: CommStats, rank: int, view: RankStats, placer: Placer | None) -> str:
    """The rank's label set, rebuilt only when what it is built from changes (the topology is
    compared by identity: the background refresh replaces it whole)."""
    where = placer(view.hostname, view.pid) if placer is not None and view.gpu is None else None
    key = (comm.n_ranks, comm.n_nodes, view.hostname, view.gpu, where)
    if view.label_key[1:] != key or view.label_key[0] is not topo:
        place = _rank_place(comm, rank, view, topo, where)
        view.label_key = (topo, *key)
        view.label_text = (
            f'{{comm="{_esc(comm.label)}",rank="{rank}",node="{_esc(view.hostname)}",gpu="{place["gpu"]}",'
            f'nic="{_esc(place["nic"])}",rail="{place["rail"]}",placement="{place["placement"]}"}}'
        )
    return view.label_text


class InspectorCollector:
    name = "nccl_inspector"
    uses_topology = True

    def __init__(
        self,
        follower: InspectorFollower,
        task: Periodic[InspectorCounts],
        placer: Placer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.follower = follower
        self.task = task
        self.placer = placer  # where the NCCL log puts each process (exporter --nccl-log)
        self.clock = clock
        self._scrapes: tuple[float | None, float | None] = (None, None)  # the last two, monotonic

    def prepare(self, poll_s: float) -> int:
        """From the background poll: format what changed when a scrape is due within two polls,
        so that the scrape joins text already made instead of formatting up to 8,192 keys while
        Prometheus waits; earlier in the scrape interval it would be formatted again before any
        scrape read it. Before two scrapes have shown the interval, every poll formats."""
        previous, last = self._scrapes
        if previous is not None and last is not None and self.clock() < 2 * last - previous - 2 * poll_s:
            return 0
        return prerender(self.follower)

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        self._scrapes = (self._scrapes[1], self.clock())
        counts = self.follower.counts()
        note_task(ctx, "nccl inspector", self.task, problems=counts.problems)
        now = time.time()
        per_comm: list[tuple[bytes, ...]] = []
        rank_ratio: list[str] = []
        since: list[str] = []
        with self.follower.locked() as comms:
            for comm in comms.values():
                text = comm.text
                if text is None:
                    text = comm.text = _comm_text(comm)
                per_comm.append(text)
                _ranks(ctx.topology, comm, rank_ratio, since, now, self.placer)
        columns: list[Sequence[bytes]] = [*zip(*per_comm)] if per_comm else [()] * (len(_FAMILIES) - 2)
        out.raw.extend(_exposition([*columns, [_encode("".join(rank_ratio))], [_encode("".join(since))]]))
        _own(counts, out)


def _ranks(
    topo: Topology,
    comm: CommStats,
    rank_ratio: list[str],
    since: list[str],
    now: float,
    placer: Placer | None,
) -> None:
    """Each rank's lines: seconds since its last collective (every scrape), its ratio (kept
    until a record or an expected bandwidth changes)."""
    for rank, view in comm.ranks.items():
        labels = _rank_labels(topo, comm, rank, view, placer)
        since.append(f"{PREFIX}nccl_seconds_since_last_collective{labels} {max(0.0, now - view.last_s)!r}\n")
        if not view.ratio_fresh:
            ratios = [bw * GB / e for key, bw in view.recent if (e := key.expected)]
            view.ratio = float(statistics.median(ratios)) if ratios else None
            view.ratio_fresh = True
        if view.ratio is not None:
            rank_ratio.append(f"{PREFIX}nccl_rank_busbw_ratio{labels} {view.ratio!r}\n")


_FAMILIES = (  # the exposition's order: per communicator (_comm_text's), then per rank (_ranks')
    ("nccl_communicator_info", "gauge", "NCCL communicator seen by the Inspector; value is always 1."),
    ("nccl_collectives_total", "counter", COLLECTIVES_HELP),
    ("nccl_busbw_bytes_per_second", "gauge", BUSBW_HELP),
    ("nccl_algbw_bytes_per_second", "gauge", ALGBW_HELP),
    ("nccl_busbw_expected_bytes_per_second", "gauge", EXPECTED_HELP),
    ("nccl_busbw_ratio", "gauge", RATIO_HELP),
    ("nccl_collective_duration_seconds", "histogram", DURATION_HELP),
    ("nccl_rank_busbw_ratio", "gauge", RANK_RATIO_HELP),
    ("nccl_seconds_since_last_collective", "gauge", SINCE_HELP),
)


_HEADERS = tuple(
    f"# HELP {PREFIX}{name} {help_text}\n# TYPE {PREFIX}{name} {kind}\n".encode()
    for name, kind, help_text in _FAMILIES
)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")  # as Exporter.render encodes: never fails


def _exposition(columns: list[Sequence[bytes]]) -> list[bytes]:
    """Each family's help and type, then its samples, in _FAMILIES' order, as a list the scrape
    joins once with the rest of the exposition; a family without samples is left out."""
    parts: list[bytes] = []
    for header, chunks in zip(_HEADERS, columns):
        if any(chunks):
            parts.append(header)
            parts.extend(chunks)
    return parts


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
