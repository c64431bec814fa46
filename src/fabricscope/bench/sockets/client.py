"""Client side of a socket test: control session, client workers, and the common run sequence."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from fabricscope.bench.counters import CounterProbe
from fabricscope.bench.results.schema import BenchResult, Stopwatch, new_result
from fabricscope.bench.sockets.procs import WorkerSet
from fabricscope.bench.sockets.protocol import (
    DEFAULT_PORT,
    PROTOCOL_VERSION,
    parse_peer,
    parse_rendezvous,
)
from fabricscope.jobs.frames import PeerError, ProtocolError, connect, recv_frame, send_frame

Tick = Callable[[float], None]  # called with elapsed seconds while a run is in progress


class ServerRefused(PeerError):
    """The server answered with an error (bad token, over its limits, busy...)."""


@dataclass(frozen=True)
class Peer:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Peer:
        """``HOST``, ``HOST:PORT`` or ``[V6]:PORT``; raises ValueError with a clear message."""
        host, port = parse_peer(text, DEFAULT_PORT)
        return cls(host, port)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class ControlSession:
    """One control connection: hello, one test request, then ``done`` and the server's reports."""

    def __init__(self, peer: Peer, token: str | None, timeout_s: float) -> None:
        self.peer = peer
        self.token = token
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None
        self.server_info: dict[str, Any] = {}
        self.peer_ip: str = peer.host

    def _expect_ok(self, reply: dict[str, Any]) -> dict[str, Any]:
        if reply.get("ok") is not True:
            error = reply.get("error")
            text = "".join(ch for ch in str(error) if ch.isprintable())[:300] if error else "no reason given"
            raise ServerRefused(f"server {self.peer} refused: {text}")
        return reply

    def open(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Connect, authenticate and request the test; returns the server's rendezvous reply."""
        self.sock = connect(self.peer.host, self.peer.port, self.timeout_s)
        self.peer_ip = self.sock.getpeername()[0]
        try:
            deadline = time.monotonic() + self.timeout_s
            send_frame(self.sock, {"op": "hello", "version": PROTOCOL_VERSION, "token": self.token}, deadline)
            self.server_info = self._expect_ok(recv_frame(self.sock, deadline))
            send_frame(self.sock, {"op": "test", "spec": spec}, deadline)
            return self._expect_ok(recv_frame(self.sock, time.monotonic() + self.timeout_s + 5))
        except ProtocolError as exc:
            raise PeerError(f"server {self.peer} spoke garbage: {exc}") from None

    def finish(self, info: dict[str, Any], wait_s: float) -> list[dict[str, Any]]:
        """Tell the server we are done; its workers' reports (deadline ``wait_s``)."""
        assert self.sock is not None
        try:
            send_frame(self.sock, {"op": "done", "info": info}, time.monotonic() + self.timeout_s)
            reply = self._expect_ok(recv_frame(self.sock, time.monotonic() + wait_s))
        except ProtocolError as exc:
            raise PeerError(f"server {self.peer} spoke garbage: {exc}") from None
        reports = reply.get("reports")
        if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
            raise PeerError(f"server {self.peer} sent a malformed result")
        return reports

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


@dataclass
class RunOutcome:
    client: list[dict[str, Any]]
    server: list[dict[str, Any]]
    elapsed_s: float
    server_info: dict[str, Any]
    reply: dict[str, Any]

    def server_summary(self) -> dict[str, Any]:
        return {k: self.server_info.get(k) for k in ("server", "version", "protocol")}


def run_socket_test(
    peer: Peer,
    token: str | None,
    spec: dict[str, Any],
    spawn_clients: Callable[[WorkerSet, str, dict[str, Any], bytes], None],
    expected_s: float,
    timeout_s: float,
    tick: Tick | None = None,
) -> RunOutcome:
    """Request ``spec``, start the client workers, run them together, gather both sides' reports.

    ``spawn_clients(workers, peer_ip, reply, cookie)`` starts this side's workers. Raises
    :class:`PeerError` with one line when the run cannot complete; the worker's own error wins
    over a secondary control-connection error because it names the cause.
    """
    session = ControlSession(peer, token, timeout_s)
    started = time.monotonic()
    try:
        reply = session.open(spec)
        try:
            rendezvous = parse_rendezvous(reply, spec)
        except ProtocolError as exc:
            raise PeerError(f"server {peer} spoke garbage: {exc}") from None
        cookie = bytes.fromhex(rendezvous.cookie)
        reply = {**reply, "ports": rendezvous.ports.model_dump(exclude_none=True)}
        with WorkerSet() as workers:
            spawn_clients(workers, session.peer_ip, reply, cookie)
            problem = workers.wait_ready(timeout_s + 5)
            if problem is not None:
                raise PeerError(problem)
            workers.go()
            started = time.monotonic()
            client = workers.collect(expected_s + 2 * timeout_s + 5, tick=tick)
        elapsed = time.monotonic() - started
        errors = [r["error"] for r in client if "error" in r]
        try:
            server = session.finish({"elapsed_s": elapsed}, wait_s=2 * timeout_s + 10)
        except PeerError as exc:
            if errors:
                raise PeerError(errors[0]) from None
            raise exc
        if errors:
            raise PeerError(errors[0])
        server_errors = [r["error"] for r in server if "error" in r]
        if server_errors:
            raise PeerError(f"server side: {server_errors[0]}")
        return RunOutcome(
            client=client, server=server, elapsed_s=elapsed, server_info=session.server_info, reply=reply
        )
    finally:
        session.close()


def record_run(
    kind: str,
    params: BaseModel,
    peer: Peer,
    body: Callable[[BenchResult], None],
    probe: CounterProbe | None = None,
) -> BenchResult:
    """Run ``body(result)`` with counters read around it; always returns a result.

    ``body`` runs one or more :func:`run_socket_test` and fills the metrics. A run that cannot
    complete gives ``status=failed`` with the reason (peer trouble never raises out of here),
    so the caller can store it and exit 2.
    """
    result = new_result(kind, params)
    probe = probe or CounterProbe(peer.host)
    probe.before()
    watch = Stopwatch()
    try:
        body(result)
    except PeerError as exc:
        result.counters = probe.after()
        return result.fail(str(exc), round(watch.elapsed_s(), 6))
    sockets = result.counters.sockets  # filled by ``body`` from this run's own sockets
    result.counters = probe.after()
    result.counters.sockets = sockets
    result.duration_s = round(watch.elapsed_s(), 6)
    return result


def offset_tick(tick: Tick | None, offset_s: float) -> Tick | None:
    """A tick for the n-th part of a run: reports elapsed time of the whole run."""
    if tick is None:
        return None
    return lambda elapsed: tick(offset_s + elapsed)


def gbps(nbytes: float, seconds: float) -> float | None:
    """Bytes over seconds in 10^9 bit/s; None when the time is not measurable."""
    if seconds <= 0:
        return None
    return nbytes * 8 / seconds / 1e9


def cpu_pct(reports: list[dict[str, Any]], wall_s: float) -> float | None:
    """CPU time of these workers as a percentage of one core over ``wall_s``."""
    total = sum(float(r.get("cpu_s", 0.0)) for r in reports)
    if wall_s <= 0 or not reports:
        return None
    return round(total / wall_s * 100.0, 1)
