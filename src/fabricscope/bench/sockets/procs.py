"""Starting, synchronising and reaping data-plane worker processes, with deadlines.

Each worker is ``python -m fabricscope.bench.sockets.workers`` (argv list, never a shell): its job is
the first line on its stdin, ``go``/``stop`` lines follow; it answers with JSON lines on stdout.
A socket handed to a worker travels as an inherited file descriptor (``pass_fds``). Separate
interpreters, not threads: one Python process cannot drive several streams at line rate.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from fabricscope.host import command

WORKER_MODULE = "fabricscope.bench.sockets.workers"
MAX_REPORT_BYTES = 16 * 1024 * 1024


class _Worker:
    def __init__(self, index: int, process: command.Process) -> None:
        self.index = index
        self.process = process  # its own session: stopping it ends anything it started too
        self.proc = process.proc
        self.buffer = bytearray()
        self.messages: list[dict[str, Any]] = []
        self.eof = False

    def feed(self) -> None:
        assert self.proc.stdout is not None
        try:
            data = os.read(self.proc.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return
        self.buffer += data
        if len(self.buffer) > MAX_REPORT_BYTES:
            self.messages.append({"error": f"worker {self.index} report too large"})
            self.eof = True
            return
        while b"\n" in self.buffer:
            line, _, rest = self.buffer.partition(b"\n")
            self.buffer = bytearray(rest)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.messages.append(message)

    def stderr_tail(self) -> str:
        if self.proc.stderr is None:
            return ""
        try:
            os.set_blocking(self.proc.stderr.fileno(), False)
            data = self.proc.stderr.read() or b""
        except (OSError, ValueError):
            return ""
        lines = data.decode(errors="replace").strip().splitlines()
        return lines[-1][:200] if lines else ""


class WorkerSet:
    """A group of workers of one run: start, wait until ready, start them together, collect."""

    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self.started = time.monotonic()
        self._ready: set[int] = set()

    def __enter__(self) -> WorkerSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

    def spawn(
        self,
        name: str,
        endpoint: socket.socket | tuple[str, int],
        cookie: bytes,
        cfg: dict[str, Any],
        sync: bool = False,
        mailbox: tuple[socket.socket, socket.socket] | None = None,
    ) -> int:
        """Start worker ``name``; a socket endpoint is inherited, an address is connected to.

        ``sync``: the worker reports ready and waits for :meth:`go` (client side). ``mailbox``:
        the socket pair through which the workers of one listener hand connections to each other
        (:class:`fabricscope.bench.sockets.dataport.Mailbox`), inherited too.
        """
        fds: tuple[int, ...] = ()
        if isinstance(endpoint, socket.socket):
            ep: dict[str, Any] = {"fd": endpoint.fileno()}
            fds = (endpoint.fileno(),)
        else:
            ep = {"host": endpoint[0], "port": int(endpoint[1])}
        if mailbox is not None:
            ep["mailbox"] = [sock.fileno() for sock in mailbox]
            fds += tuple(ep["mailbox"])
        job = {"name": name, "endpoint": ep, "cookie": cookie.hex(), "cfg": cfg, "sync": sync}
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [_package_parent(), env.get("PYTHONPATH", "")] if p)
        process = command.Process(
            [sys.executable, "-m", WORKER_MODULE], stdin=command.PIPE, pass_fds=fds, env=env
        )
        proc = process.proc
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()
        worker = _Worker(len(self.workers), process)
        self.workers.append(worker)
        return worker.index

    def _broadcast(self, word: str) -> None:
        for worker in self.workers:
            stdin = worker.proc.stdin
            if stdin is None or stdin.closed:
                continue
            try:
                stdin.write((word + "\n").encode())
                stdin.flush()
            except (OSError, ValueError):
                pass

    def _pump(self, pending: list[_Worker], timeout_s: float) -> None:
        with selectors.DefaultSelector() as sel:
            for worker in pending:
                if not worker.eof:
                    assert worker.proc.stdout is not None
                    sel.register(worker.proc.stdout.fileno(), selectors.EVENT_READ, worker)
            if not sel.get_map():
                return
            for key, _ in sel.select(max(0.0, timeout_s)):
                key.data.feed()

    def wait_ready(self, timeout_s: float) -> str | None:
        """Wait for every worker's ``ready``; the first error (or a timeout) as a reason, else None."""
        deadline = time.monotonic() + timeout_s
        while True:
            for worker in self.workers:
                for message in worker.messages:
                    if "error" in message:
                        return str(message["error"])
                    if message.get("ready"):
                        self._ready.add(worker.index)
                if worker.eof and worker.index not in self._ready:
                    tail = worker.stderr_tail()
                    return f"worker {worker.index} died while starting" + (f": {tail}" if tail else "")
            pending = [w for w in self.workers if w.index not in self._ready]
            if not pending:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return "data connections were not set up in time"
            self._pump(pending, left)

    def go(self) -> None:
        """Start every (synchronised) worker at once."""
        self.started = time.monotonic()
        self._broadcast("go")

    def stop(self) -> None:
        """Ask workers that run until told (UDP receivers, responders) to finish and report."""
        self._broadcast("stop")

    def collect(self, timeout_s: float, tick: Callable[[float], None] | None = None) -> list[dict[str, Any]]:
        """Every worker's final report; a worker that misses the deadline is killed and reported.

        ``tick(elapsed_s)`` is called a few times a second while waiting (progress bars).
        """
        deadline = time.monotonic() + timeout_s

        def final(worker: _Worker) -> dict[str, Any] | None:
            for message in worker.messages:
                if not message.get("ready"):
                    return message
            return None

        while True:
            pending = [w for w in self.workers if final(w) is None and not w.eof]
            left = deadline - time.monotonic()
            if not pending or left <= 0:
                break
            if tick is not None:
                tick(time.monotonic() - self.started)
                left = min(left, 0.2)
            self._pump(pending, left)
        reports = []
        for worker in self.workers:
            report = final(worker)
            if report is None:
                if worker.eof:
                    tail = worker.stderr_tail()
                    report = {
                        "error": f"worker {worker.index} died without a report"
                        + (f": {tail}" if tail else "")
                    }
                else:
                    report = {"error": f"worker {worker.index} did not finish in time (stopped)"}
            reports.append(report)
        self.terminate()
        return reports

    def terminate(self) -> None:
        """Stop every worker: a short grace to exit on its own, then SIGTERM, then SIGKILL."""
        self._broadcast("stop")
        for worker in self.workers:
            if worker.proc.stdin is not None:
                try:
                    worker.proc.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + 1.0
        for worker in self.workers:
            worker.process.wait_exit(deadline - time.monotonic())
        command.stop_many([w.process for w in self.workers], grace_s=2.0)
        for worker in self.workers:
            for stream in (worker.proc.stdout, worker.proc.stderr):
                if stream is not None:
                    stream.close()
        self.workers.clear()


def _package_parent() -> str:
    """The directory holding the ``fabricscope`` package, so workers import this very copy."""
    import fabricscope

    return os.path.dirname(os.path.dirname(os.path.abspath(fabricscope.__file__)))
