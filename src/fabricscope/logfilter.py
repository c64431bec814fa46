"""Rate-limited logging for servers: a flood of one kind of line becomes a few lines and a count.

A server logs each refused or malformed connection, which is what an operator wants until
someone opens thousands of them: twenty seconds of a slow-loris against ``bench serve`` once
wrote 156,168 lines (17.8 MB). :class:`RepeatLimiter` is a :class:`logging.Filter` that lets
``burst`` records of one kind through per ``window_s`` and drops the rest; the next record of
that kind to pass (or :meth:`RepeatLimiter.flush`, which a server calls now and then) says how
many were dropped, so nothing is hidden, only counted.

Records are "of one kind" when they share logger, level and format string (``record.msg``, before
its arguments are filled in), so "refused 10.0.0.7:4242: ..." and "refused 10.0.0.8:4243: ..."
count together: an attack from many ports or hosts is still one flood.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

BURST = 5
WINDOW_S = 10.0


@dataclass
class _Kind:
    window_start: float
    passed: int = 0
    dropped: int = 0


class RepeatLimiter(logging.Filter):
    """Pass at most ``burst`` records of each kind per ``window_s``; count the rest."""

    def __init__(self, burst: int = BURST, window_s: float = WINDOW_S) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self._kinds: dict[tuple[str, int, str], _Kind] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = time.monotonic()
        with self._lock:
            kind = self._kinds.get(key)
            if kind is None:
                kind = self._kinds[key] = _Kind(now)
            dropped = 0
            if now - kind.window_start >= self.window_s:
                dropped = kind.dropped
                kind.window_start, kind.passed, kind.dropped = now, 0, 0
            if kind.passed >= self.burst:
                kind.dropped += 1
                return False
            kind.passed += 1
        if dropped:
            record.msg = f"{record.msg} ({_dropped_text(dropped)})"
        return True

    def flush(self, logger: logging.Logger, *, force: bool = False) -> None:
        """Log a count for every kind whose window is over (all, with ``force``) with records dropped."""
        now = time.monotonic()
        notes: list[tuple[int, str, int]] = []
        with self._lock:
            for key, kind in list(self._kinds.items()):
                if not force and now - kind.window_start < self.window_s:
                    continue
                if kind.dropped:
                    notes.append((key[1], key[2], kind.dropped))
                del self._kinds[key]
        for level, msg, dropped in notes:
            # Bypasses this filter's count (a fresh kind) but stays one line per flooded kind.
            logger.log(level, "%s", f"{_dropped_text(dropped)} like: {msg}")

    def dropped(self) -> int:
        """Records dropped in the current windows (for tests and stats)."""
        with self._lock:
            return sum(kind.dropped for kind in self._kinds.values())


def _dropped_text(count: int) -> str:
    return f"{count} similar line{'s' if count != 1 else ''} suppressed"
