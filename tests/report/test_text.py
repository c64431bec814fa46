"""Text rendering of results: one renderer per kind for live and stored runs; tables whole when piped."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from fabricscope.bench.collective import CollectiveParams, CollectiveRun, size_result
from fabricscope.bench.collective import to_bench_result as collective_result
from fabricscope.bench.matrix import MatrixParams, MatrixRun, RdmaPart, Survey, analyze
from fabricscope.bench.matrix import to_bench_result as matrix_result
from fabricscope.bench.results.kinds import KINDS
from fabricscope.bench.results.schema import BenchResult, new_result
from fabricscope.collective_ops import layout
from fabricscope.report.bench import RENDERERS, print_live, print_stored, result_lines
from tests.conftest import TESTS


def _tcp() -> BenchResult:
    return new_result("tcp", {"peer": "h2", "direction": "send"}).finish(
        {"throughput_gbps": 9.5, "retransmits_count": 3418}
    )


def _collective() -> BenchResult:
    params = CollectiveParams(sizes=[1 << 20], iters=2, warmup=1)
    sizes = [size_result("all_reduce", 4, layout("all_reduce", 1 << 20, 4, 4), [[0.01, 0.011]] * 4, 0)]
    ranks = [{"rank": r, "host": f"h{r}", "pid": 100 + r, "device": "cpu"} for r in range(4)]
    return collective_result(CollectiveRun(params, 4, "torchrun", ranks, sizes, [], 1.0))


def _matrix() -> BenchResult:
    hosts = ["h1", "h2", "h3", "h4"]
    m = [[None if a == b else (0.25 if "h3" in (a, b) else 1.0) for b in hosts] for a in hosts]
    verdict = analyze(hosts, m)
    tcp = Survey("tcp", m, None, verdict, verdict.suspects, [], [])
    return matrix_result(
        MatrixRun(
            MatrixParams(), hosts, [0, 1, 2, 3], tcp, RdmaPart("skipped", "no RDMA device"), "lab:x", 5.0
        )
    )


def _text(show) -> str:
    buffer = io.StringIO()
    show(Console(file=buffer, width=4096, highlight=False, soft_wrap=True))
    return buffer.getvalue()


@pytest.mark.parametrize("make", [_tcp, _collective, _matrix], ids=["tcp", "collective", "matrix"])
def test_live_and_stored_runs_show_the_same_lines(make) -> None:
    result = make()
    lines = result_lines(result)
    assert lines, "every kind here has a renderer"
    stored = BenchResult.from_json(result.to_json())  # what the history gives back
    live_text = _text(lambda out: print_live(result, out))
    stored_text = _text(lambda out: print_stored(7, stored, out))
    for line in lines:
        assert line in live_text.splitlines() and line in stored_text.splitlines(), line


def test_the_kind_lines_say_what_matters() -> None:
    assert result_lines(_tcp()) == ["9.50 Gb/s; 3,418 TCP retransmits during the run"]
    assert any(
        "h3: its transfers (row and column) run at 0.25 Gbit/s median" in line
        for line in result_lines(_matrix())
    )
    row = next(line for line in result_lines(_collective()) if line.strip().startswith("1048576"))
    assert row.split()[:5] == ["1048576", "262144", "float", "sum", "-1"]


def test_every_kind_has_a_renderer() -> None:
    assert set(RENDERERS) == set(KINDS)


def test_tables_are_not_cut_when_the_output_is_piped() -> None:
    """At 80 columns rich cut `inventory`'s cells ("ACTI…", "Link…"); a pipe has no width to fit."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", "inventory", "--root", str(TESTS / "fixtures" / "hosts" / "ib-ndr-healthy")],
        capture_output=True, text=True, env=env, timeout=120,  # stdout is a pipe, not a terminal
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if "mlx5_0/1" in line and "ACTIVE" in line)
    assert "LinkUp" in row and "InfiniBand" in row and "0000:14:00.0" in row
