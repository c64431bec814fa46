"""What every worker loop shares: the line to the parent, socket deadlines, the cookie gate.

Every socket has a kernel timeout so that a dead peer ends the loop (no extra ``poll`` per call
in the hot loops). Standard library only, so that worker processes start fast.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import socket
import struct
import sys
import threading
import time
from typing import Any

from fabricscope.bench.sockets.dataport import COOKIE_TIMEOUT_S, CookieGate, same_host

Endpoint = Any  # socket.socket (server side) or tuple[str, int] (client side)
RECV_CHUNK = 256 * 1024
_SELF = resource.RUSAGE_SELF


class WorkerError(Exception):
    """A data-plane failure with a one-line reason."""


class Channel:
    """The worker's line to its parent: JSON lines on stdout; ``go``/``stop`` lines on stdin."""

    def __init__(self) -> None:
        self.start = threading.Event()
        self.stop = threading.Event()
        self._out = sys.stdout

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message) + "\n")
        self._out.flush()

    def listen(self, stdin: Any) -> None:
        """Background thread: set the events as lines arrive; EOF (parent gone) means stop."""
        for line in stdin:
            word = line.strip()
            if word == "go":
                self.start.set()
            elif word == "stop":
                self.stop.set()
        # EOF: the parent is gone (or done with us). A worker never outlives its parent: a
        # killed server or client must not leave streams running on the host.
        os._exit(3)


def os_reason(exc: OSError, what: str) -> str:
    if isinstance(exc, socket.timeout | TimeoutError) or exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
        return f"{what}: peer stopped answering (timed out)"
    if isinstance(exc, ConnectionRefusedError):
        return f"{what}: connection refused"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return f"{what}: connection reset by peer (peer stopped or was killed)"
    return f"{what}: {exc.strerror or exc}"


def cpu_s() -> float:
    usage = resource.getrusage(_SELF)
    return usage.ru_utime + usage.ru_stime


def timeval(timeout_s: float) -> bytes:
    seconds = int(timeout_s)
    return struct.pack("ll", seconds, int((timeout_s - seconds) * 1e6))


def set_kernel_timeouts(sock: socket.socket, timeout_s: float) -> None:
    """Blocking socket whose send/recv (and connect) fail after ``timeout_s`` without progress.

    Kernel timeouts instead of Python's: no extra ``poll`` per call in the hot loops.
    """
    sock.settimeout(None)
    tv = timeval(timeout_s)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def open_stream(endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any]) -> socket.socket:
    """Connected data socket: connect and send the cookie (client), or accept and check it (server)."""
    timeout_s = float(cfg["timeout_s"])
    if isinstance(endpoint, socket.socket):
        gate = cookie_gate(endpoint, cookie, cfg)
        found = gate.accept(time.monotonic() + float(cfg.get("accept_timeout_s", timeout_s)))
        gate.close()
        if found is None:
            raise WorkerError("no data connection from the client in time")
        sock = found
    else:
        host, port = endpoint
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        sock.connect((host, port))
        sock.sendall(cookie)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    window = cfg.get("window_bytes")
    if window:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(window))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(window))
    set_kernel_timeouts(sock, timeout_s)
    return sock


def cookie_gate(listener: socket.socket, cookie: bytes, cfg: dict[str, Any]) -> CookieGate:
    """Server side: who may connect (the control peer), and how long a cookie may take."""
    return CookieGate(
        listener,
        cookie,
        allowed_peer=cfg.get("peer_ip"),
        cookie_timeout_s=float(cfg.get("cookie_timeout_s", COOKIE_TIMEOUT_S)),
        mailbox=cfg.get("mailbox"),
    )


def ready_and_wait(pipe: Channel, start: Any, cfg: dict[str, Any]) -> None:
    """Client side: tell the parent we are connected, then wait for the common start signal."""
    if start is None:
        return
    pipe.send({"ready": True})
    if not start.wait(float(cfg["timeout_s"]) + 5.0) or pipe.stop.is_set():
        raise WorkerError("the run was never started (parent gave up)")


class SenderAware:
    """``recv_into`` that remembers each datagram's sender (until the socket is connected)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sender: Any = None

    def __call__(self, into: bytearray) -> int:
        count, self.sender = self.sock.recvfrom_into(into)
        return count


def from_peer(addr: Any, peer_ip: str | None) -> bool:
    """True when a datagram's sender is the control connection's host (or none is known)."""
    return peer_ip is None or addr[0] == peer_ip or same_host(str(addr[0]), peer_ip)


def set_recv_timeout(sock: socket.socket, timeout_s: float) -> None:
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval(timeout_s))
