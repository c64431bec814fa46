"""The Inspector families' exposition, byte for byte, over a generated stream: scrapes with new
records between them, with none, and after the expected bandwidths change. The golden file was
written by the renderer that formatted every sample on every scrape; the renderer that keeps each
series' text between scrapes (formatted by the background poll) must write the same bytes, and
must not show a stale value."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import GOLDEN, make_exporter
from tests.monitor.inspector_gen import Communicator, DumpWriter, prom_lines, true_busbw_gbs

GOLDEN_FILE = GOLDEN / "inspector-stream.prom"


def _nccl_lines(body: bytes) -> str:
    return "".join(line + "\n" for line in body.decode().splitlines() if "fabricscope_nccl_" in line)


def test_the_inspector_exposition_is_byte_identical_across_scrapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = float(int(time.time()))
    monkeypatch.setattr(time, "time", lambda: now)  # seconds since the last collective: exactly 5
    dump_us = (int(now) - 5) * 10**6
    dump = tmp_path / "inspector"
    dump.mkdir()
    writer = DumpWriter(dump, hostname="gpu-node-2")
    slow = Communicator(
        "0x7f8c496ae9f661",
        "DP Group 0",
        16,
        2,
        tuple(range(8, 16)),
        ops=("AllReduce", "AllGather"),
        sizes=(1 << 30, 64 << 20),
        slow={11: 0.5},
    )
    other = Communicator("0xe62dedaa97644a", "TP Group 1", 8, 1, tuple(range(8)), ops=("ReduceScatter",))
    odd = Communicator(
        "0x1", 'a "q" \\ b\nc', 4, 1, (0, 1), ops=("AllReduce", "Send", "AllToAll"), sizes=(8192, 3 << 20)
    )
    (dump / "nccl_inspector_metrics_GPU-1234.prom").write_text(
        prom_lines(
            comm_name="DP Group 9",
            node="nvl72004-T01",
            gpu=2,
            n_ranks=4,
            n_nodes=1,
            op="AllReduce",
            size=(4 << 30) + (1 << 29),
            busbw_gbs=true_busbw_gbs("AllReduce", 4 << 30, 4, 1) * 0.8,
            exec_us=9498.47,
        )
    )
    exporter = make_exporter(FIXTURE_HOSTS / "ib-ndr-healthy", inspector_dirs=(str(dump),))
    assert exporter.inspector is not None and exporter.inspector_task is not None
    scrapes = []

    def scrape(title: str) -> None:
        exporter.inspector_task.run_once()
        with exporter.inspector.locked() as comms:  # formatted by the background poll, not the scrape
            assert comms and all(comm.text is not None for comm in comms.values())
        scrapes.append(f"# --- {title}\n" + _nccl_lines(exporter.render()))

    for _ in range(3):
        writer.round([slow, other, odd], now_us=dump_us)
    scrape("first")
    writer.round([other], now_us=dump_us)  # one communicator's keys move, the others' do not
    scrape("after one communicator's round")
    scrape("nothing new")
    os.utime(dump / "nccl_inspector_metrics_GPU-1234.prom", (now - 1, now - 1))  # re-read: one more sample
    exporter.inspector.update_expected(
        lambda op, size, ranks, nodes, host: 2e11 if op == "AllReduce" else None, reset=True
    )
    scrape("expected bandwidths replaced")
    text = "".join(scrapes)
    if os.environ.get("FABRICSCOPE_UPDATE_GOLDEN"):
        GOLDEN_FILE.write_text(text)
    assert text == GOLDEN_FILE.read_text()


def test_the_poll_formats_only_when_a_scrape_is_due(tmp_path: Path) -> None:
    """At a 15 s scrape interval and 1 s polls, formatting in every poll would redo it up to 15
    times for each scrape: after two scrapes have shown the interval, a poll formats only within
    two polls of the next scrape."""
    dump = tmp_path / "inspector"
    dump.mkdir()
    writer = DumpWriter(dump, hostname="gpu-node-2")
    comm = Communicator("0x7f8c496ae9f661", "DP Group 0", 16, 2, tuple(range(8, 16)), ops=("AllReduce",))
    exporter = make_exporter(FIXTURE_HOSTS / "ib-ndr-healthy", inspector_dirs=(str(dump),))
    collector = exporter.inspector_collector
    assert collector is not None and exporter.inspector is not None
    now = [1000.0]
    collector.clock = lambda: now[0]

    def poll_at(t: float) -> bool:
        """Whether the poll at ``t`` left the text formatted."""
        now[0] = t
        writer.round([comm], now_us=int(time.time() * 1e6))
        exporter.inspector_task.run_once()
        with exporter.inspector.locked() as comms:
            return all(c.text is not None for c in comms.values())

    assert poll_at(1000.0)  # no scrape yet: every poll formats
    for t in (1000.5, 1015.5):
        now[0] = t
        exporter.render()
    assert not poll_at(1016.5) and not poll_at(1027.0)  # early in the interval: left for later
    assert poll_at(1028.6) and poll_at(1030.0)  # next scrape at 1030.5, within two polls
