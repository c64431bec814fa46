"""The HTML report: content, escaping, self-containment, and a real render in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.bench.collective import CollectiveParams, CollectiveRun, size_result
from fabricscope.bench.collective import to_bench_result as collective_result
from fabricscope.bench.matrix import MatrixParams, MatrixRun, RdmaPart, Survey, analyze
from fabricscope.bench.matrix import to_bench_result as matrix_result
from fabricscope.bench.results.schema import BenchResult, Interval, new_result
from fabricscope.collective_ops import layout
from fabricscope.report.html import render_report
from fabricscope.store import Store
from tests.bench.conftest import run_cli
from tests.report.chromium import browser, wd

HOSTILE = '<script>alert("x")</script>'


def _runs() -> list[BenchResult]:
    tcp = new_result("tcp", {"peer": HOSTILE, "streams": 2, "duration_s": 3.0}).finish(
        {"throughput_gbps": 12.1, "retransmits_count": 3418, "send_throughput_gbps": 12.1}, 3.1
    )
    tcp.intervals = [
        Interval(start_s=i, end_s=i + 1, metrics={"throughput_gbps": 11.5 + i * 0.3}) for i in range(3)
    ]
    tcp.counters.window_s = 3.2
    tcp.counters.interface = "eth0"
    tcp.counters.highlights = {"host_tcp_retrans_segs_count": 3418, "pause_rx_count": 12}
    tcp.counters.netstat = {"Tcp.RetransSegs": 3418}
    tcp.detail["streams"] = [
        {"direction": "send", "stream": 0, "throughput_gbps": 6.0},
        {"direction": "send", "stream": 1, "throughput_gbps": 6.1},
    ]
    tcp2 = new_result("tcp", {"peer": HOSTILE, "streams": 2, "duration_s": 3.0}).finish(
        {"throughput_gbps": 6.0, "retransmits_count": 9000}, 3.0
    )
    tcp2.intervals = [Interval(start_s=i, end_s=i + 1, metrics={"throughput_gbps": 6.0}) for i in range(3)]
    rows = [
        {"proto": p, "size_bytes": s, "samples": 1000, "p50": 20.0 * k, "p99": 40.0 * k, "p999": 80.0 * k}
        for p in ("tcp", "udp")
        for k, s in enumerate((64, 1024, 65536), start=1)
    ]
    lat = new_result("latency", {"peer": "10.0.0.2"}).finish({"rtt_p50_us": 20.0, "rtt_p99_us": 40.0}, 2.0)
    lat.detail["rows"] = rows + [
        {"proto": "udp", "size_bytes": 1048576, "skipped": "UDP datagrams are at most 65507 bytes"}
    ]
    conn = new_result("connect", {"peer": "10.0.0.2"}).finish(
        {"connect_per_s": 5000.0, "pooled_requests_per_s": 50000.0}, 2.0
    )
    conn.detail["rows"] = [
        {"mode": "per_request", "part": "connect", "p50": 50.0, "p99": 200.0, "p999": 900.0},
        {"mode": "pooled", "part": "request", "p50": 19.0, "p99": 25.0, "p999": 88.0},
    ]
    rdma = new_result("rdma", {"test": "write_bw", "peer": "10.0.0.3"}).finish(
        {"throughput_gbps": 0.17, "msg_size_bytes": 8}, 1.0
    )
    rdma.detail["rows"] = [
        {"size_bytes": s, "bw_average_gbps": b} for s, b in ((2, 0.04), (4, 0.08), (8, 0.17))
    ]
    failed = new_result("tcp", {"peer": "10.0.0.9"}).fail("connect to 10.0.0.9:5211: connection refused")
    return [tcp, tcp2, lat, conn, rdma, failed, _collective(1.0), _collective(0.5, straggler=True), _matrix()]


def _collective(slow_big: float, straggler: bool = False) -> BenchResult:
    """A collective run through the real result path; ``slow_big`` scales busbw at the largest size."""
    n, op = 4, "all_reduce"
    params = CollectiveParams(op=op, sizes=[1 << 20, 4 << 20, 16 << 20], iters=2, warmup=1)
    sizes = []
    for size in params.sizes:
        t = 1e-4 + size / 10e9 / (slow_big if size == 16 << 20 else 1.0)
        sizes.append(size_result(op, n, layout(op, size, n, 4), [[t, t * 1.01]] * n, 0))
    if straggler:
        sizes[0].straggler_rank, sizes[0].straggler_reason = 2, "rank 2 arrives late"
    ranks = [{"rank": r, "host": f"gpu{r + 1}", "pid": 100 + r, "device": "cpu"} for r in range(n)]
    return collective_result(CollectiveRun(params, n, "torchrun", ranks, sizes, [], 2.0))


def _matrix() -> BenchResult:
    """A matrix run through the real analysis: h3 slow over TCP, "<h4>" slow over RDMA."""
    hosts = ["h1", "h2", "h3", HOSTILE]
    tcp = [[None if i == j else (0.25 if 2 in (i, j) else 1.0) for j in range(4)] for i in range(4)]
    rdma = [[None if i == j else (20.0 if 3 in (i, j) else 90.0) for j in range(4)] for i in range(4)]
    tv, rv = analyze(hosts, tcp), analyze(hosts, rdma, transport="rdma")
    for s in tv.suspects + rv.suspects:
        s.confirmed = True
    endpoints = [
        {"host": h, "device": "mlx5_0", "port": 1, "gid_index": 3, "gid_ip": f"10.20.0.{i + 11}"}
        for i, h in enumerate(hosts)
    ]
    run = MatrixRun(
        MatrixParams(duration_s=1.0), hosts, [0, 1, 2, 3],
        Survey("tcp", tcp, None, tv, tv.suspects, [], []),
        RdmaPart("ok", None, "write_bw", 1, endpoints, Survey("rdma", rdma, None, rv, rv.suspects, [], [])),
        "torchrun", 20.0,
    )  # fmt: skip
    return matrix_result(run)


@pytest.fixture
def stored(isolated_db) -> list[int]:
    with Store.open(isolated_db) as store:
        return [store.save(r) for r in _runs()]


def test_render_contains_everything_and_escapes(stored: list[int], isolated_db) -> None:
    with Store.open(isolated_db) as store:
        runs = store.results(stored)
    html = render_report(runs)
    assert HOSTILE not in html and "&lt;script&gt;" in html
    assert "<script" not in html.lower()  # no script at all
    assert "default-src 'none'" in html  # CSP: the file can fetch nothing
    for needle in (
        'data-plot="throughput"',
        'data-plot="latency"',
        'data-plot="connect"',
        'data-plot="rdma-sweep"',
        'data-plot="collective-busbw"',
        'data-plot="collective-overview"',
        'data-plot="matrix-tcp"',
        'data-plot="matrix-rdma"',
    ):
        assert needle in html
    assert "3,418" in html and "pause frames received" in html and "connection refused" in html
    # collective: the nccl-tests table (per-size metrics are not repeated as a metric list)
    assert "Results by message size" in html and "<td>sum</td>" in html and "Straggler: rank 2 (gpu3)" in html
    assert "size_16777216_busbw_GBps" not in html
    # matrix: suspects per transport, the RDMA devices, hostile host names escaped in the heat map
    assert "RDMA: its transfers" in html and "mlx5_0/1 GID 3 (10.20.0.11)" in html
    assert html.count("&lt;script&gt;alert") >= 3


def test_collective_compared_per_size_with_its_baseline(stored: list[int], isolated_db) -> None:
    from fabricscope.bench.results.history import baseline_stats

    with Store.open(isolated_db) as store:
        first, second = store.results(stored[6:8])
    html = render_report([second], {second.id: ("run 7", baseline_stats([first.result]))})
    assert "baseline busbw (median)" in html  # the baseline line in the busbw plot
    big = html[html.index('<td class="num">16,777,216</td>') :]
    assert big.split("</tr>")[0].endswith('<td class="regression">regression</td>')  # only the slow size
    small = html[html.index('<td class="num">1,048,576</td>') :]
    assert "regression" not in small.split("</tr>")[0]
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html


def test_cli_report_with_auto_baseline(stored: list[int], tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    proc = run_cli("report", *map(str, stored), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert 'data-plot="baseline"' in html  # run 2 against run 1 (same parameters)
    assert "regression" in html
    proc = run_cli("report", "1", "999", "-o", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and "no run with id 999" in proc.stderr and not (tmp_path / "x.html").exists()


# ----- headless Chromium (tests/report/chromium.py) -----
CHECK_PLOTS = """
const plots = Array.from(document.querySelectorAll('svg.plot'));
return plots.map(p => {
  const box = p.getBoundingClientRect();
  const marks = p.querySelectorAll('polyline, rect.bar, circle, rect.cell');
  let drawn = 0;
  marks.forEach(m => { const b = m.getBBox(); if (b.width > 0 || b.height > 0) drawn++; });
  return {name: p.dataset.plot, width: box.width, height: box.height, marks: marks.length, drawn: drawn};
});
"""


def test_report_renders_in_headless_chromium(stored: list[int], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert run_cli("report", *map(str, stored), "-o", str(out)).returncode == 0
    with browser() as (base, session):
        wd(base, "POST", f"/session/{session}/url", {"url": out.as_uri()})
        plots = wd(base, "POST", f"/session/{session}/execute/sync", {"script": CHECK_PLOTS, "args": []})[
            "value"
        ]
        title = wd(base, "GET", f"/session/{session}/title")["value"]
        logs = wd(base, "POST", f"/session/{session}/se/log", {"type": "browser"}).get("value", [])
    assert title.startswith("fabricscope report")
    names = {p["name"] for p in plots}
    assert {"throughput", "baseline", "latency", "connect", "rdma-sweep", "collective-busbw", "collective-overview",
            "matrix-tcp", "matrix-rdma"} <= names, plots  # fmt: skip
    heat = [p for p in plots if p["name"].startswith("matrix-")]
    assert all(p["marks"] == 16 for p in heat), heat  # 4 x 4 cells each
    for plot in plots:
        assert plot["width"] > 100 and plot["height"] > 100, plot
        assert plot["marks"] > 0 and plot["drawn"] == plot["marks"], plot
    errors = [entry for entry in logs if entry.get("level") == "SEVERE"]
    assert not errors, errors
