"""Faults end cleanly: exit 2 with one line, a failed result stored, no hang; the server survives."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from fabricscope.bench.results.schema import Status
from fabricscope.bench.sockets.protocol import ServerLimits
from fabricscope.bench.sockets.server import BenchServer
from fabricscope.bench.sockets.tcp import TcpParams, run_tcp
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.frames import PeerError, encode_frame, recv_frame, send_frame
from fabricscope.store import Store
from tests.bench.conftest import ServerProcess, run_cli, start_server

STRONG_TOKEN = "5d0b8f3a6e1c9d4f7a2e5b8c1f4d7a0e"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raw(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return sock


def _reply(sock: socket.socket) -> dict:
    return recv_frame(sock, time.monotonic() + 5)


def test_refused_peer_exits_2_and_stores_a_failed_result(isolated_db) -> None:
    port = _free_port()
    proc = run_cli("bench", "tcp", "--peer", f"127.0.0.1:{port}", "-t", "1")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "connection refused" in lines[0] and "Traceback" not in proc.stderr
    with Store.open(isolated_db) as store:
        (run,) = store.list()
    assert run.result.status == Status.FAILED and "refused" in (run.result.reason or "")


def test_server_killed_mid_run(isolated_db) -> None:
    srv = ServerProcess("--quiet")
    try:
        killer = threading.Timer(1.5, srv.kill)
        killer.start()
        started = time.monotonic()
        proc = run_cli("bench", "tcp", "--peer", srv.peer, "-t", "6", "--timeout", "3", timeout=60)
        elapsed = time.monotonic() - started
    finally:
        srv.kill()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert elapsed < 20, "a dead peer must end the run, not hang it"
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    with Store.open(isolated_db) as store:
        (run,) = store.list()
    assert run.result.status == Status.FAILED
    assert any(word in run.result.reason for word in ("reset", "closed", "timed out", "refused", "died")), (
        run.result.reason
    )


def test_silent_peer_times_out() -> None:
    """A peer that accepts and then never answers: the client gives up after --timeout."""
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(4)
        port = lst.getsockname()[1]
        started = time.monotonic()
        result = run_tcp(TcpParams(peer=f"127.0.0.1:{port}", duration_s=1, timeout_s=1.0))
        assert time.monotonic() - started < 10
    assert result.status == Status.FAILED and "timed out" in (result.reason or "")


def test_client_killed_mid_run_server_keeps_serving(server: BenchServer, peer: str) -> None:
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-m", "fabricscope", "bench", "tcp", "--peer", peer, "-t", "5", "--no-store"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(2.0)
    import os
    import signal

    os.killpg(child.pid, signal.SIGKILL)
    child.wait(10)
    # The next client is served normally once the dead one's workers notice (data timeout).
    result = run_tcp(TcpParams(peer=peer, duration_s=0.5))
    assert result.status == Status.OK, result.reason


def test_malformed_and_hostile_requests_get_error_replies(server: BenchServer, peer: str) -> None:
    port = server.port
    cases = [
        struct.pack("!I", 0),  # zero-length frame
        struct.pack("!I", 10**9),  # oversize announcement
        struct.pack("!I", 8) + b"not json",
        encode_frame({"op": "test", "spec": {"kind": "tcp"}}),  # test before hello
        encode_frame({"op": "hello", "version": 99}),
        encode_frame({"op": "hello", "version": 1, "cmd": "id"}),
    ]
    for payload in cases:
        with _raw(port) as sock:
            sock.sendall(payload)
            reply = _reply(sock)
            assert reply["ok"] is False and isinstance(reply["error"], str), payload
    # A hostile test request after a good hello.
    for spec in (
        {"kind": "tcp", "streams": 100000},
        {"kind": "tcp", "duration_s": 1e9},
        {"kind": "tcp", "path": "/etc/shadow"},
    ):
        with _raw(port) as sock:
            send_frame(sock, {"op": "hello", "version": 1}, time.monotonic() + 5)
            assert _reply(sock)["ok"] is True
            send_frame(sock, {"op": "test", "spec": spec}, time.monotonic() + 5)
            reply = _reply(sock)
            assert reply["ok"] is False
    assert server.stats.rejected >= len(cases) + 3
    # ... and the server still serves a real test.
    assert run_tcp(TcpParams(peer=peer, duration_s=0.3)).status == Status.OK


def test_slow_client_is_dropped() -> None:
    srv = start_server()
    srv.hello_timeout_s = 0.5
    try:
        with _raw(srv.port) as sock:
            sock.settimeout(5)
            started = time.monotonic()
            data = sock.recv(4096)  # the server gives up on us and says so (or just closes)
            assert time.monotonic() - started < 4
            if data:
                assert b"timed out" in data or b"error" in data
    finally:
        srv.stop()


def test_wrong_or_missing_token(isolated_db) -> None:
    srv = start_server(token=STRONG_TOKEN)
    try:
        peer = f"127.0.0.1:{srv.port}"
        for token in (None, "wrong"):
            result = run_tcp(TcpParams(peer=peer, duration_s=0.3), token=token)
            assert result.status == Status.FAILED and "bad or missing token" in (result.reason or "")
        assert run_tcp(TcpParams(peer=peer, duration_s=0.3), token=STRONG_TOKEN).status == Status.OK
        proc = run_cli("bench", "tcp", "--peer", peer, "-t", "0.3", env={"FABRICSCOPE_BENCH_TOKEN": "nope"})
        assert proc.returncode == 2 and "token" in proc.stderr
    finally:
        srv.stop()


def test_token_required_off_loopback() -> None:
    with pytest.raises(FabricscopeError, match="token"):
        BenchServer(bind="0.0.0.0", port=0)
    proc = run_cli(
        "bench", "serve", "--bind", "0.0.0.0", "--port", "0", timeout=30, env={"FABRICSCOPE_BENCH_TOKEN": ""}
    )
    assert proc.returncode == 2 and "--token" in proc.stderr


def test_port_already_in_use() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = run_cli("bench", "serve", "--port", str(port), timeout=30)
    assert proc.returncode == 2
    assert "address already in use" in proc.stderr.lower() and "Traceback" not in proc.stderr


def test_over_the_servers_limits_and_busy() -> None:
    srv = start_server(limits=ServerLimits(max_duration_s=2, max_tests=1))
    try:
        peer = f"127.0.0.1:{srv.port}"
        too_long = run_tcp(TcpParams(peer=peer, duration_s=5))
        assert too_long.status == Status.FAILED and "limit" in (too_long.reason or "")
        results = {}
        first = threading.Thread(
            target=lambda: results.setdefault("a", run_tcp(TcpParams(peer=peer, duration_s=1.5)))
        )
        first.start()
        time.sleep(0.7)
        busy = run_tcp(TcpParams(peer=peer, duration_s=0.5))
        first.join(30)
        assert busy.status == Status.FAILED and "busy" in (busy.reason or "")
        assert results["a"].status == Status.OK
    finally:
        srv.stop()


def test_threshold_failure_exits_1_and_is_recorded(peer: str, isolated_db) -> None:
    proc = run_cli("bench", "tcp", "--peer", peer, "-t", "0.4", "--min-gbps", "100000", "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "ok" and doc["thresholds"]["passed"] is False
    assert "threshold failed" in proc.stderr
    proc = run_cli("bench", "tcp", "--peer", peer, "-t", "0.4", "--min-gbps", "0.001")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "tcp", "--peer", "host:99999"],
        ["bench", "tcp", "--peer", "127.0.0.1", "--direction", "sideways"],
        ["bench", "udp", "--peer", "127.0.0.1", "--rate", "fast"],
        ["bench", "latency", "--peer", "127.0.0.1", "--sizes", "64,huge"],
        ["bench", "latency", "--peer", "127.0.0.1", "--sizes", "4M"],
        ["bench", "connect", "--peer", "127.0.0.1", "--mode", "sometimes"],
        ["bench", "rdma"],
        ["bench", "serve", "--data-ports", "9-1"],
    ],
)
def test_bad_options_are_one_line_exit_2(args: list[str]) -> None:
    proc = run_cli(*args, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["bench", "udp", "--peer", "127.0.0.1", "--rate", "25Gbps"], "megaBYTES"),
        (["bench", "udp", "--peer", "127.0.0.1", "--rate", "-1G"], "negative"),
        (["bench", "latency", "--peer", "127.0.0.1", "--sizes", "64,\u00b2"], "cannot read size"),
        (["bench", "latency", "--peer", "127.0.0.1", "--sizes", ""], "no size"),
        (["bench", "collective", "--sizes", "16G"], "larger than 8G"),
        (["bench", "collective", "--sizes", "1e999"], "larger than"),
    ],
)
def test_bad_sizes_and_rates_are_one_line_exit_2(args: list[str], match: str) -> None:
    proc = run_cli(*args, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], proc.stderr


def test_peer_error_messages_are_plain() -> None:
    err = PeerError("connect to x: connection refused")
    assert str(err).count("\n") == 0
