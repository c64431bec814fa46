"""Mid-size messages (issue 23, first item): NCCL's chunking and the pipeline ramp its own
estimate leaves out (sim/pipeline.py), checked against NCCL's rules and whole published sweeps
of the calibration split (tests/data/sim_validation/calibration.yaml)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from fabricscope.sim import figures, pipeline

DATA = Path(__file__).resolve().parents[1] / "data" / "sim_validation"
MiB = 1 << 20


def test_chunk_sizes_follow_ncclS_rules() -> None:
    """calcCollChunking, NVIDIA NCCL v2.30.7-1 src/enqueue.cc: one-node NVLS on 16 channels x 8 heads."""
    ops = 16 * 8
    assert pipeline.chunk_bytes("nvls", "Simple", 8 * MiB, 16, 8, 1, 8) == 32768  # 8 MiB < 8 x ops x 64 KiB
    assert pipeline.chunk_bytes("nvls", "Simple", 64 * MiB, 16, 8, 1, 8) == 65536  # < 64 x ops x 128 KiB
    assert pipeline.chunk_bytes("nvls", "Simple", 64 * ops * 128 * 1024, 16, 8, 1, 8) == 128 * 1024
    assert pipeline.chunk_bytes("ring", "Simple", 1 << 30, 16, 1, 2, 8) == 2 * MiB  # 512 KiB steps x 4
    assert pipeline.chunk_bytes("ring", "LL", 1 << 30, 16, 1, 2, 8) == 32 * 1024  # LL moves half its lines
    assert (
        pipeline.chunk_bytes("ring", "LL128", 1 << 30, 16, 1, 2, 8) == 614400 // 16 * 15
    )  # 120 of 128 bytes


def test_small_messages_run_on_fewer_channels() -> None:
    assert pipeline.channels_used("ring", "Simple", 1 << 30, 16, 16, 16) == 16
    nc = pipeline.channels_used("ring", "Simple", 64 * 1024, 16, 16, 16)
    assert nc == 2 and 64 * 1024 >= nc * 512 * 64 and 64 * 1024 < (nc + 1) * 512 * 64  # 1 channel per 32 KiB


def test_the_ramp_is_a_vanishing_share_at_large_sizes() -> None:
    share = []
    for size in (4 * MiB, 64 * MiB, 1 << 30):
        bw = size / 250e9
        r = pipeline.ramp(
            "nvls", "Simple", "all_reduce", size, bw, channels=16, ranks=8, nodes=1, heads=8, nvls_channels=16
        )
        share.append(r.extra_s / bw)
    assert share[0] > share[1] > share[2] and share[2] < 0.05


SWEEPS = (
    "aws-batch-p5-allreduce",
    "dstack-nebius-h100-2node-allreduce",
    "dstack-lambda-b200-2node-allreduce",
)


@pytest.mark.parametrize("table", SWEEPS)
def test_mid_size_sweeps_where_nccl_runs_simple(table: str, monkeypatch) -> None:
    """Every published row of 1-256 MiB that the model runs with NVLS or NVLSTree (Simple): within
    the bandwidth band with the ramp in most rows, and closer to published than NCCL's own estimate."""
    rows = [
        r
        for r in yaml.safe_load((DATA / "calibration.yaml").read_text())
        if r["table"] == table and MiB <= (r["workload"]["size_bytes"] or 0) <= 256 * MiB
    ]
    assert len(rows) >= 8
    with_ramp = [figures.evaluate(r) for r in rows]
    simple = [i for i, e in enumerate(with_ramp) if e["algo"].endswith("Simple")]
    assert len(simple) >= 4
    monkeypatch.setattr(pipeline, "ramp", lambda *a, **k: pipeline.Ramp(1, 1, 1, 1, 0.0, 0.0))
    without = [figures.evaluate(rows[i]) for i in simple]
    err = lambda es: sum(abs(math.log(e["ratio"])) for e in es) / len(es)  # noqa: E731
    assert err([with_ramp[i] for i in simple]) < err(without)
    assert sum(with_ramp[i]["holds"] for i in simple) >= 0.75 * len(simple)
