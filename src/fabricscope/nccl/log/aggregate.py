"""What a stream of NCCL log lines says, kept as per-process, per-rank and per-warning state.

:class:`LogAggregator` is fed lines (or :class:`~fabricscope.nccl.log.parse.LogEvent`s) and keeps only
state that grows with ranks and distinct warnings, never with lines. Files are streamed into it by
:mod:`fabricscope.nccl.log.read`; :func:`fabricscope.nccl.log.report.build_report` reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fabricscope.nccl.log.batch import BatchReader
from fabricscope.nccl.log.parse import (
    MAX_LINE_CHARS,
    Header,
    LogEvent,
    bare_version,
    classify_info,
    classify_transport,
    classify_warn,
    make_event,
    parse_line,
    split_line,
)
from fabricscope.nccl.log.place import Placer, catalogued_id, placed_event, quoted, segments
from fabricscope.nccl.messages import catalogue

MAX_WARN_GROUPS = 256  # distinct WARN signatures kept; the rest are counted under "other"
MAX_MESSAGES = 1024
_DECODED = frozenset(
    {"completion_error", "verbs_error", "async_event"}
)  # distinct catalogue entries (and fallback texts) counted
MAX_EXAMPLES = 8  # rank labels kept per group for the report (all are counted)
_DIGITS = re.compile(r"0x[0-9a-fA-F]+|\d+")
_PLUGIN_INIT = re.compile(r"net\.cc:\d+")  # src/net.cc (2.12-2.19), not transport/net.cc


@dataclass
class ProcessState:
    """What one NCCL process (host, pid) said about itself."""

    host: str | None
    pid: int | None
    file: str | None = None
    version: str | None = None
    network: str | None = None
    net_name: str | None = None  # net module that listed RDMA devices ("IB")
    net_devices: dict[int, tuple[str, int, str]] = field(
        default_factory=dict
    )  # index -> (name, port, IB/RoCE)
    relaxed_ordering: bool = False
    oob: str | None = None
    socket_interfaces: list[tuple[str, str]] = field(default_factory=list)
    bootstrap: list[tuple[str, str]] = field(default_factory=list)
    no_device: set[str] = field(default_factory=set)
    no_verbs: bool = False  # "Failed to open libibverbs.so": rdma-core missing
    gdr_hca: dict[str, tuple[bool, str | None, str | None]] = field(
        default_factory=dict
    )  # hca -> (enabled, detail, module)
    env: dict[str, str] = field(default_factory=dict)
    qp_gids: dict[int, str | None] = field(default_factory=dict)  # GID index -> GID used by QPs
    net_plugin: str | None = None  # what NCCL said about its network plugin ("loaded X", "internal")


@dataclass(eq=False)
class RankState:
    """Per (host, pid, cudaDev): one GPU's rank and the transports its channels used.

    Compared and hashed by identity: there is one per (host, pid, cudaDev)."""

    host: str | None
    pid: int | None
    cuda_dev: int | None
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    init_started: int = 0
    init_completed: int = 0
    destroyed: int = 0
    aborted: int = 0
    transports: dict[str, int] = field(default_factory=dict)  # label -> channel lines
    tclasses: dict[str, int] = field(default_factory=dict)
    net_devs: set[int] = field(default_factory=set)
    ring_gdr: int | None = None  # "Connected all rings, use ring PXN x GDR y"
    warns: dict[str, int] = field(default_factory=dict)  # WARN kind -> count
    last_result: int | None = None  # last non-zero ncclResult seen propagating on this rank
    recovered: dict[int, str] = field(default_factory=dict)  # code -> what NCCL did instead
    rank_from_nranks: int = -1  # nranks of the communicator that set rank (the largest names it)

    def add_channel(self, via: str, local_rank: int | None, count: int = 1) -> None:
        """Count ``count`` channel lines of this rank over ``via`` (the one place they are booked);
        ``local_rank`` is the rank the first of them names as this GPU's."""
        label, tclass, _net, net_dev, _gdr = classify_transport(via)
        transports = self.transports
        transports[label] = transports.get(label, 0) + count
        tclasses = self.tclasses
        tclasses[tclass] = tclasses.get(tclass, 0) + count
        if net_dev is not None and len(self.net_devs) < 64:
            self.net_devs.add(net_dev)
        if self.rank is None and local_rank is not None:
            self.rank = local_rank

    @property
    def label(self) -> str:
        rank = f"rank {self.rank}" if self.rank is not None else f"dev {self.cuda_dev}"
        return f"{self.host or '?'}:{self.pid} {rank}"


@dataclass
class WarnGroup:
    """All WARN lines with one signature (kind plus normalised detail)."""

    kind: str
    key: str
    count: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    example: str = ""
    source: str | None = None
    first_timestamp: str | None = None
    ranks: set[tuple[Any, ...]] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    message_id: str | None = None  # its entry in the message catalogue (fabricscope.nccl.messages)
    next: str | None = None  # what NCCL's source does after printing it (returns_error, falls_back, ...)


@dataclass
class ErrorChain:
    """``-> N`` return codes propagating up one thread after (or without) a WARN."""

    code: int
    first_site: str
    cause: str | None  # key of the WarnGroup that preceded it on the same thread
    count: int = 0
    ranks: set[tuple[Any, ...]] = field(default_factory=set)
    threads: set[str] = field(default_factory=set)
    recovered_by: str | None = None  # what NCCL did instead, when the error did not reach the API


@dataclass
class FileStats:
    name: str
    bytes: int = 0
    lines: int = 0
    nccl_lines: int = 0
    binary_lines: int = 0  # lines with NUL bytes or undecodable data
    overlong_lines: int = 0
    truncated: bool = False  # ended in the middle of a line
    placed_lines: int = 0  # lines without NCCL's header whose message the catalogue or a rule's excerpt knows
    unrecognised_lines: int = 0  # non-blank lines neither NCCL's nor in the catalogue

    @property
    def recognised(self) -> int:
        return self.nccl_lines + self.placed_lines


class LogAggregator:
    """Feed NCCL log lines one at a time; memory grows with ranks and distinct warnings, not lines.

    ``expect`` is what the user expects inter-node traffic to use: ``"rdma"``, ``"socket"`` or
    ``"auto"`` (decide from the evidence in the log)."""

    def __init__(self, expect: str = "auto") -> None:
        if expect not in ("auto", "rdma", "socket"):
            raise ValueError("expect must be auto, rdma or socket")
        self.expect = expect
        self.processes: dict[tuple[Any, ...], ProcessState] = {}
        self.ranks: dict[tuple[Any, ...], RankState] = {}
        self.warn_groups: dict[tuple[str, str], WarnGroup] = {}
        self.chains: dict[tuple[Any, ...], ErrorChain] = {}
        self.files: list[FileStats] = []
        self.events: dict[str, int] = {}
        self.versions: dict[str, int] = {}
        self.plugin_skips: dict[str, int] = {}  # "net.cc:79" -> network modules that declined to start
        self.messages: dict[str, int] = {}  # catalogue id -> lines (WARN and placed lines; capped)
        self.torch: dict[str, Any] = {"timeouts": 0, "ops": {}, "api_errors": {}, "messages": {}}
        self.fallbacks: dict[str, int] = {}  # what NCCL used instead, in its words -> times
        self.excerpts: dict[str, int] = {}  # a verdict rule's excerpt (log.around) -> lines quoting it
        self.placer = Placer()  # lines without NCCL's header (log.place)
        self._open: dict[
            tuple[Any, ...], tuple[dict[Any, Any], set[Any]]
        ] = {}  # (host, pid) -> (chains by id, ranks) not yet judged
        self._thread_cause: dict[
            tuple[Any, ...], tuple[Any, ...] | None
        ] = {}  # thread -> (warn key) of its latest WARN
        self._thread_chain: dict[tuple[Any, ...], ErrorChain | None] = {}
        self._file: FileStats | None = None
        # Public for the batch path (log.batch), with rank_of(): the latest header's process, plain INFO lines.
        self.last_key: tuple[Any, ...] | None = None  # (host, pid) of the latest header line in this file
        self._pending_version: str | None = None
        self.info_lines = 0
        self._batch: BatchReader | None = None  # the caches of feed_batch

    # ----- files ------------------------------------------------------------------------
    def begin_file(self, name: str) -> FileStats:
        """Start a new input: bare ``NCCL version`` lines attach to processes of this file only."""
        stats = FileStats(name=name)
        self.files.append(stats)
        self._file = stats
        self.last_key = None
        self._pending_version = None
        return stats

    def _stats(self) -> FileStats:
        if self._file is None:
            return self.begin_file("<lines>")
        return self._file

    def drop_caches(self) -> None:  # after the file is read: not worth pickling back
        self.flush()
        self._batch = None
        self.placer = Placer()

    def flush(self) -> None:
        """Book the channel lines the batch path has counted but not yet put on their ranks."""
        if self._batch is not None:
            self._batch.flush()

    def end_file(self, truncated: bool = False) -> None:
        self.flush()
        if self._file is not None:
            self._file.truncated = truncated
        if self._pending_version is not None:
            self.versions.setdefault(self._pending_version, 0)
        self._pending_version = None
        self.last_key = None

    # ----- feeding ----------------------------------------------------------------------
    def feed(self, line: str) -> LogEvent | None:
        """Account for one line and return its event (None when the line is not NCCL's).

        For bulk input, :meth:`feed_batch` (what :func:`~fabricscope.nccl.log.read.feed_file` uses)
        is faster: it skips building events for lines the verdicts do not need."""
        stats = self._stats()
        stats.lines += 1
        if len(line) > MAX_LINE_CHARS:  # dropped whole, whatever it holds (as feed_file does)
            stats.overlong_lines += 1
            return None
        if "\x00" in line or "\ufffd" in line:
            stats.binary_lines += 1
        event = parse_line(line)
        if event is None:
            return self.feed_unheaded(line, stats)
        stats.nccl_lines += 1
        self.feed_event(event)
        return event

    def feed_batch(self, lines: list[str], stats: FileStats | None = None) -> None:
        """Feed many lines (already counted in ``stats.lines``): the fast path of ``feed_file``.

        Same result as :meth:`feed` line by line; see :mod:`fabricscope.nccl.log.batch` for how."""
        if self._batch is None:
            self._batch = BatchReader(self)
        self._batch.feed(lines, stats or self._stats())

    def feed_chunk(self, body: bytes, lines: int, stats: FileStats | None = None) -> None:
        """Feed ``lines`` whole lines of ASCII, joined by newlines, without NUL or overlong lines
        (already counted in ``stats.lines``): the fastest path of ``feed_file``; same result as
        :meth:`feed_batch` of ``body.split(b"\\n")``."""
        if self._batch is None:
            self._batch = BatchReader(self)
        self._batch.feed_chunk(body, lines, stats or self._stats())

    def feed_line(self, line: str, stats: FileStats) -> tuple[Header, str] | None:
        """Account for one line already counted in ``stats.lines``.

        Returns the line's header and event kind when it is an NCCL line with a header, else None."""
        split = split_line(line)
        if split is None:
            event = bare_version(line)
            if event is not None:
                stats.nccl_lines += 1
                self.feed_event(event)
            else:
                self.feed_unheaded(line, stats)
            return None
        header, level, msg = split
        stats.nccl_lines += 1
        kind, data = classify_warn(msg) if level == "WARN" else classify_info(msg)
        if data is None:  # plain info: remember the process, nothing else
            self.info_lines += 1
            key = (header.host, header.pid)
            if key not in self.processes:
                self._new_process(key)
            self.last_key = key
        else:
            self.feed_event(make_event(header, level, msg, kind, data))
        return header, kind

    def feed_unheaded(self, line: str, stats: FileStats) -> LogEvent | None:
        """A line without NCCL's header (already counted in ``stats.lines``): booked as the NCCL,
        PyTorch or plugin message it quotes (:mod:`fabricscope.nccl.log.place`), or counted as
        not recognised."""
        line = line.rstrip()
        if not line.strip():
            return None
        parts = segments(line)  # several NCCL lines pasted as one
        if parts is not None:
            for part in parts:
                self.feed_unheaded(part, stats)
            return None
        placed, shape = self.placer(line)
        if placed is None:
            if shape and self._quote(line):  # a rule's excerpt: NCCL's words as another release put them
                stats.placed_lines += 1
                return None
            stats.unrecognised_lines += 1
            if shape:
                self.placer.remember(shape)
            return None
        stats.placed_lines += 1
        self._quote(placed.text)
        if not placed.text:  # "Last error:" alone: NCCL's text follows
            return None
        event = placed_event(placed)
        self.feed_event(event)
        return event

    def _quote(self, text: str) -> bool:  # the verdict rules' excerpts (other releases' wordings)
        found = quoted(text)
        for excerpt in found:
            self.excerpts[excerpt] = self.excerpts.get(excerpt, 0) + 1
        return bool(found)

    def _count_message(self, message_id: str) -> None:
        if message_id in self.messages or len(self.messages) < MAX_MESSAGES:
            self.messages[message_id] = self.messages.get(message_id, 0) + 1

    def feed_event(self, event: LogEvent) -> None:
        kind = event.kind
        self.events[kind] = self.events.get(kind, 0) + 1
        if kind == "info":
            if event.host is not None or event.pid is not None:
                self._process(event)
            return
        if kind == "version":
            self._version(event)
            return
        proc = self._process(event)
        handler = _EVENT_HANDLERS.get(kind)
        if handler is not None:
            handler(self, proc, event)
        elif event.level == "WARN":
            self._warn(event, proc)
            if "Failed to open libibverbs" in event.message:  # a WARN up to 2.1x, INFO since
                proc.no_verbs = True

    # ----- one handler per event kind -------------------------------------------------------
    def _on_channel(self, proc: ProcessState, event: LogEvent) -> None:
        self.flush()  # the batch path's earlier channel lines first, as if booked one by one
        rank = self._rank(event)
        if rank is not None:
            rank.add_channel(event.data["via"], event.data["local_rank"])

    def _on_network(self, proc: ProcessState, event: LogEvent) -> None:
        proc.network = event.data["name"]

    def _on_net_devices(self, proc: ProcessState, event: LogEvent) -> None:
        data = event.data
        proc.net_name = data["net"]
        if not data.get("partial"):
            proc.net_devices = {}
        for index, name, port, link in data["devices"][:64]:
            proc.net_devices[index] = (name, port, link)
        proc.relaxed_ordering = proc.relaxed_ordering or data["relaxed_ordering"]
        proc.oob = data["oob"] or proc.oob

    def _on_socket_devices(self, proc: ProcessState, event: LogEvent) -> None:
        proc.socket_interfaces = event.data["interfaces"][:32]

    def _on_bootstrap(self, proc: ProcessState, event: LogEvent) -> None:
        proc.bootstrap = event.data["interfaces"][:32]

    def _on_no_verbs(self, proc: ProcessState, event: LogEvent) -> None:
        proc.no_verbs = True

    def _on_no_device(self, proc: ProcessState, event: LogEvent) -> None:
        proc.no_device.add(event.data["net"])

    def _on_gdr(self, proc: ProcessState, event: LogEvent) -> None:
        data = event.data
        name = data["hca"] or f"#{data['hca_index']}"
        if len(proc.gdr_hca) < 64 or name in proc.gdr_hca:
            proc.gdr_hca[name] = (data["enabled"], data["detail"], data["net"])

    def _on_env(self, proc: ProcessState, event: LogEvent) -> None:
        name = event.data["name"]
        if len(proc.env) < 256 or name in proc.env:
            proc.env[name] = event.data["value"][:256]

    def _on_comm(self, proc: ProcessState, event: LogEvent) -> None:
        rank = self._rank(event)
        if rank is None:
            return
        data = event.data
        nranks = data["nranks"]
        if nranks > rank.rank_from_nranks:
            rank.rank, rank.nranks, rank.rank_from_nranks = data["rank"], nranks, nranks
            if data["nnodes"] is not None:
                rank.nnodes = data["nnodes"]
        phase = data["phase"]
        if phase == "start":
            rank.init_started += 1
        elif phase == "complete":
            rank.init_completed += 1
            if rank.last_result:  # an error on the way, yet init completed: it did not reach the API
                rank.recovered.setdefault(rank.last_result, "communicator init completed after it")
                rank.last_result = None
        elif phase == "destroy":
            rank.destroyed += 1
        elif phase == "abort":
            rank.aborted += 1

    def _on_torch(self, proc: ProcessState, event: LogEvent) -> None:  # a watchdog timeout, an API error
        data, torch = event.data, self.torch
        if data["id"] != "nccl-tests":
            self._count_message(data["id"])
        torch["messages"][data["id"]] = torch["messages"].get(data["id"], 0) + 1
        if data.get("kind") == "timeout":
            torch["timeouts"] += 1
            torch["ops"][data["op"]] = torch["ops"].get(data["op"], 0) + 1
            torch.setdefault("timeout_ms", data["timeout_ms"])
        elif data.get("kind") == "api_error":
            code = data["code"]
            torch["api_errors"][code] = torch["api_errors"].get(code, 0) + 1
            if data.get("version"):
                self.versions.setdefault(data["version"], 0)

    def _on_catalogued(self, proc: ProcessState, event: LogEvent) -> None:
        if event.data.get("message_id"):
            self._count_message(event.data["message_id"])

    def _on_net_plugin(self, proc: ProcessState, event: LogEvent) -> None:
        """Which network plugin the process loaded; when NCCL says it went another way ("Using
        internal network plugin"), the errors just before it on this process did not reach the API."""
        if event.data.get("message_id"):
            self._count_message(event.data["message_id"])
        if event.data.get("plugin") is not None:
            proc.net_plugin = event.data["plugin"]
        if event.data.get("next") == "falls_back":
            self._recover(proc, event.message)

    def _recover(self, proc: ProcessState, instead: str) -> None:
        text = instead[:200]
        if len(self.fallbacks) < MAX_MESSAGES or text in self.fallbacks:
            self.fallbacks[text] = self.fallbacks.get(text, 0) + 1
        chains, ranks = self._open.pop((proc.host, proc.pid), ({}, ()))
        for chain in chains.values():
            chain.recovered_by = chain.recovered_by or text
        for rank in ranks:
            if rank.last_result:
                rank.recovered.setdefault(rank.last_result, text)
                rank.last_result = None

    def _on_connected(self, proc: ProcessState, event: LogEvent) -> None:
        rank = self._rank(event)
        if rank is not None and event.data["gdr"] is not None:
            rank.ring_gdr = event.data["gdr"]

    def _on_qp(self, proc: ProcessState, event: LogEvent) -> None:
        if len(proc.qp_gids) < 16:
            proc.qp_gids[event.data["gid_index"]] = event.data["gid"]

    def _on_retcode(self, proc: ProcessState, event: LogEvent) -> None:
        self._retcode(event)

    # ----- helpers ------------------------------------------------------------------------
    def _new_process(self, key: tuple[Any, ...]) -> ProcessState:
        proc = ProcessState(host=key[0], pid=key[1], file=self._stats().name)
        self.processes[key] = proc
        if self._pending_version is not None:
            proc.version = self._pending_version
            self._pending_version = None
        return proc

    def _process(self, event: LogEvent) -> ProcessState:
        key = (event.host, event.pid)
        proc = self.processes.get(key)
        if proc is None:
            proc = self._new_process(key)
        self.last_key = key
        return proc

    def _rank(self, event: LogEvent) -> RankState | None:
        if event.cuda_dev is None:
            return None
        return self.rank_of(event)

    def rank_of(self, who: LogEvent | Header) -> RankState:
        key = (who.host, who.pid, who.cuda_dev)
        rank = self.ranks.get(key)
        if rank is None:
            rank = self.ranks[key] = RankState(host=who.host, pid=who.pid, cuda_dev=who.cuda_dev)
        return rank

    def _version(self, event: LogEvent) -> None:
        version = event.data["version"]
        self.versions[version] = self.versions.get(version, 0) + 1
        if event.host is not None or event.pid is not None:
            self._process(event).version = version
        elif self.last_key is not None and self.last_key in self.processes:
            last = self.processes[self.last_key]
            if last.version is None:
                last.version = version
        else:
            self._pending_version = version

    def _warn(self, event: LogEvent, proc: ProcessState) -> None:
        kind, data = event.kind, event.data
        if kind == "completion_error":
            key = f"status {data['status']}"
        elif kind == "verbs_error":
            key = f"{data['call']}: {data['error']}"
        else:
            key = _DIGITS.sub("N", event.message)[:160]
        gkey = (kind, key)
        group = self.warn_groups.get(gkey)
        if group is None:
            if len(self.warn_groups) >= MAX_WARN_GROUPS - 1:
                gkey = ("warn", "(other warnings)")
                group = self.warn_groups.get(gkey)
            if group is None:
                # Completion, verbs and async-event WARNs are decoded by their own patterns and always
                # return the error: no catalogue lookup (nor its 35 ms load) for them.
                found = data.get("message_id") or (None if kind in _DECODED else catalogued_id(event.message))
                group = WarnGroup(
                    kind=gkey[0],
                    key=gkey[1],
                    data=dict(data),
                    example=event.message[:500],
                    source=event.source,
                    first_timestamp=event.timestamp,
                    message_id=found,
                    next=data.get("next") or (catalogue().messages[found].next if found else None),
                )
                self.warn_groups[gkey] = group
                self._quote(event.message)
        group.count += 1
        if group.message_id:
            self._count_message(group.message_id)
        if group.next == "falls_back":
            self._recover(proc, event.message)
        rank_key = (event.host, event.pid, event.cuda_dev)
        group.ranks.add(rank_key)
        if event.host:
            group.hosts.add(event.host)
        rank = self._rank(event)
        if rank is not None:
            rank.warns[kind] = rank.warns.get(kind, 0) + 1
        thread = (event.host, event.pid, event.tid)
        self._thread_cause[thread] = gkey
        self._thread_chain[thread] = None

    def _retcode(self, event: LogEvent) -> None:
        code = event.data["code"]
        if code == 0:
            return
        thread = (event.host, event.pid, event.tid)
        site = event.data["site"]
        if _PLUGIN_INIT.fullmatch(site) and self._thread_cause.get(thread) is None:
            # A network module's init() declining (a disabled plugin): NCCL marks it disabled and tries the
            # next one (src/net.cc:79 and :239 at v2.18.3-1; plugin/net.cc:208 at v2.30.7-1). Not an error.
            self.plugin_skips[site] = self.plugin_skips.get(site, 0) + 1
            return
        chain = self._thread_chain.get(thread)
        if chain is None or chain.code != code:
            cause = self._thread_cause.get(thread)
            ckey = (code, cause)
            chain = self.chains.get(ckey)
            if chain is None:
                chain = ErrorChain(
                    code=code, first_site=event.data["site"], cause=cause and f"{cause[0]}|{cause[1]}"
                )
                self.chains[ckey] = chain
            chain.count += 1
            self._thread_chain[thread] = chain
        rank_key = (event.host, event.pid, event.cuda_dev)
        chain.ranks.add(rank_key)
        if event.data["thread"] and len(chain.threads) < 8:
            chain.threads.add(event.data["thread"])
        rank = self._rank(event)
        warned = self.warn_groups.get(self._thread_cause.get(thread) or ("", ""))
        if (
            warned is not None and warned.next == "falls_back"
        ):  # the WARN before it says NCCL went another way
            chain.recovered_by = chain.recovered_by or warned.example[:200]
            if rank is not None:
                rank.recovered.setdefault(code, warned.example[:200])
            return
        chains, ranks = self._open.setdefault((event.host, event.pid), ({}, set()))
        chains[id(chain)] = chain
        if rank is not None:
            rank.last_result = code
            ranks.add(rank)

    def event_counts(self) -> dict[str, int]:
        """Lines seen per event kind (plain INFO lines under "info")."""
        counts = dict(self.events)
        counts["info"] = counts.get("info", 0) + self.info_lines
        return dict(sorted(counts.items()))


_EVENT_HANDLERS = {
    name[4:]: method for name, method in vars(LogAggregator).items() if name.startswith("_on_")
}
