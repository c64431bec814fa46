"""Request/response loops: the responder and UDP echo (server side), round trips and connection setup (client side)."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

from fabricscope.bench.results.stats import latency_summary
from fabricscope.bench.sockets.wire import MAX_RR_BYTES, RR_CLOSE, RR_HEADER, RR_HEADER_BYTES, UDP_RR_HEADER
from fabricscope.bench.sockets.workers.base import (
    Channel,
    Endpoint,
    WorkerError,
    cookie_gate,
    cpu_s,
    from_peer,
    ready_and_wait,
    set_kernel_timeouts,
    set_recv_timeout,
)


def rr_responder(
    pipe: Channel, listener: socket.socket, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Serve request/response connections one after another until ``stop`` (latency, connect).

    Each connection starts with the cookie; each message is ``RR_HEADER`` + payload and gets
    ``resp_len`` bytes back. A message breaking the limits closes that connection only.
    """
    max_bytes = int(cfg["max_bytes"])
    timeout_s = float(cfg["timeout_s"])
    deadline = time.monotonic() + float(cfg["duration_s"]) + timeout_s * 2 + 5
    buf = bytearray(MAX_RR_BYTES)
    view = memoryview(buf)
    reply = memoryview(bytearray(max_bytes))
    unpack = RR_HEADER.unpack_from
    served = 0
    connections = 0
    rejected = 0
    cpu0 = cpu_s()
    gate = cookie_gate(listener, cookie, cfg)
    while not stop.is_set() and time.monotonic() < deadline:
        conn = gate.accept(deadline, stop)
        if conn is None:
            continue
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        set_kernel_timeouts(conn, timeout_s)
        try:
            connections += 1
            have = 0  # the gate read exactly the cookie: what follows is the first message
            while True:
                while have < RR_HEADER_BYTES:
                    n = conn.recv_into(view[have:], MAX_RR_BYTES - have)
                    if not n:
                        raise EOFError
                    have += n
                msg_len, resp_len, flags = unpack(buf)
                if not RR_HEADER_BYTES <= msg_len <= MAX_RR_BYTES or resp_len > max_bytes:
                    rejected += 1
                    break
                while have < msg_len:
                    n = conn.recv_into(view[have:], MAX_RR_BYTES - have)
                    if not n:
                        raise EOFError
                    have += n
                conn.sendall(reply[:resp_len])
                served += 1
                if flags & RR_CLOSE:
                    break
                # Closed-loop clients send nothing more before our reply; keep any surplus anyway.
                surplus = have - msg_len
                if surplus:
                    view[:surplus] = view[msg_len:have]
                have = surplus
        except (EOFError, OSError):
            pass
        finally:
            conn.close()
    gate.close()
    listener.close()
    return {
        "role": "rr_responder",
        "served": served,
        "connections": connections,
        "rejected": rejected + gate.rejected,
        "cpu_s": cpu_s() - cpu0,
    }


def udp_echo(
    pipe: Channel, sock: socket.socket, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Echo datagrams of this session from the control connection's host until ``stop``."""
    session = cookie[:8]
    peer_ip = cfg.get("peer_ip")
    set_recv_timeout(sock, 0.1)
    buf = bytearray(65536)
    view = memoryview(buf)
    served = foreign = 0
    deadline = time.monotonic() + float(cfg["duration_s"]) + float(cfg["timeout_s"]) * 2 + 5
    cpu0 = cpu_s()
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            n, addr = sock.recvfrom_into(buf)
        except (BlockingIOError, TimeoutError):
            continue
        if n < UDP_RR_HEADER.size or buf[:8] != session or not from_peer(addr, peer_ip):
            foreign += 1  # never echo to a stranger: the port must not become a reflector
            continue
        try:
            sock.sendto(view[:n], addr)
        except OSError:
            continue
        served += 1
    sock.close()
    return {"role": "udp_echo", "served": served, "foreign": foreign, "cpu_s": cpu_s() - cpu0}


def rr_client(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Closed-loop round trips for each size in ``sizes`` for ``per_size_s`` seconds each."""
    host, port = endpoint
    proto = cfg["proto"]
    timeout_s = float(cfg["timeout_s"])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    results: dict[str, Any] = {}
    if proto == "tcp":
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        sock.connect((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(cookie)
        set_kernel_timeouts(sock, timeout_s)
    else:
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.connect((host, port))
        set_kernel_timeouts(sock, min(timeout_s, 1.0))
    try:
        ready_and_wait(pipe, start, cfg)
        for size in cfg["sizes"]:
            samples, lost = (_tcp_rr if proto == "tcp" else _udp_rr)(
                sock, int(size), float(cfg["per_size_s"]), cookie, int(cfg.get("warmup", 20))
            )
            results[str(size)] = {"samples": len(samples), "lost": lost, **latency_summary(samples, "rtt")}
    finally:
        sock.close()
    return {"role": "rr_client", "sizes": results}


def _tcp_rr(
    sock: socket.socket, size: int, seconds: float, cookie: bytes, warmup: int
) -> tuple[list[int], int]:
    size = max(size, RR_HEADER_BYTES)
    msg = bytearray(size)
    RR_HEADER.pack_into(msg, 0, size, size, 0)
    buf = bytearray(size)
    view = memoryview(buf)
    sendall = sock.sendall
    recv_into = sock.recv_into
    clock = time.perf_counter_ns
    samples: list[int] = []
    append = samples.append
    end = time.monotonic() + seconds
    count = 0
    while True:
        t0 = clock()
        sendall(msg)
        have = recv_into(buf)
        while have < size:
            n = recv_into(view[have:])
            if not n:
                raise WorkerError("server closed the connection")
            have += n
        t1 = clock()
        count += 1
        if count > warmup:
            append(t1 - t0)
            if count & 15 == 0 and time.monotonic() >= end:
                break
    return samples, 0


def _udp_rr(
    sock: socket.socket, size: int, seconds: float, cookie: bytes, warmup: int
) -> tuple[list[int], int]:
    size = max(size, UDP_RR_HEADER.size)
    msg = bytearray(size)
    buf = bytearray(65536)
    session = cookie[:8]
    pack_into = UDP_RR_HEADER.pack_into
    unpack = UDP_RR_HEADER.unpack_from
    clock = time.perf_counter_ns
    samples: list[int] = []
    lost = 0
    consecutive_lost = 0
    end = time.monotonic() + seconds
    seq = 0
    while True:
        seq += 1
        pack_into(msg, 0, session, seq)
        t0 = clock()
        sock.send(msg)
        while True:
            try:
                sock.recv_into(buf)
            except (BlockingIOError, TimeoutError):
                lost += 1
                consecutive_lost += 1
                if consecutive_lost >= 5:
                    raise WorkerError("5 UDP round trips in a row got no answer (peer gone?)") from None
                break
            _sess, got = unpack(buf)
            if got == seq:
                consecutive_lost = 0
                if seq > warmup:
                    samples.append(clock() - t0)
                break
            # a late answer to an earlier (timed out) request: keep waiting for ours
        if seq & 15 == 0 and time.monotonic() >= end:
            break
    return samples, lost


class _Requests:
    """Timings of one connect client: per phase of a request, in nanoseconds."""

    def __init__(self) -> None:
        self.connect_ns: list[int] = []
        self.first_byte_ns: list[int] = []
        self.total_ns: list[int] = []
        self.close_ns: list[int] = []


@dataclass
class _Loop:
    """What both request loops share: the server, the response they wait for, until when, and the
    timings they append to."""

    address: tuple[str, int]
    family: int
    resp_bytes: int
    timeout_s: float
    end: float
    out: _Requests

    def buffer(self) -> tuple[bytearray, memoryview]:
        """The receive buffer, one byte longer than the response so that an over-long answer is seen."""
        buf = bytearray(max(self.resp_bytes, 1) + 1)
        return buf, memoryview(buf)


def _pooled(loop: _Loop, cookie: bytes, msg: bytearray) -> None:
    """Requests over one kept connection until ``end``: first byte and whole request per request."""
    buf, view = loop.buffer()
    resp_bytes, end, out = loop.resp_bytes, loop.end, loop.out
    clock = time.perf_counter_ns
    sock = socket.socket(loop.family, socket.SOCK_STREAM)
    sock.settimeout(loop.timeout_s)
    sock.connect(loop.address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    set_kernel_timeouts(sock, loop.timeout_s)
    sock.sendall(cookie)
    try:
        count = 0
        while True:
            t0 = clock()
            sock.sendall(msg)
            have = sock.recv_into(buf, resp_bytes)
            t1 = clock()
            if not have and resp_bytes:
                raise WorkerError("server closed the pooled connection")
            while have < resp_bytes:
                n = sock.recv_into(view[have:], resp_bytes - have)
                if not n:
                    raise WorkerError("server closed the pooled connection")
                have += n
            t2 = clock()
            out.first_byte_ns.append(t1 - t0)
            out.total_ns.append(t2 - t0)
            count += 1
            if count & 7 == 0 and time.monotonic() >= end:
                break
    finally:
        sock.close()


def _per_request(loop: _Loop, first_msg: bytes) -> None:
    """A new connection per request until ``end``: connect, first byte, close and the whole."""
    buf, view = loop.buffer()
    resp_bytes, end, out = loop.resp_bytes, loop.end, loop.out
    clock = time.perf_counter_ns
    while time.monotonic() < end:
        t0 = clock()
        sock = socket.socket(loop.family, socket.SOCK_STREAM)
        set_kernel_timeouts(sock, loop.timeout_s)  # SO_SNDTIMEO also bounds connect() on Linux
        try:
            sock.connect(loop.address)
            t1 = clock()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(first_msg)
            have = sock.recv_into(buf)
            t2 = clock()
            while True:  # the response, then the server's close
                n = sock.recv_into(view[have:]) if have < len(buf) else 0
                if not n:
                    break
                have += n
            if have != resp_bytes:
                raise WorkerError(f"short response ({have} of {resp_bytes} bytes)")
            t3 = clock()
        finally:
            sock.close()
        t4 = clock()
        out.connect_ns.append(t1 - t0)
        out.first_byte_ns.append(t2 - t1)
        out.close_ns.append(t4 - t3)
        out.total_ns.append(t4 - t0)


def connect_client(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Per-request connections (connect, request, first byte, close) or one pooled connection."""
    host, port = endpoint
    timeout_s = float(cfg["timeout_s"])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    req_bytes = max(int(cfg["request_bytes"]), RR_HEADER_BYTES)
    resp_bytes = int(cfg["response_bytes"])
    pooled = cfg["mode"] == "pooled"
    msg = bytearray(req_bytes)
    RR_HEADER.pack_into(msg, 0, req_bytes, resp_bytes, 0 if pooled else RR_CLOSE)
    timings = _Requests()
    ready_and_wait(pipe, start, cfg)
    end = time.monotonic() + float(cfg["duration_s"])
    cpu0 = cpu_s()
    t_start = time.monotonic()
    loop = _Loop((host, port), family, resp_bytes, timeout_s, end, timings)
    if pooled:
        _pooled(loop, cookie, msg)
    else:
        _per_request(loop, cookie + bytes(msg))
    report: dict[str, Any] = {
        "role": "connect_client",
        "mode": cfg["mode"],
        "requests": len(timings.total_ns),
        "elapsed_s": time.monotonic() - t_start,
        "cpu_s": cpu_s() - cpu0,
    }
    report.update(latency_summary(timings.connect_ns, "connect"))
    report.update(latency_summary(timings.first_byte_ns, "first_byte"))
    report.update(latency_summary(timings.close_ns, "close"))
    report.update(latency_summary(timings.total_ns, "request"))
    return report
