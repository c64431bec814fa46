"""Baselines (median + MAD), the regression rule, and the history commands on a stored database."""

from __future__ import annotations

import json

import pytest

from fabricscope.bench.results.history import baseline_stats, better_direction, compare
from fabricscope.bench.results.schema import BenchResult, MatrixSuspect, new_result
from fabricscope.report.bench import format_metric, headline_text
from fabricscope.store import Store
from tests.bench.conftest import run_cli


def _tcp(gbps: float, retrans: int = 10, streams: int = 1) -> BenchResult:
    return new_result("tcp", {"peer": "10.0.0.2", "streams": streams, "duration_s": 10.0}).finish(
        {"throughput_gbps": gbps, "retransmits_count": retrans, "send_bytes": 1000}
    )


def test_median_and_mad_resist_one_bad_run() -> None:
    stats = baseline_stats([_tcp(g) for g in (10.0, 10.2, 9.8, 10.1, 2.0)])
    s = stats["throughput_gbps"]
    # deviations 0, 0.2, 0.2, 0.1, 8.0: their median is 0.2; the 2.0 Gb/s run moves nothing
    assert s.median == 10.0 and s.mad == pytest.approx(0.2) and s.n == 5
    assert s.sigma == pytest.approx(0.29652)


def test_failed_runs_do_not_count() -> None:
    stats = baseline_stats([_tcp(10.0), _tcp(5.0).fail("peer died")])
    assert stats["throughput_gbps"].n == 1


def test_regression_needs_both_threshold_and_spread() -> None:
    stats = baseline_stats(
        [_tcp(g) for g in (10.0, 10.5, 9.5, 10.0, 10.0)]
    )  # deviations 0, .5, .5, 0, 0: MAD 0, so only the percentage applies
    by = {c.name: c for c in compare(_tcp(9.0, retrans=10), stats)}
    assert by["throughput_gbps"].verdict == "regression" and by["throughput_gbps"].change_pct == -10.0
    assert by["retransmits_count"].verdict == "same" and by["send_bytes"].verdict == "info"
    assert compare(_tcp(9.8), stats)[0].verdict != "regression"  # -2 %: under the 5 % threshold
    noisy = baseline_stats([_tcp(g) for g in (10.0, 14.0, 6.0, 12.0, 8.0)])  # MAD 2 -> sigma 2.97
    assert {c.name: c.verdict for c in compare(_tcp(8.5), noisy)}[
        "throughput_gbps"
    ] == "same"  # -15 % but within 3 sigma
    assert {c.name: c.verdict for c in compare(_tcp(1.0), noisy)}["throughput_gbps"] == "regression"
    assert {c.name: c.verdict for c in compare(_tcp(11.0, retrans=200), stats)}[
        "retransmits_count"
    ] == "regression"
    assert {c.name: c.verdict for c in compare(_tcp(12.0), stats)}["throughput_gbps"] == "improvement"


def test_directions_and_formatting() -> None:
    assert better_direction("throughput_gbps") == "higher" and better_direction("connect_per_s") == "higher"
    assert better_direction("rtt_p99_us") == "lower" and better_direction("loss_pct") == "lower"
    assert (
        better_direction("retransmits_count") == "lower" and better_direction("tcp_64B_samples_count") is None
    )
    assert (
        better_direction("msg_size_bytes") is None and better_direction("pooling_speedup_ratio") == "higher"
    )
    assert (
        format_metric("throughput_gbps", 12.345) == "12.35 Gb/s"
        and format_metric("connect_per_s", 12590.4) == "12,590 /s"
    )
    assert format_metric("retransmits_count", 3418) == "3,418 retransmits"
    assert headline_text(_tcp(9.5, 3)) == "9.5 Gb/s, 3 retransmits"


@pytest.fixture
def filled_db(isolated_db):
    with Store.open(isolated_db) as store:
        for g in (10.0, 10.2, 9.9, 10.1):
            store.save(_tcp(g))
        store.save(_tcp(10.0, streams=8))  # 5: other parameters
        store.save(_tcp(6.0, retrans=900))  # 6: the bad day
        store.save(
            new_result("tcp", {"peer": "10.0.0.9", "streams": 1, "duration_s": 10.0}).fail(
                "connect to 10.0.0.9:5211: connection refused"
            )
        )
    return isolated_db


def test_history_list_and_show(filled_db) -> None:
    proc = run_cli("history", "list")
    assert proc.returncode == 0, proc.stderr
    assert "6.0 Gb/s" in proc.stdout or "6 Gb/s" in proc.stdout
    assert "connection refused" in proc.stdout and "failed" in proc.stdout
    proc = run_cli("history", "list", "--kind", "tcp", "--param", "streams=8", "--json")
    doc = json.loads(proc.stdout)
    assert [r["run_id"] for r in doc["runs"]] == [5]
    proc = run_cli("history", "show", "6")
    assert proc.returncode == 0 and "throughput_gbps" in proc.stdout and "900" in proc.stdout
    proc = run_cli("history", "show", "404")
    assert proc.returncode == 2 and "no run with id 404" in proc.stderr


def test_history_compare_with_last_runs_and_with_a_baseline(filled_db) -> None:
    proc = run_cli("history", "compare", "6", "--json")
    assert proc.returncode == 1, proc.stderr  # regressions exit 1
    doc = json.loads(proc.stdout)
    assert doc["baseline"].startswith("the last 4 matching runs")  # run 5 has other params
    verdicts = {c["name"]: c["verdict"] for c in doc["changes"]}
    assert verdicts["throughput_gbps"] == "regression" and verdicts["retransmits_count"] == "regression"
    proc = run_cli("history", "compare", "4", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 regression(s)" in proc.stdout
    assert run_cli("history", "baseline", "set", "good", "1", "2", "3", "4").returncode == 0
    proc = run_cli("history", "baseline", "show", "good", "--json")
    assert json.loads(proc.stdout)["metrics"]["throughput_gbps"]["median"] == pytest.approx(10.05)
    assert run_cli("history", "compare", "6", "--baseline", "good").returncode == 1
    assert "good" in run_cli("history", "baseline", "list").stdout
    proc = run_cli("history", "baseline", "set", "recent", "--last", "3", "--kind", "tcp", "--json")
    assert json.loads(proc.stdout)["run_ids"] == [6, 5, 4]
    assert run_cli("history", "baseline", "delete", "recent").returncode == 0


def test_history_compare_errors(filled_db) -> None:
    assert run_cli("history", "compare", "7").returncode == 2  # a failed run has nothing to compare
    proc = run_cli("history", "compare", "1")
    assert proc.returncode == 2 and "no earlier completed tcp run" in proc.stderr
    proc = run_cli("history", "compare", "6", "--baseline", "nope")
    assert proc.returncode == 2 and "no baseline named 'nope'" in proc.stderr
    proc = run_cli("history", "baseline", "set", "x", "7")
    assert proc.returncode == 2 and "completed" in proc.stderr


def test_unreadable_database_is_one_line(tmp_path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 1000)
    proc = run_cli("history", "list", "--db", str(bad))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a database" in proc.stderr
    assert bad.read_bytes() == b"garbage" * 1000  # nothing was overwritten


# ----- collective and matrix runs ------------------------------------------------------------------
def _coll(busbw_big: float) -> BenchResult:
    """A collective run via the real result path: busbw at 1 MiB fixed, at 64 MiB ``busbw_big``."""
    from fabricscope.bench.collective import (
        CollectiveParams,
        CollectiveRun,
        size_result,
        to_bench_result,
    )
    from fabricscope.collective_ops import layout

    n, op = 4, "all_reduce"
    params = CollectiveParams(op=op, sizes=[1 << 20, 64 << 20], iters=2, warmup=1)
    sizes = []
    for size, busbw in ((1 << 20, 5.0), (64 << 20, busbw_big)):
        t = size / (busbw / 1.5 * 1e9)  # busbw = algbw x 2(n-1)/n = 1.5 algbw at n = 4
        sizes.append(size_result(op, n, layout(op, size, n, 4), [[t, t]] * n, 0))
    ranks = [{"rank": r, "host": f"gpu{r}", "pid": r, "device": "cpu"} for r in range(n)]
    return to_bench_result(CollectiveRun(params, n, "torchrun", ranks, sizes, [], 1.0))


def _mat(slow: tuple[str, ...], hosts=("h1", "h2", "h3", "h4")) -> BenchResult:
    from fabricscope.bench.matrix import MatrixParams, MatrixRun, RdmaPart, Survey, analyze, to_bench_result

    m = [[None if a == b else (0.25 if {a, b} & set(slow) else 1.0) for b in hosts] for a in hosts]
    verdict = analyze(list(hosts), m)
    for s in verdict.suspects:
        s.confirmed = True
    tcp = Survey("tcp", m, None, verdict, verdict.suspects, [], [])
    run = MatrixRun(
        MatrixParams(),
        list(hosts),
        list(range(len(hosts))),
        tcp,
        RdmaPart("skipped", "no RDMA device"),
        "lab:x",
        5.0,
    )
    return to_bench_result(run)


def test_collective_compare_is_per_message_size(isolated_db) -> None:
    with Store.open(isolated_db) as store:
        for busbw in (9.0, 9.1, 8.9):
            store.save(_coll(busbw))
        store.save(_coll(4.5))  # 4: half the busbw at 64 MiB only
    proc = run_cli("history", "compare", "4", "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    sizes = {s["size_bytes"]: s for s in doc["sizes"]}
    assert sizes[1 << 20]["verdict"] == "same" and sizes[1 << 20]["baseline_busbw_GBps"] == pytest.approx(5.0)
    assert sizes[64 << 20]["verdict"] == "regression" and sizes[64 << 20]["change_pct"] == pytest.approx(
        -50.0
    )
    assert "size_67108864_busbw_GBps" in doc["regressed"] and "size_67108864_time_s" not in doc["regressed"]
    text = run_cli("history", "compare", "4").stdout
    assert "busbw by message size" in text and "67108864" in text
    assert (
        "size_67108864_time_s" not in text
    )  # the per-size table says it; the metric list does not repeat it
    show = run_cli("history", "show", "4").stdout
    assert "all_reduce over gloo, 4 ranks" in show and "Avg bus bandwidth" in show
    row = next(ln for ln in show.splitlines() if ln.strip().startswith("67108864"))
    assert row.split()[2:5] == ["float", "sum", "-1"] and "size_67108864_busbw_GBps" not in show


def test_matrix_compare_flags_new_suspects(isolated_db) -> None:
    with Store.open(isolated_db) as store:
        store.save(_mat(("h3",)))  # 1: h3 was already slow
        store.save(_mat(("h3",)))  # 2
        store.save(_mat(("h3",)))  # 3: the same
        store.save(_mat(("h2",)))  # 4: h3 fixed, h2 now slow
    proc = run_cli("history", "compare", "3", "--json")
    assert proc.returncode == 0, proc.stdout  # a known suspect is no regression
    doc = json.loads(proc.stdout)
    assert [(s["host"], s["status"], s["baseline_runs"]) for s in doc["suspects"]] == [
        ("h3", "persisting", 2)
    ]
    proc = run_cli("history", "compare", "4", "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert [(s["host"], s["status"], s["regression"]) for s in doc["suspects"]] == [
        ("h2", "new", True),
        ("h3", "resolved", False),
    ]
    assert "new suspect h2" in doc["regressed"]
    text = run_cli("history", "compare", "4").stdout
    assert "suspects" in text and "new" in text and "resolved" in text
    show = run_cli("history", "show", "4").stdout
    assert (
        "pairwise TCP bandwidth" in show
        and "host h2: its transfers" in show
        and "RDMA skipped: no RDMA device" in show
    )
    assert "hosts_count" in show  # summary metrics stay; neutral in comparisons
    assert better_direction("hosts_count") is None and better_direction("ranks_count") is None


def test_suspects_against_runs_that_never_recorded_them() -> None:
    from fabricscope.bench.results.history import suspect_changes

    old = _mat(())
    old.suspects = None  # stored before suspects were kept (see store migration 3)
    changes = suspect_changes(_mat(("h2",)), [old])
    assert [(c.host, c.status, c.regression) for c in changes] == [("h2", "unknown", False)]
    link = _mat(())
    link.suspects = [MatrixSuspect(host="h2", peer="h1", kind="link", reason="x", confirmed=True)]
    again = _mat(())
    again.suspects = [MatrixSuspect(host="h1", peer="h2", kind="link", reason="x", confirmed=True)]
    assert [c.status for c in suspect_changes(again, [link])] == ["persisting"]  # either end named first
