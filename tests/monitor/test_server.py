"""The HTTP server: where it binds, what it serves, what it refuses, and shared collections."""

from __future__ import annotations

import gzip
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.monitor.server import Coalescer, MetricsServer, parse_listen


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9731", ("127.0.0.1", 9731)),
        ("[::1]:9731", ("::1", 9731)),
        ("localhost:9100", ("127.0.0.1", 9100)),
        (":9731", ("", 9731)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
    ],
)
def test_parse_listen(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "9731",
        "127.0.0.1",
        "127.0.0.1:99999",
        "::1:9731",
        "[::1]9731",
        "example.com:9731",
        "1.2.3.4:x",
        "127.0.0.1:\u00b2",  # str.isdigit() is True, int() raises
        "[::1]:\u0669\u0667\u0663\u0661",  # Arabic-Indic digits: int() reads them as 9731
    ],
)
def test_parse_listen_rejects(text: str) -> None:
    with pytest.raises(FabricscopeError):
        parse_listen(text)


@pytest.fixture
def served():
    calls = []

    def render() -> bytes:
        calls.append(time.monotonic())
        return b"# HELP x y\n# TYPE x gauge\nx 1.0\n"

    server = MetricsServer(render, "127.0.0.1", 0, max_connections=4, timeout_s=2.0)
    server.start_in_thread()
    yield server, calls
    server.shutdown()


def request(
    server: MetricsServer, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict, bytes]:
    host, port = server.address
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_serves_metrics_and_refuses_the_rest(served) -> None:
    server, calls = served
    assert server.address[0] == "127.0.0.1"
    status, headers, body = request(server, "GET", "/metrics")
    assert status == 200 and body.endswith(b"x 1.0\n")
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    status, headers, body = request(server, "GET", "/metrics?name[]=x&collect[]=everything")
    assert status == 200 and b"x 1.0" in body
    status, headers, body = request(server, "GET", "/metrics", {"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body).endswith(b"x 1.0\n")
    status, headers, body = request(server, "HEAD", "/metrics")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    assert request(server, "GET", "/healthz")[0] == 200
    assert request(server, "GET", "/")[0] == 200
    assert request(server, "GET", "/../../etc/passwd")[0] == 404
    assert request(server, "POST", "/metrics")[0] == 405
    assert request(server, "DELETE", "/metrics")[0] == 405


def test_garbage_request_line_does_not_kill_the_server(served) -> None:
    server, _calls = served
    with socket.create_connection(server.address, timeout=5) as sock:
        sock.sendall(b"\x00\xff\xfe garbage \r\n\r\n")
        reply = sock.recv(4096)
        assert b"400" in reply  # an unparsable request line gets an HTTP/0.9-style error body
    assert request(server, "GET", "/metrics")[0] == 200


def test_connection_cap_and_idle_timeout(served) -> None:
    server, _calls = served
    idle = [socket.create_connection(server.address, timeout=5) for _ in range(4)]
    try:
        time.sleep(0.2)
        with socket.create_connection(server.address, timeout=5) as extra:
            reply = extra.recv(1024)
        assert reply.startswith(b"HTTP/1.1 503")
    finally:
        for sock in idle:
            sock.close()
    time.sleep(0.3)
    assert request(server, "GET", "/metrics")[0] == 200
    # a connection that sends nothing is closed after the timeout (2 s here)
    with socket.create_connection(server.address, timeout=10) as slow:
        started = time.monotonic()
        assert slow.recv(1024) == b""
        assert time.monotonic() - started < 5


def test_binding_a_busy_port_is_one_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(FabricscopeError, match=f"cannot listen on 127.0.0.1:{port}"):
            MetricsServer(lambda: b"", "127.0.0.1", port)


def test_ipv6_loopback() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this kernel")
    try:
        server = MetricsServer(lambda: b"x 1\n", "::1", 0)
    except FabricscopeError as exc:
        pytest.skip(f"IPv6 loopback not configured: {exc}")
    server.start_in_thread()
    try:
        with urllib.request.urlopen(server.url, timeout=5) as response:
            assert response.read() == b"x 1\n"
    finally:
        server.shutdown()


def test_concurrent_scrapes_share_one_collection() -> None:
    started = threading.Event()
    release = threading.Event()
    renders = []

    def slow_render() -> bytes:
        renders.append(1)
        started.set()
        release.wait(5)
        return b"x %d\n" % len(renders)

    coalescer = Coalescer(slow_render)
    results: list[bytes] = []
    first = threading.Thread(target=lambda: results.append(coalescer.get().body))
    first.start()
    started.wait(5)
    waiters = [threading.Thread(target=lambda: results.append(coalescer.get().body)) for _ in range(10)]
    for t in waiters:
        t.start()
    time.sleep(0.2)
    release.set()
    for t in [first, *waiters]:
        t.join(5)
    assert len(renders) == 1
    assert results == [b"x 1\n"] * 11
    assert coalescer.get().body == b"x 2\n"  # a later scrape collects afresh


def test_failed_collection_is_503_not_a_hang() -> None:
    def broken() -> bytes:
        raise OSError("disk on fire")

    server = MetricsServer(broken, "127.0.0.1", 0)
    server.start_in_thread()
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server.url, timeout=5)
        assert info.value.code == 503
    finally:
        server.shutdown()
