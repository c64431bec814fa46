"""Throughput loops: TCP sink and source, UDP sink and source (receiver-side truth, per interval)."""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from fabricscope.bench.sockets.tcpinfo import read_tcp_info
from fabricscope.bench.sockets.wire import GO_BYTE, UDP_HEADER
from fabricscope.bench.sockets.workers.base import (
    RECV_CHUNK,
    Channel,
    Endpoint,
    SenderAware,
    WorkerError,
    cpu_s,
    from_peer,
    open_stream,
    ready_and_wait,
    set_kernel_timeouts,
    set_recv_timeout,
)


def _tcp_report(
    role: str,
    total: int,
    first_ns: int,
    last_ns: int,
    marks: list[tuple[int, int]],
    cpu: float,
    info: dict[str, int],
    **extra: float,
) -> dict[str, Any]:
    """What either end of a TCP stream reports: bytes, the interval marks, CPU and TCP_INFO."""
    return {
        "role": role,
        "bytes": total,
        "first_ns": first_ns,
        "last_ns": last_ns,
        **extra,
        "marks": marks,
        "cpu_s": cpu,
        "wall_s": (last_ns - first_ns) / 1e9,
        "tcp_info": info,
    }


def tcp_sink(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Receive until the sender closes; count bytes per interval (receiver-side truth)."""
    sock = open_stream(endpoint, cookie, cfg)
    try:
        ready_and_wait(pipe, start, cfg)
        if not isinstance(endpoint, socket.socket):
            sock.sendall(GO_BYTE)  # reverse direction: our peer sends after this byte
        buf = bytearray(max(RECV_CHUNK, int(cfg.get("msg_bytes", 0))))
        recv_into = sock.recv_into
        clock = time.monotonic_ns
        interval_ns = int(float(cfg.get("interval_s", 1.0)) * 1e9)
        cpu0 = cpu_s()
        first = recv_into(buf)
        t_first = clock()
        if not first:
            raise WorkerError("sender closed before sending data")
        total = first
        marks: list[tuple[int, int]] = []
        next_mark = t_first + interval_ns
        t_last = t_first
        # A server-side sink stops a client that keeps sending past the agreed duration.
        hard_end = t_first + int(float(cfg.get("hard_limit_s", 1e9)) * 1e9)
        while True:
            n = recv_into(buf)
            if not n:
                break
            total += n
            t_last = clock()
            if t_last >= next_mark:
                marks.append((t_last - t_first, total))
                next_mark += interval_ns
                if t_last > hard_end:
                    raise WorkerError("the peer kept sending past the test's duration")
        info = read_tcp_info(sock)
        cpu = cpu_s() - cpu0
    finally:
        sock.close()
    marks.append((t_last - t_first, total))
    return _tcp_report("sink", total, t_first, t_last, marks, cpu, info)


def tcp_source(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Send ``msg_bytes`` blocks for ``duration_s``, then close and wait for the receiver's close."""
    sock = open_stream(endpoint, cookie, cfg)
    try:
        if isinstance(endpoint, socket.socket):
            if sock.recv(1) != GO_BYTE:  # server side of a reverse test: wait for the client
                raise WorkerError("client did not start the reverse stream")
        else:
            ready_and_wait(pipe, start, cfg)
        buf = memoryview(bytearray(os.urandom(16)) * (int(cfg["msg_bytes"]) // 16 + 1))[
            : int(cfg["msg_bytes"])
        ]
        send = sock.send
        clock = time.monotonic_ns
        interval_ns = int(float(cfg.get("interval_s", 1.0)) * 1e9)
        cpu0 = cpu_s()
        t0 = clock()
        end = t0 + int(float(cfg["duration_s"]) * 1e9)
        next_mark = t0 + interval_ns
        total = 0
        marks: list[tuple[int, int]] = []
        now = t0
        while now < end:
            total += send(buf)
            now = clock()
            if now >= next_mark:
                marks.append((now - t0, total))
                next_mark += interval_ns
        info = read_tcp_info(sock)
        sock.shutdown(socket.SHUT_WR)
        # The receiver closes after reading everything: our bytes are then all delivered.
        while sock.recv(4096):
            pass
        t_end = clock()
        cpu = cpu_s() - cpu0
    finally:
        sock.close()
    marks.append((now - t0, total))
    return _tcp_report("source", total, t0, t_end, marks, cpu, info, send_s=(now - t0) / 1e9)


# ----- UDP throughput -----------------------------------------------------------------------------
def udp_sink(
    pipe: Channel, sock: socket.socket, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Count datagrams of this session until ``stop``: loss, reordering and RFC 3550 jitter.

    Until the first datagram of the session arrives, each sender's address is checked against
    the control connection's host; then the socket is connected to that sender, so the kernel
    drops everyone else's datagrams and the hot loop stays a plain ``recv_into``.
    """
    session = cookie[:8]
    sock.settimeout(None)
    set_recv_timeout(sock, 0.2)
    buf = bytearray(65536)
    recv_first, peer_ip = SenderAware(sock), cfg.get("peer_ip")
    recv_into: Callable[[bytearray], int] = recv_first
    unpack = UDP_HEADER.unpack_from
    clock = time.monotonic_ns
    interval_ns = int(float(cfg.get("interval_s", 1.0)) * 1e9)
    received = nbytes = foreign = out_of_order = 0
    max_seq = -1
    jitter_ns = 0.0
    last_transit: int | None = None
    t_first = t_last = 0
    marks: list[tuple[int, int]] = []
    next_mark = 0
    cpu0 = cpu_s()
    deadline = time.monotonic() + float(cfg["duration_s"]) + float(cfg["timeout_s"]) * 2 + 5
    while not stop.is_set():
        if time.monotonic() > deadline:
            raise WorkerError("UDP receiver was never told to stop")
        try:
            n = recv_into(buf)
        except (BlockingIOError, TimeoutError):
            continue
        now = clock()
        if n < UDP_HEADER.size:
            foreign += 1
            continue
        sess, _stream, seq, sent_ns = unpack(buf)
        if sess != session or (recv_into is recv_first and not from_peer(recv_first.sender, peer_ip)):
            foreign += 1
            continue
        if received == 0:
            t_first = now
            next_mark = now + interval_ns
            sock.connect(recv_first.sender)
            recv_into = sock.recv_into
        received += 1
        nbytes += n
        t_last = now
        if seq > max_seq:
            max_seq = seq
        else:
            out_of_order += 1
        transit = now - sent_ns
        if last_transit is not None:
            d = abs(transit - last_transit)
            jitter_ns += (d - jitter_ns) / 16.0
        last_transit = transit
        if now >= next_mark:
            marks.append((now - t_first, nbytes))
            next_mark += interval_ns
    cpu = cpu_s() - cpu0
    sock.close()
    if received:
        marks.append((t_last - t_first, nbytes))
    return {
        "role": "udp_sink",
        "received": received,
        "bytes": nbytes,
        "out_of_order": out_of_order,
        "max_seq": max_seq,
        "foreign": foreign,
        "jitter_us": jitter_ns / 1e3,
        "first_ns": t_first,
        "last_ns": t_last,
        "marks": marks,
        "cpu_s": cpu,
    }


def udp_source(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Send numbered datagrams at ``rate_bps`` (0: as fast as the socket takes them)."""
    host, port = endpoint
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.connect((host, port))
        set_kernel_timeouts(sock, float(cfg["timeout_s"]))
        ready_and_wait(pipe, start, cfg)
        size = int(cfg["size_bytes"])
        stream = int(cfg.get("stream", 0))
        rate = float(cfg["rate_bps"]) / 8.0  # bytes per second
        session = cookie[:8]
        buf = bytearray(size)
        pack_into = UDP_HEADER.pack_into
        send = sock.send
        clock = time.monotonic_ns
        sleep = time.sleep
        cpu0 = cpu_s()
        t0 = clock()
        end = t0 + int(float(cfg["duration_s"]) * 1e9)
        seq = 0
        sent_bytes = 0
        dropped_local = 0
        now = t0
        while now < end:
            if rate > 0:
                ahead = sent_bytes - (now - t0) * 1e-9 * rate
                if ahead > size:
                    sleep(min(ahead / rate, 0.002))
                    now = clock()
                    continue
            pack_into(buf, 0, session, stream, seq, now)
            try:
                send(buf)
            except (BlockingIOError, InterruptedError):
                dropped_local += 1
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    dropped_local += 1
                else:
                    raise
            seq += 1
            sent_bytes += size
            now = clock()
        cpu = cpu_s() - cpu0
    finally:
        sock.close()
    return {
        "role": "udp_source",
        "sent": seq,
        "bytes": sent_bytes,
        "dropped_local": dropped_local,
        "send_s": (now - t0) / 1e9,
        "cpu_s": cpu,
    }
