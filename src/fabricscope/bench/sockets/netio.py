"""Socket operations with deadlines: the only place bench opens control connections.

Two kinds of deadline are used, both so that a dead peer ends a run instead of hanging it:

* control sockets use Python timeouts and an absolute deadline per frame;
* data sockets (the hot loops) stay in blocking mode with kernel ``SO_RCVTIMEO`` /
  ``SO_SNDTIMEO``: a stalled ``send``/``recv`` fails after the timeout without an extra
  ``poll`` per call, which keeps Python within reach of iperf3.
"""

from __future__ import annotations

import errno
import socket
import time
from typing import Any

from fabricscope.bench.sockets.protocol import (
    ProtocolError,
    decode_body,
    decode_length,
    encode_frame,
)


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


def send_frame(sock: socket.socket, message: dict[str, Any], deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise PeerError("timed out sending to the peer")
    sock.settimeout(left)
    try:
        sock.sendall(encode_frame(message))
    except OSError as exc:
        raise PeerError(describe_os_error(exc, "send")) from None


def recv_frame(sock: socket.socket, deadline: float) -> dict[str, Any]:
    """One frame; :class:`ProtocolError` for a bad frame, :class:`PeerError` for I/O trouble."""
    length = decode_length(recv_exact(sock, 4, deadline))
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
    "PeerError",
    "ProtocolError",
    "connect",
    "describe_os_error",
    "is_loopback",
    "recv_exact",
    "recv_frame",
    "resolve",
    "send_frame",
]
