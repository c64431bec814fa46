"""The exporter following NCCL Inspector output: metrics per communicator, collective and size
bucket, the expected bandwidth and the ratio, per-rank NIC and rail, rotation and bad lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import make_exporter, samples
from tests.monitor.inspector_gen import Communicator, DumpWriter, prom_lines, true_busbw_gbs


def _scrape(exporter) -> dict:
    exporter.inspector_task.run_once()
    return samples(exporter.render().decode())


def _pick(parsed: dict, name: str, **labels: str) -> list[tuple[dict, float]]:
    out = []
    for (sample, labelset), value in parsed.items():
        found = dict(labelset)
        if sample == name and all(found.get(k) == v for k, v in labels.items()):
            out.append((found, value))
    return out


def test_a_planted_slowdown_shows_as_the_ratio_on_the_right_rank_and_nic(tmp_path: Path) -> None:
    dump = tmp_path / "inspector"
    dump.mkdir()
    writer = DumpWriter(dump, hostname="gpu-node-2")
    # ranks 8-15 of a 16-rank, 2-node job run here: rank 11 is GPU 3, whose nearest NIC is mlx5_3.
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
    exporter = make_exporter(FIXTURE_HOSTS / "ib-ndr-healthy", inspector_dirs=(str(dump),))
    for _ in range(5):
        writer.round([slow, other])
    with open(writer.path, "a") as handle:
        handle.write('not json\n{"header": 1}\n')
    exporter.inspector_task.run_once()  # the follower's 1 s poll
    writer.rotate()  # logrotate: the rest goes to a new file of the same name
    for _ in range(5):
        writer.round([slow, other])
    parsed = _scrape(exporter)

    rank11 = _pick(parsed, "fabricscope_nccl_rank_busbw_ratio", comm="0x7f8c496ae9f661", rank="11")
    assert len(rank11) == 1
    labels, ratio = rank11[0]
    assert ratio == pytest.approx(0.5, rel=0.10)
    assert (labels["node"], labels["gpu"], labels["nic"], labels["rail"]) == (
        "gpu-node-2",
        "3",
        "mlx5_3",
        "3",
    )
    healthy = [v for lab, v in _pick(parsed, "fabricscope_nccl_rank_busbw_ratio") if lab["rank"] != "11"]
    assert len(healthy) == 7 + 8 and all(v == pytest.approx(1.0, rel=0.10) for v in healthy)

    expected = _pick(
        parsed,
        "fabricscope_nccl_busbw_expected_bytes_per_second",
        comm="0x7f8c496ae9f661",
        collective="AllReduce",
        size_bucket="1-2GB",
    )
    assert expected[0][1] == pytest.approx(true_busbw_gbs("AllReduce", 1 << 30, 16, 2) * 1e9, rel=0.01)
    count = _pick(
        parsed,
        "fabricscope_nccl_collectives_total",
        comm="0x7f8c496ae9f661",
        collective="AllReduce",
        size_bucket="64-65MB",
    )
    assert count[0][1] == 10 * 8  # 10 rounds x 8 local ranks, across the rotation
    hist = _pick(parsed, "fabricscope_nccl_collective_duration_seconds_count", comm="0xe62dedaa97644a")
    assert hist[0][1] == 10 * 8
    assert _pick(parsed, "fabricscope_nccl_inspector_bad_lines_total")[0][1] == 2
    since = [v for _lab, v in _pick(parsed, "fabricscope_nccl_seconds_since_last_collective")]
    assert since and max(since) < 60


def test_the_textfile_form_is_read_too(tmp_path: Path) -> None:
    dump = tmp_path / "inspector"
    dump.mkdir()
    busbw = true_busbw_gbs("AllReduce", 4 << 30, 4, 1) * 0.8
    (dump / "nccl_inspector_metrics_GPU-1234.prom").write_text(
        prom_lines(
            comm_name="DP Group 0",
            node="nvl72004-T01",
            gpu=2,
            n_ranks=4,
            n_nodes=1,
            op="AllReduce",
            size=(4 << 30) + (1 << 29),
            busbw_gbs=busbw,
            exec_us=9498.47,
        )
    )
    parsed = _scrape(make_exporter(FIXTURE_HOSTS / "ib-ndr-healthy", inspector_dirs=(str(dump),)))
    ((labels, value),) = _pick(parsed, "fabricscope_nccl_busbw_bytes_per_second", size_bucket="4-5GB")
    assert value == pytest.approx(float(f"{busbw:.6g}") * 1e9) and labels["comm"].startswith(
        "h"
    )  # as written: 6 digits
    ((labels, _v),) = _pick(parsed, "fabricscope_nccl_seconds_since_last_collective")
    assert (labels["gpu"], labels["nic"], labels["node"]) == ("2", "mlx5_2", "nvl72004-T01")


def test_communicators_are_capped_and_the_drop_counted(tmp_path: Path) -> None:
    """Labels stay bounded whatever the dumps hold: 300 communicators active at once keep 256."""
    from fabricscope.monitor.inspector_tail import MAX_COMMUNICATORS, InspectorFollower

    dump = tmp_path / "inspector"
    dump.mkdir()
    comms = [
        Communicator(f"0x{0x1000 + i:x}", f"c{i}", 8, 1, (0,), ops=("AllReduce",), sizes=(1 << 20,))
        for i in range(300)
    ]
    DumpWriter(dump).round(comms)
    follower = InspectorFollower([str(dump)], from_start=True)
    counts = follower.poll()
    with follower.locked() as state:
        assert len(state) == MAX_COMMUNICATORS
    assert counts.dropped_records == 300 - MAX_COMMUNICATORS and counts.records == MAX_COMMUNICATORS
