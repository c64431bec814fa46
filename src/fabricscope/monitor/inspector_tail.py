"""Follow the NCCL Inspector's output and keep, per communicator, collective and message-size
bucket, what the exporter shows: counts, an execution-time histogram, recent bandwidths, and per
rank the recent bandwidths and when its last collective completed.

Both of the Inspector's forms (parsed by :mod:`fabricscope.nccl.inspector`): the JSONL dump files
``*.log`` are followed by :class:`~fabricscope.monitor.follow.FileFollower` (the NCCL log
follower's mechanism: rotation, caps per file and per poll, overlong lines); the node_exporter
textfiles ``*.prom``, rewritten whole every interval, are re-read when they change (at most
:data:`MAX_PROM_FILES` of :data:`MAX_PROM_BYTES`). A line that is not a record is counted, never
fatal.

Labels stay bounded: at most :data:`MAX_COMMUNICATORS` communicators (the least recently active
forgotten first, and any idle for :data:`IDLE_FORGET_S`), :data:`MAX_OPS` operations and
:data:`MAX_BUCKETS` size buckets each; a communicator's label is its Inspector hash (already a
hash of NCCL's unique id) or, for the textfile's free-text ``comm_name``, a hash of it.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from fabricscope.monitor.follow import MAX_FILES, FileFollower, FollowStats
from fabricscope.nccl.inspector import (
    InspectorFormatError,
    InspectorRecord,
    PromSample,
    parse_line,
    read_prom,
    size_bucket,
)

MAX_COMMUNICATORS = 256
MAX_OPS = 32  # per communicator: NCCL has a dozen collectives and P2P kinds
MAX_BUCKETS = 64  # per operation: 64 distinct sizes is more than a training step uses
MAX_PROM_FILES = 64  # one per GPU
MAX_PROM_BYTES = 4 * 1024 * 1024  # the README: ~1 KB per communicator and metric
RECENT = 64  # bandwidth samples kept per key and per rank
IDLE_FORGET_S = 3600.0
# Execution time histogram buckets (seconds): a 8 KB AllReduce inside a node takes ~10 us, a
# 16 GB one across nodes ~100 ms (the README's example: 62 ms), a stalled one seconds.
DURATION_BUCKETS = (1e-5, 1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
_HEX_ID = re.compile(r"0x[0-9a-f]{1,16}\Z")


def comm_label(comm: str) -> str:
    """A bounded label for a communicator: the Inspector's hash as is, anything else hashed."""
    if _HEX_ID.match(comm):
        return comm
    return "h" + hashlib.sha256(comm.encode("utf-8", "surrogateescape")).hexdigest()[:12]


@dataclass
class KeyStats:
    """One (communicator, operation, size bucket). Window sums are kept as records arrive, so a
    scrape reads means without walking the windows."""

    count: int = 0
    size_sum: float = 0.0
    busbw: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))  # GB/s
    algbw: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))
    bus_sum: float = 0.0
    alg_sum: float = 0.0
    expected: float | None = None  # bytes/s, set by the background poll (ExpectedBusbw)
    expected_size: float = 0.0  # the size ``expected`` was computed for; 0: not yet
    labels: tuple[str, ...] = ()  # the exposition's "name{labels} " per family, built once by the renderer
    text: tuple[str, ...] | None = None  # the renderer's lines for this key; None: changed since
    expected_line: str = ""  # the renderer's line for ``expected``, kept until that changes

    @property
    def mean_size(self) -> float:
        return self.size_sum / self.count if self.count else 0.0

    def add_bw(self, busbw: float | None, algbw: float | None) -> None:
        self.text = None
        if busbw is not None:
            if len(self.busbw) == RECENT:
                self.bus_sum -= self.busbw[0]
            self.busbw.append(busbw)
            self.bus_sum += busbw
        if algbw is not None:
            if len(self.algbw) == RECENT:
                self.alg_sum -= self.algbw[0]
            self.algbw.append(algbw)
            self.alg_sum += algbw

    @property
    def busbw_gbs(self) -> float | None:
        return self.bus_sum / len(self.busbw) if self.busbw else None

    @property
    def algbw_gbs(self) -> float | None:
        return self.alg_sum / len(self.algbw) if self.algbw else None


@dataclass
class RankStats:
    hostname: str = ""
    last_s: float = 0.0  # wall time of its last completed collective (dump time, else read time)
    recent: deque[tuple[KeyStats, float]] = field(
        default_factory=lambda: deque(maxlen=RECENT)
    )  # (its key, busbw)
    gpu: int | None = None  # from the textfile's gpu label; else from the NCCL log, or inferred
    pid: int | None = None  # the process (the JSONL dump's metadata), to find it in the NCCL log
    ratio: float | None = None  # the renderer's median of ``recent`` over expected ...
    ratio_fresh: bool = False  # ... valid until a record or an expected bandwidth changes
    label_key: tuple[object, ...] = ()  # what the renderer's ``label_text`` was built from
    label_text: str = ""


@dataclass
class OpHistogram:
    """One operation's execution times, every size together (the duration histogram)."""

    count: int = 0
    seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))  # not cumulative
    labels: tuple[str, ...] = ()  # the renderer's "name{labels,le=...} " per line, built once
    text: str | None = None  # the renderer's lines; None: changed since

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.seconds += seconds
        self.text = None
        index = bisect_left(DURATION_BUCKETS, seconds)
        if index < len(DURATION_BUCKETS):
            self.buckets[index] += 1


@dataclass
class CommStats:
    comm_id: str
    label: str
    name: str = ""
    n_ranks: int = 0
    n_nodes: int = 0
    last_s: float = 0.0
    keys: dict[tuple[str, str], KeyStats] = field(default_factory=dict)
    ranks: dict[int, RankStats] = field(default_factory=dict)
    ops: dict[str, OpHistogram] = field(default_factory=dict)
    # The renderer's encoded text of this communicator's families, kept between scrapes; every
    # change to the communicator (a record, an expected bandwidth) sets it to None.
    text: tuple[bytes, ...] | None = None

    def observe(self, op: str, seconds: float) -> None:
        hist = self.ops.get(op)
        if hist is None:
            hist = self.ops[op] = OpHistogram()
        hist.observe(seconds)


@dataclass(frozen=True)
class InspectorCounts(FollowStats):
    """The follower's counts (``problems`` with the .prom files' added) and the records read."""

    records: int = 0
    bad_lines: int = 0
    dropped_records: int = 0  # beyond the caps on communicators, operations or buckets
    prom_files: int = 0


class InspectorFollower:
    """Follows NCCL_INSPECTOR_DUMP_DIR directories; :meth:`poll` from a background thread,
    :meth:`view` from scrapes."""

    def __init__(
        self,
        dirs: Iterable[str],
        *,
        from_start: bool = False,
        clock: Callable[[], float] = time.time,
        max_files: int = MAX_FILES,
        **caps: int,
    ) -> None:
        self.dirs = [os.path.expanduser(d) for d in dirs]
        self.clock = clock
        self.follower = FileFollower(
            [os.path.join(d, "*.log") for d in self.dirs],
            self._feed,
            from_start=from_start,
            max_files=max_files,
            **caps,
        )
        self._lock = threading.Lock()
        self._comms: dict[str, CommStats] = {}
        self._records = self._bad = self._dropped = 0
        self._prom_seen: dict[str, tuple[float, int]] = {}
        self._prom_files = 0
        self._prom_problems: list[tuple[str, str]] = []

    # ----- reading ---------------------------------------------------------------------------
    def poll(self) -> InspectorCounts:
        self.follower.poll()
        self._read_textfiles()
        self._forget_idle()
        return self.counts()

    def close(self) -> None:
        self.follower.close()

    def _feed(self, _path: str, lines: list[bytes]) -> None:
        now = self.clock()
        records: list[InspectorRecord] = []
        bad = 0
        for raw in lines:
            try:
                record = parse_line(raw.decode("utf-8", errors="replace"))
            except InspectorFormatError:
                bad += 1
                continue
            if record is not None:
                records.append(record)
        with self._lock:
            self._bad += bad
            for record in records:
                self._add(record, now)

    def _comm(self, comm_id: str, now: float) -> CommStats | None:
        comm = self._comms.get(comm_id)
        if comm is None:
            if len(self._comms) >= MAX_COMMUNICATORS:
                oldest = min(self._comms.values(), key=lambda c: c.last_s)
                if now - oldest.last_s < 60:
                    return None  # every slot busy within the last minute: the newcomer is dropped
                del self._comms[oldest.comm_id]
            comm = self._comms[comm_id] = CommStats(comm_id, comm_label(comm_id))
        return comm

    def _key(self, comm: CommStats, op: str, bucket: str) -> KeyStats | None:
        key = (op[:64], bucket)
        stats = comm.keys.get(key)
        if stats is None:
            ops = {o for o, _b in comm.keys}
            if (key[0] not in ops and len(ops) >= MAX_OPS) or sum(
                1 for o, _b in comm.keys if o == key[0]
            ) >= MAX_BUCKETS:
                return None
            stats = comm.keys[key] = KeyStats()
        return stats

    def _add(self, record: InspectorRecord, now: float) -> None:
        when = record.dump_timestamp_us / 1e6 if record.dump_timestamp_us else now
        comm = self._comm(record.comm_id, now)
        bucket = size_bucket(record.msg_size_bytes)
        stats = self._key(comm, record.op, bucket) if comm is not None else None
        if comm is None or stats is None:
            self._dropped += 1
            return
        self._records += 1
        comm.text = stats.text = None
        comm.name = record.comm_name or comm.name
        comm.n_ranks, comm.n_nodes = record.n_ranks, record.n_nodes
        comm.last_s = max(comm.last_s, when)
        stats.count += 1
        stats.size_sum += record.msg_size_bytes
        comm.observe(stats_key_op(record.op), record.exec_time_s)
        stats.add_bw(record.busbw_gbs, record.algbw_gbs)
        if record.rank not in comm.ranks and len(comm.ranks) >= 1024:
            return
        rank = comm.ranks.setdefault(record.rank, RankStats())
        rank.hostname = (record.hostname or rank.hostname)[:128]
        rank.pid = record.pid if record.pid is not None else rank.pid
        rank.last_s = max(rank.last_s, when)
        rank.recent.append((stats, record.busbw_gbs))
        rank.ratio_fresh = False

    def _read_textfiles(self) -> None:
        problems: list[tuple[str, str]] = []
        paths = sorted({p for d in self.dirs for p in glob.glob(os.path.join(d, "*.prom"))})[:MAX_PROM_FILES]
        for path in paths:
            try:
                st = os.stat(path)
            except OSError as exc:
                problems.append((path, exc.strerror or str(exc)))
                continue
            if self._prom_seen.get(path) == (st.st_mtime, st.st_size):
                continue
            self._prom_seen[path] = (st.st_mtime, st.st_size)
            if st.st_size > MAX_PROM_BYTES:
                problems.append((path, f"larger than {MAX_PROM_BYTES} bytes: not read"))
                continue
            try:
                with open(path, "rb") as handle:
                    text = handle.read(MAX_PROM_BYTES + 1).decode("utf-8", errors="replace")
            except OSError as exc:
                problems.append((path, exc.strerror or str(exc)))
                continue
            samples, bad = read_prom(text.splitlines())
            with self._lock:
                self._bad += bad
                for sample in samples:
                    self._add_prom(sample, st.st_mtime)
        self._prom_files = len(paths)
        self._prom_problems = problems

    def _add_prom(self, sample: PromSample, when: float) -> None:
        """A textfile sample: a mean over the Inspector's interval, for one GPU of this node."""
        comm = self._comm(sample.comm, when)
        stats = self._key(comm, sample.op, sample.size_bucket) if comm is not None else None
        if comm is None or stats is None:
            self._dropped += 1
            return
        self._records += 1
        comm.text = stats.text = None
        comm.name = sample.labels.get("comm_name", comm.name)[:128]
        comm.n_ranks, comm.n_nodes = sample.n_ranks or comm.n_ranks, sample.n_nodes or comm.n_nodes
        comm.last_s = max(comm.last_s, when)
        gpu = int(sample.gpu[3:]) if sample.gpu.startswith("GPU") and sample.gpu[3:].isdigit() else None
        rank_id = sample.rank if sample.rank is not None else (gpu if gpu is not None else 0)
        rank = comm.ranks.setdefault(rank_id, RankStats())
        rank.hostname, rank.gpu = sample.node[:128], gpu
        rank.last_s = max(rank.last_s, when)
        if sample.metric == "busbw_gbs":
            stats.add_bw(sample.value, None)
            rank.recent.append((stats, sample.value))
            rank.ratio_fresh = False
        elif sample.metric == "algbw_gbs":
            stats.add_bw(None, sample.value)
        elif sample.value > 0:  # a mean execution time over the interval: one more observation of it
            stats.count += 1
            comm.observe(sample.op[:64], sample.value * 1e-6)

    def _forget_idle(self) -> None:
        now = self.clock()
        with self._lock:
            for comm_id in [c for c, s in self._comms.items() if now - s.last_s > IDLE_FORGET_S]:
                del self._comms[comm_id]

    # ----- reporting ---------------------------------------------------------------------------
    def counts(self) -> InspectorCounts:
        stats = self.follower.stats()
        with self._lock:
            return InspectorCounts(
                **(stats.as_fields() | {"problems": stats.problems + tuple(self._prom_problems)}),
                records=self._records,
                bad_lines=self._bad,
                dropped_records=self._dropped,
                prom_files=self._prom_files,
            )

    @contextmanager
    def locked(self) -> Iterator[dict[str, CommStats]]:
        """The live state, the follower kept out meanwhile: a scrape renders from it directly
        (copying 8,192 keys per scrape would cost more than rendering them)."""
        with self._lock:
            yield self._comms

    def update_expected(
        self, expected: Callable[[str, float, int, int, str], float | None], *, reset: bool = False
    ) -> int:
        """Give each key without one (or whose mean size moved by 10%) its expected bus bandwidth:
        ``expected(op, size, ranks, nodes, host)``, host the node its ranks here run on, runs
        outside the lock (a simulation takes milliseconds). Returns keys updated."""
        with self._lock:
            todo = [
                (comm, comm.n_ranks, comm.n_nodes, _host(comm), op, stats.mean_size, stats)
                for comm in self._comms.values()
                for (op, _bucket), stats in comm.keys.items()
                if reset
                or not stats.expected_size
                or abs(stats.mean_size - stats.expected_size) > 0.1 * stats.expected_size
            ]
        values = [
            (comm, stats, size, expected(op, size, ranks, nodes, host))
            for comm, ranks, nodes, host, op, size, stats in todo
        ]
        with self._lock:
            for comm, stats, size, value in values:
                if value != stats.expected:  # the lines showing it, and the ratios using it, are stale
                    comm.text = stats.text = None
                    stats.expected_line = ""
                    for rank in comm.ranks.values():
                        rank.ratio_fresh = False
                stats.expected, stats.expected_size = value, size
        return len(values)


def _host(comm: CommStats) -> str:
    """The node the communicator's ranks here run on (the Inspector's hostname)."""
    return next((rank.hostname for rank in comm.ranks.values() if rank.hostname), "")


def stats_key_op(op: str) -> str:
    return op[:64]
