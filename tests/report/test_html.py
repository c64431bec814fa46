"""The HTML report a user trusts at a glance (issue 26 item 4): every alternative of an ambiguous
suspect drawn, the verdict equal to the exit status, a regression column, the incast page with the
CLI's verdict and its retransmit/timeout table, and one meaning per word for matrix medians."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape

from fabricscope.bench.results.history import baseline_stats
from fabricscope.bench.results.schema import IncastPoint, new_result
from fabricscope.bench.results.verdict import exit_status, verdict
from fabricscope.report.html import render_report
from fabricscope.report.incast import collapse_verdict
from fabricscope.store import StoredRun
from tests.collective.test_matrix_topology import _lab_result


def _red(html: str, cls: str) -> list[str]:
    return [line for line in html.split("<line ") if f'class="{cls} suspect"' in line]


def test_every_alternative_of_an_ambiguous_suspect_is_drawn() -> None:
    result, stored = _lab_result()
    link = result.suspects[1]
    link.alternatives = ["leaf1 - spine", "leaf2 - spine"]  # "one of": the matrix cannot tell them apart
    html = render_report([stored])
    red = _red(html, "cable")
    assert (
        len(red) == 2
        and any("leaf1 - spine" in line for line in red)
        and any("leaf2 - spine" in line for line in red)
    )
    assert "one of: leaf1 - spine, leaf2 - spine" in html and "drawn at every place it may be" in html


def test_the_report_verdict_is_the_exit_status() -> None:
    """A matrix run that exited 1 with a confirmed bad host showed a green "ok"."""
    result, stored = _lab_result()
    for s in result.suspects:
        s.confirmed = True
    assert (
        exit_status(result) == 1
    )  # what `bench matrix` exits with (cli/collective.py uses the same function)
    html = render_report([stored])
    summary = html[html.index("<h2>Summary</h2>") : html.index("<h2>Runs</h2>")]
    assert '<td class="failed">FAIL (exit 1): suspect: h3; leaf2 &lt;-&gt; spine</td>' in summary
    failed = new_result("tcp", {"peer": "x"}).fail("connection refused")
    skipped = new_result("rdma", {"peer": "x"}).skip("no RDMA device")
    skipped.thresholds = {"checks": [{"metric": "throughput_gbps", "op": ">=", "limit": 360, "value": None, "passed": False,
                                      "option": "--min-gbps", "untested": "nothing was tested (no RDMA device)"}], "passed": False}  # fmt: skip
    plain = new_result("rdma", {"peer": "x"}).skip("no RDMA device")
    assert [verdict(r).code for r in (failed, skipped, plain)] == [2, 2, 0]
    html = render_report(
        [StoredRun(i, datetime.now(timezone.utc), r) for i, r in enumerate((failed, skipped, plain), 1)]
    )
    assert "no verdict (exit 2): could not complete: connection refused" in html
    assert "no verdict (exit 2): nothing was tested (no RDMA device): --min-gbps cannot pass" in html
    assert "skipped (exit 0): no RDMA device" in html


def test_the_summary_has_a_regression_column() -> None:
    first = new_result("tcp", {"peer": "x"}).finish({"throughput_gbps": 10.0, "retransmits_count": 0})
    again = new_result("tcp", {"peer": "x"}).finish({"throughput_gbps": 10.1, "retransmits_count": 0})
    slow = new_result("tcp", {"peer": "x"}).finish({"throughput_gbps": 5.0, "retransmits_count": 0})
    base = ("runs 1, 2", baseline_stats([first, again]))
    runs = [StoredRun(3, datetime.now(timezone.utc), slow), StoredRun(4, datetime.now(timezone.utc), again)]
    html = render_report(runs, {3: base, 4: base})
    summary = html[html.index("<h2>Summary</h2>") : html.index("<h2>Runs</h2>")]
    assert "<th>regression</th>" in summary
    assert '<td class="regression">regression: throughput_gbps -50.2 %</td>' in summary
    assert summary.count("<td>none</td>") == 1


def test_the_incast_page_says_the_verdict_and_the_retransmits_and_timeouts() -> None:
    result = new_result("incast", {"size_bytes": 262144, "rounds": 40}).finish({"goodput_gbps": 0.19})
    # bench incast in a lab (docs/bench.md): collapse at 4 senders
    result.incast = [IncastPoint(senders=s, goodput_gbps=g, round_p50_ms=p50, round_p99_ms=p99, round_max_ms=mx, rounds=40,
                                 retransmits=rt, timeouts=to)
                     for s, g, p50, p99, mx, rt, to in ((1, 0.178, 11.08, 17.45, 17.56, 31, 0), (2, 0.189, 22.11, 22.81, 22.81, 352, 0),
                                                        (4, 0.066, 44.49, 190.72, 283.05, 1518, 1))]  # fmt: skip
    result.hosts = ["receiver:h1"]
    html = render_report([StoredRun(1, datetime.now(timezone.utc), result)])
    said = collapse_verdict(result.incast)
    assert said.startswith("incast collapse from 4 senders") and escape(said) in html
    assert (
        "<th>retransmits</th><th>timeouts</th>" in html
        and '<td class="num">1,518</td><td class="num">1</td>' in html
    )


def test_matrix_medians_have_one_meaning_each() -> None:
    result, _ = _lab_result()
    m = result.metrics
    assert m["fleet_median_gbps"] == result.thresholds_gbps.fleet_median  # what the CLI calls "fleet median"
    assert (
        m["all_pairs_median_gbps"] < m["fleet_median_gbps"]
    )  # every pair, dragged down by the bad host and uplink
    assert "matrix_median_gbps" not in m


def test_a_large_fabric_without_graphviz_keeps_todays_drawing(monkeypatch) -> None:
    """Graphviz lays out large fabrics when `dot` is installed; without it the drawing is today's."""
    from fabricscope.report import graphviz
    from fabricscope.report.topology import topology_svg
    from fabricscope.topology.view import view_from_document
    from tests.collective.test_matrix_topology import leaf_spine

    doc = leaf_spine(20, 3, spines=2)  # 22 switches: over LARGE_SWITCHES
    doc["switches"][0] = 'leaf"1\\'  # a name DOT must quote
    doc["links"] = [{"a": 'leaf"1\\' if x["a"] == "leaf1" else x["a"], "b": x["b"]} for x in doc["links"]]
    doc["attach"] = {('leaf"1\\' if k == "leaf1" else k): v for k, v in doc["attach"].items()}
    view = view_from_document(doc)
    source = graphviz.dot_source(view, set(), "t", False)
    assert '"leaf\\"1\\\\"' in source and "rankdir=LR" in source
    monkeypatch.setattr(graphviz.shutil, "which", lambda name: None)
    plain = topology_svg(view)
    assert plain.startswith('<svg class="topology"') and "<line" in plain and 'class="graph"' not in plain
