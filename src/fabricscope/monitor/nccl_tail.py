"""Follow NCCL logs as they are written, like ``tail -F``, and count what matters.

Rotation-safe: a path whose inode changes (logrotate ``create``, a new job writing the same
NCCL_DEBUG_FILE name) is drained to its end before the new file is read from its start; a file
that shrinks (``copytruncate``) is read again from the start; a file that disappears is drained and
forgotten. Files present when the exporter starts are read from their end (their past is not news;
``from_start`` changes that); files that appear later are read from their start.

Each line goes through :func:`fabricscope.nccl.log.parse.parse_line`, the NCCL helper's per-line
event API. Memory is bounded: a line longer than ``MAX_LINE_BYTES`` is dropped (and counted),
at most ``MAX_FILES`` files are followed, and each poll reads at most ``MAX_READ_PER_POLL`` bytes
per file (the rest is read on the next poll).
"""

from __future__ import annotations

import glob
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

MAX_LINE_BYTES = 64 * 1024
MAX_FILES = 256
MAX_READ_PER_POLL = 16 * 1024 * 1024
READ_CHUNK = 256 * 1024


@dataclass(frozen=True)
class NcclCounts:
    lines: int = 0
    warnings: dict[str, int] = field(default_factory=dict)  # WARN kind -> count
    socket_fallbacks: int = 0
    completion_errors: dict[int | None, int] = field(default_factory=dict)  # ibv_wc_status -> count
    files: int = 0
    rotations: int = 0
    dropped_lines: int = 0
    problems: tuple[tuple[str, str], ...] = ()  # (path or pattern, reason) from the last poll


@dataclass
class _Tracked:
    handle: BinaryIO
    dev: int
    ino: int
    offset: int
    partial: bytes = b""
    overlong: bool = False  # inside a line that is already too long: drop until its newline


def _default_parser() -> Callable[[str], Any]:
    from fabricscope.nccl.log.parse import parse_line

    return parse_line


class NcclLogTailer:
    def __init__(
        self,
        patterns: Iterable[str],
        *,
        from_start: bool = False,
        parse: Callable[[str], Any] | None = None,
        max_files: int = MAX_FILES,
    ) -> None:
        self.patterns = [os.path.expanduser(p) for p in patterns]
        self.from_start = from_start
        self.max_files = max_files
        self._parse = parse or _default_parser()
        self._tracked: dict[str, _Tracked] = {}
        self._first_poll = True
        self._lock = threading.Lock()  # guards the counters below (scrapes read them)
        self._poll_lock = threading.Lock()  # one poll at a time
        self._lines = 0
        self._warnings: Counter[str] = Counter()
        self._completions: Counter[int | None] = Counter()
        self._fallbacks = 0
        self._rotations = 0
        self._dropped = 0
        self._problems: tuple[tuple[str, str], ...] = ()

    # ----- reading ----------------------------------------------------------------------
    def poll(self) -> NcclCounts:
        """Look for new files and new lines once; returns the counts after this poll."""
        with self._poll_lock:
            problems: list[tuple[str, str]] = []
            paths = self._expand(problems)
            for path in [p for p in self._tracked if p not in paths]:
                self._drain_and_close(path)
            for path in paths:
                self._follow(path, problems)
            self._first_poll = False
            with self._lock:
                self._problems = tuple(problems)
        return self.snapshot()

    def close(self) -> None:
        with self._poll_lock:
            for tracked in self._tracked.values():
                tracked.handle.close()
            self._tracked.clear()

    def _expand(self, problems: list[tuple[str, str]]) -> list[str]:
        found: set[str] = set()
        for pattern in self.patterns:
            try:
                found.update(glob.glob(pattern, recursive=True))
            except OSError as exc:  # pragma: no cover - glob swallows most errors itself
                problems.append((pattern, exc.strerror or str(exc)))
        paths = sorted(found)
        if len(paths) > self.max_files:
            problems.append(
                (self.patterns[0], f"{len(paths)} files match; following the first {self.max_files}")
            )
            paths = paths[: self.max_files]
        return paths

    def _follow(self, path: str, problems: list[tuple[str, str]]) -> None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if path in self._tracked:
                self._drain_and_close(path)
            return
        except OSError as exc:
            problems.append((path, exc.strerror or str(exc)))
            return
        if not stat.S_ISREG(st.st_mode):
            return
        tracked = self._tracked.get(path)
        if tracked is not None and (st.st_dev, st.st_ino) != (tracked.dev, tracked.ino):
            self._drain_and_close(path)  # rotated: finish the old file, then start the new one
            self._count_rotation()
            tracked = None
            start_at_end = False
        else:
            start_at_end = self._first_poll and not self.from_start
        if tracked is None:
            try:
                handle = open(path, "rb")  # kept open across polls; closed in _drain_and_close
            except OSError as exc:
                problems.append((path, exc.strerror or str(exc)))
                return
            fst = os.fstat(handle.fileno())
            offset = fst.st_size if start_at_end else 0
            handle.seek(offset)
            tracked = _Tracked(handle, fst.st_dev, fst.st_ino, offset)
            self._tracked[path] = tracked
        elif st.st_size < tracked.offset:
            tracked.handle.seek(0)  # truncated in place (copytruncate)
            tracked.offset = 0
            tracked.partial = b""
            tracked.overlong = False
            self._count_rotation()
        try:
            self._read(tracked, MAX_READ_PER_POLL)
        except OSError as exc:
            problems.append((path, exc.strerror or str(exc)))

    def _drain_and_close(self, path: str) -> None:
        tracked = self._tracked.pop(path)
        try:
            self._read(tracked, MAX_READ_PER_POLL)
            if tracked.partial and not tracked.overlong:
                self._feed([tracked.partial])  # the last line of a finished file has no newline
        except OSError:
            pass
        finally:
            tracked.handle.close()

    def _read(self, tracked: _Tracked, budget: int) -> None:
        while budget > 0:
            chunk = tracked.handle.read(min(READ_CHUNK, budget))
            if not chunk:
                return
            budget -= len(chunk)
            tracked.offset += len(chunk)
            pieces = chunk.split(b"\n")
            complete: list[bytes] = []
            first = pieces[0]
            if tracked.overlong:
                if len(pieces) > 1:
                    tracked.overlong = False  # the too-long line ends here; it was counted as dropped
                    tracked.partial = b""
                    pieces = pieces[1:]
                else:
                    continue
            else:
                pieces[0] = tracked.partial + first
                tracked.partial = b""
            *lines, rest = pieces
            for line in lines:
                if len(line) > MAX_LINE_BYTES:
                    self._count_dropped()
                else:
                    complete.append(line)
            if len(rest) > MAX_LINE_BYTES:
                self._count_dropped()
                tracked.overlong = True
            else:
                tracked.partial = rest
            if complete:
                self._feed(complete)

    def _feed(self, lines: list[bytes]) -> None:
        warnings: Counter[str] = Counter()
        completions: Counter[int | None] = Counter()
        fallbacks = 0
        for raw in lines:
            event = self._parse(raw.decode("utf-8", errors="replace"))
            if event is None:
                continue
            kind = getattr(event, "kind", None)
            data = getattr(event, "data", None) or {}
            if getattr(event, "level", None) == "WARN":
                warnings[str(kind)] += 1
            if kind == "completion_error":
                status = data.get("status")
                completions[status if isinstance(status, int) else None] += 1
            elif kind == "network" and str(data.get("name", "")).lower() == "socket":
                fallbacks += 1
        with self._lock:
            self._lines += len(lines)
            self._warnings.update(warnings)
            self._completions.update(completions)
            self._fallbacks += fallbacks

    def _count_rotation(self) -> None:
        with self._lock:
            self._rotations += 1

    def _count_dropped(self) -> None:
        with self._lock:
            self._dropped += 1

    # ----- reporting --------------------------------------------------------------------
    def snapshot(self) -> NcclCounts:
        with self._lock:
            return NcclCounts(
                lines=self._lines,
                warnings=dict(self._warnings),
                socket_fallbacks=self._fallbacks,
                completion_errors=dict(self._completions),
                files=len(self._tracked),
                rotations=self._rotations,
                dropped_lines=self._dropped,
                problems=self._problems,
            )
