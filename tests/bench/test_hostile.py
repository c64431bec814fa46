"""Attacks on ``bench serve`` from another host: slow-loris, log floods, strangers on the data ports.

"Another host" is another loopback address: all of 127.0.0.0/8 is loopback on Linux, so an
attacker socket bound to 127.0.0.2 reaches the server from a different source address than the
authenticated client on 127.0.0.1, as a second machine would.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from fabricscope.bench.results.schema import Status
from fabricscope.bench.sockets.latency import LatencyParams, run_latency
from fabricscope.bench.sockets.server import BenchServer
from fabricscope.bench.sockets.tcp import TcpParams, run_tcp
from fabricscope.jobs.frames import PeerError, recv_frame, send_frame
from tests.bench.conftest import run_cli
from tests.loopback_attacker import Recorder, attacker_address

TOKEN = "9c2f5e8a1d4b7c0e3f6a9d2c5b8e1f4a"  # strong enough (bench/sockets/admission.py)


class SlowLoris:
    """``count`` connections from ``source`` that send a fraction of a hello and then nothing.

    A closed connection is reopened at once, so the pressure stays on for as long as it runs.
    """

    def __init__(self, port: int, source: str, count: int, reconnect_pause_s: float = 0.0) -> None:
        self.port = port
        self.source = source
        self.count = count
        self.pause_s = reconnect_pause_s
        self.opened = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._hold, daemon=True) for _ in range(count)]

    def __enter__(self) -> SlowLoris:
        for thread in self._threads:
            thread.start()
        time.sleep(0.5)  # let them take their slots
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)

    def _hold(self) -> None:
        while not self._stop.is_set():
            sock = socket.socket()
            try:
                sock.bind((self.source, 0))
                sock.settimeout(2.0)
                sock.connect(("127.0.0.1", self.port))
                self.opened += 1
                sock.sendall(struct.pack("!I", 40)[:2])  # half a length prefix, then silence
                while not self._stop.is_set():
                    try:
                        if not sock.recv(4096):
                            break  # the server gave up on us: come back
                    except TimeoutError:
                        continue
            except OSError:
                pass
            finally:
                sock.close()
            self._stop.wait(self.pause_s)


@contextlib.contextmanager
def serving(**kwargs) -> Iterator[BenchServer]:
    server = BenchServer(port=0, **kwargs)
    server.start()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()
        thread.join(5)


def test_slowloris_from_another_host_leaves_authenticated_clients_served() -> None:
    source = attacker_address()
    with serving(token=TOKEN) as server, SlowLoris(server.port, source, 20):
        peer = f"127.0.0.1:{server.port}"
        for _ in range(2):
            result = run_tcp(TcpParams(peer=peer, duration_s=0.3, timeout_s=3), token=TOKEN)
            assert result.status == Status.OK, result.reason
    assert server.stats.rejected > 0  # the attacker was turned away, not served


def test_unauthenticated_connections_are_capped_per_source() -> None:
    source = attacker_address()
    with serving(token=TOKEN) as server, SlowLoris(server.port, source, 20) as attack:
        time.sleep(0.5)
        # Refused ones come back at once: far more connections than the per-source cap were opened,
        # but the server never holds more than the cap.
        assert attack.opened > server.pending.per_source
        assert server.pending.held(source) <= server.pending.per_source


def test_an_attack_does_not_flood_the_log() -> None:
    source = attacker_address()
    handler = Recorder(logging.INFO)
    logger = logging.getLogger("fabricscope.bench.sockets.server")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with serving(token=TOKEN) as server:
            server.hello_timeout_s = 0.3
            with SlowLoris(server.port, source, 20):
                time.sleep(2.0)
            refused = server.stats.rejected
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    lines = [r.getMessage() for r in handler.records]
    assert refused > 200, "the attack was too weak to show anything"
    assert len(lines) < 40, f"{len(lines)} log lines for {refused} refused connections"
    assert any("suppressed" in line for line in lines), lines[-5:]


def _free_port_range(count: int) -> tuple[int, int]:
    """``count`` consecutive ports free on 127.0.0.1, below the ephemeral range."""
    for _ in range(50):
        low = random.randrange(20000, 32000 - count)
        socks = []
        try:
            for port in range(low, low + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return low, low + count - 1
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    pytest.skip("no free port range")


class PortSquatter:
    """Connects to every port of a range again and again and holds what it gets, sending nothing."""

    def __init__(self, ports: tuple[int, int], source: str) -> None:
        self.ports = ports
        self.source = source
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PortSquatter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.held:
            sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for port in range(self.ports[0], self.ports[1] + 1):
                sock = socket.socket()
                sock.setblocking(False)
                try:
                    sock.bind((self.source, 0))
                    sock.connect_ex(("127.0.0.1", port))
                except OSError:
                    sock.close()
                    continue
                self.held.append(sock)
            self._stop.wait(0.02)
            if len(self.held) > 400:  # keep the newest; the server's backlog holds those
                for sock in self.held[:-200]:
                    sock.close()
                del self.held[:-200]


@pytest.mark.parametrize("stranger", ["other-host", "same-host"])
def test_a_stranger_on_the_data_ports_does_not_break_a_test(stranger: str) -> None:
    source = attacker_address() if stranger == "other-host" else "127.0.0.1"
    ports = _free_port_range(6)
    with serving(token=TOKEN, data_ports=ports) as server, PortSquatter(ports, source):
        peer = f"127.0.0.1:{server.port}"
        latency = run_latency(
            LatencyParams(peer=peer, protos=("tcp",), sizes=(64,), duration_s=0.6, timeout_s=3), token=TOKEN
        )
        assert latency.status == Status.OK, latency.reason
        tcp = run_tcp(TcpParams(peer=peer, duration_s=0.5, streams=2, timeout_s=3), token=TOKEN)
        assert tcp.status == Status.OK, tcp.reason


# ----- hostile requests and replies -----------------------------------------------------------
def test_a_deeply_nested_hello_is_refused_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    body = b"[" * 30000 + b"]" * 30000  # 60 KB: json.loads would recurse 30,000 levels
    with serving() as server, caplog.at_level(logging.DEBUG, logger="fabricscope.bench.sockets.server"):
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
                sock.sendall(struct.pack("!I", len(body)) + body)
                reply = recv_frame(sock, time.monotonic() + 5)
            assert reply["ok"] is False and "nests deeper" in reply["error"]
    assert not [r for r in caplog.records if r.exc_info or "internal error" in r.getMessage()]


class FakeServer:
    """Answers the hello, then replies to the test request with ``reply`` (whatever it holds)."""

    def __init__(self, reply: dict) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError, PeerError), self.listener:
            conn, _ = self.listener.accept()
            with conn:
                deadline = time.monotonic() + 10
                recv_frame(conn, deadline)
                send_frame(conn, {"ok": True, "server": "fabricscope", "protocol": 1}, deadline)
                recv_frame(conn, deadline)
                send_frame(conn, self.reply, deadline)
                time.sleep(1)


@pytest.mark.parametrize(
    "ports", ["abc", {"to_server": "abc"}, {"to_server": -1}, {"from_server": 5300}, {"to_server": [1]}]
)
def test_a_server_sending_garbage_ports_is_one_line_exit_2(ports: object) -> None:
    fake = FakeServer({"ok": True, "cookie": "ab" * 16, "ports": ports})
    proc = run_cli("bench", "tcp", "--peer", f"127.0.0.1:{fake.port}", "-t", "0.3", "--no-store", timeout=30)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1 and "internal error" not in lines[0], lines
    assert "malformed test reply" in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["bench", "serve", "--port", "0", "--data-ports", "\u00b2-\u00b3"], "--data-ports"),
        (["bench", "serve", "--port", "0", "--data-ports", "5300-\u0665\u0663\u0660\u0660"], "--data-ports"),
        (["bench", "serve", "--port", "0", "--token", "x" * 257], "--token"),
        (["bench", "tcp", "--peer", "127.0.0.1:\u00b2", "--no-store"], "port must be"),
    ],
)
def test_hostile_options_are_one_line_exit_2(args: list[str], match: str) -> None:
    try:
        proc = run_cli(*args, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[:3]} accepted the option and kept running")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert match in lines[0] and "internal error" not in lines[0], lines[0]


def test_udp_data_ports_answer_only_the_control_peer() -> None:
    """Even with the session id, a datagram from another host is neither echoed nor counted."""
    from fabricscope.bench.sockets.wire import UDP_HEADER, UDP_RR_HEADER
    from fabricscope.bench.sockets.workers import udp_echo, udp_sink

    source = attacker_address()
    cookie = bytes(range(16))
    cfg = {"duration_s": 2, "timeout_s": 1, "peer_ip": "127.0.0.1", "interval_s": 1.0}

    def run(worker, payload: bytes) -> tuple[dict, dict[str, bytes | None]]:
        server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        server.bind(("127.0.0.1", 0))
        stop = threading.Event()
        box: dict = {}
        thread = threading.Thread(target=lambda: box.update(worker(None, server, cookie, cfg, None, stop)))
        thread.start()
        replies: dict[str, bytes | None] = {}
        for name, addr in (("stranger", source), ("peer", "127.0.0.1")):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
                sender.bind((addr, 0))
                sender.settimeout(0.5)
                sender.sendto(payload, server.getsockname())
                try:
                    replies[name] = sender.recv(2048)
                except TimeoutError:
                    replies[name] = None
        stop.set()
        thread.join(5)
        return box, replies

    echo, replies = run(udp_echo, UDP_RR_HEADER.pack(cookie[:8], 1) + b"x" * 32)
    assert replies == {"stranger": None, "peer": UDP_RR_HEADER.pack(cookie[:8], 1) + b"x" * 32}
    assert echo["served"] == 1 and echo["foreign"] == 1
    sink, _ = run(udp_sink, UDP_HEADER.pack(cookie[:8], 0, 0, time.monotonic_ns()) + b"y" * 100)
    assert sink["received"] == 1 and sink["foreign"] == 1
