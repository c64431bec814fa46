"""``fabricscope bench serve``: serves tests one after another (or a few at once), like iperf3 -s.

Protects the host it runs on: a token is required off loopback, every request is validated
(:mod:`fabricscope.bench.sockets.protocol`) and capped (:class:`ServerLimits`), control connections and
concurrent tests are limited, every wait has a deadline, data-plane workers are killed at the
end of their test's time. It never runs a command and never opens a file named by a client.
A bad request gets an error reply and a log line; the server keeps serving.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fabricscope import __version__
from fabricscope.bench.sockets.admission import MAKE_TOKEN, AuthFailures, token_weakness
from fabricscope.bench.sockets.dataport import COOKIE_TIMEOUT_S, Mailbox
from fabricscope.bench.sockets.procs import WorkerSet
from fabricscope.bench.sockets.protocol import (
    MAX_TOKEN_CHARS,
    PROTOCOL_VERSION,
    Done,
    Hello,
    RunRequest,
    ServerLimits,
    error_reply,
    parse_request,
)
from fabricscope.bench.sockets.specs import MailboxSockets, Spec
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.frames import (
    PeerError,
    PendingConnections,
    ProtocolError,
    describe_os_error,
    encode_frame,
    is_loopback,
    listen,
    recv_frame,
    send_frame,
)
from fabricscope.logfilter import RepeatLimiter

log = logging.getLogger("fabricscope.bench.sockets.server")

HELLO_TIMEOUT_S = 3.0  # the whole hello, from accept to its last byte: before authentication
REQUEST_TIMEOUT_S = (
    5.0  # an authenticated connection that sends no test request is ended (clients send at once)
)
PENDING_PER_SOURCE = 8  # connections not yet authenticated, from one source address
PENDING_TOTAL = 64  # ... and from all sources together
LOG_FLUSH_S = 1.0
DATA_TIMEOUT_S = 10.0  # a data socket without progress for this long means the peer is gone
ACCEPT_TIMEOUT_S = 15.0  # client has this long to open its data connections
UDP_RCVBUF_BYTES = 8 * 1024 * 1024


@dataclass
class ServerStats:
    tests_ok: int = 0
    tests_failed: int = 0
    rejected: int = 0


class BenchServer:
    """Create, :meth:`start` (binds; raises FabricscopeError), then :meth:`serve_forever`."""

    def __init__(
        self,
        bind: str = "127.0.0.1",
        port: int = 5211,
        token: str | None = None,
        limits: ServerLimits | None = None,
        data_ports: tuple[int, int] | None = None,
    ) -> None:
        if not is_loopback(bind) and not token:
            raise FabricscopeError(
                f"serving on {bind} (not loopback) needs --token (or $FABRICSCOPE_BENCH_TOKEN); clients pass the same token"
            )
        if token is not None and len(token) > MAX_TOKEN_CHARS:
            raise FabricscopeError(
                f"--token is {len(token)} characters; clients send at most {MAX_TOKEN_CHARS}, so none could connect"
            )
        weakness = token_weakness(token) if token is not None else None
        if weakness:
            raise FabricscopeError(
                f"the token (--token or $FABRICSCOPE_BENCH_TOKEN) is too weak ({weakness}): make one with {MAKE_TOKEN}"
            )
        self.bind = bind
        self.port = port
        self.token = token
        self.limits = limits or ServerLimits()
        self.data_ports = data_ports
        self.stats = ServerStats()
        self._tests = threading.BoundedSemaphore(self.limits.max_tests)
        self._clients = threading.BoundedSemaphore(self.limits.max_clients)  # authenticated
        self.pending = PendingConnections(PENDING_PER_SOURCE, PENDING_TOTAL)  # not yet authenticated
        self.failures = AuthFailures()  # wrong tokens per source: backoff (bench/sockets/admission.py)
        self.log_limiter = RepeatLimiter()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._family = socket.AF_INET
        self._port_lock = threading.Lock()
        self.hello_timeout_s = HELLO_TIMEOUT_S
        self.request_timeout_s = REQUEST_TIMEOUT_S

    # ----- lifecycle ------------------------------------------------------------------------
    def start(self) -> tuple[str, int]:
        """Bind and listen; returns the bound (address, port). Raises FabricscopeError."""
        try:
            sock = listen(self.bind, self.port, 64)
        except socket.gaierror as exc:
            raise FabricscopeError(f"--bind {self.bind}: {exc.strerror}") from None
        except OSError as exc:
            raise FabricscopeError(
                describe_os_error(exc, f"cannot listen on {self.bind}:{self.port}")
            ) from None
        self._listener = sock
        self._family = sock.family
        self.port = sock.getsockname()[1]
        return self.bind, self.port

    def stop(self) -> None:
        self._stop.set()

    def serve_forever(self) -> None:
        """Accept control connections until :meth:`stop`; each is served in its own thread."""
        if self._listener is None:
            self.start()
        assert self._listener is not None
        log.addFilter(self.log_limiter)
        log.info("listening on %s port %d (limits: %s)", self.bind, self.port, self.limits.model_dump())
        flushed = time.monotonic()
        try:
            while not self._stop.is_set():
                if time.monotonic() - flushed >= LOG_FLUSH_S:
                    self.log_limiter.flush(log)
                    flushed = time.monotonic()
                try:
                    conn, addr = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError as exc:
                    log.warning("accept failed: %s", exc)
                    time.sleep(0.05)
                    continue
                source = _source(addr)
                wait_s = self.failures.wait_s(source)
                refusal = self._backoff_refusal(source, wait_s) if wait_s else self.pending.enter(source)
                if refusal is not None:
                    self._refuse(conn, addr, refusal)
                    continue
                threading.Thread(target=self._serve_client, args=(conn, addr), daemon=True).start()
        finally:
            self._listener.close()
            self.log_limiter.flush(log, force=True)
            log.removeFilter(self.log_limiter)

    def _refuse(self, conn: socket.socket, addr: Any, reason: str) -> None:
        """Say why in one frame if the socket takes it at once (never wait on a refused peer)."""
        self.stats.rejected += 1
        log.warning("refused %s: %s", _peer(addr), reason)
        with contextlib.suppress(OSError, ProtocolError):
            conn.setblocking(False)
            conn.send(encode_frame(error_reply(reason)))
        conn.close()

    def _backoff_refusal(self, source: str, wait_s: float) -> str:
        return f"too many wrong tokens from {source}; try again in {math.ceil(wait_s)} s"

    # ----- one control connection -----------------------------------------------------------
    def _serve_client(self, conn: socket.socket, addr: Any) -> None:
        who = _peer(addr)
        authenticated = False
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._handshake(conn, _source(addr))
            finally:
                self.pending.leave(_source(addr))
            # a free slot before "ok": a client told "ok" and then "busy" once waited for nothing
            if not self._clients.acquire(blocking=False):
                raise ProtocolError(
                    f"too many control connections (limit {self.limits.max_clients}), try again later"
                )
            authenticated = True
            self._welcome(conn)
            # idle: an authenticated connection that sends no request gives its slot back soon
            message = parse_request(recv_frame(conn, time.monotonic() + self.request_timeout_s))
            if not isinstance(message, RunRequest):
                raise ProtocolError(f"expected a test request, got {message.op!r}")
            spec = message.spec
            self.limits.check(spec)
            if not self._tests.acquire(blocking=False):
                raise ProtocolError(
                    f"server busy: {self.limits.max_tests} tests already running, try again later"
                )
            try:
                log.info("%s: %s test %s", who, spec.kind, spec.model_dump(exclude={"kind"}))
                ok = self._run(conn, spec, who, _source(addr))
            finally:
                self._tests.release()
            if ok:
                self.stats.tests_ok += 1
            else:
                self.stats.tests_failed += 1
        except ProtocolError as exc:
            self.stats.rejected += 1
            log.warning("%s: rejected: %s", who, exc)
            with contextlib.suppress(OSError, PeerError, ProtocolError):
                send_frame(conn, error_reply(str(exc)), time.monotonic() + 2.0)
        except PeerError as exc:
            log.warning("%s: %s", who, exc)
        except Exception as exc:  # a bug must not take the server down
            log.exception("%s: internal error: %s", who, exc)
            with contextlib.suppress(OSError, PeerError, ProtocolError):
                send_frame(
                    conn, error_reply(f"server internal error: {type(exc).__name__}"), time.monotonic() + 2.0
                )
        finally:
            conn.close()
            if authenticated:
                self._clients.release()

    def _handshake(self, conn: socket.socket, source: str) -> None:
        """Hello and token within one short deadline: an unauthenticated peer holds little for long.
        A wrong token counts against its source; a source in backoff is not even compared."""
        message = parse_request(recv_frame(conn, time.monotonic() + self.hello_timeout_s))
        if not isinstance(message, Hello):
            raise ProtocolError("expected hello first")
        if message.version != PROTOCOL_VERSION:
            raise ProtocolError(
                f"protocol version {message.version} not supported (server speaks {PROTOCOL_VERSION})"
            )
        if self.token is not None:
            wait_s = self.failures.wait_s(source)  # connections accepted before the backoff began
            if wait_s:
                raise ProtocolError(self._backoff_refusal(source, wait_s))
            given = (message.token or "").encode()
            if not hmac.compare_digest(given, self.token.encode()):
                self.failures.failed(source)
                raise ProtocolError("bad or missing token")
            self.failures.succeeded(source)

    def _welcome(self, conn: socket.socket) -> None:
        send_frame(
            conn,
            {
                "ok": True,
                "server": "fabricscope",
                "version": __version__,
                "protocol": PROTOCOL_VERSION,
                "limits": self.limits.model_dump(),
            },
            time.monotonic() + HELLO_TIMEOUT_S,
        )

    # ----- tests ----------------------------------------------------------------------------
    def _run(self, conn: socket.socket, spec: Spec, who: str, source: str) -> bool:
        """One test of any served kind: the spec opens its data plane (bench/sockets/specs.py)."""
        cookie = os.urandom(16)
        cfg: dict[str, Any] = {
            "timeout_s": DATA_TIMEOUT_S,
            "accept_timeout_s": ACCEPT_TIMEOUT_S,
            "peer_ip": source,  # data connections from any other address are closed unread
            "cookie_timeout_s": COOKIE_TIMEOUT_S,
            "duration_s": spec.duration_s,
            "hard_limit_s": spec.duration_s + DATA_TIMEOUT_S,
        }
        # Everything the client may still take: connecting, the run, and a stalled end.
        budget = ACCEPT_TIMEOUT_S + spec.duration_s + 2 * DATA_TIMEOUT_S
        with WorkerSet() as workers, contextlib.ExitStack() as sockets:
            ports = spec.open(_Plane(self, workers, sockets, cookie, cfg))
            send_frame(conn, {"ok": True, "cookie": cookie.hex(), "ports": ports}, time.monotonic() + 5.0)
            sockets.close()  # workers hold their own copies of the data sockets
            deadline = time.monotonic() + budget
            if spec.waits_for_done:
                self._wait_done(conn, deadline)
                time.sleep(spec.drain_s)
                workers.stop()
                reports = workers.collect(5.0)
            else:
                reports = workers.collect(max(1.0, deadline - time.monotonic()))
                self._wait_done(conn, deadline + 5.0)
            errors = [r["error"] for r in reports if "error" in r]
            send_frame(conn, {"ok": True, "op": "result", "reports": reports}, time.monotonic() + 5.0)
            if errors:
                log.warning("%s: %s test ended with errors: %s", who, spec.kind, errors[0])
            else:
                log.info("%s: %s test done", who, spec.kind)
            return not errors

    def _wait_done(self, conn: socket.socket, deadline: float) -> Done:
        message = parse_request(recv_frame(conn, deadline))
        if not isinstance(message, Done):
            raise ProtocolError(f"expected done, got {message.op!r}")
        return message

    @contextlib.contextmanager
    def tcp_listener(
        self, backlog: int
    ) -> Iterator[tuple[socket.socket, tuple[socket.socket, socket.socket]]]:
        """A data listener and the mailbox its workers share (see :mod:`fabricscope.bench.sockets.dataport`)."""
        sock = self._bound(socket.SOCK_STREAM)
        mailbox = Mailbox.create()
        try:
            sock.listen(backlog)
            yield sock, mailbox.sockets()
        finally:
            sock.close()
            mailbox.close()

    @contextlib.contextmanager
    def udp_socket(self) -> Iterator[socket.socket]:
        sock = self._bound(socket.SOCK_DGRAM)
        try:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF_BYTES)
            yield sock
        finally:
            sock.close()

    def _bound(self, kind: int) -> socket.socket:
        """A socket on the bind address: an ephemeral port, or the first free one in --data-ports."""
        host = self._listener.getsockname()[0] if self._listener else self.bind
        candidates: Any = (
            [0] if self.data_ports is None else range(self.data_ports[0], self.data_ports[1] + 1)
        )
        with self._port_lock:
            for port in candidates:
                sock = socket.socket(self._family, kind)
                try:
                    sock.bind((host, port))
                    return sock
                except OSError:
                    sock.close()
        raise ProtocolError("server has no free data port left, try again later")


@dataclass
class _Plane:
    """The data plane of one test, as a spec sees it (:class:`fabricscope.bench.sockets.specs.DataPlane`):
    sockets on the server's bind address, closed when the rendezvous is sent, and its workers."""

    server: BenchServer
    workers: WorkerSet
    sockets: contextlib.ExitStack
    cookie: bytes
    cfg: dict[str, Any]

    def tcp_listener(self, backlog: int) -> tuple[socket.socket, MailboxSockets]:
        return self.sockets.enter_context(self.server.tcp_listener(backlog))

    def udp_socket(self) -> socket.socket:
        return self.sockets.enter_context(self.server.udp_socket())

    def spawn(self, worker: str, sock: socket.socket, mailbox: MailboxSockets | None = None) -> None:
        self.workers.spawn(worker, sock, self.cookie, self.cfg, mailbox=mailbox)


def _source(addr: Any) -> str:
    """The peer's address without the port; IPv4-mapped IPv6 as plain IPv4."""
    host = str(addr[0]) if isinstance(addr, tuple) and addr else str(addr)
    return host.removeprefix("::ffff:") if "." in host else host


def _peer(addr: Any) -> str:
    try:
        host, port = addr[0], addr[1]
    except (TypeError, IndexError):
        return str(addr)
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
