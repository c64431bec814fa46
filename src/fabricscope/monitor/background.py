"""Periodic background work: anything slow (commands, the doctor) runs here, never in a scrape.

A :class:`Periodic` runs one function every ``interval_s`` in a daemon thread and keeps the last
result with its time; a scrape only reads that result. A failing run keeps the previous result
(stale but shown with its age) and records the error, which the owning collector turns into
``success 0``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger("fabricscope.exporter")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What the last run left: its value (possibly from an earlier run), when, and any error."""

    value: T | None
    finished_s: float | None  # time.monotonic() of the last successful run
    error: str | None  # why the most recent run failed; None when it succeeded
    duration_s: float | None  # how long the most recent run took
    runs: int


class Periodic(Generic[T]):
    def __init__(self, name: str, func: Callable[[], T], interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError("interval must be positive")
        self.name = name
        self.interval_s = interval_s
        self._func = func
        self._lock = threading.Lock()
        self._outcome: Outcome[T] = Outcome(None, None, None, None, 0)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def outcome(self) -> Outcome[T]:
        with self._lock:
            return self._outcome

    def age_s(self) -> float | None:
        finished = self.outcome.finished_s
        return None if finished is None else max(0.0, time.monotonic() - finished)

    def is_stale(self, factor: float = 3.0, minimum_s: float = 30.0) -> bool:
        """No successful run within ``max(factor * interval, minimum_s)`` (a stuck thread or
        a source that keeps failing)."""
        age = self.age_s()
        return age is not None and age > max(factor * self.interval_s, minimum_s)

    def run_once(self) -> Outcome[T]:
        """Run now in the calling thread (startup and ``--once``)."""
        started = time.monotonic()
        try:
            value = self._func()
        except Exception as exc:  # a broken source must not kill the thread
            error = f"{type(exc).__name__}: {exc}"
            log.warning("%s refresh failed: %s", self.name, error)
            with self._lock:
                previous = self._outcome
                self._outcome = Outcome(
                    previous.value, previous.finished_s, error, time.monotonic() - started, previous.runs + 1
                )
                return self._outcome
        finished = time.monotonic()
        with self._lock:
            self._outcome = Outcome(value, finished, None, finished - started, self._outcome.runs + 1)
            return self._outcome

    def start(self, *, run_first: bool = True) -> None:
        """Start the thread; the first run happens at once unless ``run_first`` is False."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._loop, args=(run_first,), name=f"fabricscope-{self.name}", daemon=True
        )
        self._thread.start()

    def trigger(self) -> None:
        """Ask for a run now instead of at the next interval."""
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self, run_first: bool) -> None:
        if not run_first and self._wait(self.interval_s):
            return
        while not self._stop.is_set():
            started = time.monotonic()
            self.run_once()
            if self._wait(max(0.0, self.interval_s - (time.monotonic() - started))):
                return

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when asked to stop."""
        self._wake.wait(seconds)
        self._wake.clear()
        return self._stop.is_set()
