"""PyTorch Flight Recorder dumps (pickle and JSON, PyTorch 2.5 and later) read as plain data.

The format is PyTorch's (torch/distributed/flight_recorder and the "Flight Recorder for debugging
stuck jobs" tutorial): a dict with ``version``, ``pg_config`` (group name -> desc and ranks),
``pg_status`` (group -> last enqueued / started / completed collective sequence id; strings in
the JSON form, ints in the pickle) and ``entries`` (one per collective or p2p op). The pickle is
read through :mod:`fabricscope.triage.safe_pickle` only; torch itself is never needed.
"""

from __future__ import annotations

import json
import os
import re
from operator import itemgetter
from pathlib import Path
from typing import Any

from fabricscope.triage.model import Entry, GroupStatus, RankDump, Skipped
from fabricscope.triage.safe_pickle import HostilePickle, loads_plain

MAX_DUMP_BYTES = 256 * 2**20  # a 20,000-entry dump with stack frames is a few MB
MAX_ENTRIES = 100_000  # per dump; PyTorch's default ring buffer holds 2,000 (TORCH_FR_BUFFER_SIZE)
PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")

_FIELDS = (
    "collective_seq_id",
    "profiling_name",
    "input_sizes",
    "output_sizes",
    "input_dtypes",
    "state",
    "time_created_ns",
    "time_discovered_started_ns",
    "time_discovered_completed_ns",
)
_ALL = itemgetter(*_FIELDS)
_RANK_WORD = re.compile(r".*rank[_\-.]?(\d{1,7})(?:\D.*)?\Z", re.IGNORECASE | re.DOTALL)
_TRAILING = re.compile(r".*?(\d{1,7})\Z", re.DOTALL)


def rank_from_name(name: str) -> int | None:
    """The rank a dump's file name carries: ``...rank_3`` / ``rank3.json`` / ``nccl_trace_rank_3.host``
    (PyTorch appends the rank to TORCH_NCCL_DEBUG_INFO_TEMP_FILE; users add host names, pytorch#140879),
    else the digits that end the stem."""
    stem = name.removesuffix(".pkl").removesuffix(".pickle").removesuffix(".json")
    match = _RANK_WORD.match(stem) or _TRAILING.match(stem)
    return int(match.group(1)) if match else None


def looks_like_dump(head: bytes) -> bool:
    """A pickle (protocol 2+) or a JSON object that names Flight Recorder keys in its first bytes."""
    if head.startswith(PICKLE_MAGIC):
        return True
    text = head.lstrip()[:4096]
    return text.startswith(b"{") and (
        b'"entries"' in text
        or b'"pg_config"' in text
        or b'"pg_status"' in text
        or b'"comm_lib_version"' in text
    )


def read_dump(
    path: Path, rank: int | None = None, host: str | None = None, *, header_only: bool = False
) -> RankDump | Skipped:
    """One rank's dump, or the reason it is left out; never raises for bad content. With
    ``header_only`` the entries are not read when the counters can be had without them."""
    try:
        size = path.stat().st_size
        if size == 0:
            return Skipped(str(path), "empty file")
        if size > MAX_DUMP_BYTES:
            return Skipped(str(path), f"{size} bytes, over the {MAX_DUMP_BYTES} byte cap")
        data = path.read_bytes()
        mtime = path.stat().st_mtime
    except OSError as exc:
        return Skipped(str(path), f"unreadable: {exc.strerror or exc}")
    if rank is None:
        rank = rank_from_name(path.name)
    if rank is None:
        return Skipped(str(path), "no rank in the file name (PyTorch names dumps <prefix><rank>)")
    dump = (parse_header(data, rank, str(path)) if header_only else None) or parse_bytes(
        data, rank, str(path)
    )
    if isinstance(dump, RankDump):
        dump.host, dump.mtime = host, mtime
    return dump


def parse_bytes(data: bytes, rank: int, path: str = "<bytes>") -> RankDump | Skipped:
    """A dump from its bytes: pickle through the restricted reader, or JSON."""
    fmt = "pickle" if data.startswith(PICKLE_MAGIC) else "json"
    try:
        obj = loads_plain(data) if fmt == "pickle" else json.loads(data)
    except HostilePickle as exc:
        return Skipped(path, f"hostile pickle, not loaded: {exc}")
    except Exception as exc:  # a corrupt pickle fails in many ways (AttributeError, KeyError, ...)
        what = "truncated or corrupt" if fmt == "pickle" else "not valid JSON (truncated?)"
        return Skipped(path, f"{what}: {type(exc).__name__}")
    return from_object(obj, rank, path, fmt)


_PICKLED_ENTRIES_KEY = b"X\x07\x00\x00\x00entries"  # BINUNICODE "entries", as PyTorch's pickler writes it


def parse_header(data: bytes, rank: int, path: str = "<bytes>") -> RankDump | None:
    """version, pg_config and pg_status without the entries (the bulk of a dump), or None when the
    layout is not the one PyTorch writes (the caller then reads the whole dump).

    PyTorch pickles the top-level dict in the order version, pg_config, comm_lib_version,
    pg_status, entries: the bytes before the ``entries`` key, closed with SETITEMS and STOP, are
    a complete pickle of the rest. Its JSON form sorts keys, so pg_config and pg_status follow
    the entries: each is decoded where it starts."""
    try:
        if data.startswith(PICKLE_MAGIC):
            cut = data.find(_PICKLED_ENTRIES_KEY)
            if cut <= 0:
                return None
            obj = loads_plain(data[:cut] + b"u.")
        else:
            obj = {}
            decoder = json.JSONDecoder()
            text = data.decode("utf-8")
            for key in ("version", "comm_lib_version", "pg_config", "pg_status"):
                at = text.rfind(f'"{key}":')
                if at < 0:
                    return None
                start = at + len(key) + 3
                while text[start] in " \t\r\n":
                    start += 1
                obj[key] = decoder.raw_decode(text, start)[0]
    except Exception:  # anything odd: the caller reads the whole dump and names what is wrong
        return None
    if not isinstance(obj, dict) or "version" not in obj or not obj.get("pg_status") or "entries" in obj:
        return None
    obj["entries"] = []
    dump = from_object(obj, rank, path, "pickle" if data.startswith(PICKLE_MAGIC) else "json")
    if isinstance(dump, RankDump):
        dump.header_only = True
        return dump
    return None


def load_entries(dump: RankDump) -> RankDump | Skipped:
    """The whole dump behind a header-only one (same rank, host and file time)."""
    full = read_dump(Path(dump.path), dump.rank, dump.host)
    if isinstance(full, RankDump):
        full.mtime = dump.mtime
    return full


def from_object(obj: Any, rank: int, path: str, fmt: str) -> RankDump | Skipped:
    """Check the shape PyTorch documents and keep what the verdict needs."""
    if not isinstance(obj, dict) or not isinstance(obj.get("entries", []), list) or "version" not in obj:
        return Skipped(path, "not a Flight Recorder dump (no version/entries)")
    dump = RankDump(
        rank=rank,
        path=path,
        fmt=fmt,
        version=str(obj.get("version")),
        comm_lib_version=str(obj.get("comm_lib_version") or ""),
    )
    try:
        _groups(dump, obj.get("pg_config") or {}, obj.get("pg_status") or {})
        entries = obj.get("entries") or []
        if len(entries) > MAX_ENTRIES:
            dump.notes.append(f"{len(entries)} entries, only the newest {MAX_ENTRIES} read")
            entries = entries[-MAX_ENTRIES:]
        _entries(dump, entries)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        return Skipped(path, f"malformed Flight Recorder dump: {type(exc).__name__}: {str(exc)[:120]}")
    return dump


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    number = int(value)  # the JSON form writes the counters as strings
    return None if number < 0 else number  # -1: never (gloo does not record "started")


_RANKS_SEEN: dict[str, tuple[int, ...]] = {}  # every rank of a 4,096-rank job lists the same 4,096 members


def _members(ranks: Any) -> tuple[int, ...] | None:
    """pg_config's member list (a string in both forms), shared between dumps that list the same."""
    if isinstance(ranks, str):
        if (seen := _RANKS_SEEN.get(ranks)) is not None:
            return seen
        parsed = json.loads(ranks)
        if not isinstance(parsed, list):
            return None
        members = tuple(int(r) for r in parsed)
        if len(_RANKS_SEEN) < 256:
            _RANKS_SEEN[ranks] = members
        return members
    return tuple(int(r) for r in ranks) if isinstance(ranks, list) else None


def _groups(dump: RankDump, config: dict, status: dict) -> None:
    for name, cfg in config.items():
        group = GroupStatus(
            name=str(cfg.get("name", name)) if isinstance(cfg, dict) else str(name),
            desc=str(cfg.get("desc", "")) if isinstance(cfg, dict) else "",
            ranks=_members(cfg.get("ranks")) if isinstance(cfg, dict) else None,
        )
        dump.groups[group.name] = group
    for name, st in status.items():
        group = dump.groups.get(str(name))
        if group is None:
            # gloo's default group is configured under "" but counted under "0": one config, one status
            unnamed = [g for g in dump.groups.values() if not g.name]
            group = unnamed[0] if len(unnamed) == 1 and len(status) == 1 else GroupStatus(name=str(name))
            if group in unnamed:
                del dump.groups[""]
                group.name = str(name)
            dump.groups[group.name] = group
        group.last_enqueued = _int(st.get("last_enqueued_collective"))
        group.last_started = _int(st.get("last_started_collective"))
        group.last_completed = _int(st.get("last_completed_collective"))


def _entries(dump: RankDump, entries: list) -> None:
    """Collectives (not p2p) per group, oldest first, through one C-level itemgetter per entry."""
    for raw in entries:
        if raw.get("is_p2p"):
            continue
        pg = raw.get("process_group")
        name = str(pg[0]) if isinstance(pg, list | tuple) and pg else str(raw.get("pg_id", "0"))
        group = dump.groups.get(name)
        if group is None:
            group = dump.groups[name] = GroupStatus(
                name=name, desc=str(pg[1]) if isinstance(pg, list | tuple) and len(pg) > 1 else ""
            )
        try:
            seq, op, ins, outs, dtypes, state, created, started, completed = _ALL(raw)
        except KeyError:
            get = raw.get
            seq, op, ins, outs, dtypes, state, created, started, completed = (get(k) for k in _FIELDS)
        if type(seq) is not int:
            raise TypeError(f"collective_seq_id is {type(seq).__name__}")
        group.entries.append(
            Entry(
                seq,
                str(op),
                ins,
                outs,
                dtypes,
                str(state),
                created,
                started or None,
                completed or None,
                raw.get("duration_ms"),
            )
        )
    for group in dump.groups.values():
        group.entries.sort(key=itemgetter(0))
        if group.last_enqueued is None and group.entries:  # no pg_status: what the entries show
            group.last_enqueued = group.entries[-1].seq
            done = [e.seq for e in group.entries if e.state == "completed"]
            group.last_completed = max(done) if done else None


def file_mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
