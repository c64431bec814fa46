"""``bench incast``: N senders answer one receiver at once, in synchronized rounds.

This is the partition/aggregate pattern of inference fan-in and of gradient or KV gathers: the
receiver (rank 0) asks every sender for a response of a fixed size at the same moment, and a
round ends when the last byte of the last response is in. As N grows, the responses meet in
the queue of the switch port towards the receiver; when that queue is shallow, TCP loses whole
windows, waits for its retransmission timeout (200 ms minimum on Linux), and goodput collapses.

Wiring: rank 0 listens at MASTER_ADDR:MASTER_PORT (the address the launcher already gives every
rank, so no store or SSH is needed); every other rank connects there, proves it belongs to the
job by signing rank 0's fresh nonce with the job's secret (:mod:`fabricscope.jobs.secret`:
FABRICSCOPE_JOB_TOKEN, our launchers' token, or under Slurm a key rank 0 hands over through munge),
and then answers requests on that one TCP connection. Without any secret (torchrun or mpirun and
no token) nothing proves a sender belongs to the job: see docs/security.md. Every wait has a
deadline: a sender that dies or stalls ends the run with an error naming it.

Request (receiver -> sender), 9 bytes: op (u8) and a size (u64, network order). op RESPOND asks
for ``size`` bytes of data; op REPORT asks for the sender's counters since its last report, as
one frame; op STOP ends the job.
"""

from __future__ import annotations

import math
import os
import queue
import secrets
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench.counters import CounterProbe
from fabricscope.bench.results.schema import BenchResult, IncastPoint, new_result
from fabricscope.bench.results.stats import percentile
from fabricscope.bench.sockets.tcpinfo import read_tcp_info
from fabricscope.errors import FabricscopeError
from fabricscope.jobs import rendezvous
from fabricscope.jobs.frames import (
    PeerError,
    ProtocolError,
    describe_os_error,
    recv_exact,
    recv_frame,
    send_frame,
)
from fabricscope.jobs.launch import DistEnv
from fabricscope.jobs.secret import JobSecret, SecretError, munge_credential, open_credential
from fabricscope.jobs.wire import check_nonce, check_text, sign, verify

HELLO_MAGIC = "fabricscope-incast/1"
OP_RESPOND, OP_REPORT, OP_STOP = 1, 2, 3
_REQUEST = struct.Struct("!BQ")
MAX_RESPONSE_BYTES = 1 << 30
MAX_ROUNDS = 100_000
HELLO_DEADLINE_S = 5.0
MAX_PENDING_HELLOS = 64  # connections whose hello is still being read
_JOIN_POLL_S = 0.05  # how often the join loop looks at the hellos read
CHUNK = 1 << 20


class IncastError(FabricscopeError):
    """The incast job could not be set up or a sender failed during it."""


class IncastParams(BaseModel):
    """What to measure; validated before anything is sent."""

    model_config = ConfigDict(extra="forbid")

    senders: list[int] = Field(default_factory=list)  # sender counts to measure; empty: 1, 2, 4 ... all
    size_bytes: int = Field(default=256 * 1024, ge=1, le=MAX_RESPONSE_BYTES)
    rounds: int = Field(default=50, ge=1, le=MAX_ROUNDS)
    warmup: int = Field(default=2, ge=0, le=1000)
    congestion: str | None = Field(
        default=None, pattern=r"^[a-z0-9_]{1,16}$"
    )  # TCP_CONGESTION; None: the host's
    round_timeout_s: float = Field(default=10.0, gt=0, le=600)
    join_timeout_s: float = Field(default=60.0, gt=0, le=3600)


def sender_counts(requested: list[int], available: int) -> list[int]:
    """The N to measure: as asked (each within 1..available), or 1, 2, 4 ... up to every sender."""
    if available < 1:
        raise IncastError("incast needs at least 2 ranks: a receiver (rank 0) and one sender")
    if requested:
        bad = [n for n in requested if not 1 <= n <= available]
        if bad:
            raise IncastError(f"--senders {bad[0]}: this job has {available} senders (ranks 1..{available})")
        return sorted(set(requested))
    counts = [1 << k for k in range(int(math.log2(available)) + 1)]
    return counts if counts[-1] == available else [*counts, available]


def job_secret(env: DistEnv) -> tuple[JobSecret, bool]:
    """The job's secret and whether rank 0 hands it over through munge."""
    try:
        return rendezvous.job_secret(env, os.environ)
    except SecretError as exc:
        raise IncastError(str(exc)) from None


def sender_hello(
    sock: socket.socket, rank: int, host: str, secret: JobSecret, by_munge: bool, deadline: float
) -> None:
    """Join rank 0: say who we are with a fresh nonce, then sign rank 0's nonce with the job's key."""
    nonce = secrets.token_hex(16)
    send_frame(sock, {"hello": HELLO_MAGIC, "rank": rank, "host": host, "nonce": nonce}, deadline)
    challenge = recv_frame(sock, deadline)
    key = secret.key
    if by_munge:
        try:
            key = open_credential(str(challenge.get("credential", "")), secret.job, nonce)
        except SecretError as exc:
            raise IncastError(f"rank {rank}: {exc}") from None
    mac = sign(key, [secret.job, "incast", rank, host, str(challenge.get("nonce")), nonce])
    send_frame(sock, {"mac": mac}, deadline)


def _set_congestion(sock: socket.socket, name: str | None) -> None:
    if name is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
    except OSError as exc:
        available = _read_first_line("/proc/sys/net/ipv4/tcp_available_congestion_control")
        raise IncastError(
            f"--congestion {name}: {exc.strerror or exc} (this host has: {available or 'unknown'}; "
            "an algorithm outside net.ipv4.tcp_allowed_congestion_control needs root)"
        ) from None


def _read_first_line(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.readline().strip()
    except OSError:
        return ""


def _congestion_of(sock: socket.socket) -> str | None:
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode() or None
    except OSError:
        return None


# ----- sender ------------------------------------------------------------------------------
def run_sender(env: DistEnv, params: IncastParams) -> None:
    """Connect to rank 0, then answer its requests until it says stop."""
    deadline = time.monotonic() + params.join_timeout_s
    sock = _connect_with_retry(env.master_addr, env.master_port, deadline)
    try:
        _set_congestion(sock, params.congestion)
        secret, by_munge = job_secret(env)
        sender_hello(
            sock, env.rank, (env.host_label or socket.gethostname())[:64], secret, by_munge, deadline
        )
        probe = CounterProbe(peer_host=env.master_addr)
        probe.before()
        retrans_before = read_tcp_info(sock).get("total_retrans", 0)
        payload = memoryview(bytes(min(CHUNK, params.size_bytes)))
        idle = max(params.round_timeout_s * (params.rounds + params.warmup + 2), params.join_timeout_s) * 4
        while True:
            op, size = _REQUEST.unpack(recv_exact(sock, _REQUEST.size, time.monotonic() + idle))
            if op == OP_RESPOND:
                if not 0 < size <= MAX_RESPONSE_BYTES:
                    raise IncastError(f"rank 0 asked for {size} bytes (at most {MAX_RESPONSE_BYTES})")
                _send_bytes(sock, payload, size, params.round_timeout_s)
            elif op == OP_REPORT:
                deltas = probe.after()
                retrans = read_tcp_info(sock).get("total_retrans", 0)
                report = {
                    "retransmits": max(0, retrans - retrans_before),
                    "timeouts": deltas.netstat.get("TcpExt.TCPTimeouts", 0),
                    "netns": _netns_id(),
                    "netstat_retrans": deltas.netstat.get("Tcp.RetransSegs", 0),
                }
                send_frame(sock, report, time.monotonic() + params.round_timeout_s)
                probe.before()
                retrans_before = retrans
            elif op == OP_STOP:
                return
            else:
                raise IncastError(f"rank 0 sent an unknown request {op}")
    except (PeerError, ProtocolError) as exc:
        raise IncastError(f"rank {env.rank}: {exc}") from None
    finally:
        sock.close()


def _connect_with_retry(host: str, port: int, deadline: float) -> socket.socket:
    """Rank 0 may start listening after us: retry until the join deadline."""
    last = "no attempt"
    while time.monotonic() < deadline:
        try:
            sock = socket.create_connection(
                (host, port), timeout=min(5.0, max(0.1, deadline - time.monotonic()))
            )
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            last = describe_os_error(exc, f"connect to rank 0 at {host}:{port}")
            time.sleep(0.2)
    raise IncastError(f"{last} (gave up after the join timeout)")


def _send_bytes(sock: socket.socket, payload: memoryview, size: int, timeout_s: float) -> None:
    sock.settimeout(timeout_s)
    left = size
    try:
        while left:
            chunk = payload[: min(left, len(payload))]
            sock.sendall(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise PeerError(describe_os_error(exc, "send response")) from None


def _netns_id() -> str:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return "unknown"


# ----- receiver ----------------------------------------------------------------------------
@dataclass
class _Sender:
    rank: int
    host: str
    sock: socket.socket
    left: int = 0


@dataclass
class _Receiver:
    env: DistEnv
    params: IncastParams
    senders: list[_Sender] = field(default_factory=list)
    congestion: str | None = None

    def join(self, listener: socket.socket) -> None:
        """Accept every sender's hello before the join deadline; strangers are closed unread.

        Hellos are read side by side, each on its own thread under its own short deadline, so a
        connection that says nothing delays no sender; at most MAX_PENDING_HELLOS wait at once
        (more are closed unread)."""
        expected = self.env.world_size - 1
        deadline = time.monotonic() + self.params.join_timeout_s
        secret = job_secret(self.env)
        by_rank: dict[int, _Sender] = {}
        heard: queue.SimpleQueue[_Sender | None] = queue.SimpleQueue()
        pending = 0
        try:
            while len(by_rank) < expected:
                while not heard.empty():  # the hellos read so far: the first of each rank joins
                    pending -= 1
                    sender = heard.get()
                    if sender is not None and sender.rank not in by_rank:
                        by_rank[sender.rank] = sender
                    elif sender is not None:
                        sender.sock.close()
                if len(by_rank) == expected:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(1, expected + 1)) - set(by_rank))
                    raise IncastError(
                        f"ranks {_ranges(missing)} did not join within {self.params.join_timeout_s:g} s"
                    )
                listener.settimeout(min(left, _JOIN_POLL_S))
                try:
                    sock, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError as exc:
                    raise IncastError(describe_os_error(exc, "accept")) from None
                if pending >= MAX_PENDING_HELLOS:
                    sock.close()
                    continue
                pending += 1
                hello_deadline = min(deadline, time.monotonic() + HELLO_DEADLINE_S)
                threading.Thread(
                    target=_hello_into, args=(heard, sock, secret, expected, hello_deadline),
                    daemon=True, name="fabricscope-incast-hello",
                ).start()  # fmt: skip
        except BaseException:
            for sender in by_rank.values():
                sender.sock.close()
            raise
        self.senders = [by_rank[r] for r in sorted(by_rank)]
        self.congestion = _congestion_of(self.senders[0].sock) if self.senders else None

    def round(self, count: int) -> float:
        """One synchronized round with the first ``count`` senders; seconds until all is in."""
        group = self.senders[:count]
        request = _REQUEST.pack(OP_RESPOND, self.params.size_bytes)
        buffer = bytearray(min(CHUNK, self.params.size_bytes))
        with selectors.DefaultSelector() as selector:
            start = time.perf_counter()
            for sender in group:
                sender.left = self.params.size_bytes
                _send_request(sender, request)
                selector.register(sender.sock, selectors.EVENT_READ, sender)
            waiting = len(group)
            deadline = start + self.params.round_timeout_s
            while waiting:
                events = selector.select(max(0.0, deadline - time.perf_counter()))
                if not events:
                    late = [s for s in group if s.left]
                    raise IncastError(
                        f"round did not complete within {self.params.round_timeout_s:g} s: "
                        + ", ".join(f"rank {s.rank} ({s.host}) owes {s.left} bytes" for s in late[:4])
                    )
                for key, _ in events:
                    sender = key.data
                    try:
                        got = sender.sock.recv_into(buffer, min(len(buffer), sender.left))
                    except OSError as exc:
                        raise IncastError(
                            f"rank {sender.rank} ({sender.host}): {describe_os_error(exc, 'receive')}"
                        ) from None
                    if got == 0:
                        raise IncastError(
                            f"rank {sender.rank} ({sender.host}) closed the connection mid-round"
                        )
                    sender.left -= got
                    if sender.left == 0:
                        waiting -= 1
                        selector.unregister(sender.sock)
            return time.perf_counter() - start

    def reports(self) -> tuple[int, int]:
        """Retransmits (per socket, exact) and RTO timeouts (per network namespace) since the last call."""
        request = _REQUEST.pack(OP_REPORT, 0)
        retransmits, timeouts_by_ns = 0, {}
        deadline = time.monotonic() + self.params.round_timeout_s
        for sender in self.senders:
            _send_request(sender, request)
        for sender in self.senders:
            try:
                report = recv_frame(sender.sock, deadline)
            except (PeerError, ProtocolError) as exc:
                raise IncastError(f"rank {sender.rank} ({sender.host}): counters: {exc}") from None
            retransmits += _count(report.get("retransmits"))
            netns = str(report.get("netns", sender.rank))[:64]
            timeouts_by_ns[netns] = max(timeouts_by_ns.get(netns, 0), _count(report.get("timeouts")))
        return retransmits, sum(timeouts_by_ns.values())

    def stop(self) -> None:
        for sender in self.senders:
            try:
                sender.sock.sendall(_REQUEST.pack(OP_STOP, 0))
            except OSError:
                pass
            sender.sock.close()


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62 else 0


def _send_request(sender: _Sender, request: bytes) -> None:
    try:
        sender.sock.settimeout(HELLO_DEADLINE_S)
        sender.sock.sendall(request)
        sender.sock.setblocking(False)
    except OSError as exc:
        raise IncastError(
            f"rank {sender.rank} ({sender.host}): {describe_os_error(exc, 'send request')}"
        ) from None


def _hello_into(
    heard: queue.SimpleQueue,
    sock: socket.socket,
    secret: tuple[JobSecret, bool],
    expected: int,
    deadline: float,
) -> None:
    heard.put(_hello(sock, secret, expected, deadline))


def _hello(
    sock: socket.socket, secret: tuple[JobSecret, bool], expected: int, deadline: float
) -> _Sender | None:
    """A sender's hello and its signature over our nonce, read before ``deadline``; anything
    wrong closes the socket."""
    (job_key, by_munge) = secret
    try:
        hello = recv_frame(sock, deadline)
        rank = hello.get("rank")
        if (
            hello.get("hello") == HELLO_MAGIC
            and isinstance(rank, int)
            and not isinstance(rank, bool)
            and 1 <= rank <= expected
        ):
            host, nonce = check_text(hello.get("host"), "host", 64), check_nonce(hello.get("nonce"))
            challenge: dict[str, Any] = {"nonce": secrets.token_hex(16)}
            if by_munge and job_key.key is not None:
                challenge["credential"] = munge_credential(job_key.job, job_key.key, nonce, os.getuid())
            send_frame(sock, challenge, deadline)
            answer = recv_frame(sock, deadline)
            if verify(
                job_key.key, [job_key.job, "incast", rank, host, challenge["nonce"], nonce], answer.get("mac")
            ):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return _Sender(rank=rank, host=host or f"rank{rank}", sock=sock)
    except (PeerError, ProtocolError, SecretError, OSError):
        pass
    sock.close()
    return None


def _ranges(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks[:8]) + (" ..." if len(ranks) > 8 else "")


def run_receiver(env: DistEnv, params: IncastParams, progress: Any = None) -> BenchResult:
    """Rank 0: listen, gather the senders, run every sender count, and build the result."""
    counts = sender_counts(params.senders, env.world_size - 1)
    result = new_result("incast", params.model_copy(update={"senders": counts}))
    started = time.monotonic()
    receiver = _Receiver(env, params)
    try:
        listener = socket.create_server(
            (_bind_address(env.master_addr), env.master_port),
            reuse_port=False,
            backlog=min(4096, env.world_size * 2),
        )
    except OSError as exc:
        raise IncastError(describe_os_error(exc, f"listen on {env.master_addr}:{env.master_port}")) from None
    try:
        with listener:
            receiver.join(listener)
        points = []
        for count in counts:
            for _ in range(params.warmup):
                receiver.round(count)
            receiver.reports()  # counters from here on belong to this point
            times = []
            for _ in range(params.rounds):
                times.append(receiver.round(count))
                if progress is not None:
                    progress(count, len(times))
            retransmits, timeouts = receiver.reports()
            points.append(_point(count, params.size_bytes, times, retransmits, timeouts))
    finally:
        receiver.stop()
    result.incast = points
    result.hosts = ["receiver:" + (env.host_label or socket.gethostname())] + [
        s.host for s in receiver.senders
    ]
    result.detail["congestion"] = params.congestion or receiver.congestion
    last = points[-1]
    return result.finish(
        {
            "goodput_gbps": last.goodput_gbps,
            "round_p99_ms": last.round_p99_ms,
            "senders_count": last.senders,
            "timeouts_count": last.timeouts,
            "retransmits_count": last.retransmits,
        },
        duration_s=time.monotonic() - started,
    )


def _bind_address(master_addr: str) -> str:
    """Bind where the launcher told the senders to connect (an address of this host)."""
    try:
        return socket.getaddrinfo(master_addr, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, IndexError):
        raise IncastError(f"cannot resolve MASTER_ADDR {master_addr!r}") from None


def _point(count: int, size: int, times: list[float], retransmits: int, timeouts: int) -> IncastPoint:
    ordered = sorted(times)
    total = sum(times)
    return IncastPoint(
        senders=count,
        goodput_gbps=count * size * len(times) * 8 / total / 1e9 if total > 0 else 0.0,
        round_p50_ms=percentile(ordered, 50) * 1e3,
        round_p99_ms=percentile(ordered, 99) * 1e3,
        round_max_ms=ordered[-1] * 1e3,
        rounds=len(times),
        retransmits=retransmits,
        timeouts=timeouts,
    )
