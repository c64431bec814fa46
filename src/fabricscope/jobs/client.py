"""A rank's connection to the job's store (:mod:`fabricscope.jobs.store`): signed requests, signed
replies checked, a deadline on every one. Thread-safe: one request at a time on the connection.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from fabricscope.jobs.frames import PeerError, ProtocolError, connect, recv_frame, send_frame
from fabricscope.jobs.store import FRAME_OVERHEAD, HELLO_TIMEOUT_S, MAX_WAIT_S, StoreError
from fabricscope.jobs.wire import STORE_MAGIC, check_text, sign, verify

RETRY_S = 0.1
# Learns the job's key from rank 0's munge credential: (credential, nonce) -> key.
KeyFromCredential = Callable[[str, str], bytes]


class StoreTimeout(StoreError):
    """A key did not come within its deadline (the rank that should write it died or hangs)."""


class StoreClient:
    """Connect with :meth:`open`; then set/get/wait/add/check as torch's TCPStore would."""

    def __init__(self, sock: Any, rank: int, job: str, key: bytes | None, server_nonce: str,
                 nonce: str, value_bytes: int, request_timeout_s: float) -> None:  # fmt: skip
        self.sock, self.rank, self.job, self.key = sock, rank, job, key
        self.server_nonce, self.nonce = server_nonce, nonce
        self.value_bytes = value_bytes
        self.request_timeout_s = request_timeout_s
        self.seq = 0
        self._lock = threading.Lock()

    @property
    def authenticated(self) -> bool:
        return self.key is not None

    @classmethod
    def open(cls, host: str, port: int, rank: int, job: str, key: bytes | None, timeout_s: float, *,
             node: str = "", from_credential: KeyFromCredential | None = None) -> StoreClient:  # fmt: skip
        """Connect (retrying until ``timeout_s``: rank 0 may start later) and authenticate."""
        end = time.monotonic() + timeout_s
        last = "no answer"
        while True:
            try:
                sock = connect(host, port, max(0.1, min(HELLO_TIMEOUT_S, end - time.monotonic())))
                break
            except PeerError as exc:
                last = str(exc)
            if time.monotonic() >= end:
                raise StoreError(
                    f"rank {rank}: cannot reach the job's store at {host}:{port} within {timeout_s:g} s: {last}"
                )
            time.sleep(RETRY_S)
        try:
            return cls._hello(sock, host, port, rank, job, key, node, from_credential, timeout_s)
        except (PeerError, ProtocolError) as exc:
            sock.close()
            raise StoreError(f"rank {rank}: the job's store at {host}:{port}: {exc}") from None
        except BaseException:
            sock.close()
            raise

    @classmethod
    def _hello(cls, sock: Any, host: str, port: int, rank: int, job: str, key: bytes | None, node: str,
               from_credential: KeyFromCredential | None, timeout_s: float) -> StoreClient:  # fmt: skip
        deadline = time.monotonic() + HELLO_TIMEOUT_S * 3
        greeting = recv_frame(sock, deadline)
        if greeting.get("store") != STORE_MAGIC or greeting.get("job") != job:
            raise StoreError(
                f"rank {rank}: {host}:{port} is not this job's store (job {greeting.get('job')!r}, not {job!r})"
            )
        server_nonce, nonce = str(greeting.get("nonce")), secrets.token_hex(16)
        if key is None and greeting.get("signed"):
            if from_credential is None:
                raise StoreError(
                    f"rank {rank}: rank 0 signs with a secret this rank does not have (set FABRICSCOPE_JOB_TOKEN alike on every rank)"
                )
            send_frame(sock, {"op": "munge", "nonce": nonce}, deadline)
            got = recv_frame(sock, deadline + 10.0)
            key = from_credential(str(got.get("credential", "")), nonce)
        if key is not None and not greeting.get("signed"):
            raise StoreError(
                f"rank {rank}: rank 0 at {host}:{port} does not sign, though this rank has the job's secret"
            )
        check_text(node, "node name", 255)
        send_frame(sock, {"op": "hello", "rank": rank, "node": node, "nonce": nonce,
                          "mac": sign(key, [job, "hello", rank, node, server_nonce, nonce])}, deadline)  # fmt: skip
        value_bytes = greeting.get("value_bytes")
        client = cls(
            sock,
            rank,
            job,
            key,
            server_nonce,
            nonce,
            value_bytes if isinstance(value_bytes, int) else 0,
            timeout_s,
        )
        client._answer(0, deadline)
        return client

    def _answer(self, seq: int, deadline: float) -> Any:
        reply = recv_frame(self.sock, deadline, self.value_bytes + FRAME_OVERHEAD)
        if reply.get("ok") is False and "seq" not in reply:  # an unsigned refusal can only end the run
            raise StoreError(
                f"rank {self.rank}: rank 0 refused: {str(reply.get('error'))[:200]} (is FABRICSCOPE_JOB_TOKEN the same on every rank?)"
            )
        body = {k: v for k, v in reply.items() if k not in ("seq", "mac")}
        if reply.get("seq") != seq or not verify(
            self.key, [self.job, "reply", self.server_nonce, self.nonce, seq, body], reply.get("mac")
        ):
            raise StoreError(f"rank {self.rank}: an answer not signed by the job's rank 0")
        if not reply.get("ok"):
            if reply.get("timeout"):
                raise StoreTimeout("timed out")
            raise StoreError(f"rank {self.rank}: the job's store refused: {reply.get('error')}")
        return reply.get("value")

    def request(self, op: str, key: str | None, value: Any, wait_s: float = 0.0) -> Any:
        with self._lock:
            self.seq += 1
            fields = [self.job, self.rank, self.server_nonce, self.nonce, self.seq, op, key, value]
            deadline = time.monotonic() + self.request_timeout_s + wait_s
            try:
                send_frame(self.sock, {"op": op, "key": key, "value": value, "seq": self.seq, "mac": sign(self.key, fields)},
                           deadline, self.value_bytes + FRAME_OVERHEAD)  # fmt: skip
                return self._answer(self.seq, deadline)
            except (PeerError, ProtocolError) as exc:
                raise StoreError(f"rank {self.rank}: the job's store (rank 0): {exc}") from None

    def set(self, key: str, value: str) -> None:
        self.request("set", key, value)

    def get(self, key: str, timeout_s: float) -> str:
        """The value of ``key``, waiting up to ``timeout_s`` for it; :class:`StoreTimeout` if none."""
        value = self._wait_for(key, timeout_s)
        if not isinstance(value, str):
            raise StoreError(f"{key} holds a counter, not a value")
        return value

    def wait(self, keys: list[str], timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        for key in keys:
            self._wait_for(key, max(0.0, end - time.monotonic()))

    def _wait_for(self, key: str, timeout_s: float) -> Any:
        """One get, or several where the wait is longer than the server holds one (MAX_WAIT_S)."""
        end = time.monotonic() + timeout_s
        while True:
            part = min(max(0.0, end - time.monotonic()), MAX_WAIT_S)
            try:
                return self.request("get", key, part, wait_s=part)
            except StoreTimeout:
                if time.monotonic() >= end - 0.01:
                    raise StoreTimeout(f"{key} did not come within {timeout_s:g} s") from None

    def add(self, key: str, amount: int) -> int:
        return int(self.request("add", key, amount))

    def check(self, keys: list[str]) -> bool:
        return bool(self.request("check", None, keys))

    def close(self) -> None:
        self.sock.close()
