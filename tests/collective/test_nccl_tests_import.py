"""``bench import nccl-tests`` on the real captured outputs, nccl-tests' JSON and garbage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabricscope.bench.collective.nccl_tests import (
    NcclTestsError,
    parse_file,
    parse_json,
    parse_row,
    parse_text,
    to_bench_result,
)
from fabricscope.bench.results.schema import BenchResult
from tests.conftest import SAMPLES


def sample(name: str) -> Path:
    return SAMPLES / name


def test_gh200_sample_rows_and_inferred_ranks() -> None:
    parsed = parse_file(sample("nccl_tests_all_reduce_gh200_ib_stall.txt"))
    assert len(parsed.rows) == 11  # the NCCL INFO lines around them are not rows
    first, last = parsed.rows[0], parsed.rows[-1]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (
        2048,
        512,
        "float",
        "sum",
        -1,
    )
    assert first.time_s == pytest.approx(14.99e-6) and first.busbw_GBps == 0.14 and first.wrong == 0
    assert first.inplace_time_s == pytest.approx(14.74e-6)
    assert (last.size_bytes, last.algbw_GBps, last.busbw_GBps) == (2097152, 5.39, 5.39)
    assert parsed.op == "all_reduce" and parsed.op_assumed  # the excerpt has no header
    assert parsed.ranks == 2 and parsed.ranks_inferred  # busbw == algbw -> 2(n-1)/n = 1 -> n = 2


def test_modern_header_sample() -> None:
    parsed = parse_file(sample("nccl_tests_all_reduce_header_v2_20.txt"))
    assert parsed.version == "2.20.0" and parsed.op == "all_reduce" and not parsed.op_assumed
    assert parsed.ranks == 2 and not parsed.ranks_inferred and parsed.hosts == ["spark-d708", "spark-dbf4"]
    assert (
        parsed.settings["warmup_iters"] == 10
        and parsed.settings["iters"] == 100
        and parsed.settings["minBytes"] == 8192
    )
    assert [r.size_bytes for r in parsed.rows] == [8192, 16384, 32768, 65536]


@pytest.mark.parametrize("cut", ["#  Rank  0 ", "#  Rank  1 "])
def test_rank_count_when_the_header_is_cut(tmp_path, cut: str) -> None:
    """The real v2.20 header with one 'Rank N' line lost: 2 ranks all the same (busbw/algbw, issue 13 C16)."""
    text = sample("nccl_tests_all_reduce_header_v2_20.txt").read_text()
    path = tmp_path / "cut.txt"
    path.write_text("".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith(cut)))
    parsed = parse_file(path)
    assert parsed.ranks == 2 and parsed.ranks_inferred
    assert any("inferred from busbw/algbw" in n for n in parsed.notes)


def test_multinode_tail_sample_footer_and_ranks() -> None:
    parsed = parse_file(sample("nccl_tests_all_reduce_multinode_tail.txt"))
    assert (
        len(parsed.rows) == 6
        and parsed.out_of_bounds == 0
        and parsed.avg_busbw_GBps == pytest.approx(84.8558)
    )
    assert parsed.ranks == 24  # 95.75 / 49.96 = 1.9165 = 2 * 23 / 24
    result = to_bench_result(parsed, source="tail.txt")
    again = BenchResult.from_json(result.to_json())
    assert again.metrics["file_avg_busbw_GBps"] == pytest.approx(84.8558)
    assert result.to_json_dict()["entries"][0]["busbw_GBps"] == 95.75
    assert again.entries[0].in_place.busbw_GBps == 95.92 and again.entries[0].type == "float"


def test_row_variants() -> None:
    # older output without redop/root columns; out-of-place N/A; per-iteration columns; timestamps
    assert (
        parse_row("    1048576  262144  float  181.3  5.79  5.79  0  180.7  5.80  5.80  0").busbw_GBps == 5.79
    )
    row = parse_row(
        "  134217728  33554432  float  sum  -1  1211.2  110.81  110.81  0  1211.8  110.76  110.76  N/A"
    )
    assert row.inplace_wrong is None and row.wrong == 0
    row = parse_row(
        "  1024  256  float  sum  -1  10.0  0.10  0.19  0  9.0  11.0  12.0  0.5  10.0  0.10  0.19  0  9.0  11.0  12.0  0.5"
    )
    assert row.time_s == pytest.approx(10e-6) and row.inplace_busbw_GBps == 0.19
    assert (
        parse_row(
            "  1024  256  float  sum  -1  10.0  0.10  0.19  0  10.0  0.10  0.19  0  2024-01-02 10:11:12"
        ).size_bytes
        == 1024
    )
    for junk in ("gh1:185972:186354 [0] NCCL INFO Using network IBext_v8", "12 34", "", "1 2 3 4 5 6 7"):
        assert parse_row(junk) is None


def test_nccl_tests_json_report() -> None:
    doc = {
        "version": 2,
        "args": ["/opt/nccl-tests/build/reduce_scatter_perf", "-b", "8"],
        "config": {
            "nthreads": 1,
            "ngpus": 1,
            "iterations": 20,
            "devices": [
                {"rank": 0, "hostname": "a"},
                {"rank": 1, "hostname": "a"},
                {"rank": 2, "hostname": "b"},
                {"rank": 3, "hostname": "b"},
            ],
        },
        "results": [
            {
                "size": 1048576,
                "count": 65536,
                "type": "float",
                "redop": "sum",
                "root": "    -1",
                "out_of_place": {"time": 100.0, "alg_bw": 10.49, "bus_bw": 7.86, "nwrong": 0.0},
                "in_place": {"time": 99.0, "alg_bw": 10.59, "bus_bw": 7.94, "nwrong": 0.0},
            }
        ],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 7.9, "okay": "unchecked"},
    }
    parsed = parse_json(doc)
    assert parsed.op == "reduce_scatter" and parsed.ranks == 4 and parsed.hosts == ["a", "b"]
    assert (
        parsed.rows[0].root == -1
        and parsed.rows[0].time_s == pytest.approx(1e-4)
        and parsed.avg_busbw_GBps == 7.9
    )


def test_records_json_lines(tmp_path) -> None:
    path = tmp_path / "all_gather_perf.json"
    recs = [
        {
            "name": "all_gather_perf",
            "size": 1024 * (2**i),
            "type": "float",
            "inPlace": ip,
            "time": 10.0 + i,
            "algBw": 1.0,
            "busBw": 0.75,
            "wrong": 0,
            "ranks": 4,
        }
        for i in range(3)
        for ip in (0, 1)
    ]
    path.write_text("\n".join(json.dumps(r) for r in recs))
    parsed = parse_file(path)
    assert (
        parsed.op == "all_gather"
        and parsed.ranks == 4
        and len(parsed.rows) == 3
        and parsed.format == "records"
    )


@pytest.mark.parametrize("content", ["", "hello world\n", '{"a": 1}', "[1, 2", "\x00\x01garbage\xff"])
def test_garbage_is_refused(tmp_path, content: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(content, errors="ignore") if isinstance(content, str) else None
    with pytest.raises(NcclTestsError):
        parse_file(path)


def test_parse_text_requires_rows() -> None:
    with pytest.raises(NcclTestsError, match="no nccl-tests result rows"):
        parse_text("# nccl-tests version 2.20.0\n# Avg bus bandwidth : 1\n")


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FABRICSCOPE_DB": str(db)}
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_cli_import_stores_in_history(tmp_path) -> None:
    db = tmp_path / "h.sqlite3"
    proc = _cli(
        "bench",
        "import",
        "nccl-tests",
        str(sample("nccl_tests_all_reduce_multinode_tail.txt")),
        "--json",
        db=db,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "collective" and doc["run_id"] and len(doc["entries"]) == 6
    from fabricscope.store import Store

    with Store.open(db) as store:
        stored = store.get(doc["run_id"]).result
    assert stored.metrics["size_133169160_busbw_GBps"] == 95.74  # per-size busbw: compared and baselined
    assert [e.size_bytes for e in stored.entries] == [
        e["size_bytes"] for e in doc["entries"]
    ]  # entries stored
    assert stored.to_json_dict()["entries"] == doc["entries"]


def test_cli_import_bad_file_one_line_exit_2(tmp_path) -> None:
    db = tmp_path / "h.sqlite3"
    for target in (tmp_path / "missing.txt", tmp_path):
        proc = _cli("bench", "import", "nccl-tests", str(target), db=db)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_our_own_table_reads_back_as_nccl_tests_output(tmp_path) -> None:
    """`bench import nccl-tests` (and any nccl-tests reader) reads the table fabricscope prints
    (issue 26 item 6): a captured run imported, printed, and imported again gives the same rows,
    in-place columns included; a measured run (out-of-place only) reads back too."""
    from fabricscope.bench.collective import CollectiveParams, CollectiveRun, size_result
    from fabricscope.bench.collective import to_bench_result as measured_result
    from fabricscope.collective_ops import layout
    from fabricscope.report.bench import collective_lines

    first = parse_file(sample("nccl_tests_all_reduce_header_v2_20.txt"))
    printed = tmp_path / "ours.txt"
    printed.write_text("\n".join(collective_lines(to_bench_result(first, source="x"))) + "\n")
    again = parse_file(printed)
    assert [
        (r.size_bytes, r.count, r.time_s, r.busbw_GBps, r.wrong, r.inplace_busbw_GBps) for r in again.rows
    ] == [(r.size_bytes, r.count, r.time_s, r.busbw_GBps, r.wrong, r.inplace_busbw_GBps) for r in first.rows]
    params = CollectiveParams(op="all_reduce", sizes=[1 << 20, 4 << 20], iters=2, warmup=1)
    sizes = [
        size_result("all_reduce", 4, layout("all_reduce", s, 4, 4), [[2e-4, 2e-4]] * 4, 0)
        for s in params.sizes
    ]
    ranks = [{"rank": r, "host": f"gpu{r}", "pid": 10 + r, "device": "cpu"} for r in range(4)]
    ours = measured_result(CollectiveRun(params, 4, "torchrun", ranks, sizes, [], 1.0))
    printed.write_text("\n".join(collective_lines(ours)) + "\n")
    back = parse_file(printed)
    assert [(r.size_bytes, r.busbw_GBps) for r in back.rows] == [
        (e.size_bytes, round(e.busbw_GBps, 2)) for e in ours.entries
    ]
    assert back.ranks == 4 and back.op == "all_reduce"
