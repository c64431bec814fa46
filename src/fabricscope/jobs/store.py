"""The job's key-value store, served by rank 0 over length-prefixed JSON frames: our own, small,
and closed to strangers (it replaces torch's TCPStore, which any process on the network could join,
read and write, and whose values some callers unpickled).

A connection starts with rank 0's greeting (its nonce, the job id, whether it signs, the value cap);
the rank answers ``hello`` with its rank and nonce, signed under the job's key (see
:mod:`fabricscope.jobs.wire`), within :data:`HELLO_TIMEOUT_S`. Then, one signed request at a time:

* ``set`` key value: write-once; a second write of a key is refused. ``rank/N/...`` keys only rank N
  may write.
* ``get`` key timeout_s: the value, waiting for it up to the timeout (bounded by the server).
* ``add`` key amount: a counter (barriers); ``check`` keys: whether all are there.

Refused, unauthenticated or duplicate writes are logged once per source address and kind, through
:class:`fabricscope.logfilter.RepeatLimiter`. Caps bound what a peer can make rank 0 hold: value
bytes, keys and bytes per rank, total bytes, JSON depth and frame size, connections not yet
authenticated per source and in total, and authenticated connections.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.jobs.frames import (
    PeerError,
    PendingConnections,
    ProtocolError,
    describe_os_error,
    listen,
    recv_frame,
    send_frame,
)
from fabricscope.jobs.wire import (
    MAX_NODE_CHARS,
    STORE_MAGIC,
    STORE_VERSION,
    check_key,
    check_nonce,
    check_text,
    rank_of_key,
    sign,
    verify,
)
from fabricscope.logfilter import RepeatLimiter

log = logging.getLogger("fabricscope.jobs.store")

HELLO_TIMEOUT_S = 3.0  # from accept to a verified hello: before authentication
MAX_WAIT_S = 600.0  # the longest one get may wait on the server
PENDING_PER_SOURCE = 8
PENDING_TOTAL = 64
FRAME_OVERHEAD = 4096  # a frame's fields besides its value
MAX_LOGGED_SOURCES = 1024


class StoreError(FabricscopeError):
    """The store cannot serve, or a request was refused."""


@dataclass(frozen=True)
class StoreLimits:
    """What rank 0 holds at most, whoever sends."""

    value_bytes: int = 1024 * 1024
    keys_per_rank: int = 512
    bytes_per_rank: int = 32 * 1024 * 1024
    total_bytes: int = 512 * 1024 * 1024
    connections: int = 1024  # authenticated, all ranks together

    @property
    def frame_bytes(self) -> int:
        return self.value_bytes + FRAME_OVERHEAD


@dataclass
class _Entry:
    value: str | int
    rank: int


class _Data:
    """The keys, their owners' usage, and one condition every waiter sleeps on."""

    def __init__(self, limits: StoreLimits, world_size: int) -> None:
        self.limits = limits
        self.world_size = world_size
        self.entries: dict[str, _Entry] = {}
        self.keys = [0] * world_size
        self.bytes = [0] * world_size
        self.total = 0
        self.cond = threading.Condition()

    def _charge(self, rank: int, size: int) -> None:
        lim = self.limits
        if self.keys[rank] >= lim.keys_per_rank:
            raise ProtocolError(f"rank {rank} already holds {lim.keys_per_rank} keys")
        if self.bytes[rank] + size > lim.bytes_per_rank or self.total + size > lim.total_bytes:
            raise ProtocolError(f"rank {rank}: the store's byte cap is reached")
        self.keys[rank] += 1
        self.bytes[rank] += size
        self.total += size

    def set(self, rank: int, key: str, value: str) -> None:
        owner = rank_of_key(key)
        if owner is not None and owner != rank:
            raise ProtocolError(f"rank {rank} may not write {key} (only rank {owner} may)")
        with self.cond:
            if key in self.entries:
                raise ProtocolError(f"{key} is already set (keys are write-once)")
            self._charge(rank, len(key) + len(value.encode()))
            self.entries[key] = _Entry(value, rank)
            self.cond.notify_all()

    def add(self, rank: int, key: str, amount: int) -> int:
        with self.cond:
            entry = self.entries.get(key)
            if entry is None:
                self._charge(rank, len(key) + 8)
                entry = self.entries[key] = _Entry(0, rank)
            if not isinstance(entry.value, int):
                raise ProtocolError(f"{key} holds a value, not a counter")
            entry.value += amount
            self.cond.notify_all()
            return entry.value

    def get(self, key: str, timeout_s: float) -> str | int | None:
        end = time.monotonic() + min(timeout_s, MAX_WAIT_S)
        with self.cond:
            while key not in self.entries:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 1.0))
            return self.entries[key].value

    def check(self, keys: list[str]) -> bool:
        with self.cond:
            return all(k in self.entries for k in keys)


class _Slots:
    """Connections counted per source address before authentication, and in total after."""

    def __init__(self, authenticated: int) -> None:
        self.pending = PendingConnections(PENDING_PER_SOURCE, PENDING_TOTAL)
        self.authenticated = 0
        self.max_authenticated = authenticated
        self.lock = threading.Lock()

    def enter(self, source: str) -> str | None:
        return self.pending.enter(source)

    def leave_pending(self, source: str) -> None:
        self.pending.leave(source)

    def promote(self) -> bool:
        with self.lock:
            if self.authenticated >= self.max_authenticated:
                return False
            self.authenticated += 1
            return True

    def leave_authenticated(self) -> None:
        with self.lock:
            self.authenticated -= 1


@dataclass
class _Conn:
    sock: socket.socket
    source: str
    nonce: str
    rank: int = -1
    peer_nonce: str = ""
    seq: int = 0


class StoreServer:
    """Rank 0's store: :meth:`start` binds (to the address named, never a wildcard unless named),
    :meth:`close` stops. Serves on daemon threads; ``key`` None: nothing signed (no secret)."""

    def __init__(self, bind: str, port: int, world_size: int, job: str, key: bytes | None, *,
                 limits: StoreLimits | None = None, idle_timeout_s: float = 300.0,
                 munge: Any = None) -> None:  # fmt: skip
        self.bind, self.port, self.job, self.key = bind, port, job, key
        self.world_size = world_size
        self.limits = limits or StoreLimits()
        self.data = _Data(self.limits, world_size)
        self.slots = _Slots(self.limits.connections)
        self.idle_timeout_s = idle_timeout_s
        self.munge = munge  # callable(nonce) -> credential, where ranks learn the key through munge
        self.limiter = RepeatLimiter()
        self.refused: set[tuple[str, str]] = set()
        self.nodes: dict[int, str] = {}  # rank -> node named in its hello
        self.sources: dict[int, str] = {}  # rank -> source address of its hello
        self._listener: socket.socket | None = None
        self._stop = threading.Event()

    def start(self) -> tuple[str, int]:
        try:
            sock = listen(self.bind, self.port, 128)
        except (socket.gaierror, UnicodeError) as exc:
            raise StoreError(
                f"cannot resolve the store's address {self.bind}: {getattr(exc, 'strerror', exc)}"
            ) from None
        except OSError as exc:
            raise StoreError(
                describe_os_error(exc, f"the job's store cannot listen on {self.bind}:{self.port}")
            ) from None
        self._listener = sock
        host, self.port = sock.getsockname()[:2]
        log.addFilter(self.limiter)
        threading.Thread(target=self._accept_loop, name="job-store", daemon=True).start()
        return host, self.port

    def close(self) -> None:
        self._stop.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        self.limiter.flush(log, force=True)
        log.removeFilter(self.limiter)

    def refuse(self, source: str, kind: str, why: str) -> None:
        """Log a refusal once per source address and kind (and the limiter caps a flood of sources)."""
        if (source, kind) in self.refused or len(self.refused) >= MAX_LOGGED_SOURCES:
            return
        self.refused.add((source, kind))
        log.warning("job store: refused %s from %s: %s", kind, source, why)

    # ----- connections -----------------------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                sock, addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)
                continue
            source = str(addr[0])
            why = self.slots.enter(source)
            if why is not None:
                self.refuse(source, "connection", why)
                sock.close()
                continue
            threading.Thread(target=self._serve, args=(sock, source), daemon=True).start()

    def _serve(self, sock: socket.socket, source: str) -> None:
        conn = _Conn(sock, source, secrets.token_hex(16))
        promoted = False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self._handshake(conn):
                return
            self.slots.leave_pending(source)
            promoted = True
            if not self.slots.promote():
                self.refuse(source, "connection", "too many connections")
                return
            self._requests(conn)
        except (PeerError, ProtocolError, OSError) as exc:
            self.refuse(source, "connection", str(exc))
        finally:
            if promoted:
                self.slots.leave_authenticated()
            else:
                self.slots.leave_pending(source)
            with contextlib.suppress(OSError):
                sock.close()

    def _handshake(self, conn: _Conn) -> bool:
        """Greeting, optional munge credential, then a verified hello; False (logged) if not."""
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        greeting = {"store": STORE_MAGIC, "version": STORE_VERSION, "job": self.job, "nonce": conn.nonce,
                    "signed": self.key is not None, "value_bytes": self.limits.value_bytes}  # fmt: skip
        send_frame(conn.sock, greeting, deadline)
        hello = recv_frame(conn.sock, deadline)
        if hello.get("op") == "munge" and self.munge is not None:
            nonce = check_nonce(hello.get("nonce"))
            send_frame(
                conn.sock, {"ok": True, "credential": self.munge(nonce)}, time.monotonic() + HELLO_TIMEOUT_S
            )
            hello = recv_frame(conn.sock, deadline + HELLO_TIMEOUT_S)
        rank, node = hello.get("rank"), hello.get("node", "")
        if (
            hello.get("op") != "hello"
            or not isinstance(rank, int)
            or isinstance(rank, bool)
            or not 0 <= rank < self.world_size
        ):
            self.refuse(conn.source, "hello", f"not a hello from a rank of 0..{self.world_size - 1}")
            return False
        conn.peer_nonce = check_nonce(hello.get("nonce"))
        check_text(node, "node name", MAX_NODE_CHARS)
        if not verify(
            self.key, [self.job, "hello", rank, node, conn.nonce, conn.peer_nonce], hello.get("mac")
        ):
            self.refuse(conn.source, "hello", f"claims rank {rank} without the job's secret")
            send_frame(conn.sock, {"ok": False, "error": "not authenticated"}, deadline)
            return False
        conn.rank = rank
        self.nodes.setdefault(rank, node)
        self.sources.setdefault(rank, conn.source)
        self._reply(conn, 0, {"ok": True})
        return True

    def _reply(self, conn: _Conn, seq: int, reply: dict[str, Any]) -> None:
        fields = [self.job, "reply", conn.nonce, conn.peer_nonce, seq, reply]
        send_frame(conn.sock, {**reply, "seq": seq, "mac": sign(self.key, fields)},
                   time.monotonic() + HELLO_TIMEOUT_S * 10, self.limits.frame_bytes)  # fmt: skip

    def _requests(self, conn: _Conn) -> None:
        while not self._stop.is_set():
            try:
                msg = recv_frame(conn.sock, time.monotonic() + self.idle_timeout_s, self.limits.frame_bytes)
            except PeerError:
                return  # gone, or idle past the deadline
            seq = msg.get("seq")
            if seq != conn.seq + 1:
                self.refuse(
                    conn.source, "request", f"rank {conn.rank}: sequence {seq!r} after {conn.seq} (a replay?)"
                )
                return
            fields = [
                self.job,
                conn.rank,
                conn.nonce,
                conn.peer_nonce,
                seq,
                msg.get("op"),
                msg.get("key"),
                msg.get("value"),
            ]
            if not verify(self.key, fields, msg.get("mac")):
                self.refuse(
                    conn.source, "request", f"rank {conn.rank}: a request without the job's signature"
                )
                return
            conn.seq = seq
            try:
                reply = self._do(conn.rank, msg)
            except ProtocolError as exc:
                self.refuse(conn.source, str(msg.get("op")), str(exc))
                reply = {"ok": False, "error": str(exc)}
            self._reply(conn, seq, reply)

    def _do(self, rank: int, msg: dict[str, Any]) -> dict[str, Any]:
        op, value = msg.get("op"), msg.get("value")
        if op == "check":
            if not isinstance(value, list) or len(value) > 64:
                raise ProtocolError("check takes a list of at most 64 keys")
            return {"ok": True, "value": self.data.check([check_key(k) for k in value])}
        key = check_key(msg.get("key"))
        if op == "set":
            self.data.set(rank, key, check_text(value, "value", self.limits.value_bytes))
            return {"ok": True}
        if op == "add":
            if not isinstance(value, int) or isinstance(value, bool) or abs(value) > 1 << 20:
                raise ProtocolError("add takes a small integer")
            return {"ok": True, "value": self.data.add(rank, key, value)}
        if op == "get":
            if not isinstance(value, int | float) or value < 0:
                raise ProtocolError("get takes a timeout in seconds")
            got = self.data.get(key, float(value))
            return (
                {"ok": True, "value": got}
                if got is not None
                else {"ok": False, "error": "timeout", "timeout": True}
            )
        raise ProtocolError(f"unknown operation {op!r}")
