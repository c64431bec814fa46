"""Run one process per host at once: prefixed output, one deadline, the worst exit status.

Used by ``lab run`` and by the benchmark launchers (``--launch local:N`` / ``lab:NAME``).
A rank that fails makes the others get ``grace_s`` to end on their own (so they can report
their own clear error), then they are terminated; the deadline ends everything.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

from fabricscope.host import command

TIMEOUT_RC = 124
STOP_GRACE_S = 3.0  # SIGTERM to SIGKILL when ranks are ended
MAX_LINE_BYTES = 1 << 20  # a rank printing without newlines is relayed in pieces, not buffered


@dataclass(frozen=True)
class ProcSpec:
    label: str  # "h1", "rank 0"
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # added to the parent's environment
    passthrough_stdout: bool = False  # True: stdout unprefixed (rank 0's table / JSON)


@dataclass
class GroupResult:
    codes: dict[str, int]
    timed_out: bool
    first_failure: str | None  # label of the first process that exited non-zero
    seconds: float

    @property
    def worst(self) -> int:
        return worst_code(self.codes.values())


def worst_code(codes) -> int:
    """The worst exit status: any timeout (124) or signal death beats a plain failure; 0 only if all 0."""
    norm = [(128 - c) if c < 0 else c for c in codes]  # -9 (killed by SIGKILL) -> 137
    return max(norm, default=0)


def run_group(
    specs: Sequence[ProcSpec],
    *,
    timeout_s: float,
    grace_s: float = 10.0,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    on_start: Callable[[str, int], None] | None = None,
) -> GroupResult:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    lock = threading.Lock()
    width = max((len(s.label) for s in specs), default=0)
    procs: dict[str, command.Process] = {}
    threads: list[threading.Thread] = []
    t0 = time.monotonic()

    def pump(stream, sink: IO[str], prefix: str) -> None:
        for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with lock:
                sink.write(f"{prefix}{line}\n")
                sink.flush()
        stream.close()

    try:
        for spec in specs:
            try:
                proc = command.Process(spec.argv, env={**os.environ, **spec.env})
            except OSError as exc:
                raise RuntimeError(
                    f"cannot start {spec.argv[0]} for {spec.label}: {exc.strerror or exc}"
                ) from None
            procs[spec.label] = proc
            if on_start:
                on_start(spec.label, proc.pid)
            tag = f"[{spec.label:<{width}}] "
            for stream, sink, prefix in (
                (proc.proc.stdout, out, "" if spec.passthrough_stdout else tag),
                (proc.proc.stderr, err, tag),
            ):
                th = threading.Thread(target=pump, args=(stream, sink, prefix), daemon=True)
                th.start()
                threads.append(th)
        timed_out, first_failure = _watch(procs, t0 + timeout_s, grace_s)
        codes: dict[str, int] = {}
        for lbl, p in procs.items():
            rc = p.stop()  # reaps; ends whatever the rank left behind in its process group
            if timed_out and rc < 0:
                rc = TIMEOUT_RC
            codes[lbl] = rc
        for th in threads:
            th.join(timeout=5)
        return GroupResult(codes, timed_out, first_failure, time.monotonic() - t0)
    finally:
        command.stop_many(list(procs.values()), STOP_GRACE_S)  # on an exception: end them all


def _watch(procs: Mapping[str, command.Process], deadline: float, grace_s: float) -> tuple[bool, str | None]:
    """Wait for every process; after the first failure the rest get ``grace_s``, the deadline ends all.

    Returns (timed out, label of the first process that exited non-zero)."""
    first_failure: str | None = None
    failure_deadline: float | None = None
    while True:
        running = [lbl for lbl, p in procs.items() if not p.exited()]
        if first_failure is None:
            for lbl, p in procs.items():
                if lbl not in running and p.status() != 0:
                    first_failure = lbl
                    failure_deadline = time.monotonic() + grace_s
                    break
        if not running:
            return False, first_failure
        now = time.monotonic()
        if now >= deadline or (failure_deadline is not None and now >= failure_deadline):
            command.stop_many([procs[lbl] for lbl in running], STOP_GRACE_S)
            return now >= deadline, first_failure
        time.sleep(0.05)
