"""Every chart and page as a browser draws it (issue 26 item 4), in headless Chromium through
chromedriver's W3C WebDriver API: the HTML report with a run of every kind, the heat map `bench
matrix --svg` writes for two hosts (it was 236 px wide: title cut to "rows s", legend to "gre"),
and `topology show --svg` of a fabric of 109 hosts and 37 switches whose long names share their
prefix (they were cut from the left).

Checked by size and by the DOM, not by pixels: each drawing's screenshot has the size the page
gives it; every text lies inside its drawing; no two tick labels overlap; the words a user reads
(verdicts, the regression column, the incast table, the whole switch names) are in the page.
"""

from __future__ import annotations

import base64
import shutil
import struct
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fabricscope.bench.results.history import baseline_stats
from fabricscope.bench.results.schema import IncastPoint, new_result
from fabricscope.report.html import render_report
from fabricscope.report.plots import heatmap_svg
from fabricscope.report.topology import topology_svg
from fabricscope.store import StoredRun
from fabricscope.topology.view import view_from_document
from tests.bench.test_report import _runs
from tests.collective.test_matrix_topology import _lab_result
from tests.conftest import skip_unless_ci
from tests.report.chromium import browser as _browser
from tests.report.chromium import wd as _wd

# Every drawing: its box, its screenshot's element id, the texts outside it, the tick labels that overlap.
MEASURE = """
const out = [];
const inside = (r, box) => r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
const meet = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
document.querySelectorAll('svg').forEach(svg => {
  if (svg.parentElement && svg.parentElement.closest('svg')) return;
  const box = svg.getBoundingClientRect();
  const cut = [];
  svg.querySelectorAll('text').forEach(t => {
    if (t.closest('title')) return;
    const r = t.getBoundingClientRect();
    if (r.width > 0 && !inside(r, box)) cut.push(t.textContent);
  });
  const ticks = Array.from(svg.querySelectorAll('text.tick')).map(t => [t.textContent, t.getBoundingClientRect()]);
  const overlaps = [];
  for (let i = 0; i < ticks.length; i++) for (let j = i + 1; j < ticks.length; j++)
    if (meet(ticks[i][1], ticks[j][1])) overlaps.push([ticks[i][0], ticks[j][0]]);
  out.push({name: svg.dataset.plot || svg.getAttribute('class') || 'svg', width: box.width, height: box.height,
            cut: cut, overlaps: overlaps});
});
return out;
"""


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def _look(base: str, session: str, path: Path) -> tuple[list[dict], str, list[tuple[int, int, float, float]]]:
    """Open ``path``; the drawings measured, the page's text, and each drawing's screenshot size."""
    _wd(base, "POST", f"/session/{session}/url", {"url": path.as_uri()})
    drawings = _wd(base, "POST", f"/session/{session}/execute/sync", {"script": MEASURE, "args": []})["value"]
    text = _wd(base, "POST", f"/session/{session}/execute/sync",
               {"script": "return document.documentElement.textContent", "args": []})["value"]  # fmt: skip
    found = _wd(base, "POST", f"/session/{session}/elements", {"using": "css selector", "value": "svg"})[
        "value"
    ]
    shots = []
    for element in found:
        eid = next(iter(element.values()))
        rect = _wd(base, "GET", f"/session/{session}/element/{eid}/rect")["value"]
        if rect["width"] < 1:
            continue
        png = base64.b64decode(_wd(base, "GET", f"/session/{session}/element/{eid}/screenshot")["value"])
        shots.append((*_png_size(png), rect["width"], rect["height"]))
    return drawings, text, shots


def _assert_legible(drawings: list[dict], shots: list[tuple[int, int, float, float]]) -> None:
    for d in drawings:
        assert not d["cut"], (d["name"], d["cut"][:5])  # every text inside its drawing
        assert not d["overlaps"], (d["name"], d["overlaps"][:5])
        assert d["width"] > 300 and d["height"] > 100, d
    for w, h, rw, rh in shots:
        assert abs(w - rw) <= 2 and abs(h - min(rh, 1000)) <= 2 + max(0, rh - 1000), (w, h, rw, rh)


def _report_runs() -> tuple[list[StoredRun], dict]:
    now = datetime.now(timezone.utc)
    results = _runs()
    matrix, _ = _lab_result()
    for s in matrix.suspects:
        s.confirmed = True
    matrix.suspects[1].alternatives = ["leaf1 - spine", "leaf2 - spine"]
    incast = new_result("incast", {"size_bytes": 262144, "rounds": 40}).finish({"goodput_gbps": 0.19})
    incast.incast = [IncastPoint(senders=s, goodput_gbps=g, round_p50_ms=11.0 * s, round_p99_ms=17.0 * s * s, round_max_ms=20.0 * s * s,
                                 rounds=40, retransmits=31 * s * s, timeouts=int(s > 2)) for s, g in ((1, 0.178), (2, 0.189), (4, 0.066))]  # fmt: skip
    incast.hosts = ["receiver:h1"]
    runs = [StoredRun(i, now, r) for i, r in enumerate([*results, matrix, incast], 1)]
    return runs, {2: ("run 1", baseline_stats([results[0]]))}


@pytest.mark.slow
def test_every_chart_and_page_is_legible_in_chromium(tmp_path: Path) -> None:
    runs, baselines = _report_runs()
    report = tmp_path / "report.html"
    report.write_text(render_report(runs, baselines))
    heat = tmp_path / "heat.svg"  # what `bench matrix --svg` writes for a two-host job
    heat.write_text(heatmap_svg(["node-a", "node-b"], [[None, 9.1], [9.4, None]], reference_gbps=9.2))
    switches = [f"sjc2-fab1-spine-{i:02d}" for i in range(1, 6)] + [
        f"sjc2-fab1-leaf-{i:02d}" for i in range(1, 33)
    ]
    doc = {"name": "dc", "nodes": 109, "nics_per_node": 1, "gpus_per_node": 1, "gpu": "none", "switches": switches,
           "links": [{"a": leaf, "b": spine} for leaf in switches[5:] for spine in switches[:5]],
           "attach": {leaf: [f"{i * 109 // 32}-{(i + 1) * 109 // 32 - 1}"] for i, leaf in enumerate(switches[5:])},
           "hosts": [f"sjc2-gpu-{i:03d}" for i in range(109)]}  # fmt: skip
    view = view_from_document(doc)
    fabric, plain = tmp_path / "fabric.svg", tmp_path / "fabric-plain.svg"
    fabric.write_text(
        topology_svg(view, [("sjc2-fab1-leaf-03", "sjc2-fab1-spine-02")])
    )  # Graphviz, when installed
    plain.write_text(
        topology_svg(view, [("sjc2-fab1-leaf-03", "sjc2-fab1-spine-02")], layout="plain")
    )  # the fallback
    if shutil.which("dot") is None:
        skip_unless_ci("large fabrics are laid out by Graphviz: the Debian package graphviz")
    assert (
        'class="graph"' in fabric.read_text() and "#d62728" in fabric.read_text()
    )  # dot drew it, the suspect in red
    with _browser() as (base, session):
        looks = {name: _look(base, session, path)
                 for name, path in (("report", report), ("heat", heat), ("fabric", fabric), ("plain", plain))}  # fmt: skip
    for name, (drawings, _, shots) in looks.items():
        if (
            name == "plain"
        ):  # the fallback: names whole and inside, but a row of 32 leaves scales down to a strip
            assert not any(d["cut"] or d["overlaps"] for d in drawings), drawings
            continue
        _assert_legible(drawings, shots)
    drawings, text, _ = looks["report"]
    names = {d["name"] for d in drawings}
    assert {"throughput", "latency", "connect", "rdma-sweep", "collective-busbw", "matrix-tcp", "matrix-rdma", "topology",
            "incast-11-goodput", "incast-11-rounds"} <= names, names  # fmt: skip
    for words in ("FAIL (exit 1): suspect: h3", "no verdict (exit 2): could not complete", "regression: ", "throughput_gbps -50.4 %",
                  "one of: leaf1 - spine, leaf2 - spine", "incast collapse from 4 senders", "timeouts",
                  "fleet median"):  # fmt: skip
        assert words in text, words
    heat_drawings, heat_text, _ = looks["heat"]
    assert (
        heat_drawings[0]["width"] >= 400
        and "rows send to columns" in heat_text
        and "green = at or above it" in heat_text
    )
    for drawing in ("fabric", "plain"):
        _, fabric_text, _ = looks[drawing]
        assert all(name in fabric_text for name in switches) and "…" not in fabric_text, drawing
    fabric_box = looks["fabric"][0][0]
    assert (
        fabric_box["width"] < 1400
    )  # Graphviz's tiers as columns fit a page; the fallback's row of 32 leaves does not
