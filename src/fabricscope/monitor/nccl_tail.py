"""Follow NCCL logs as they are written and count what matters.

Following (rotation, caps per file and per poll, overlong lines) is :mod:`.follow`'s, shared
with the NCCL Inspector follower. Each line goes through :func:`fabricscope.nccl.log.parse.parse_line`,
the NCCL helper's per-line event API.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fabricscope.monitor.follow import MAX_FILES, FileFollower


@dataclass(frozen=True)
class NcclCounts:
    lines: int = 0
    warnings: dict[str, int] = field(default_factory=dict)  # WARN kind -> count
    socket_fallbacks: int = 0
    completion_errors: dict[int | None, int] = field(default_factory=dict)  # ibv_wc_status -> count
    files: int = 0
    rotations: int = 0
    dropped_lines: int = 0
    read_bytes: int = 0
    skipped_bytes: int = 0
    problems: tuple[tuple[str, str], ...] = ()  # (path or pattern, reason) from the last poll


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
        **caps: int,
    ) -> None:
        self._parse = parse or _default_parser()
        self.follower = FileFollower(patterns, self._feed, from_start=from_start, max_files=max_files, **caps)
        self._lock = threading.Lock()  # guards the counters below (scrapes read them)
        self._warnings: Counter[str] = Counter()
        self._completions: Counter[int | None] = Counter()
        self._fallbacks = 0

    def poll(self) -> NcclCounts:
        """Look for new files and new lines once; returns the counts after this poll."""
        self.follower.poll()
        return self.snapshot()

    def close(self) -> None:
        self.follower.close()

    def _feed(self, _path: str, lines: list[bytes]) -> None:
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
            self._warnings.update(warnings)
            self._completions.update(completions)
            self._fallbacks += fallbacks

    def snapshot(self) -> NcclCounts:
        stats = self.follower.stats()
        with self._lock:
            return NcclCounts(
                lines=stats.lines,
                warnings=dict(self._warnings),
                socket_fallbacks=self._fallbacks,
                completion_errors=dict(self._completions),
                files=stats.files,
                rotations=stats.rotations,
                dropped_lines=stats.dropped_lines,
                read_bytes=stats.read_bytes,
                skipped_bytes=stats.skipped_bytes,
                problems=stats.problems,
            )
