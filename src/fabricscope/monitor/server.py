"""The exporter's HTTP server: small, strict, and safe to scrape from many places at once.

* Binds where it is told (loopback by default); IPv4 or IPv6 literal, or ``localhost``.
* Serves ``GET``/``HEAD`` on ``/metrics`` (gzip when asked), ``/`` and ``/healthz``; anything else
  is 404 or 405. Query strings are ignored: a client cannot make a scrape do more work.
* Concurrent scrapes share one collection: while a collection runs, new requests wait for it and
  get its result, so fifty scrapers cost one collection at a time, not fifty.
* At most ``max_connections`` connections are served at once, at most ``max_per_source`` of them
  from one address (more get 503 at once): a slow-loris from one host cannot take every slot.
* Every request has a whole-request deadline, not a per-read one: its request line and headers
  must all arrive within ``header_timeout_s`` (of the connection for the first request, of its
  first byte for a keep-alive one), so a client sending one header line every few seconds is cut
  off; a keep-alive connection may idle ``timeout_s`` between requests. Refusals are logged through :class:`fabricscope.logfilter.RepeatLimiter`.

Why our own server on the standard library rather than a WSGI server: the well-kept Python ones
do not close a connection that trickles bytes (waitress' ``channel_timeout`` counts only
inactivity, and its ``connection_limit`` is global), so they would need this code too; see
docs/security.md.
"""

from __future__ import annotations

import gzip
import io
import ipaddress
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from fabricscope.errors import FabricscopeError
from fabricscope.logfilter import RepeatLimiter
from fabricscope.units import parse_port

log = logging.getLogger("fabricscope.exporter")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_CONNECTIONS = 128
MAX_PER_SOURCE = 8  # connections from one address: a Prometheus server needs one per target
TIMEOUT_S = 30.0  # a keep-alive connection's wait for its next request
HEADER_TIMEOUT_S = 10.0  # a request line and its headers, from the first byte to the last
RENDER_WAIT_S = 60.0
LANDING = b"""<!doctype html><html><head><title>fabricscope exporter</title></head><body>
<h1>fabricscope exporter</h1><p><a href="/metrics">/metrics</a> &middot; <a href="/healthz">/healthz</a></p>
<p>Grafana dashboard and alert rules: <code>fabricscope monitoring assets --out DIR</code></p>
</body></html>
"""


def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` -> (host, port). ``127.0.0.1:9731``, ``[::1]:9731``, ``localhost:9731``,
    ``:9731`` (every interface: only when asked for explicitly). Port 0 picks a free port."""
    text = text.strip()
    if text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise FabricscopeError(f"--listen {text!r}: expected [IPv6]:PORT")
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise FabricscopeError(f"--listen {text!r}: expected ADDR:PORT, e.g. 127.0.0.1:9731")
        if ":" in host:
            raise FabricscopeError(f"--listen {text!r}: write IPv6 addresses in brackets, e.g. [::1]:9731")
    try:
        port = parse_port(port_text, minimum=0)
    except ValueError:
        raise FabricscopeError(f"--listen {text!r}: port must be a number from 0 to 65535") from None
    if host not in ("", "localhost"):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise FabricscopeError(f"--listen {text!r}: {host!r} is not an IP address") from None
    return ("127.0.0.1" if host == "localhost" else host), port


class Rendered:
    """One collection's output, compressed at most once however many clients ask for gzip."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self._gzip: bytes | None = None
        self._lock = threading.Lock()

    def gzipped(self) -> bytes:
        with self._lock:
            if self._gzip is None:
                self._gzip = gzip.compress(self.body, compresslevel=5)
            return self._gzip


class Coalescer:
    """Single flight: concurrent callers share the collection in progress."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        self._render = render
        self._cond = threading.Condition()
        self._busy = False
        self._generation = 0
        self._result: Rendered | None = None
        self._error: BaseException | None = None

    def get(self, wait_s: float = RENDER_WAIT_S) -> Rendered:
        with self._cond:
            if self._busy:
                target = self._generation + 1
                if not self._cond.wait_for(lambda: self._generation >= target, timeout=wait_s):
                    raise TimeoutError("collection did not finish in time")
                if self._error is not None:
                    raise RuntimeError(f"collection failed: {self._error}")
                assert self._result is not None
                return self._result
            self._busy = True
        result: Rendered | None = None
        error: BaseException | None = None
        try:
            result = Rendered(self._render())
        except Exception as exc:
            error = exc
        with self._cond:
            self._generation += 1
            self._result, self._error, self._busy = result, error, False
            self._cond.notify_all()
        if error is not None:
            raise RuntimeError(f"collection failed: {error}") from error
        assert result is not None
        return result


class _DeadlineReader(io.RawIOBase):
    """The request side of a connection, read under one deadline per request (not per read).

    A new connection's first request must arrive whole within ``header_timeout_s`` of the
    connection; between requests a keep-alive connection may idle for ``timeout_s``, and from a
    later request's first byte its request line and headers must arrive within ``header_timeout_s``.
    """

    def __init__(self, handler: _Handler) -> None:
        super().__init__()
        self._handler = handler
        self._sock = handler.connection

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        handler = self._handler
        now = time.monotonic()
        deadline = handler.request_deadline
        if deadline is None:
            self._sock.settimeout(handler.server.timeout_s)
        elif deadline <= now:
            raise TimeoutError("request not complete in time")  # http.server closes on it
        else:
            self._sock.settimeout(deadline - now)
        count = self._sock.recv_into(buffer)
        if count and handler.request_deadline is None:
            handler.request_deadline = time.monotonic() + handler.server.header_timeout_s
        return count


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "fabricscope-exporter"
    protocol_version = "HTTP/1.1"
    request_deadline: float | None = None
    requests_seen = 0

    def setup(self) -> None:
        self.timeout = self.server.timeout_s  # writes: one sendall of a whole response
        self.request_deadline = time.monotonic() + self.server.header_timeout_s
        super().setup()
        self.rfile.close()  # the socket stays open: wfile still uses it
        self.rfile = io.BufferedReader(_DeadlineReader(self))
        # Headers and body go out as separate writes: without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every keep-alive scrape.
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def handle_one_request(self) -> None:
        if self.requests_seen:
            self.request_deadline = None  # a keep-alive request's clock starts at its first byte
        self.requests_seen += 1
        super().handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.connection.settimeout(self.server.timeout_s)  # the response is written without a rush
        return parsed

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _not_allowed(self) -> None:
        self.close_connection = True  # a body we do not read must not be taken for the next request
        self._send(405, b"method not allowed\n", "text/plain; charset=utf-8", extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def _serve(self, head: bool) -> None:
        path = urlsplit(self.path).path
        if path == "/metrics":
            try:
                rendered = self.server.coalescer.get()
            except (TimeoutError, RuntimeError) as exc:
                log.error("scrape failed: %s", exc)
                self._send(503, f"{exc}\n".encode(), "text/plain; charset=utf-8", head=head)
                return
            accepts = self.headers.get("Accept-Encoding", "")
            if "gzip" in accepts.lower():
                self._send(
                    200, rendered.gzipped(), CONTENT_TYPE, head=head, extra={"Content-Encoding": "gzip"}
                )
            else:
                self._send(200, rendered.body, CONTENT_TYPE, head=head)
        elif path == "/":
            self._send(200, LANDING, "text/html; charset=utf-8", head=head)
        elif path == "/healthz":
            self._send(200, b"ok\n", "text/plain; charset=utf-8", head=head)
        else:
            self._send(404, b"not found: try /metrics\n", "text/plain; charset=utf-8", head=head)

    def _send(
        self, code: int, body: bytes, ctype: str, *, head: bool = False, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(
        self,
        address: tuple[str, int],
        coalescer: Coalescer,
        limits: tuple[int, int],
        timeout_s: float,
        header_timeout_s: float,
    ) -> None:
        host = address[0]
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.coalescer = coalescer
        self.timeout_s = timeout_s
        self.header_timeout_s = min(header_timeout_s, timeout_s)
        self.max_connections, self.max_per_source = limits
        self._lock = threading.Lock()
        self._open = 0
        self._by_source: dict[str, int] = {}
        self._flushed = time.monotonic()
        self.log_limiter: RepeatLimiter | None = None
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        """A client that leaves mid-response is no error of ours; anything else is logged, limited."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            log.debug("connection from %s ended: %s", _source(client_address), exc)
        else:
            log.error("internal error serving %s", _source(client_address), exc_info=exc)

    def service_actions(self) -> None:
        """Called by ``serve_forever`` between polls: say what the log limiter held back."""
        super().service_actions()
        if self.log_limiter is not None and time.monotonic() - self._flushed >= 1.0:
            self._flushed = time.monotonic()
            self.log_limiter.flush(log)

    def _admit(self, source: str) -> str | None:
        """Take a slot for ``source``; the reason to refuse it instead."""
        with self._lock:
            if self._open >= self.max_connections:
                return "too many connections"
            if self._by_source.get(source, 0) >= self.max_per_source:
                return "too many connections from this address"
            self._open += 1
            self._by_source[source] = self._by_source.get(source, 0) + 1
            return None

    def _release(self, source: str) -> None:
        with self._lock:
            self._open -= 1
            left = self._by_source.get(source, 1) - 1
            if left:
                self._by_source[source] = left
            else:
                self._by_source.pop(source, None)

    def process_request(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        source = _source(client_address)
        refusal = self._admit(source)
        if refusal is not None:
            log.warning("refused a connection from %s: %s", source, refusal)
            body = refusal.encode()
            try:
                request.setblocking(False)  # never wait on a peer we are turning away
                request.send(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\nConnection: close\r\n"
                    b"Retry-After: 1\r\n\r\n%s" % (len(body), body)
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(source)
            raise

    def process_request_thread(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(_source(client_address))


def _source(client_address: tuple) -> str:  # type: ignore[type-arg]
    """The client's address without the port; IPv4-mapped IPv6 as plain IPv4."""
    host = str(client_address[0]) if client_address else ""
    return host.removeprefix("::ffff:") if "." in host else host


class MetricsServer:
    """HTTP server for one exporter; ``serve_forever`` blocks, ``shutdown`` from another thread."""

    def __init__(
        self,
        render: Callable[[], bytes],
        host: str,
        port: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        max_per_source: int = MAX_PER_SOURCE,
        timeout_s: float = TIMEOUT_S,
        header_timeout_s: float = HEADER_TIMEOUT_S,
    ) -> None:
        self.log_limiter = RepeatLimiter()
        try:
            self._httpd = _Server(
                (host, port),
                Coalescer(render),
                (max_connections, min(max_per_source, max_connections)),
                timeout_s,
                header_timeout_s,
            )
        except OSError as exc:
            shown = f"[{host}]:{port}" if ":" in host else f"{host or '*'}:{port}"
            raise FabricscopeError(f"cannot listen on {shown}: {exc.strerror or exc}") from None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/metrics"

    def serve_forever(self) -> None:
        self._httpd.log_limiter = self.log_limiter
        log.addFilter(self.log_limiter)
        try:
            self._httpd.serve_forever(poll_interval=0.5)
        finally:
            self.log_limiter.flush(log, force=True)
            log.removeFilter(self.log_limiter)

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="fabricscope-http", daemon=True)
        thread.start()
        return thread

    def shutdown(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
