"""The server's data ports: only the session's own client gets in, and no stranger can stall it.

A test's data port is open to the network while the client connects. Two defences, both here:

* **who**: when the control connection's peer address is known, a data connection from any
  other address is closed at once, unread;
* **how long**: connections wait for their cookie *together* (one ``select`` over all of them),
  each for at most ``cookie_timeout_s``. A stranger who connects and sends nothing costs one
  socket for that long, never the turn of the real client, whose cookie is read as it arrives.

Several worker processes share one listener, each with its own :class:`CookieGate`. A gate that
finds its connection may still hold others waiting for their cookie, which may be another
worker's stream: it hands them to the listener's :class:`Mailbox` (a Unix datagram socket pair
that carries file descriptors), where any worker still waiting picks them up.

Standard library only: worker processes import this and must start fast.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import select
import socket
import threading
import time

from fabricscope.bench.sockets.wire import COOKIE_BYTES

COOKIE_TIMEOUT_S = 2.0  # a connected client sends its cookie at once; 2 s covers a lost segment
MAX_PENDING = 64  # connections waiting for their cookie at once; older ones are dropped first


def same_host(address: str, allowed: str | None) -> bool:
    """True when ``address`` is ``allowed`` (None: anyone); IPv4-mapped IPv6 equals its IPv4."""
    if allowed is None:
        return True
    try:
        a, b = ipaddress.ip_address(address.split("%")[0]), ipaddress.ip_address(allowed.split("%")[0])
    except ValueError:
        return address == allowed
    a = getattr(a, "ipv4_mapped", None) or a
    b = getattr(b, "ipv4_mapped", None) or b
    return a == b


class Mailbox:
    """Connections handed between the worker processes of one listener (fds over a Unix socket)."""

    def __init__(self, outbox: socket.socket, inbox: socket.socket) -> None:
        self.outbox = outbox  # what is sent here ...
        self.inbox = inbox  # ... is received here, by whichever worker reads first
        inbox.setblocking(False)
        outbox.setblocking(False)

    @classmethod
    def create(cls) -> Mailbox:
        outbox, inbox = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        return cls(outbox, inbox)

    def sockets(self) -> tuple[socket.socket, socket.socket]:
        return self.outbox, self.inbox

    def close(self) -> None:
        self.outbox.close()
        self.inbox.close()

    def put(self, sock: socket.socket, got: bytes, deadline: float) -> bool:
        """Hand ``sock`` over (this process's copy is closed either way); False if it was dropped."""
        note = json.dumps({"got": got.hex(), "deadline": deadline}).encode()
        try:
            socket.send_fds(self.outbox, [note], [sock.fileno()])
            return True
        except OSError:  # queue full (net.unix.max_dgram_qlen): drop that connection
            return False
        finally:
            sock.close()

    def take(self) -> tuple[socket.socket, bytes, float] | None:
        """One handed-over connection, if there is one now."""
        try:
            note, fds, _flags, _addr = socket.recv_fds(self.inbox, 1024, 1)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return None
        if not fds:
            return None
        sock = socket.socket(fileno=fds[0])
        for extra in fds[1:]:
            socket.close(extra)
        try:
            meta = json.loads(note)
            return sock, bytes.fromhex(str(meta["got"]))[:COOKIE_BYTES], float(meta["deadline"])
        except (ValueError, KeyError, TypeError):
            sock.close()
            return None


class _Pending:
    __slots__ = ("sock", "got", "deadline")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.got = b""
        self.deadline = deadline


class CookieGate:
    """Accepts on a shared listener and returns connections that presented the session cookie.

    Reads exactly :data:`COOKIE_BYTES` from each connection, so anything the client sent after
    its cookie (a request/response client's first message) is still in the socket. Several worker
    processes may each hold a gate on the same listener: whoever accepts a connection owns it.
    """

    def __init__(
        self,
        listener: socket.socket,
        cookie: bytes,
        allowed_peer: str | None = None,
        cookie_timeout_s: float = COOKIE_TIMEOUT_S,
        mailbox: Mailbox | None = None,
    ) -> None:
        self.listener = listener
        self.cookie = cookie
        self.allowed_peer = allowed_peer
        self.cookie_timeout_s = cookie_timeout_s
        self.mailbox = mailbox
        self.rejected = 0
        self._pending: list[_Pending] = []
        listener.setblocking(False)  # shared by several workers: never block in accept()

    def accept(self, deadline: float, stop: threading.Event | None = None) -> socket.socket | None:
        """The next authenticated connection (blocking socket), or None at ``deadline``/``stop``.

        Connections still waiting for their cookie go to the mailbox for the other workers.
        """
        found = self._accept(deadline, stop)
        if found is not None and self.mailbox is not None:
            for pending in self._pending:
                if not self.mailbox.put(pending.sock, pending.got, pending.deadline):
                    self.rejected += 1
            self._pending.clear()
        return found

    def close(self) -> None:
        """Close connections still waiting for a cookie (the listener belongs to the caller)."""
        for pending in self._pending:
            pending.sock.close()
        self._pending.clear()

    def _accept(self, deadline: float, stop: threading.Event | None) -> socket.socket | None:
        while True:
            now = time.monotonic()
            for pending in [p for p in self._pending if p.deadline <= now]:
                found = self._read_cookie(pending.sock)  # one last look before giving up on it
                if found is not None:
                    return found
                if pending in self._pending:
                    self._drop(pending)
            if now >= deadline or (stop is not None and stop.is_set()):
                return None
            wait = min([deadline, *(p.deadline for p in self._pending)]) - now
            if stop is not None:
                wait = min(wait, 0.1)
            watched = [self.listener, *(p.sock for p in self._pending)]
            if self.mailbox is not None:
                watched.append(self.mailbox.inbox)
            readable, _, _ = select.select(watched, [], [], max(0.0, wait))
            # Connections we hold first: the listener's next one may be another worker's.
            for sock in sorted(readable, key=lambda s: s is self.listener or s is self._inbox()):
                if sock is self.listener:
                    self._take_new(time.monotonic())
                elif sock is self._inbox():
                    self._take_mail()
                else:
                    found = self._read_cookie(sock)
                    if found is not None:
                        return found

    def _inbox(self) -> socket.socket | None:
        return self.mailbox.inbox if self.mailbox is not None else None

    def _take_mail(self) -> None:
        assert self.mailbox is not None
        mail = self.mailbox.take()
        if mail is None:
            return
        sock, got, deadline = mail
        pending = _Pending(sock, deadline)
        pending.got = got
        self._add(pending)

    def _add(self, pending: _Pending) -> None:
        if len(self._pending) >= MAX_PENDING:
            self._drop(self._pending[0])
        self._pending.append(pending)

    def _take_new(self, now: float) -> None:
        try:
            sock, addr = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return  # another worker took it
        except OSError:
            return  # ECONNABORTED and the like: that connection is gone, ours may come
        if not same_host(str(addr[0]), self.allowed_peer):
            self.rejected += 1
            sock.close()
            return
        sock.setblocking(False)
        self._add(_Pending(sock, now + self.cookie_timeout_s))

    def _read_cookie(self, sock: socket.socket) -> socket.socket | None:
        pending = next(p for p in self._pending if p.sock is sock)
        try:
            data = sock.recv(COOKIE_BYTES - len(pending.got))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        if not data:
            self._drop(pending)
            return None
        pending.got += data
        if len(pending.got) < COOKIE_BYTES:
            return None
        self._pending.remove(pending)
        if not hmac.compare_digest(pending.got, self.cookie):
            self.rejected += 1
            sock.close()  # someone else's connection: ignore it, keep waiting for ours
            return None
        sock.setblocking(True)
        return sock

    def _drop(self, pending: _Pending) -> None:
        self.rejected += 1
        self._pending.remove(pending)
        pending.sock.close()
