"""nccl-tests arithmetic, layouts, straggler naming, launcher environments and the table: no torch."""

from __future__ import annotations

import pytest

from fabricscope.bench.collective import (
    CollectiveParams,
    CollectiveRun,
    find_straggler,
    pattern_modulus,
    size_result,
    to_bench_result,
)
from fabricscope.bench.results.schema import BenchResult
from fabricscope.collective_ops import UnknownOpError, bus_factor, layout
from fabricscope.jobs.launch import LaunchError, detect, first_slurm_host, parse_launch
from fabricscope.report.bench import collective_lines


def test_bus_factors_match_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_reduce", 2) == 1.0
    for op in ("all_gather", "reduce_scatter", "alltoall"):
        assert bus_factor(op, 4) == pytest.approx(3 / 4)
    assert bus_factor("broadcast", 16) == 1.0 and bus_factor("sendrecv", 16) == 1.0
    assert bus_factor("reduce", 16) == 1.0
    with pytest.raises(UnknownOpError):
        bus_factor("scan", 2)


def test_layout_rounds_like_nccl_tests() -> None:
    # all_gather of 1000 floats over 3 ranks: per-rank chunk = floor(1000 / 12) * 4 = 332
    lay = layout("all_gather", 4000, 3, 4)
    assert (lay.chunk, lay.send, lay.recv, lay.size_bytes) == (332, 332, 996, 3984)
    lay = layout("reduce_scatter", 4000, 3, 4)
    assert (lay.send, lay.recv, lay.size_bytes) == (996, 332, 3984)
    lay = layout("alltoall", 4096, 4, 4)
    assert (lay.send, lay.recv, lay.chunk) == (1024, 1024, 256)
    assert layout("all_reduce", 4098, 4, 4).size_bytes == 4096
    assert layout("all_gather", 8, 4, 4) is None  # too small for one aligned chunk per rank


def test_pattern_modulus_keeps_sums_exact() -> None:
    assert pattern_modulus("float", 8) == 3
    assert pattern_modulus("bfloat16", 100) == 2  # 100 * 2 = 200 <= 256
    assert pattern_modulus("int8", 64) == 1
    assert pattern_modulus("int8", 200) is None  # cannot check: reported as N/A


def test_size_result_uses_mean_over_ranks_like_nccl_tests() -> None:
    lay = layout("all_reduce", 64 << 20, 4, 4)
    times = [[0.5, 0.5], [0.5, 0.5], [0.6, 0.6], [0.5, 0.5]]
    res = size_result("all_reduce", 4, lay, times, 0)
    assert res.time_s == pytest.approx(0.525)
    assert res.max_rank_time_s == pytest.approx(0.6)
    assert res.algbw_GBps == pytest.approx((64 << 20) / 0.525 / 1e9)
    assert res.busbw_GBps == pytest.approx(res.algbw_GBps * 1.5)


def test_straggler_is_the_rank_the_others_wait_for() -> None:
    # rank 2 arrives 40 ms late: its own op time is short, everyone else's is long
    times = [[0.10 + 0.001 * (i % 3) for i in range(10)] for _ in range(4)]
    times[2] = [0.06 + 0.001 * (i % 2) for i in range(10)]
    verdict = find_straggler(times)
    assert verdict.rank == 2 and "rank 2" in (verdict.reason or "")


def test_no_straggler_in_noise() -> None:
    import random

    rng = random.Random(7)
    times = [[0.1 + rng.uniform(-0.002, 0.002) for _ in range(20)] for _ in range(8)]
    assert find_straggler(times).rank is None


def _run(op="all_reduce", n=4) -> CollectiveRun:
    params = CollectiveParams(op=op, sizes=[1 << 20, 2 << 20], iters=2, warmup=1)
    sizes = [size_result(op, n, layout(op, s, n, 4), [[0.01, 0.011]] * n, 0) for s in params.sizes]
    ranks = [{"rank": r, "host": f"h{r + 1}", "pid": 100 + r, "device": "cpu"} for r in range(n)]
    return CollectiveRun(params, n, "torchrun", ranks, sizes, [], 1.0)


def test_bench_result_document() -> None:
    result = to_bench_result(_run())
    doc = result.to_json_dict()  # what --json prints is the stored result
    again = BenchResult.from_json(result.to_json())
    assert again.kind == "collective" and again.metrics["busbw_avg_GBps"] == pytest.approx(
        result.metrics["busbw_avg_GBps"]
    )
    assert again.to_json_dict() == doc  # entries, ranks and stragglers survive the round trip
    assert doc["schema"] == "fabricscope.bench/v1" and doc["kind"] == "collective"
    entry = doc["entries"][0]
    for key in (
        "size_bytes",
        "time_s",
        "algbw_GBps",
        "busbw_GBps",
        "wrong",
        "per_rank_time_s",
        "straggler_rank",
    ):
        assert key in entry
    assert entry["algbw_GBps"] == pytest.approx(entry["size_bytes"] / entry["time_s"] / 1e9)
    assert [r["host"] for r in doc["ranks"]] == ["h1", "h2", "h3", "h4"]
    # per size: busbw (baselines and compare judge it) and time (sim calibrate fits it); the rest is in entries
    per_size = sorted(k for k in result.metrics if k.startswith("size_"))
    assert per_size == [
        "size_1048576_busbw_GBps",
        "size_1048576_time_s",
        "size_2097152_busbw_GBps",
        "size_2097152_time_s",
    ]


def test_straggler_and_stored_table() -> None:
    run = _run(n=3)
    run.sizes[1].straggler_rank, run.sizes[1].straggler_reason = 2, "rank 2 arrives late"
    result = to_bench_result(run)
    assert [(s.rank, s.host, s.sizes_bytes) for s in result.stragglers] == [(2, "h3", [2097152])]
    text = "\n".join(collective_lines(BenchResult.from_json(result.to_json())))  # as stored
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("2097152"))
    # nccl-tests' columns (issue 26 item 6): the row ends in #wrong; the straggler is a comment line
    assert row.split()[:5] == ["2097152", "524288", "float", "sum", "-1"] and row.split()[-1] == "0"
    assert "# straggler at 2097152 B: rank 2 arrives late" in text
    assert "# straggler: rank 2 (h3) at 2097152 B" in text and "# Out of bounds values : 0 OK" in text


def test_entries_refuse_nonsense() -> None:
    base = {
        "kind": "collective",
        "entries": [{"size_bytes": 8, "time_s": 1e-6, "algbw_GBps": 0.008, "busbw_GBps": 0.012}],
    }
    assert BenchResult.model_validate(base).entries[0].wrong is None  # not checked
    for bad in ({"busbw_GBps": -1.0}, {"time_s": float("nan")}, {"surprise": 1}):
        doc = {**base, "entries": [{**base["entries"][0], **bad}]}
        with pytest.raises(ValueError):
            BenchResult.model_validate(doc)


def test_table_looks_like_nccl_tests() -> None:
    lines = collective_lines(to_bench_result(_run()))  # as a live run prints it
    text = "\n".join(lines)
    header = next(ln for ln in lines if "size" in ln and "count" in ln)
    for col in ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"):
        assert col in header
    row = next(ln for ln in lines if ln.strip().startswith("1048576"))
    toks = row.split()
    assert toks[:5] == ["1048576", "262144", "float", "sum", "-1"]
    assert "# Out of bounds values : 0 OK" in text and "# Avg bus bandwidth" in text
    assert "#  Rank  3 Pid     103 on         h4 device cpu" in lines  # nccl-tests' device list


def test_detect_torchrun_slurm_openmpi_mpich() -> None:
    env = detect(
        {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "n1", "MASTER_PORT": "1234"}
    )
    assert (env.rank, env.world_size, env.local_rank, env.master_addr, env.master_port, env.launcher) == (
        3,
        8,
        1,
        "n1",
        1234,
        "torchrun",
    )
    env = detect(
        {
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "16",
            "SLURM_LOCALID": "5",
            "SLURM_JOB_NODELIST": "gpu[07-08,11]",
            "SLURM_JOB_ID": "4242",
        }
    )
    assert (env.rank, env.world_size, env.master_addr, env.master_port, env.launcher) == (
        5,
        16,
        "gpu07",
        24242,
        "slurm",
    )
    env = detect(
        {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1"},
        master_addr="10.0.0.1",
    )
    assert (env.rank, env.local_rank, env.master_addr, env.launcher) == (1, 1, "10.0.0.1", "openmpi")
    env = detect({"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MASTER_ADDR": "a"})
    assert (env.world_size, env.launcher) == (4, "mpich")
    assert detect({}).launcher == "single"


def test_detect_refuses_incomplete_environments() -> None:
    with pytest.raises(LaunchError, match="MASTER_ADDR"):
        detect({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"})
    with pytest.raises(LaunchError, match="both"):
        detect({"RANK": "0"})
    with pytest.raises(LaunchError, match="outside"):
        detect({"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "x"})
    with pytest.raises(LaunchError, match="integer"):
        detect({"RANK": "x", "WORLD_SIZE": "4"})


def test_slurm_hostlist_and_launch_specs() -> None:
    assert first_slurm_host("node1") == "node1"
    assert first_slurm_host("gpu[003-010],cpu[1-2]") == "gpu003"
    assert parse_launch("local:4").count == 4
    spec = parse_launch("lab:ls:h1,h5,h2")
    assert (spec.kind, spec.lab, spec.hosts) == ("lab", "ls", ("h1", "h5", "h2"))
    for bad in ("local:x", "local:0", "lab:", "ssh:foo"):
        with pytest.raises(LaunchError):
            parse_launch(bad)
