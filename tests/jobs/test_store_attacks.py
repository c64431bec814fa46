"""The job's store against a stranger on loopback (issue 20): each attack is built here, from a
second loopback address (127.0.0.2, as a second host would), against a real store on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import secrets
import socket
import threading
import time

import pytest

from fabricscope.jobs.client import StoreClient
from fabricscope.jobs.frames import PeerError, recv_frame, send_frame
from fabricscope.jobs.launch import DistEnv, free_port
from fabricscope.jobs.rendezvous import gather, open_store
from fabricscope.jobs.store import StoreError, StoreLimits, StoreServer
from fabricscope.jobs.wire import sign
from tests.loopback_attacker import Recorder, attacker_address

TOKEN = "9f3a51c2e07b48d6a1c35e9b72f04d18"
JOB = "job-42"
ENV = {"FABRICSCOPE_JOB_TOKEN": TOKEN, "FABRICSCOPE_JOB_ID": JOB}


def _raw(port: int, source: str) -> socket.socket:
    """A stranger's connection, from ``source``."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    return sock


def _serve(
    world: int = 3, key: bytes | None = TOKEN.encode(), limits: StoreLimits | None = None
) -> StoreServer:
    server = StoreServer("127.0.0.1", 0, world, JOB, key, limits=limits)
    server.start()
    return server


@pytest.fixture
def log_records():
    recorder = Recorder()
    logger = logging.getLogger("fabricscope.jobs.store")
    logger.addHandler(recorder)
    logger.setLevel(logging.DEBUG)
    yield recorder.records
    logger.removeHandler(recorder)


def test_a_stranger_cannot_join_as_a_rank_and_is_logged_once_by_address(log_records) -> None:
    stranger = attacker_address()
    server = _serve()
    try:
        for _ in range(5):  # the stranger tries again and again; one log line names it
            with pytest.raises(StoreError, match="refused|not signed"):
                StoreClient.open("127.0.0.1", server.port, 1, JOB, b"guessed-key-guessed-key", 5)
            sock = _raw(server.port, stranger)
            greeting = recv_frame(sock, time.monotonic() + 5)
            send_frame(
                sock,
                {"op": "hello", "rank": 1, "node": "", "nonce": secrets.token_hex(16), "mac": None},
                time.monotonic() + 5,
            )
            assert recv_frame(sock, time.monotonic() + 5) == {"ok": False, "error": "not authenticated"}
            assert greeting["signed"] is True
            sock.close()
        assert not server.data.entries
        lines = [r.getMessage() for r in log_records if stranger in r.getMessage()]
        assert len(lines) == 1 and "claims rank 1 without the job's secret" in lines[0], lines
    finally:
        server.close()


def test_an_unsigned_write_of_the_key_rank_0_is_about_to_read_is_refused() -> None:
    """The stranger waits on the rank's gather key and writes its own document first: with the
    job's secret, it cannot even hello; the document rank 0 reads is the rank's own."""
    port = free_port()
    envs = [DistEnv(r, 2, r, "127.0.0.1", port, "local:2", f"local{r}") for r in (0, 1)]
    env = {**ENV, "FABRICSCOPE_NODELIST": "local0,local1"}
    box: dict = {}

    def rank0() -> None:
        meeting = open_store(envs[0], 20, needs="test", node="local0", environ=env)
        box["got"] = gather(meeting, {"document": json.dumps({"who": "rank0"})}, 20)
        meeting.close()

    thread = threading.Thread(target=rank0)
    thread.start()
    forged = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and forged == 0:  # the stranger goes first, as often as it likes
        try:
            sock = _raw(port, attacker_address())
        except OSError:
            time.sleep(0.02)
            continue
        greeting = recv_frame(sock, time.monotonic() + 5)
        nonce = secrets.token_hex(16)
        send_frame(sock, {"op": "hello", "rank": 1, "node": "local1", "nonce": nonce,
                          "mac": sign(b"not-the-job-secret", [JOB, "hello", 1, "local1", greeting["nonce"], nonce])},
                   time.monotonic() + 5)  # fmt: skip
        reply = recv_frame(sock, time.monotonic() + 5)
        send_frame(
            sock,
            {"op": "set", "key": "rank/1/gather", "value": "{}", "seq": 1, "mac": None},
            time.monotonic() + 5,
        )
        forged = 1
        assert reply.get("ok") is False
        sock.close()
    meeting = open_store(envs[1], 20, needs="test", node="local1", environ=env)
    gather(meeting, {"document": json.dumps({"who": "rank1"})}, 20)
    meeting.close()
    thread.join(30)
    got = box["got"]
    assert [json.loads(g.items["document"])["who"] for g in got] == ["rank0", "rank1"]
    assert all(g.authenticated and g.error is None for g in got)


def test_a_rank_may_write_only_its_own_keys_and_each_once() -> None:
    server = _serve()
    try:
        one = StoreClient.open("127.0.0.1", server.port, 1, JOB, TOKEN.encode(), 5)
        one.set("rank/1/doc", "a")
        with pytest.raises(StoreError, match="already set"):
            one.set("rank/1/doc", "b")
        with pytest.raises(StoreError, match="only rank 2 may"):
            one.set("rank/2/doc", "forged")
        assert one.get("rank/1/doc", 1) == "a"
    finally:
        server.close()


def test_a_flood_of_keys_leaves_rank_0_bounded() -> None:
    """Without a secret anyone may say it is a rank: even then the keys and bytes it can make rank 0
    hold are capped per rank and in total (40 values of 8 MiB once grew rank 0 by 337 MB)."""
    limits = StoreLimits(value_bytes=64 * 1024, keys_per_rank=50, bytes_per_rank=1 << 20, total_bytes=2 << 20)
    server = _serve(world=4, key=None, limits=limits)
    try:
        stranger = StoreClient.open("127.0.0.1", server.port, 3, JOB, None, 5)
        refused = 0
        for i in range(400):
            try:
                stranger.set(f"flood/{i}", "x" * 60_000)
            except StoreError:
                refused += 1
        with pytest.raises(StoreError, match="exceeds"):
            stranger.set("big", "x" * 70_000)
        assert refused >= 380
        assert server.data.total <= limits.bytes_per_rank and len(server.data.entries) <= limits.keys_per_rank
    finally:
        server.close()


def test_non_utf8_node_names_and_keys_are_refused_cleanly(log_records) -> None:
    server = _serve(key=None)
    try:
        sock = _raw(server.port, attacker_address())
        recv_frame(sock, time.monotonic() + 5)
        body = (
            b'{"op":"hello","rank":1,"node":"\xff\xfenode","nonce":"' + secrets.token_hex(16).encode() + b'"}'
        )
        sock.sendall(len(body).to_bytes(4, "big") + body)
        assert sock.recv(100) == b""  # closed, no crash
        sock.close()
        sock = _raw(server.port, attacker_address())
        recv_frame(sock, time.monotonic() + 5)
        send_frame(
            sock,
            {"op": "hello", "rank": 1, "node": "\udcff", "nonce": secrets.token_hex(16)},
            time.monotonic() + 5,
        )
        assert sock.recv(100) == b""
        sock.close()
        with pytest.raises(StoreError, match="not valid UTF-8"):  # a rank whose own node name is not UTF-8
            StoreClient.open("127.0.0.1", server.port, 1, JOB, None, 5, node="gpu\udcff01")
        good = StoreClient.open("127.0.0.1", server.port, 1, JOB, None, 5, node="gpu01")  # still serving
        good.set("rank/1/x", "y")
        assert not any(r.exc_info for r in log_records)
    finally:
        server.close()


def test_the_store_binds_only_where_the_launcher_says() -> None:
    server = _serve()
    try:
        with pytest.raises(OSError):
            socket.create_connection((attacker_address(), server.port), timeout=2)
    finally:
        server.close()


def test_without_the_secret_nothing_can_be_read() -> None:
    """bench matrix keeps its per-run token in the store: a stranger cannot read it."""
    server = _serve()
    try:
        rank0 = StoreClient.open("127.0.0.1", server.port, 0, JOB, TOKEN.encode(), 5)
        rank0.set("rank/0/token", json.dumps("the-run-token"))
        sock = _raw(server.port, attacker_address())
        greeting = recv_frame(sock, time.monotonic() + 5)
        send_frame(
            sock, {"op": "hello", "rank": 2, "node": "", "nonce": secrets.token_hex(16)}, time.monotonic() + 5
        )
        assert recv_frame(sock, time.monotonic() + 5)["ok"] is False
        send_frame(sock, {"op": "get", "key": "rank/0/token", "value": 1, "seq": 1}, time.monotonic() + 5)
        with pytest.raises(PeerError):
            recv_frame(sock, time.monotonic() + 3)  # closed: nothing answered
        assert greeting["signed"]
    finally:
        server.close()


def test_a_replayed_request_is_refused() -> None:
    """A captured signed request, sent again on the same connection, is refused (the sequence only rises)."""
    server = _serve()
    try:
        client = StoreClient.open("127.0.0.1", server.port, 1, JOB, TOKEN.encode(), 5)
        client.add("count", 1)
        fields = [JOB, 1, client.server_nonce, client.nonce, 1, "add", "count", 1]
        send_frame(
            client.sock,
            {"op": "add", "key": "count", "value": 1, "seq": 1, "mac": sign(TOKEN.encode(), fields)},
            time.monotonic() + 5,
        )
        with pytest.raises(PeerError):
            recv_frame(client.sock, time.monotonic() + 3)
        other = StoreClient.open("127.0.0.1", server.port, 2, JOB, TOKEN.encode(), 5)
        assert other.add("count", 0) == 1
    finally:
        server.close()


def test_only_the_jobs_nodes_count_and_a_bad_index_fails_only_its_rank() -> None:
    """Slurm's node list is gpu[01-02]: a rank on gpu99 (even with the secret) is refused by name,
    and a rank whose index is malformed is that rank's error; the others are taken."""
    port = free_port()
    env = {**ENV, "SLURM_JOB_NODELIST": "gpu[01-02]"}
    envs = [DistEnv(r, 3, 0, "127.0.0.1", port, "slurm") for r in range(3)]
    box: dict = {}

    def rank0() -> None:
        meeting = open_store(envs[0], 20, needs="test", node="gpu01", environ=env)
        box["got"] = gather(meeting, {"document": "{}"}, 20)
        meeting.close()

    thread = threading.Thread(target=rank0)
    thread.start()
    outside = open_store(envs[1], 20, needs="test", node="gpu99", environ=env)
    gather(outside, {"document": "{}"}, 20)
    bad = open_store(envs[2], 20, needs="test", node="gpu02", environ=env)
    bad.client.set("rank/2/gather", json.dumps({"node": "gpu02", "items": {"../x": 1}}))
    thread.join(30)
    got = box["got"]
    assert got[0].error is None and got[0].items == {"document": "{}"}
    assert "names node 'gpu99', which is not one of the job's nodes" in got[1].error and not got[1].items
    assert "malformed index" in got[2].error and not got[2].items
