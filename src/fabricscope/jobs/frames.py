"""Length-prefixed JSON frames and socket operations with deadlines: how our processes talk.

bench's control connections and the job's store (:mod:`fabricscope.jobs.store`) speak the same
frames: a 4-byte big-endian length, then UTF-8 JSON (at most ``max_bytes``; the nesting is checked
before decoding). Two kinds of deadline are used, both so that a dead peer ends a run instead of
hanging it:

* control sockets use Python timeouts and an absolute deadline per frame;
* data sockets (the hot loops) stay in blocking mode with kernel ``SO_RCVTIMEO`` /
  ``SO_SNDTIMEO``: a stalled ``send``/``recv`` fails after the timeout without an extra
  ``poll`` per call, which keeps Python within reach of iperf3.

Both servers also listen the same way (:func:`listen`) and count the connections that have not
authenticated yet the same way (:class:`PendingConnections`).
"""

from __future__ import annotations

import errno
import json
import socket
import struct
import threading
import time
from typing import Any

from fabricscope.untrusted import json_nesting_depth

MAX_FRAME_BYTES = 64 * 1024  # bench's control frames; the job store passes its own, larger cap
MAX_JSON_DEPTH = 32  # real frames nest 4 levels (a result's reports and their intervals)

_LEN = struct.Struct("!I")


# ----- frames: a 4-byte big-endian length, then UTF-8 JSON -----------------------------------
class ProtocolError(Exception):
    """A frame or request that breaks the protocol; the message is safe to send back."""


def encode_frame(message: dict[str, Any], max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > max_bytes:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds {max_bytes}")
    return _LEN.pack(len(body)) + body


def decode_length(header: bytes, max_bytes: int = MAX_FRAME_BYTES) -> int:
    (length,) = _LEN.unpack(header)
    if length == 0 or length > max_bytes:
        raise ProtocolError(f"frame length {length} outside 1..{max_bytes}")
    return length


def decode_body(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    message = decode_json(body, max_depth)
    if not isinstance(message, dict):
        raise ProtocolError("frame is not a JSON object")
    return message


def decode_json(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """UTF-8 JSON from a peer, nesting checked first; no lone surrogates (``\\ud800``) let through."""
    if json_nesting_depth(body, max_depth) > max_depth:
        raise ProtocolError(f"frame nests deeper than {max_depth} levels")
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("frame is not UTF-8 JSON") from None
    if b"\\u" in body:  # only an escape can smuggle in a lone surrogate
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ProtocolError("frame carries text that is not valid UTF-8") from None
    return value


# ----- sockets with deadlines ---------------------------------------------------------------
class PeerError(Exception):
    """The peer is unreachable, refused, went away or stopped answering in time."""


def describe_os_error(exc: BaseException, what: str) -> str:
    if isinstance(exc, socket.timeout | TimeoutError) or getattr(exc, "errno", None) in (
        errno.EAGAIN,
        errno.EWOULDBLOCK,
    ):
        return f"{what}: timed out"
    if isinstance(exc, ConnectionRefusedError):
        return f"{what}: connection refused (is `fabricscope bench serve` running there?)"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return f"{what}: connection reset by peer (peer stopped or was killed)"
    if isinstance(exc, socket.gaierror):
        return f"{what}: cannot resolve host ({exc.strerror})"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{what}: {exc.strerror}"
    return f"{what}: {exc}"


def resolve(host: str, port: int, kind: int = socket.SOCK_STREAM) -> tuple[int, tuple[Any, ...]]:
    """First address for host:port (family, sockaddr); raises :class:`PeerError`."""
    try:
        infos = socket.getaddrinfo(host, port, 0, kind)
    except (socket.gaierror, UnicodeError) as exc:
        raise PeerError(f"{host}: cannot resolve ({getattr(exc, 'strerror', exc)})") from None
    if not infos:
        raise PeerError(f"{host}: no address")
    family, _, _, _, sockaddr = infos[0]
    return family, sockaddr


class PendingConnections:
    """Connections that have not authenticated yet, counted per source address and in total.

    Kept apart from the authenticated slots (bench's ``ServerLimits.max_clients``, the store's
    connections): a host without the token can hold at most ``per_source`` handshakes (each under
    a hello timeout), and never a slot that an authenticated client needs. Bench's server and the
    job's store both admit through it.
    """

    def __init__(self, per_source: int, total: int) -> None:
        self.per_source = per_source
        self.total = total
        self._by_source: dict[str, int] = {}
        self._count = 0
        self._lock = threading.Lock()

    def enter(self, source: str) -> str | None:
        """Count one more from ``source``; the reason to refuse it instead, if over a cap."""
        with self._lock:
            held = self._by_source.get(source, 0)
            if held >= self.per_source:
                return f"too many unauthenticated connections from {source} (limit {self.per_source})"
            if self._count >= self.total:
                return f"too many unauthenticated connections (limit {self.total})"
            self._by_source[source] = held + 1
            self._count += 1
            return None

    def held(self, source: str) -> int:
        with self._lock:
            return self._by_source.get(source, 0)

    def leave(self, source: str) -> None:
        with self._lock:
            held = self._by_source.get(source, 0)
            if held <= 1:
                self._by_source.pop(source, None)
            else:
                self._by_source[source] = held - 1
            self._count = max(0, self._count - 1)


def listen(bind: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on ``bind``:``port`` (0: any free port), with a 0.5 s accept timeout
    so its loop sees a stop request. Raises socket.gaierror (or UnicodeError) when ``bind`` does
    not resolve, OSError when it cannot be bound; the callers say which server failed."""
    family, _, _, _, sockaddr = socket.getaddrinfo(bind, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.settimeout(0.5)
    return sock


def connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """TCP connection with a connect deadline; the socket keeps ``timeout_s`` for later calls."""
    family, sockaddr = resolve(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(sockaddr)
    except OSError as exc:
        sock.close()
        raise PeerError(describe_os_error(exc, f"connect to {host}:{port}")) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exact(sock: socket.socket, count: int, deadline: float) -> bytes:
    """Exactly ``count`` bytes before ``deadline`` (time.monotonic), else :class:`PeerError`."""
    chunks = bytearray()
    while len(chunks) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise PeerError("timed out waiting for the peer")
        sock.settimeout(left)
        try:
            data = sock.recv(count - len(chunks))
        except OSError as exc:
            raise PeerError(describe_os_error(exc, "receive")) from None
        if not data:
            raise PeerError("peer closed the connection")
        chunks += data
    return bytes(chunks)


def send_frame(
    sock: socket.socket, message: dict[str, Any], deadline: float, max_bytes: int = MAX_FRAME_BYTES
) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise PeerError("timed out sending to the peer")
    sock.settimeout(left)
    try:
        sock.sendall(encode_frame(message, max_bytes))
    except OSError as exc:
        raise PeerError(describe_os_error(exc, "send")) from None


def recv_frame(sock: socket.socket, deadline: float, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """One frame; :class:`ProtocolError` for a bad frame, :class:`PeerError` for I/O trouble."""
    length = decode_length(recv_exact(sock, 4, deadline), max_bytes)
    return decode_body(recv_exact(sock, length, deadline))


def is_loopback(host: str) -> bool:
    """True when ``host`` (an address or name to bind) is only reachable from this machine."""
    import ipaddress

    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = [
    "MAX_FRAME_BYTES",
    "PeerError",
    "ProtocolError",
    "connect",
    "decode_body",
    "decode_json",
    "decode_length",
    "describe_os_error",
    "encode_frame",
    "is_loopback",
    "recv_exact",
    "recv_frame",
    "resolve",
    "send_frame",
]
