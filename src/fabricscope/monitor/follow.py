"""Follow files as they are written, like ``tail -F``, in bounded work: the one mechanism behind
the NCCL log follower (:mod:`.nccl_tail`) and the NCCL Inspector follower (:mod:`.inspector_tail`).

Rotation-safe: a path whose inode changes (logrotate ``create``, a new job writing the same name)
is drained to its end before the new file is read from its start; a file that shrinks
(``copytruncate``) is read again from the start; a file that disappears is drained and forgotten.
Files present when following starts are read from their end unless ``from_start``; files that
appear later are read from their start.

Bounded, because whoever can write the directory decides what is in it (a 1 TB sparse ``*.log``
is one ``truncate`` away): at most :data:`MAX_FILES` files, :data:`MAX_READ_PER_FILE` bytes per
file and :data:`MAX_READ_PER_POLL` bytes over all files in one poll (the poll starts at a
different file each time, so one busy file cannot starve the rest); a file further behind than
:data:`MAX_BACKLOG` jumps ahead to its last :data:`MAX_READ_PER_FILE` bytes and counts what it
skipped; a line longer than :data:`MAX_LINE_BYTES` is dropped and counted.
"""

from __future__ import annotations

import glob
import os
import stat
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any, BinaryIO

MAX_LINE_BYTES = 64 * 1024
MAX_FILES = 256
MAX_READ_PER_FILE = 4 * 1024 * 1024  # per poll (1 s): an NCCL INFO log at init writes well under this
MAX_READ_PER_POLL = 16 * 1024 * 1024  # per poll, every file together
MAX_BACKLOG = 64 * 1024 * 1024  # further behind than this: skip ahead instead of reading it all
READ_CHUNK = 256 * 1024


@dataclass(frozen=True)
class FollowStats:
    """The follower's own work, cumulative; ``problems`` are those of the last poll."""

    lines: int = 0
    files: int = 0
    rotations: int = 0
    dropped_lines: int = 0
    read_bytes: int = 0
    skipped_bytes: int = 0
    problems: tuple[tuple[str, str], ...] = ()

    def as_fields(self) -> dict[str, Any]:
        """These counts as keyword arguments for a tailer's counts class, which extends this one."""
        return {f.name: getattr(self, f.name) for f in fields(FollowStats)}


@dataclass
class _Tracked:
    handle: BinaryIO
    dev: int
    ino: int
    offset: int
    partial: bytes = b""
    overlong: bool = (
        False  # inside a line that is already too long (or cut by a skip): drop until its newline
    )


LineSink = Callable[[str, list[bytes]], None]  # (path, complete lines without their newline)


class FileFollower:
    """Follows every file matching ``patterns``; :meth:`poll` hands new complete lines to ``sink``."""

    def __init__(
        self,
        patterns: Iterable[str],
        sink: LineSink,
        *,
        from_start: bool = False,
        max_files: int = MAX_FILES,
        per_file: int = MAX_READ_PER_FILE,
        per_poll: int = MAX_READ_PER_POLL,
        backlog: int = MAX_BACKLOG,
    ) -> None:
        self.patterns = [os.path.expanduser(p) for p in patterns]
        self.sink = sink
        self.from_start = from_start
        self.max_files, self.per_file, self.per_poll, self.backlog = max_files, per_file, per_poll, backlog
        self._tracked: dict[str, _Tracked] = {}
        self._first_poll = True
        self._next = 0  # index of the file the next poll starts with
        self._lock = threading.Lock()  # guards the counters (scrapes read them)
        self._poll_lock = threading.Lock()  # one poll at a time
        self._stats = FollowStats()
        self._counts = {"lines": 0, "rotations": 0, "dropped_lines": 0, "read_bytes": 0, "skipped_bytes": 0}

    # ----- polling -------------------------------------------------------------------------
    def poll(self) -> FollowStats:
        """Look for new files and new lines once."""
        with self._poll_lock:
            problems: list[tuple[str, str]] = []
            paths = self._expand(problems)
            budget = self.per_poll
            for path in [p for p in self._tracked if p not in paths]:
                budget -= self._drain_and_close(path, min(budget, self.per_file))
            if paths:
                start = self._next % len(paths)
                self._next = start + 1
                for path in paths[start:] + paths[:start]:
                    if budget <= 0:
                        break
                    budget -= self._follow(path, min(budget, self.per_file), problems)
            self._first_poll = False
            with self._lock:
                self._stats = FollowStats(files=len(self._tracked), problems=tuple(problems), **self._counts)
        return self.stats()

    def stats(self) -> FollowStats:
        with self._lock:
            return self._stats

    def close(self) -> None:
        with self._poll_lock:
            for tracked in self._tracked.values():
                tracked.handle.close()
            self._tracked.clear()

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for key, delta in deltas.items():
                self._counts[key] += delta

    def _expand(self, problems: list[tuple[str, str]]) -> list[str]:
        found: set[str] = set()
        for pattern in self.patterns:
            found.update(glob.glob(pattern, recursive=True))
        paths = sorted(found)
        if len(paths) > self.max_files:
            problems.append(
                (self.patterns[0], f"{len(paths)} files match; following the first {self.max_files}")
            )
            paths = paths[: self.max_files]
        return paths

    def _follow(self, path: str, budget: int, problems: list[tuple[str, str]]) -> int:
        """Read what ``path`` has new, at most ``budget`` bytes; returns the bytes read."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return self._drain_and_close(path, budget) if path in self._tracked else 0
        except OSError as exc:
            problems.append((path, exc.strerror or str(exc)))
            return 0
        if not stat.S_ISREG(st.st_mode):
            return 0
        used = 0
        tracked = self._tracked.get(path)
        if tracked is not None and (st.st_dev, st.st_ino) != (tracked.dev, tracked.ino):
            used = self._drain_and_close(path, budget)  # rotated: finish the old file, then start the new one
            self._count(rotations=1)
            tracked = None
            start_at_end = False
        else:
            start_at_end = self._first_poll and not self.from_start
        if tracked is None:
            try:
                handle = open(path, "rb")  # kept open across polls; closed in _drain_and_close
            except OSError as exc:
                problems.append((path, exc.strerror or str(exc)))
                return used
            fst = os.fstat(handle.fileno())
            offset = fst.st_size if start_at_end else 0
            handle.seek(offset)
            tracked = _Tracked(handle, fst.st_dev, fst.st_ino, offset)
            self._tracked[path] = tracked
        elif st.st_size < tracked.offset:
            tracked.handle.seek(0)  # truncated in place (copytruncate)
            tracked.offset, tracked.partial, tracked.overlong = 0, b"", False
            self._count(rotations=1)
        if st.st_size - tracked.offset > self.backlog:
            self._skip_to(tracked, st.st_size - self.per_file)
        try:
            return used + self._read(path, tracked, max(0, budget - used))
        except OSError as exc:
            problems.append((path, exc.strerror or str(exc)))
            return used

    def _skip_to(self, tracked: _Tracked, offset: int) -> None:
        """Jump over a backlog nobody could read in time (or a sparse file's hole); the line cut
        there is dropped up to its newline."""
        self._count(skipped_bytes=offset - tracked.offset)
        tracked.handle.seek(offset)
        tracked.offset, tracked.partial, tracked.overlong = offset, b"", True

    def _drain_and_close(self, path: str, budget: int) -> int:
        tracked = self._tracked.pop(path)
        used = 0
        try:
            used = self._read(path, tracked, budget)
            if tracked.partial and not tracked.overlong:
                self._emit(path, [tracked.partial])  # the last line of a finished file has no newline
        except OSError:
            pass
        finally:
            tracked.handle.close()
        return used

    def _read(self, path: str, tracked: _Tracked, budget: int) -> int:
        used = 0
        while used < budget:
            chunk = tracked.handle.read(min(READ_CHUNK, budget - used))
            if not chunk:
                break
            used += len(chunk)
            tracked.offset += len(chunk)
            pieces = chunk.split(b"\n")
            if tracked.overlong:
                if len(pieces) == 1:
                    continue
                tracked.overlong, tracked.partial = False, b""  # the dropped line ends here
                pieces = pieces[1:]
            else:
                pieces[0] = tracked.partial + pieces[0]
                tracked.partial = b""
            *lines, rest = pieces
            complete = [line for line in lines if len(line) <= MAX_LINE_BYTES]
            dropped = len(lines) - len(complete)
            if len(rest) > MAX_LINE_BYTES:
                dropped += 1
                tracked.overlong = True
            else:
                tracked.partial = rest
            if dropped:
                self._count(dropped_lines=dropped)
            if complete:
                self._emit(path, complete)
        self._count(read_bytes=used)
        return used

    def _emit(self, path: str, lines: list[bytes]) -> None:
        self._count(lines=len(lines))
        self.sink(path, lines)
