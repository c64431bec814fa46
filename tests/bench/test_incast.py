"""``bench incast`` on loopback: the round protocol, its deadlines, and strangers kept out."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from fabricscope.bench.incast import (
    _REQUEST,
    OP_REPORT,
    OP_STOP,
    IncastError,
    IncastParams,
    run_receiver,
    run_sender,
    sender_counts,
    sender_hello,
)
from fabricscope.bench.results.schema import BenchResult
from fabricscope.jobs.frames import recv_exact, send_frame
from fabricscope.jobs.launch import DistEnv, free_port
from fabricscope.jobs.secret import TOKEN_ENV, JobSecret
from fabricscope.report.bench import result_lines
from fabricscope.report.incast import collapse_verdict, incast_svg
from tests.lab.conftest import fs

GOOD_TOKEN = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"


def test_sender_counts() -> None:
    assert sender_counts([], 8) == [1, 2, 4, 8]
    assert sender_counts([], 6) == [1, 2, 4, 6]
    assert sender_counts([4, 2, 2], 7) == [2, 4]
    with pytest.raises(IncastError, match="has 3 senders"):
        sender_counts([4], 3)
    with pytest.raises(IncastError, match="at least 2 ranks"):
        sender_counts([], 0)


def _env(rank: int, world: int, port: int) -> DistEnv:
    return DistEnv(rank, world, rank, "127.0.0.1", port, "test", f"t{rank}")


def _start_senders(
    world: int, port: int, params: IncastParams, *, skip: set[int] = frozenset()
) -> list[threading.Thread]:
    threads = []
    for rank in range(1, world):
        if rank in skip:
            continue
        thread = threading.Thread(
            target=lambda r=rank: _quiet(run_sender, _env(r, world, port), params), daemon=True
        )
        thread.start()
        threads.append(thread)
    return threads


def _quiet(fn, *args) -> None:
    try:
        fn(*args)
    except IncastError:
        pass


def test_rounds_on_loopback_give_every_point(monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, GOOD_TOKEN)
    port = free_port()
    params = IncastParams(size_bytes=64 * 1024, rounds=5, warmup=1, round_timeout_s=10, join_timeout_s=20)
    threads = _start_senders(4, port, params)
    result = run_receiver(_env(0, 4, port), params)
    for thread in threads:
        thread.join(10)
    assert [p.senders for p in result.incast] == [1, 2, 3]
    for point in result.incast:
        assert point.rounds == 5
        assert point.round_p50_ms <= point.round_p99_ms <= point.round_max_ms
        # goodput is the bytes over the summed round times: never below what the slowest round alone gives
        assert point.goodput_gbps >= point.senders * 64 * 1024 * 8 / (point.round_max_ms / 1e3) / 1e9 * 0.9999
    assert result.hosts == ["receiver:t0", "t1", "t2", "t3"]
    doc = json.loads(json.dumps(result.to_json_dict()))
    assert BenchResult.model_validate(doc).incast == result.incast  # the stored form reads back
    assert "senders" in result_lines(result)[1] and incast_svg(result).count("<svg") == 2


def test_a_stranger_with_the_wrong_token_is_closed_and_the_job_still_runs(monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, GOOD_TOKEN)
    port = free_port()
    params = IncastParams(senders=[1], size_bytes=4096, rounds=2, warmup=0, join_timeout_s=20)
    box: dict = {}
    receiver = threading.Thread(
        target=lambda: box.update(result=run_receiver(_env(0, 2, port), params)), daemon=True
    )
    receiver.start()
    stranger = _connect(port)
    wrong = JobSecret("", b"0123456789abcdef-wrong", "token")
    sender_hello(stranger, 1, "stranger", wrong, False, time.monotonic() + 5)
    assert stranger.recv(1) == b""  # closed: its signature is not the job's
    _start_senders(2, port, params)
    receiver.join(20)
    assert box["result"].incast[0].rounds == 2


def test_silent_strangers_delay_no_sender(monkeypatch) -> None:
    """Connections that never say a word are read side by side with the senders' hellos: the
    job joins at once instead of after one hello deadline per stranger (5 s each before)."""
    from fabricscope.bench.incast import HELLO_DEADLINE_S

    monkeypatch.setenv(TOKEN_ENV, GOOD_TOKEN)
    port = free_port()
    params = IncastParams(size_bytes=4096, rounds=1, warmup=0, join_timeout_s=30)
    box: dict = {}
    started = time.monotonic()
    receiver = threading.Thread(
        target=lambda: box.update(result=run_receiver(_env(0, 3, port), params)), daemon=True
    )
    receiver.start()
    strangers = [_connect(port) for _ in range(3)]
    time.sleep(0.2)  # the strangers are accepted first
    _start_senders(3, port, params)
    receiver.join(30)
    took = time.monotonic() - started
    assert "result" in box and [p.senders for p in box["result"].incast] == [1, 2]
    assert took < HELLO_DEADLINE_S, f"the job took {took:.1f} s to run: silent strangers held up its join"
    for stranger in strangers:
        stranger.close()


def test_a_sender_that_never_joins_is_named(monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, GOOD_TOKEN)
    port = free_port()
    params = IncastParams(size_bytes=4096, rounds=1, warmup=0, join_timeout_s=1.5)
    _start_senders(4, port, params, skip={2})
    started = time.monotonic()
    with pytest.raises(IncastError, match=r"ranks 2 did not join within 1.5 s"):
        run_receiver(_env(0, 4, port), params)
    assert time.monotonic() - started < 10


def test_a_sender_that_stops_answering_ends_the_round_with_its_name(monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, GOOD_TOKEN)
    port = free_port()
    params = IncastParams(
        senders=[2], size_bytes=4096, rounds=3, warmup=0, round_timeout_s=1.0, join_timeout_s=20
    )
    _start_senders(2, port, params)  # rank 1 answers; rank 2 joins and then says nothing
    silent = threading.Thread(target=_silent_sender, args=(port,), daemon=True)
    silent.start()
    started = time.monotonic()
    with pytest.raises(IncastError, match=r"rank 2 \(silent\) owes 4096 bytes"):
        run_receiver(_env(0, 3, port), params)
    assert time.monotonic() - started < 10


def _silent_sender(port: int) -> None:
    """Joins and answers counter requests, but never sends a response."""
    sock = _connect(port)
    sender_hello(sock, 2, "silent", JobSecret("", GOOD_TOKEN.encode(), "token"), False, time.monotonic() + 5)
    try:
        while True:
            op, _ = _REQUEST.unpack(recv_exact(sock, _REQUEST.size, time.monotonic() + 15))
            if op == OP_REPORT:
                send_frame(sock, {"retransmits": 0, "timeouts": 0, "netns": "x"}, time.monotonic() + 5)
            elif op == OP_STOP:
                return
    except Exception:
        pass
    finally:
        sock.close()


def _connect(port: int) -> socket.socket:
    deadline = time.monotonic() + 10
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_cli_launch_local_json_and_bad_input(tmp_path) -> None:
    proc = fs(
        "bench",
        "incast",
        "--launch",
        "local:3",
        "--rounds",
        "3",
        "--size",
        "16KiB",
        "--json",
        db=tmp_path / "h.db",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "incast" and [p["senders"] for p in doc["incast"]] == [1, 2]
    assert doc["run_id"] is not None  # stored
    shown = fs("history", "show", str(doc["run_id"]), db=tmp_path / "h.db")
    assert shown.returncode == 0, shown.stderr
    assert "goodput" in shown.stdout and "timeouts" in shown.stdout  # the same table as the live run
    report = fs("report", str(doc["run_id"]), "-o", str(tmp_path / "r.html"), db=tmp_path / "h.db")
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert "Incast goodput" in html and "Round completion time" in html  # both curves against N
    for args, message in (
        (["--size", "0"], "--size"),
        (["--senders", "x"], "--senders"),
        (["--congestion", "no such; rm"], "congestion"),
    ):
        bad = fs("bench", "incast", "--launch", "local:2", *args, db=tmp_path / "h.db", timeout=60)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_collapse_verdict_names_the_first_collapsed_count() -> None:
    from fabricscope.bench.results.schema import IncastPoint

    def point(n: int, goodput: float, timeouts: int) -> IncastPoint:
        return IncastPoint(
            senders=n,
            goodput_gbps=goodput,
            round_p50_ms=1,
            round_p99_ms=2,
            round_max_ms=3,
            rounds=10,
            retransmits=5,
            timeouts=timeouts,
        )

    assert "no collapse" in collapse_verdict([point(1, 0.9, 0), point(2, 0.95, 0), point(4, 0.9, 0)])
    text = collapse_verdict([point(1, 0.9, 0), point(2, 0.95, 0), point(4, 0.3, 7), point(8, 0.1, 30)])
    assert text.startswith("incast collapse from 4 senders") and "7 retransmission timeouts" in text
