"""Slow-loris against the exporter from another host: scrapes keep working, requests have deadlines.

The attacker binds to 127.0.0.2, a second source address on Linux's loopback (all of 127/8), so
the server sees it as another host than the scraper on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import time

import pytest

from fabricscope.monitor.server import MetricsServer
from tests.loopback_attacker import Recorder, attacker_address


class HeaderTrickle:
    """``count`` connections that each send a request line, then one header line every ``every_s``."""

    def __init__(self, address: tuple[str, int], source: str, count: int, every_s: float) -> None:
        self.address = address
        self.source = source
        self.count = count
        self.every_s = every_s
        self.socks: list[socket.socket] = []
        self.closed_after: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HeaderTrickle:
        for _ in range(self.count):
            sock = socket.socket()
            sock.bind((self.source, 0))
            sock.settimeout(5)
            sock.connect(self.address)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            self.socks.append(sock)
        self._started = time.monotonic()
        self._thread.start()
        time.sleep(0.3)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.socks:
            sock.close()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self.every_s):
            n += 1
            for sock in list(self.socks):
                try:
                    sock.sendall(b"X-Slow-%d: 1\r\n" % n)
                except OSError:  # the server closed it
                    self.closed_after.append(time.monotonic() - self._started)
                    self.socks.remove(sock)


def _scrape(server: MetricsServer) -> int:
    conn = http.client.HTTPConnection(*server.address, timeout=5)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.fixture
def exporter():
    server = MetricsServer(lambda: b"up 1\n", "127.0.0.1", 0)  # the shipped limits
    server.start_in_thread()
    yield server
    server.shutdown()


def test_scrapes_succeed_during_a_slowloris_from_another_host(exporter: MetricsServer) -> None:
    source = attacker_address()
    with HeaderTrickle(exporter.address, source, 130, every_s=1.0):
        statuses = [_scrape(exporter) for _ in range(5)]
        time.sleep(1.2)
        statuses += [_scrape(exporter) for _ in range(5)]
    assert statuses == [200] * 10


def test_a_request_must_arrive_whole_within_its_deadline() -> None:
    """One header line every 0.4 s used to keep a connection for ever (the timeout was per read)."""
    server = MetricsServer(lambda: b"up 1\n", "127.0.0.1", 0, timeout_s=2.0)
    server.start_in_thread()
    try:
        with HeaderTrickle(server.address, "127.0.0.1", 1, every_s=0.4) as trickle:
            deadline = time.monotonic() + 6
            while trickle.socks and time.monotonic() < deadline:
                time.sleep(0.1)
        assert trickle.closed_after, "the server kept a request that never ended"
        assert trickle.closed_after[0] < 3.5
        assert _scrape(server) == 200
    finally:
        server.shutdown()


def test_refusals_do_not_flood_the_log(exporter: MetricsServer) -> None:
    source = attacker_address()
    logger = logging.getLogger("fabricscope.exporter")
    handler = Recorder()
    logger.addHandler(handler)
    refused = 0
    try:
        deadline = time.monotonic() + 1.5
        held = []
        while time.monotonic() < deadline:
            sock = socket.socket()
            sock.bind((source, 0))
            sock.settimeout(2)
            sock.connect(exporter.address)
            held.append(sock)
            if len(held) > 8:
                refused += 1
        for sock in held:
            sock.close()
    finally:
        logger.removeHandler(handler)
    warnings = [r for r in handler.records if r.levelno >= logging.WARNING]
    assert refused > 100
    assert len(warnings) < 20, f"{len(warnings)} warnings for {refused} refused connections"


def test_keep_alive_idles_between_requests_but_a_silent_new_connection_is_closed() -> None:
    server = MetricsServer(lambda: b"up 1\n", "127.0.0.1", 0, timeout_s=3.0, header_timeout_s=0.8)
    server.start_in_thread()
    try:
        conn = http.client.HTTPConnection(*server.address, timeout=5)
        for pause in (0, 1.2):  # longer than the header deadline, shorter than the idle timeout
            time.sleep(pause)
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b"up 1\n"
        conn.close()
        with socket.create_connection(server.address, timeout=5) as silent:
            started = time.monotonic()
            assert silent.recv(1024) == b""
            assert time.monotonic() - started < 2.0
    finally:
        server.shutdown()


def test_exporter_listen_port_in_unicode_digits_is_one_line_exit_2() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", "exporter", "--listen", "127.0.0.1:\u00b2"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--listen" in lines[0] and "internal error" not in lines[0], lines[0]
