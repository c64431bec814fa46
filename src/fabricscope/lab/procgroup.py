"""Run one process per host at once: prefixed output, one deadline, the worst exit status.

Used by ``lab run`` and by the benchmark launchers (``--launch local:N`` / ``lab:NAME``).
A rank that fails makes the others get ``grace_s`` to end on their own (so they can report
their own clear error), then they are terminated; the deadline ends everything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

TIMEOUT_RC = 124


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
    procs: dict[str, subprocess.Popen[bytes]] = {}
    threads: list[threading.Thread] = []
    t0 = time.monotonic()

    def pump(stream, sink: IO[str], prefix: str) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with lock:
                sink.write(f"{prefix}{line}\n")
                sink.flush()
        stream.close()

    try:
        for spec in specs:
            env = {**os.environ, **spec.env}
            try:
                proc = subprocess.Popen(
                    list(spec.argv),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,  # its own process group: we can end its children too
                )
            except OSError as exc:
                raise RuntimeError(f"cannot start {spec.argv[0]} for {spec.label}: {exc.strerror or exc}") from None
            procs[spec.label] = proc
            if on_start:
                on_start(spec.label, proc.pid)
            tag = f"[{spec.label:<{width}}] "
            for stream, sink, prefix in (
                (proc.stdout, out, "" if spec.passthrough_stdout else tag),
                (proc.stderr, err, tag),
            ):
                th = threading.Thread(target=pump, args=(stream, sink, prefix), daemon=True)
                th.start()
                threads.append(th)

        deadline = t0 + timeout_s
        first_failure: str | None = None
        failure_deadline: float | None = None
        timed_out = False
        while True:
            running = [lbl for lbl, p in procs.items() if p.poll() is None]
            if first_failure is None:
                for lbl, p in procs.items():
                    if p.returncode not in (None, 0):
                        first_failure = lbl
                        failure_deadline = time.monotonic() + grace_s
                        break
            if not running:
                break
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                _terminate([procs[lbl] for lbl in running])
                break
            if failure_deadline is not None and now >= failure_deadline:
                _terminate([procs[lbl] for lbl in running])
                break
            time.sleep(0.05)
        codes: dict[str, int] = {}
        for lbl, p in procs.items():
            rc = p.wait()
            if timed_out and rc < 0:
                rc = TIMEOUT_RC
            codes[lbl] = rc
        for th in threads:
            th.join(timeout=5)
        return GroupResult(codes, timed_out, first_failure, time.monotonic() - t0)
    except BaseException:
        _terminate([p for p in procs.values() if p.poll() is None])
        raise


def _terminate(procs: list[subprocess.Popen[bytes]], wait_s: float = 3.0) -> None:
    """SIGTERM each process group we started, then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
        end = time.monotonic() + wait_s
        while time.monotonic() < end and any(p.poll() is None for p in procs):
            time.sleep(0.05)
        if all(p.poll() is not None for p in procs):
            return
