"""Who `bench serve` lets in (issue 20): weak tokens are refused, a token guesser is slowed per
source address while a client elsewhere is served, a full server says so before "ok", and idle
authenticated connections give their slot back.

The guesser is another loopback address (127.0.0.2), a second host as far as the server can tell.
"""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from fabricscope.bench.results.schema import Status
from fabricscope.bench.sockets import admission
from fabricscope.bench.sockets.protocol import ServerLimits
from fabricscope.bench.sockets.server import BenchServer
from fabricscope.bench.sockets.tcp import TcpParams, run_tcp
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.frames import recv_frame, send_frame
from tests.bench.conftest import run_cli, start_server
from tests.loopback_attacker import attacker_address

TOKEN = "7b3e9f1a5c8d2e6b0f4a7c1d9e3b5f8a"
GUESS_SECONDS = 3.0
IDLE_LIMIT_S = 10.0  # what an authenticated connection that sends nothing may hold a slot


def _hello(port: int, token: str | None, source: str = "127.0.0.1") -> tuple[socket.socket, dict]:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    send_frame(sock, {"op": "hello", "version": 1, "token": token}, time.monotonic() + 5)
    return sock, recv_frame(sock, time.monotonic() + 5)


@pytest.mark.parametrize(
    "weak", ["1234", "s3cret-token", "a" * 40, "0123456789012345", "abababababababababab"]
)
def test_weak_tokens_are_refused_in_one_line(weak: str) -> None:
    with pytest.raises(FabricscopeError, match="too weak"):
        BenchServer(port=0, token=weak)
    for args, env in ((["--token", weak], {}), ([], {"FABRICSCOPE_BENCH_TOKEN": weak})):
        proc = run_cli("bench", "serve", "--port", "0", *args, timeout=20, env=env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert (
            "too weak" in lines[0]
            and "secrets.token_hex(16)" in lines[0]
            and "openssl rand -hex 16" in lines[0]
        )


def test_tokens_made_as_documented_are_strong() -> None:
    import secrets

    for _ in range(100):
        assert admission.token_weakness(secrets.token_hex(16)) is None
        assert admission.token_weakness(secrets.token_urlsafe(16)) is None


def test_a_guesser_is_slowed_and_a_client_elsewhere_is_served() -> None:
    """A guesser sends 4-digit tokens as fast as it can for 3 s (the issue's attacker found one in
    2.5 s at ~1,730 a second); the server compares at most a handful of them."""
    source = attacker_address()
    server = start_server(token=TOKEN)
    compared, refused, stop = [], [], threading.Event()

    def guess() -> None:
        while not stop.is_set():
            try:
                sock, reply = _hello(server.port, f"{random.randint(0, 9999):04d}", source)
                sock.close()
            except OSError:
                continue
            (compared if "bad or missing token" in str(reply.get("error")) else refused).append(reply)

    guesser = threading.Thread(target=guess, daemon=True)
    try:
        started = time.monotonic()
        guesser.start()
        time.sleep(1.0)
        served = run_tcp(TcpParams(peer=f"127.0.0.1:{server.port}", duration_s=0.3, timeout_s=5), token=TOKEN)
        time.sleep(max(0.0, GUESS_SECONDS - (time.monotonic() - started)))
        stop.set()
        guesser.join(10)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    assert served.status == Status.OK, served.reason
    # 3 free, then backoff of 1, 2, 4 s: at most 5 in 3 s; 8 allows the guesses already in flight
    assert len(compared) <= 8, f"{len(compared)} tokens compared in {elapsed:.1f} s"
    assert refused and all("too many wrong tokens" in str(r.get("error")) for r in refused)


def test_failures_are_remembered_per_source_within_bounded_memory() -> None:
    failures = admission.AuthFailures(free=1, first_s=10, max_sources=50)
    for i in range(200):
        failures.failed(f"10.0.{i // 250}.{i % 250}")
    assert len(failures) == 50 and failures.wait_s("10.0.0.199") > 9 and failures.wait_s("10.0.0.0") == 0
    failures.failed("2001:db8::1")
    assert failures.wait_s("2001:db8::ffff") > 9  # one IPv6 host's /64 is one source
    failures.succeeded("2001:db8::2")
    assert failures.wait_s("2001:db8::1") == 0


def _idle_clients(port: int, count: int) -> list[socket.socket]:
    idle = []
    for _ in range(count):
        sock, reply = _hello(port, TOKEN)
        assert reply["ok"] is True
        idle.append(sock)  # authenticated, then silent
    time.sleep(0.2)
    return idle


def test_a_full_server_refuses_at_hello_not_after_ok() -> None:
    server = start_server(token=TOKEN, limits=ServerLimits(max_clients=2))
    idle = _idle_clients(server.port, 2)
    try:
        third, reply = _hello(server.port, TOKEN)
        third.close()
        assert reply["ok"] is False and "too many control connections (limit 2)" in reply["error"], reply
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_idle_authenticated_connections_give_their_slot_back() -> None:
    server = start_server(token=TOKEN, limits=ServerLimits(max_clients=2))
    idle = _idle_clients(server.port, 2)
    try:
        started = time.monotonic()
        for sock in idle:  # ended within IDLE_LIMIT_S (once 30 s): an error frame, then EOF
            sock.settimeout(max(0.1, IDLE_LIMIT_S - (time.monotonic() - started)))
            while sock.recv(4096):  # a timeout raises here
                pass
        result = run_tcp(TcpParams(peer=f"127.0.0.1:{server.port}", duration_s=0.3, timeout_s=5), token=TOKEN)
        assert result.status == Status.OK, result.reason
    finally:
        for sock in idle:
            sock.close()
        server.stop()
