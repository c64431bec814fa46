"""Find and read what a job left behind in the given files and directories (bounded walk).

Every file is classified by its first bytes, not its name: a Flight Recorder dump (pickle or
JSON), RAS output (text or JSON), or a text log (job stderr, NCCL log). Anything else is named
and left out; nothing here raises for bad content.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from fabricscope.errors import FabricscopeError
from fabricscope.triage.flight_recorder import (
    MAX_DUMP_BYTES,
    load_entries,
    looks_like_dump,
    rank_from_name,
    read_dump,
)
from fabricscope.triage.inspector_adapter import CollRecord, looks_like_inspector, read_records
from fabricscope.triage.joblog import LogEvidence, read_log
from fabricscope.triage.model import RankDump, Skipped
from fabricscope.triage.ras import RasSnapshot, looks_like_ras
from fabricscope.triage.ras import parse as parse_ras

FULL_READ_RANKS = 256  # up to this many ranks every dump is read whole
SAMPLE_RANKS = 8  # beyond it: the ranks whose counters differ from most, and this many of the rest
MAX_FULL_READS = 1024
MAX_FILES = 100_000
MAX_INSPECTOR = 2_000_000
MAX_DEPTH = 4
MAX_LOG_BYTES = 2 * 2**30
HEAD = 4096


@dataclass
class JobInputs:
    dumps: list[RankDump] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    ras: list[RasSnapshot] = field(default_factory=list)
    logs: LogEvidence = field(default_factory=LogEvidence)
    hidden: int = 0  # dot files (a writer's temporary files) not read
    entries_read: int = 0  # dumps read whole (the others: counters only)
    inspector: list[CollRecord] = field(default_factory=list)


def _files(root: Path) -> list[tuple[Path, Path]]:
    if root.is_file():
        return [(root, root.parent)]
    if not root.is_dir():
        raise FabricscopeError(f"{root}: no such file or directory")
    found: list[tuple[Path, Path]] = []
    base_depth = len(root.parts)
    for folder, dirs, names in os.walk(root, followlinks=False):
        depth = len(Path(folder).parts) - base_depth
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < MAX_DEPTH else []
        for name in sorted(names):
            found.append((Path(folder) / name, root))
            if len(found) > MAX_FILES:
                raise FabricscopeError(
                    f"{root}: more than {MAX_FILES} files; point at the job's dump directory"
                )
    return found


def _host_for(path: Path, root: Path, host_map: dict[int, str], rank: int | None) -> str | None:
    """A host for a dump: the --host map, else the folder it sits in below the given directory
    (dumps gathered per node: DIR/<host>/<prefix><rank>)."""
    if rank is not None and rank in host_map:
        return host_map[rank]
    return path.parent.name if path.parent != root else None


def read_one(path: Path, root: Path, inputs: JobInputs, host_map: dict[int, str]) -> None:
    if path.name.startswith("."):
        inputs.hidden += 1
        return
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD)
    except OSError as exc:
        inputs.skipped.append(Skipped(str(path), f"unreadable: {exc.strerror or exc}"))
        return
    if not head:
        inputs.skipped.append(Skipped(str(path), "empty file"))
    elif looks_like_dump(head):
        rank = rank_from_name(path.name)
        got = read_dump(path, rank, _host_for(path, root, host_map, rank), header_only=True)
        (inputs.dumps if isinstance(got, RankDump) else inputs.skipped).append(got)  # type: ignore[arg-type]
    elif b"\x00" in head:
        inputs.skipped.append(Skipped(str(path), "binary, and not a Flight Recorder dump (foreign file)"))
    else:
        _read_text(path, head, inputs)


def _read_text(path: Path, head: bytes, inputs: JobInputs) -> None:
    text_head = head.decode("utf-8", "replace")
    if looks_like_inspector(text_head):
        with path.open(encoding="utf-8", errors="replace") as lines:
            inputs.inspector.extend(read_records(lines)[: MAX_INSPECTOR - len(inputs.inspector)])
        return
    if looks_like_ras(text_head):
        if path.stat().st_size > MAX_DUMP_BYTES:
            inputs.skipped.append(Skipped(str(path), "RAS output over the size cap"))
            return
        snap = parse_ras(path.read_bytes(), str(path))
        if snap is None:
            inputs.skipped.append(Skipped(str(path), "looks like RAS output but is not (truncated?)"))
        else:
            inputs.ras.append(snap)
        return
    if path.stat().st_size > MAX_LOG_BYTES:
        inputs.skipped.append(Skipped(str(path), f"log over {MAX_LOG_BYTES} bytes"))
        return
    with path.open(encoding="utf-8", errors="replace") as lines:
        inputs.logs.merge(read_log(lines, str(path)))


def collect(paths: list[Path], host_map: dict[int, str] | None = None) -> JobInputs:
    inputs = JobInputs()
    for root in paths:
        for path, base in _files(root):
            read_one(path, base, inputs, host_map or {})
    seen: dict[int, RankDump] = {}
    for dump in sorted(inputs.dumps, key=lambda d: (d.rank, -(d.mtime or 0))):
        if dump.rank in seen:
            inputs.skipped.append(
                Skipped(
                    dump.path, f"a second dump for rank {dump.rank} (kept the newer {seen[dump.rank].path})"
                )
            )
        else:
            seen[dump.rank] = dump
    inputs.dumps = read_entries(list(seen.values()), inputs)
    inputs.ras.sort(key=lambda s: (os.path.getmtime(s.source) if os.path.exists(s.source) else 0, s.source))
    return inputs


def _counters(dump: RankDump) -> tuple:
    return tuple(sorted((name, g.last_enqueued, g.last_completed) for name, g in dump.groups.items()))


def read_entries(dumps: list[RankDump], inputs: JobInputs) -> list[RankDump]:
    """Entries for every rank of a small job; for a large one, for the ranks whose counters differ
    from what most ranks show (the suspects) and a sample of the rest (the reference): a verdict
    compares the suspects' collectives with the majority's, and 4,096 whole dumps would take
    minutes to unpickle. The document says how many were read whole."""
    if len(dumps) <= FULL_READ_RANKS:
        wanted = {d.rank for d in dumps}
    else:
        common: dict[tuple, list[int]] = {}
        for d in dumps:
            common.setdefault(_counters(d), []).append(d.rank)
        majority = max(common.values(), key=len)
        outliers = [d.rank for d in dumps if d.rank not in set(majority)]
        wanted = set(outliers[: MAX_FULL_READS - SAMPLE_RANKS]) | set(majority[:SAMPLE_RANKS])
    out = []
    for d in dumps:
        if d.rank in wanted and d.header_only:
            full = load_entries(d)
            if isinstance(full, Skipped):
                inputs.skipped.append(full)
                continue
            d = full
        out.append(d)
    inputs.entries_read = sum(1 for d in out if not d.header_only)
    return out
