"""The data plane: loops that run in their own processes, one per stream, on both ends.

Each worker gets a pipe to report on, an *endpoint* (a listening/bound socket on the server
side, a ``(host, port)`` address on the client side), the test cookie and a config dict. It
sends at most one ``{"ready": True}`` (client side) and exactly one final report dict, which
carries ``"error"`` when the run could not complete. Standard library only, so that worker
processes start fast; every socket has a kernel timeout so that a dead peer ends the loop.

Worker processes exist because one Python process cannot both send and receive at the speed
of a C tool: the GIL serialises the per-call overhead of every stream. With one process per
stream the work is the kernel's copy, as in iperf3.
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
import traceback
from collections.abc import Callable
from typing import Any

from fabricscope.bench.dataport import COOKIE_TIMEOUT_S, CookieGate, Mailbox, same_host
from fabricscope.bench.stats import latency_summary
from fabricscope.bench.tcpinfo import read_tcp_info
from fabricscope.bench.wire import (
    GO_BYTE,
    MAX_RR_BYTES,
    RR_CLOSE,
    RR_HEADER,
    RR_HEADER_BYTES,
    UDP_HEADER,
    UDP_RR_HEADER,
)

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


def main() -> None:
    """``python -m fabricscope.bench.workers``: first stdin line is the job as JSON.

    ``{"name": ..., "endpoint": {"fd": N} | {"host": h, "port": p}, "cookie": hex, "cfg": {...},
    "sync": bool}``. A passed socket arrives as an inherited file descriptor.
    """
    channel = Channel()
    try:
        job = json.loads(sys.stdin.readline())
        name = job["name"]
        func: Callable[..., dict[str, Any]] = _WORKERS[name]
        ep = job["endpoint"]
        endpoint: Endpoint = (
            socket.socket(fileno=int(ep["fd"])) if "fd" in ep else (str(ep["host"]), int(ep["port"]))
        )
        cookie = bytes.fromhex(job["cookie"])
        cfg = job["cfg"]
        if "mailbox" in ep:  # server side: connections handed between this listener's workers
            outbox, inbox = (socket.socket(fileno=int(fd)) for fd in ep["mailbox"])
            cfg["mailbox"] = Mailbox(outbox, inbox)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        channel.send({"error": f"bad worker job: {exc}"})
        return
    threading.Thread(target=channel.listen, args=(sys.stdin,), daemon=True).start()
    start = channel.start if job.get("sync") else None
    try:
        report = func(channel, endpoint, cookie, cfg, start, channel.stop)
    except WorkerError as exc:
        report = {"error": str(exc)}
    except OSError as exc:
        report = {"error": _os_reason(exc, name)}
    except Exception as exc:  # report, never a silent death of a worker
        report = {
            "error": f"{name}: internal error {type(exc).__name__}: {exc}",
            "trace": traceback.format_exc(limit=5),
        }
    report.setdefault("worker", name)
    try:
        channel.send(report)
    except (OSError, ValueError):
        pass


def _os_reason(exc: OSError, what: str) -> str:
    if isinstance(exc, socket.timeout | TimeoutError) or exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
        return f"{what}: peer stopped answering (timed out)"
    if isinstance(exc, ConnectionRefusedError):
        return f"{what}: connection refused"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return f"{what}: connection reset by peer (peer stopped or was killed)"
    return f"{what}: {exc.strerror or exc}"


def _cpu_s() -> float:
    usage = resource.getrusage(_SELF)
    return usage.ru_utime + usage.ru_stime


def _timeval(timeout_s: float) -> bytes:
    seconds = int(timeout_s)
    return struct.pack("ll", seconds, int((timeout_s - seconds) * 1e6))


def set_kernel_timeouts(sock: socket.socket, timeout_s: float) -> None:
    """Blocking socket whose send/recv (and connect) fail after ``timeout_s`` without progress.

    Kernel timeouts instead of Python's: no extra ``poll`` per call in the hot loops.
    """
    sock.settimeout(None)
    tv = _timeval(timeout_s)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


_set_timeouts = set_kernel_timeouts


def _open_stream(endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any]) -> socket.socket:
    """Connected data socket: connect and send the cookie (client), or accept and check it (server)."""
    timeout_s = float(cfg["timeout_s"])
    if isinstance(endpoint, socket.socket):
        gate = _gate(endpoint, cookie, cfg)
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
    _set_timeouts(sock, timeout_s)
    return sock


def _gate(listener: socket.socket, cookie: bytes, cfg: dict[str, Any]) -> CookieGate:
    """Server side: who may connect (the control peer), and how long a cookie may take."""
    return CookieGate(
        listener,
        cookie,
        allowed_peer=cfg.get("peer_ip"),
        cookie_timeout_s=float(cfg.get("cookie_timeout_s", COOKIE_TIMEOUT_S)),
        mailbox=cfg.get("mailbox"),
    )


def _ready_and_wait(pipe: Channel, start: Any, cfg: dict[str, Any]) -> None:
    """Client side: tell the parent we are connected, then wait for the common start signal."""
    if start is None:
        return
    pipe.send({"ready": True})
    if not start.wait(float(cfg["timeout_s"]) + 5.0) or pipe.stop.is_set():
        raise WorkerError("the run was never started (parent gave up)")


# ----- TCP throughput -----------------------------------------------------------------------------
def tcp_sink(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Receive until the sender closes; count bytes per interval (receiver-side truth)."""
    sock = _open_stream(endpoint, cookie, cfg)
    try:
        _ready_and_wait(pipe, start, cfg)
        if not isinstance(endpoint, socket.socket):
            sock.sendall(GO_BYTE)  # reverse direction: our peer sends after this byte
        buf = bytearray(max(RECV_CHUNK, int(cfg.get("msg_bytes", 0))))
        recv_into = sock.recv_into
        clock = time.monotonic_ns
        interval_ns = int(float(cfg.get("interval_s", 1.0)) * 1e9)
        cpu0 = _cpu_s()
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
        cpu = _cpu_s() - cpu0
    finally:
        sock.close()
    marks.append((t_last - t_first, total))
    return {
        "role": "sink",
        "bytes": total,
        "first_ns": t_first,
        "last_ns": t_last,
        "marks": marks,
        "cpu_s": cpu,
        "wall_s": (t_last - t_first) / 1e9,
        "tcp_info": info,
    }


def tcp_source(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Send ``msg_bytes`` blocks for ``duration_s``, then close and wait for the receiver's close."""
    sock = _open_stream(endpoint, cookie, cfg)
    try:
        if isinstance(endpoint, socket.socket):
            if sock.recv(1) != GO_BYTE:  # server side of a reverse test: wait for the client
                raise WorkerError("client did not start the reverse stream")
        else:
            _ready_and_wait(pipe, start, cfg)
        buf = memoryview(bytearray(os.urandom(16)) * (int(cfg["msg_bytes"]) // 16 + 1))[
            : int(cfg["msg_bytes"])
        ]
        send = sock.send
        clock = time.monotonic_ns
        interval_ns = int(float(cfg.get("interval_s", 1.0)) * 1e9)
        cpu0 = _cpu_s()
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
        cpu = _cpu_s() - cpu0
    finally:
        sock.close()
    marks.append((now - t0, total))
    return {
        "role": "source",
        "bytes": total,
        "first_ns": t0,
        "last_ns": t_end,
        "send_s": (now - t0) / 1e9,
        "marks": marks,
        "cpu_s": cpu,
        "wall_s": (t_end - t0) / 1e9,
        "tcp_info": info,
    }


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
    _set_timeouts_rcv(sock, 0.2)
    buf = bytearray(65536)
    recv_first, peer_ip = _SenderAware(sock), cfg.get("peer_ip")
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
    cpu0 = _cpu_s()
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
        if sess != session or (recv_into is recv_first and not _from_peer(recv_first.sender, peer_ip)):
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
    cpu = _cpu_s() - cpu0
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


class _SenderAware:
    """``recv_into`` that remembers each datagram's sender (until the socket is connected)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sender: Any = None

    def __call__(self, into: bytearray) -> int:
        count, self.sender = self.sock.recvfrom_into(into)
        return count


def _from_peer(addr: Any, peer_ip: str | None) -> bool:
    """True when a datagram's sender is the control connection's host (or none is known)."""
    return peer_ip is None or addr[0] == peer_ip or same_host(str(addr[0]), peer_ip)


def _set_timeouts_rcv(sock: socket.socket, timeout_s: float) -> None:
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(timeout_s))


def udp_source(
    pipe: Channel, endpoint: Endpoint, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Send numbered datagrams at ``rate_bps`` (0: as fast as the socket takes them)."""
    host, port = endpoint
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.connect((host, port))
        _set_timeouts(sock, float(cfg["timeout_s"]))
        _ready_and_wait(pipe, start, cfg)
        size = int(cfg["size_bytes"])
        stream = int(cfg.get("stream", 0))
        rate = float(cfg["rate_bps"]) / 8.0  # bytes per second
        session = cookie[:8]
        buf = bytearray(size)
        pack_into = UDP_HEADER.pack_into
        send = sock.send
        clock = time.monotonic_ns
        sleep = time.sleep
        cpu0 = _cpu_s()
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
        cpu = _cpu_s() - cpu0
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


# ----- request/response ---------------------------------------------------------------------------
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
    cpu0 = _cpu_s()
    gate = _gate(listener, cookie, cfg)
    while not stop.is_set() and time.monotonic() < deadline:
        conn = gate.accept(deadline, stop)
        if conn is None:
            continue
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _set_timeouts(conn, timeout_s)
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
        "cpu_s": _cpu_s() - cpu0,
    }


def udp_echo(
    pipe: Channel, sock: socket.socket, cookie: bytes, cfg: dict[str, Any], start: Any, stop: Any
) -> dict[str, Any]:
    """Echo datagrams of this session from the control connection's host until ``stop``."""
    session = cookie[:8]
    peer_ip = cfg.get("peer_ip")
    _set_timeouts_rcv(sock, 0.1)
    buf = bytearray(65536)
    view = memoryview(buf)
    served = foreign = 0
    deadline = time.monotonic() + float(cfg["duration_s"]) + float(cfg["timeout_s"]) * 2 + 5
    cpu0 = _cpu_s()
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            n, addr = sock.recvfrom_into(buf)
        except (BlockingIOError, TimeoutError):
            continue
        if n < UDP_RR_HEADER.size or buf[:8] != session or not _from_peer(addr, peer_ip):
            foreign += 1  # never echo to a stranger: the port must not become a reflector
            continue
        try:
            sock.sendto(view[:n], addr)
        except OSError:
            continue
        served += 1
    sock.close()
    return {"role": "udp_echo", "served": served, "foreign": foreign, "cpu_s": _cpu_s() - cpu0}


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
        _set_timeouts(sock, timeout_s)
    else:
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.connect((host, port))
        _set_timeouts(sock, min(timeout_s, 1.0))
    try:
        _ready_and_wait(pipe, start, cfg)
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
    first_msg = cookie + bytes(msg)
    buf = bytearray(max(resp_bytes, 1) + 1)
    view = memoryview(buf)
    clock = time.perf_counter_ns
    connect_ns: list[int] = []
    first_byte_ns: list[int] = []
    total_ns: list[int] = []
    close_ns: list[int] = []
    _ready_and_wait(pipe, start, cfg)
    end = time.monotonic() + float(cfg["duration_s"])
    cpu0 = _cpu_s()
    t_start = time.monotonic()
    if pooled:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        sock.connect((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _set_timeouts(sock, timeout_s)
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
                first_byte_ns.append(t1 - t0)
                total_ns.append(t2 - t0)
                count += 1
                if count & 7 == 0 and time.monotonic() >= end:
                    break
        finally:
            sock.close()
    else:
        while time.monotonic() < end:
            t0 = clock()
            sock = socket.socket(family, socket.SOCK_STREAM)
            _set_timeouts(sock, timeout_s)  # SO_SNDTIMEO also bounds connect() on Linux
            try:
                sock.connect((host, port))
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
            connect_ns.append(t1 - t0)
            first_byte_ns.append(t2 - t1)
            close_ns.append(t4 - t3)
            total_ns.append(t4 - t0)
    elapsed = time.monotonic() - t_start
    report: dict[str, Any] = {
        "role": "connect_client",
        "mode": cfg["mode"],
        "requests": len(total_ns),
        "elapsed_s": elapsed,
        "cpu_s": _cpu_s() - cpu0,
    }
    report.update(latency_summary(connect_ns, "connect"))
    report.update(latency_summary(first_byte_ns, "first_byte"))
    report.update(latency_summary(close_ns, "close"))
    report.update(latency_summary(total_ns, "request"))
    return report


_WORKERS: dict[str, Callable[..., dict[str, Any]]] = {
    "tcp_sink": tcp_sink,
    "tcp_source": tcp_source,
    "udp_sink": udp_sink,
    "udp_source": udp_source,
    "rr_responder": rr_responder,
    "udp_echo": udp_echo,
    "rr_client": rr_client,
    "connect_client": connect_client,
}


if __name__ == "__main__":
    main()
