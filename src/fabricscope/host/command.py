"""Every child process fabricscope starts: argv lists (never a shell), each in its own session,
the whole session ended when its deadline passes.

Killing only the direct child is not enough: a hung ``ethtool`` or ``nvidia-smi`` may have forked
helpers that then live on as orphans, one more per timeout. So each child is a session leader
(``setsid``), and ending it (deadline, output cap, cancel, fabricscope exiting) means signalling
its whole process group. A leader that finished on its own is only reaped, unless the caller
asks for its leftovers to be killed too (probes do; a lab starting a daemon does not). The leader
is not reaped until its group has been signalled, so the group id cannot be reused by an
unrelated process meanwhile. Output is read with a cap: a command that prints forever is
stopped, not buffered. Processes still running when fabricscope exits (an exception, SIGTERM
turned into an exit by the CLI) are ended by :func:`shutdown`, which the CLI calls and
``atexit`` repeats; from then on no new child is started.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import IO, TypeVar

MAX_OUTPUT_BYTES = 8 * 1024 * 1024  # per stream; nothing we parse is anywhere near this
LINGER_S = 1.0  # after the leader exits, how long its leftovers may keep our pipes open
_POLL_S = 0.05  # exit polling when the kernel has no pidfd, and cancel checks
# The longest the main thread blocks in one wait. The kernel hands a process signal (SIGTERM, a
# terminal's SIGINT) to any thread: when a worker thread takes it, the main thread, where Python
# runs the handler, only acts on it when its wait returns. Doctor with hung tools ignored 2 of 48
# signals under load (tests/cli/test_signals.py): its main thread waited out the 120 s deadline.
SIGNAL_CHECK_S = 0.25

DEVNULL = subprocess.DEVNULL
PIPE = subprocess.PIPE


@dataclass(frozen=True)
class Outcome:
    """What one command did. ``rc`` is None when it was stopped (deadline, output cap, cancel)."""

    argv: tuple[str, ...]
    rc: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool = False
    overflowed: bool = False  # printed more than the cap: stopped, output cut at the cap
    cancelled: bool = False

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    @property
    def why_stopped(self) -> str | None:
        if self.timed_out:
            return f"timed out after {self.seconds:.3g} s"
        if self.overflowed:
            return "printed more than the output cap"
        if self.cancelled:
            return "cancelled"
        return None


class Process:
    """A child started in its own session; :meth:`stop` ends it and everything it started."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        stdin: int | None = DEVNULL,
        stdout: int | IO[bytes] | None = PIPE,
        stderr: int | IO[bytes] | None = PIPE,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.argv = tuple(str(a) for a in argv)
        self.started = time.monotonic()
        self._reaped = False
        self._reap_lock = threading.Lock()
        # Started and registered under one lock that shutdown() also takes: a worker thread
        # cannot start a child that the final stop_all() does not see.
        with _SPAWN_LOCK:
            if _closing:
                raise OSError(errno.ESHUTDOWN, f"fabricscope is exiting: {self.argv[0]} not started")
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                list(self.argv),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                pass_fds=tuple(pass_fds),
                close_fds=True,
                start_new_session=True,  # own session and process group: we can end its children too
            )
            self._exit_fd = _pidfd(self.proc.pid)
            with _LIVE_LOCK:
                _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """Exit status once :meth:`stop` has reaped it (negative: the signal that ended it)."""
        return self.proc.returncode

    def status(self) -> int | None:
        """The leader's exit status once it has exited (negative: the signal that ended it), else
        None. Does not reap it, so its process-group id stays ours until :meth:`stop`."""
        if self._reaped:
            return self.proc.returncode
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # another thread's stop() is reaping it right now
            return self.proc.wait()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def exited(self) -> bool:
        return self.status() is not None

    def wait_exit(self, timeout_s: float | None) -> bool:
        """Wait up to ``timeout_s`` (None: no limit) for the leader to exit; True when it has."""
        deadline = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
        while not self.exited():
            left = 3600.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return False
            exit_fd = self._exit_fd
            try:
                if exit_fd is None:
                    raise ValueError("no pidfd")
                with selectors.DefaultSelector() as sel:
                    sel.register(exit_fd, selectors.EVENT_READ)
                    sel.select(left)
            except (OSError, ValueError):  # no pidfd, or another thread reaped and closed it
                time.sleep(min(left, _POLL_S))
        return True

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the whole process group, as long as the leader is not reaped."""
        if not self._reaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    def stop(self, grace_s: float = 0.0, *, kill_leftovers: bool = False) -> int:
        """End the group if the leader still runs: SIGTERM and ``grace_s`` to exit, then SIGKILL to
        the whole group; reap; the leader's exit status.

        A leader that has already exited is only reaped: what it left running may be meant to run
        on (a daemon that did not call setsid, such as lldpd started for a lab). Pass
        ``kill_leftovers`` for probes, whose leftovers can only be leaks.
        """
        running = not self.exited()
        if grace_s > 0 and running:
            self.signal_group(signal.SIGTERM)
            self.wait_exit(grace_s)
        with self._reap_lock:  # stop_all (main thread) and collect (a worker) may race here
            if not self._reaped:
                if running or kill_leftovers:
                    self.signal_group(signal.SIGKILL)  # before reaping: the group id is still ours
                self.proc.wait()
                self._reaped = True
                if self._exit_fd is not None:
                    os.close(self._exit_fd)
                    self._exit_fd = None
        with _LIVE_LOCK:
            _LIVE.discard(self)
        return self.proc.returncode if self.proc.returncode is not None else -signal.SIGKILL

    def collect(
        self,
        deadline: float,
        *,
        input_bytes: bytes | None = None,
        max_output_bytes: int = MAX_OUTPUT_BYTES,
        grace_s: float = 0.0,
        cancel: threading.Event | None = None,
        kill_leftovers: bool = False,
    ) -> Outcome:
        """Read stdout/stderr (each capped) until the leader exits and the pipes close, or
        ``deadline`` (time.monotonic()) passes, or ``cancel`` is set; then :meth:`stop`."""
        reader = _Reader(self.proc, input_bytes, max_output_bytes)
        timed_out = cancelled = False
        exited_at: float | None = None
        try:
            while True:
                now = time.monotonic()
                if exited_at is None and self.exited():
                    exited_at = now
                if exited_at is not None and (reader.done() or now >= exited_at + LINGER_S):
                    break
                if reader.overflowed:
                    break
                if cancel is not None and cancel.is_set():
                    cancelled = exited_at is None
                    break
                if now >= deadline:
                    timed_out = exited_at is None
                    break
                wait = deadline - now
                if exited_at is not None:
                    wait = min(wait, exited_at + LINGER_S - now)
                if cancel is not None or self._exit_fd is None:
                    wait = min(wait, _POLL_S)
                elif threading.current_thread() is threading.main_thread():
                    wait = min(wait, SIGNAL_CHECK_S)
                reader.pump(wait, self._exit_fd if exited_at is None else None)
        finally:
            reader.close()
            rc = self.stop(grace_s, kill_leftovers=kill_leftovers)
        stopped = timed_out or cancelled or (reader.overflowed and exited_at is None)
        return Outcome(
            argv=self.argv,
            rc=None if stopped else rc,
            stdout=bytes(reader.out[:max_output_bytes]),
            stderr=bytes(reader.err[:max_output_bytes]),
            seconds=time.monotonic() - self.started,
            timed_out=timed_out,
            overflowed=reader.overflowed,
            cancelled=cancelled,
        )


class _Reader:
    """Non-blocking pump of a child's pipes: stdin fed from bytes, stdout/stderr kept up to a cap."""

    def __init__(self, proc: subprocess.Popen[bytes], input_bytes: bytes | None, cap: int) -> None:
        self.cap = cap
        self.out = bytearray()
        self.err = bytearray()
        self.overflowed = False
        self.sel = selectors.DefaultSelector()
        self.pending = memoryview(input_bytes or b"")
        self.stdin = proc.stdin
        for stream, sink in ((proc.stdout, self.out), (proc.stderr, self.err)):
            if stream is not None:
                os.set_blocking(stream.fileno(), False)
                self.sel.register(stream, selectors.EVENT_READ, sink)
        if self.stdin is not None:
            if self.pending:
                os.set_blocking(self.stdin.fileno(), False)
                self.sel.register(self.stdin, selectors.EVENT_WRITE, None)
            else:
                self._close_stdin()

    def done(self) -> bool:
        return not any(key.data is not None for key in self.sel.get_map().values())

    def pump(self, timeout_s: float, exit_fd: int | None) -> None:
        if exit_fd is not None:
            try:
                self.sel.register(exit_fd, selectors.EVENT_READ, "exit")
            except (OSError, ValueError):  # stop_all reaped it meanwhile and closed the pidfd
                exit_fd = None
                timeout_s = min(timeout_s, _POLL_S)
        try:
            if not self.sel.get_map():
                time.sleep(max(0.0, timeout_s))
                return
            for key, _ in self.sel.select(max(0.0, timeout_s)):
                if key.data == "exit":
                    continue
                if key.data is None:
                    self._feed_stdin()
                else:
                    self._read(key)
        finally:
            if exit_fd is not None:
                self.sel.unregister(exit_fd)

    def _read(self, key: selectors.SelectorKey) -> None:
        try:
            chunk = os.read(key.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.sel.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
            return
        sink: bytearray = key.data
        room = self.cap + 1 - len(sink)
        sink += chunk[: max(0, room)]
        if len(sink) > self.cap:
            self.overflowed = True

    def _feed_stdin(self) -> None:
        assert self.stdin is not None
        try:
            written = os.write(self.stdin.fileno(), self.pending[:65536])
        except BlockingIOError:
            return
        except OSError:  # the child closed its stdin (EPIPE): the rest is not wanted
            written = len(self.pending)
        self.pending = self.pending[written:]
        if not self.pending:
            self.sel.unregister(self.stdin)
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self.stdin is not None:
            with contextlib.suppress(OSError):
                self.stdin.close()
            self.stdin = None

    def close(self) -> None:
        for key in list(self.sel.get_map().values()):
            with contextlib.suppress(OSError, ValueError):
                key.fileobj.close()  # type: ignore[union-attr]
        self.sel.close()
        self._close_stdin()


def run(
    argv: Sequence[str],
    timeout_s: float,
    *,
    input_bytes: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
    grace_s: float = 0.0,
    cancel: threading.Event | None = None,
    kill_leftovers: bool = False,
) -> Outcome:
    """Run ``argv`` to completion or its deadline; raises OSError when it cannot be started."""
    proc = Process(argv, stdin=PIPE if input_bytes else DEVNULL, env=env, cwd=cwd)
    return proc.collect(
        time.monotonic() + timeout_s,
        input_bytes=input_bytes,
        max_output_bytes=max_output_bytes,
        grace_s=grace_s,
        cancel=cancel,
        kill_leftovers=kill_leftovers,
    )


K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


def in_parallel(job: Callable[[K], R], keys: Iterable[K]) -> dict[K, Future[R]]:
    """Start ``job(key)`` for every key at once, each on its own daemon thread.

    Daemon threads: a job stuck past its deadline never holds up the interpreter's exit
    (the processes themselves are ended by :func:`shutdown`).
    """
    futures: dict[K, Future[R]] = {}
    for key in dict.fromkeys(keys):
        future: Future[R] = Future()
        future.set_running_or_notify_cancel()
        futures[key] = future
        threading.Thread(
            target=_fill, args=(future, job, key), daemon=True, name="fabricscope-command"
        ).start()
    return futures


def result_of(future: Future[R]) -> R:
    """``future.result()``, waited for in slices of SIGNAL_CHECK_S so that a signal the kernel
    gave another thread still ends the run within that time."""
    while not future.done():
        wait((future,), timeout=SIGNAL_CHECK_S)
    return future.result()


def _fill(future: Future[R], job: Callable[[K], R], key: K) -> None:
    try:
        future.set_result(job(key))
    except BaseException as exc:  # handed to whoever takes the result
        future.set_exception(exc)


def running() -> list[Process]:
    """Processes started here and not yet stopped (tests, diagnostics)."""
    with _LIVE_LOCK:
        return list(_LIVE)


def stop_all(grace_s: float = 1.0) -> None:
    """End every process group we started that is still alive."""
    stop_many(running(), grace_s)


def shutdown(grace_s: float = 1.0) -> None:
    """fabricscope is exiting (a signal, an error, the end): start nothing more, then end every
    group still alive. Worker threads may still be running a command's probes; from here on their
    new commands fail to start (OSError) instead of outliving us."""
    global _closing
    with _SPAWN_LOCK:
        _closing = True
    stop_all(grace_s)


def stop_many(procs: Sequence[Process], grace_s: float) -> None:
    """End several groups at once: SIGTERM to all, one shared grace, then SIGKILL; reap all."""
    if grace_s > 0:
        for proc in procs:
            if not proc.exited():
                proc.signal_group(signal.SIGTERM)
        end = time.monotonic() + grace_s
        for proc in procs:
            proc.wait_exit(end - time.monotonic())
    for proc in procs:
        with contextlib.suppress(OSError, ChildProcessError):
            proc.stop()


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux >= 5.3), else None (we poll)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


_LIVE: set[Process] = set()
_LIVE_LOCK = threading.Lock()
_SPAWN_LOCK = threading.Lock()
_closing = False  # set by shutdown(): no new child from then on
atexit.register(shutdown)
