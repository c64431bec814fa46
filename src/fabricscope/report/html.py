"""``fabricscope report``: one self-contained HTML file for stored bench runs.

No network access is needed to view it (inline CSS and SVG; a Content-Security-Policy forbids
fetching anything), and no script runs in it. Every value that came from a user or a peer is
escaped. Collective runs get an nccl-tests-like table and busbw against message size (with
the baseline's median per size); matrix runs get heat maps (TCP, and RDMA where measured) and
their suspects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from typing import Any

from fabricscope import __version__
from fabricscope.bench.results.history import MetricStat, compare, headline
from fabricscope.bench.results.schema import BenchResult, Cutoffs
from fabricscope.bench.results.verdict import verdict
from fabricscope.errors import FabricscopeError
from fabricscope.report.bench import HIGHLIGHT_TEXT, headline_text, redop_root
from fabricscope.report.incast import collapse_verdict, incast_svg
from fabricscope.report.plots import Series, bar_chart, heatmap_svg, line_chart
from fabricscope.store import StoredRun

Baselines = Mapping[int, tuple[str, dict[str, MetricStat]]]  # run id -> (label, stats)

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin-bottom:.3em}.meta{color:#666;font-size:.9em}
table{border-collapse:collapse;margin:.5em 0 1em 0;font-size:.9em}
th,td{border-bottom:1px solid #eee;padding:.25em .7em;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37}.failed{color:#cf222e;font-weight:bold}.skipped{color:#9a6700}
.regression{color:#cf222e;font-weight:bold}.improvement{color:#1a7f37}.same,.info{color:#666}
svg.plot{display:block;margin:.5em 0 1.5em 0;max-width:100%;height:auto}
svg .grid{stroke:#eee}svg .axis{stroke:#555}svg .tick{font-size:11px;fill:#444}
svg .label{font-size:12px;fill:#222}svg .legend{font-size:11px;fill:#222}svg .ptitle{font-size:14px;font-weight:600;fill:#222}
svg .err{stroke:#000;stroke-width:1.5}
.matrix svg{display:block;margin:.5em 0 1.5em 0;max-width:100%;height:auto}
details{margin:.3em 0 1em 0}summary{cursor:pointer;color:#0969da}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85em}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto}
"""


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
        return f'<td class="num">{escape(text)}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="num">{value:,}</td>'
    if value is None:
        return '<td class="num">-</td>'
    return f"<td>{escape(str(value))}</td>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _label(run: StoredRun) -> str:
    return f"run {run.id} ({run.result.kind})"


# ----- plots ----------------------------------------------------------------------------------
def throughput_plot(runs: Sequence[StoredRun]) -> str:
    series = []
    for run in runs:
        points = [
            ((iv.start_s + iv.end_s) / 2, float(iv.metrics["throughput_gbps"]))
            for iv in run.result.intervals
            if iv.metrics.get("throughput_gbps") is not None
        ]
        if points:
            series.append(Series(_label(run), points))
    if not series:
        return ""
    return line_chart(
        series, "Throughput over time", "seconds since the first byte", "Gb/s", name="throughput"
    )


def latency_plot(run: StoredRun) -> str:
    rows = [
        r
        for r in run.result.detail.get("rows", [])
        if isinstance(r, dict) and not r.get("skipped") and "size_bytes" in r
    ]
    series = []
    for proto in sorted({str(r.get("proto")) for r in rows}):
        for stat, label in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")):
            pts = [
                (float(r["size_bytes"]), float(r[stat]))
                for r in rows
                if r.get("proto") == proto and r.get(stat)
            ]
            if pts:
                series.append(Series(f"{proto} {label}", sorted(pts)))
    if not series:
        return ""
    return line_chart(
        series,
        f"Round-trip latency percentiles, run {run.id}",
        "message size (bytes)",
        "microseconds",
        name="latency",
        log_x=True,
        log_y=True,
    )


def connect_plot(run: StoredRun) -> str:
    rows = [r for r in run.result.detail.get("rows", []) if isinstance(r, dict) and "part" in r]
    if not rows:
        return ""
    groups = [f"{r['mode'].replace('_', '-')} {r['part'].replace('_', ' ')}" for r in rows]
    series = [(stat, [r.get(stat) for r in rows]) for stat in ("p50", "p99", "p999")]
    return bar_chart(
        groups,
        series,
        f"Connection and request latency, run {run.id}",
        "microseconds",
        name="connect",
        log_y=True,
    )


def rdma_plot(run: StoredRun) -> str:
    rows = [r for r in run.result.detail.get("rows", []) if isinstance(r, dict) and "size_bytes" in r]
    if len(rows) < 2:
        lat = {
            k: run.result.metrics.get(k)
            for k in ("lat_min_us", "lat_typical_us", "lat_p99_us", "lat_p999_us", "lat_max_us")
        }
        if not any(v is not None for v in lat.values()):
            return ""
        names = [k for k, v in lat.items() if v is not None]
        return bar_chart(
            [n.removeprefix("lat_").removesuffix("_us") for n in names], [("latency", [lat[n] for n in names])],
            f"perftest one-way latency, run {run.id}", "microseconds", name="rdma-latency",
        )  # fmt: skip
    key, label, what, unit = (
        ("bw_average_gbps", "average", "bandwidth", "Gb/s")
        if any("bw_average_gbps" in r for r in rows)
        else ("lat_typical_us", "typical", "latency", "microseconds")
    )
    pts = [(float(r["size_bytes"]), float(r[key])) for r in rows if r.get(key) is not None]
    return line_chart(
        [Series(label, pts)], f"perftest {what} by message size, run {run.id}", "message size (bytes)", unit,
        name="rdma-sweep", log_x=True,
    )  # fmt: skip


def _busbw_points(result: BenchResult) -> list[tuple[float, float]]:
    return sorted(
        (float(e.size_bytes), float(e.busbw_GBps)) for e in result.entries or [] if e.size_bytes > 0
    )


def collective_plot(run: StoredRun, base: tuple[str, dict[str, MetricStat]] | None = None) -> str:
    """busbw (and algbw) against message size, like nccl-tests' curve; the baseline's median per size."""
    entries = [e for e in run.result.entries or [] if e.size_bytes > 0]
    if not entries:
        return ""
    series = [Series("busbw", _busbw_points(run.result))]
    series.append(Series("algbw", sorted((float(e.size_bytes), float(e.algbw_GBps)) for e in entries)))
    if base is not None:
        pts = [
            (float(e.size_bytes), base[1][f"size_{e.size_bytes}_busbw_GBps"].median)
            for e in entries
            if f"size_{e.size_bytes}_busbw_GBps" in base[1]
        ]
        if pts:
            series.append(Series("baseline busbw (median)", sorted(pts)))
    op = run.result.params.get("op", "collective")
    return line_chart(
        series,
        f"{op} bandwidth by message size, run {run.id}",
        "message size (bytes)",
        "GB/s",
        name="collective-busbw",
        log_x=True,
    )


def collectives_overview(runs: Sequence[StoredRun]) -> str:
    """busbw by size of every collective run in the report, one line each (two or more runs)."""
    members = [r for r in runs if r.result.kind == "collective" and r.result.entries]
    if len(members) < 2:
        return ""
    series = [
        Series(f"run {r.id} {r.result.params.get('op', '')}".strip(), _busbw_points(r.result))
        for r in members
    ]
    return line_chart(
        series, "Collective busbw by message size", "message size (bytes)", "GB/s",
        name="collective-overview", log_x=True,
    )  # fmt: skip


def _entries_html(run: StoredRun, base: tuple[str, dict[str, MetricStat]] | None) -> str:
    r = run.result
    changes = {c.name: c for c in compare(r, base[1])} if base is not None else {}
    headers = ["size (B)", "count", "type", "redop", "root", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong",
               "slowest rank (us)", "straggler"]  # fmt: skip
    if base is not None:
        headers += [f"baseline busbw ({base[0]})", "change", "verdict"]
    rows = []
    for e in r.entries or []:
        row: list[Any] = [
            e.size_bytes,
            e.count,
            e.type or r.params.get("dtype"),
            *redop_root(r, e),
            e.time_s * 1e6,
            e.algbw_GBps,
            e.busbw_GBps,
            "N/A" if e.wrong is None else e.wrong,
            e.max_rank_time_s * 1e6 if e.max_rank_time_s is not None else None,
            f"rank {e.straggler_rank}" if e.straggler_rank is not None else "-",
        ]
        if base is not None:
            c = changes.get(f"size_{e.size_bytes}_busbw_GBps")
            row += [
                c.baseline if c else None,
                f"{c.change_pct:+.1f} %" if c and c.change_pct is not None else "-",
                c.verdict if c else "-",
            ]
        rows.append(row)
    table = _mark_verdicts(_table(headers, rows))
    parts = [f"<h4>Results by message size (nccl-tests columns, out of place)</h4>{table}"]
    for s in r.stragglers or []:
        parts.append(
            f"<p>Straggler: rank {s.rank} ({escape(s.host or '?')}) at {escape(', '.join(map(str, s.sizes_bytes)))} B: "
            "the other ranks waited for it.</p>"
        )
    if r.skipped_sizes_bytes:
        parts.append(
            f"<p class='meta'>Sizes too small for the rank count, not run: {escape(', '.join(map(str, r.skipped_sizes_bytes)))}</p>"
        )
    for note in r.notes or []:
        parts.append(f"<p class='meta'>{escape(note)}</p>")
    return "".join(parts)


def _matrix_html(run: StoredRun) -> str:
    r = run.result
    parts = [_heatmaps_html(run), _suspects_html(r)]
    if r.topology is not None:
        parts.append(_matrix_topology_html(r))
    failures = (r.failures or []) + (r.rdma.failures if r.rdma is not None else [])
    if failures:
        parts.append(
            "<h4>Pairs that could not be measured</h4><ul>"
            + "".join(f"<li>{escape(f)}</li>" for f in failures)
            + "</ul>"
        )
    return "".join(parts)


def _heatmap_html(
    run: StoredRun, matrix: list[list[float | None]], transport: str, thresholds: Cutoffs | None
) -> str:
    """One transport's pairwise matrix as a heat map, coloured against that transport's fleet median."""
    return (
        "<div class='matrix'>"
        + heatmap_svg(
            run.result.hosts or [],
            matrix,
            title=f"{transport} Gbit/s, rows send to columns, run {run.id}",
            name=f"matrix-{transport.lower()}",
            reference_gbps=thresholds.fleet_median if thresholds else None,
        )
        + "</div>"
    )


def _heatmaps_html(run: StoredRun) -> str:
    """The TCP and RDMA matrices a run measured, and why RDMA was not (fully) measured."""
    r = run.result
    parts = []
    if r.matrix_gbps is not None:
        parts.append(
            "<h4>Pairwise TCP bandwidth</h4>" + _heatmap_html(run, r.matrix_gbps, "TCP", r.thresholds_gbps)
        )
    rdma = r.rdma
    if rdma is not None and rdma.matrix_gbps is not None:
        where = "; ".join(
            f"{e.host}: {e.device}/{e.port}"
            + (f" GID {e.gid_index} ({e.gid_ip})" if e.gid_index is not None else "")
            for e in rdma.endpoints
        )
        parts.append(
            f"<h4>Pairwise RDMA bandwidth (perftest ib_{escape(rdma.test or '?')}, {rdma.duration_s or 0:g} s per flow)</h4>"
            f"<p class='meta'>{escape(where)}</p>"
            + _heatmap_html(run, rdma.matrix_gbps, "RDMA", rdma.thresholds_gbps)
        )
    if rdma is not None and (rdma.status.value != "ok" or rdma.reason):
        parts.append(f"<p><b>RDMA {escape(rdma.status.value)}:</b> {escape(rdma.reason or '')}</p>")
    return "".join(parts)


def _suspects_html(r: BenchResult) -> str:
    """The suspects the matrix named and the ones a retest cleared."""
    if r.suspects is None:
        html = "<p class='meta'>Suspects were not recorded for this run (stored before fabricscope kept them).</p>"
    elif r.suspects:
        rows = [
            (s.transport, s.kind, f"one of: {', '.join(s.alternatives)}" if s.alternatives else s.label,
             {True: "confirmed", False: "cleared", None: "not retested"}[s.confirmed],
             s.score_gbps, s.retest_gbps, s.retransmit_pct, s.reason)
            for s in r.suspects
        ]  # fmt: skip
        html = "<h4>Suspects</h4>" + _table(
            [
                "transport",
                "kind",
                "suspect",
                "retest",
                "score (Gbit/s)",
                "retest (Gbit/s)",
                "retransmits (%)",
                "reason",
            ],
            rows,
        )
    else:
        html = "<p>No suspect: every host and link is within the fleet's spread.</p>"
    if r.cleared:
        cleared = [(s.transport, s.label, s.retest_gbps, s.reason) for s in r.cleared]
        html += "<h4>Cleared on retest</h4>" + _table(
            ["transport", "suspect", "retest (Gbit/s)", "first reason"], cleared
        )
    return html


def _matrix_topology_html(r: BenchResult) -> str:
    """The fabric of a ``--topology`` run, its suspect cables (and suspect hosts' NIC cables, and
    every cable of a suspect switch) in red."""
    from fabricscope.report.topology import topology_svg
    from fabricscope.topology.view import view_from_document

    try:
        view = view_from_document(r.topology or {})
    except (FabricscopeError, KeyError, TypeError, ValueError) as exc:
        return f"<p class='meta'>The fabric of this run cannot be drawn: {escape(str(exc))}</p>"
    from fabricscope.topology.paths import parse_element_label

    marked: list[tuple[str, str]] = []
    ambiguous = False
    for s in r.suspects or []:
        # A suspect the matrix cannot tell from others ("one of a, b, c") is drawn at every place
        # it may be: drawing only the first sent people to replace the wrong cable (issue 26).
        elements = [parse_element_label(a) for a in s.alternatives] if s.alternatives else [
            ("link", *s.link) if s.kind == "link" and s.link else (s.kind, s.host)]  # fmt: skip
        ambiguous = ambiguous or len(elements) > 1
        for e in elements:
            if e[0] == "link":
                marked.append((e[1], e[2]))
            elif e[0] == "host":
                marked += [
                    (e[1], sw) for sw, items in view.nics_of.items() if any(h == e[1] for h, _ in items)
                ]
            elif e[0] == "switch":
                marked += [(x.a, x.b) for x in view.links if e[1] in (x.a, x.b)]  # every cable of the switch
    notes = "".join(f"<li>{escape(n)}</li>" for n in r.notes or [])
    caption = f"{view.name}: suspect links in red" + (
        "; a suspect marked 'one of' is drawn at every place it may be" if ambiguous else ""
    )
    return (
        "<h4>Fabric (suspects in red)</h4>"
        + topology_svg(view, marked, caption)
        + (f"<ul class='meta'>{notes}</ul>" if notes else "")
    )


def _mark_verdicts(table: str) -> str:
    for word in ("regression", "improvement"):
        table = table.replace(f"<td>{word}</td>", f'<td class="{word}">{word}</td>')
    return table


def _per_item_metric(name: str) -> bool:
    return bool(re.match(r"^size_\d+_", name)) or (name.startswith("pair_") and name.endswith("_gbps"))


def baseline_plots(runs: Sequence[StoredRun], baselines: Baselines) -> list[str]:
    """Per kind and headline metric: each run's value next to its baseline median (MAD bars)."""
    charts = []
    kinds = sorted({r.result.kind for r in runs if r.id in baselines and r.result.status.value == "ok"})
    for kind in kinds:
        members = [
            r for r in runs if r.result.kind == kind and r.id in baselines and r.result.status.value == "ok"
        ]
        metric_names = [n for n, _ in headline(members[0].result)][:2]
        for metric in metric_names:
            groups, base_vals, base_err, run_vals = [], [], [], []
            for r in members:
                stat = baselines[r.id][1].get(metric)
                groups.append(f"run {r.id}")
                base_vals.append(stat.median if stat else None)
                base_err.append(stat.sigma if stat else None)
                value = r.result.metrics.get(metric)
                run_vals.append(float(value) if value is not None else None)
            chart = bar_chart(
                groups,
                [("baseline median", base_vals), ("this run", run_vals)],
                f"{kind}: {metric} against baseline (bars: 1.4826 x MAD)",
                metric,
                name="baseline",
                errors=[base_err, [None] * len(run_vals)],
            )
            if chart:
                charts.append(chart)
    return charts


# ----- sections -------------------------------------------------------------------------------
def _counters_html(result: BenchResult) -> str:
    c = result.counters
    if c.window_s is None and not (c.highlights or c.netstat or c.ports or c.ethtool or c.unavailable):
        return ""  # nothing was read around this run (collective, matrix, imported runs)
    parts = []
    if c.highlights:
        rows = [(HIGHLIGHT_TEXT.get(n, n), n, v) for n, v in sorted(c.highlights.items())]
        parts.append(_table(["counter", "name", "delta during the run"], rows))
    elif c.window_s is not None:
        parts.append("<p>No error, drop, pause or retransmit counter moved during the run.</p>")
    raw: list[tuple[str, str, int]] = []
    raw += [("netstat", k, v) for k, v in sorted(c.netstat.items())]
    raw += [(f"port {p}", k, v) for p, vals in sorted(c.ports.items()) for k, v in sorted(vals.items())]
    raw += [(f"ethtool {d}", k, v) for d, vals in sorted(c.ethtool.items()) for k, v in sorted(vals.items())]
    if raw:
        parts.append(
            f"<details><summary>all {len(raw)} counters that moved</summary>{_table(['source', 'counter', 'delta'], raw)}</details>"
        )
    if c.unavailable:
        parts.append("<p class='meta'>Not read: " + escape("; ".join(c.unavailable)) + "</p>")
    where = f" (interface {escape(c.interface)})" if c.interface else ""
    window = f", {c.window_s:.2f} s window" if c.window_s is not None else ""
    return f"<h4>Counters{where}{window}</h4>" + "".join(parts)


def _detail_tables(result: BenchResult) -> str:
    out = []
    streams = result.detail.get("streams")
    if isinstance(streams, list) and streams and isinstance(streams[0], dict):
        keys = list(streams[0].keys())
        out.append("<h4>Streams</h4>" + _table(keys, [[s.get(k) for k in keys] for s in streams]))
    rows = result.detail.get("rows")
    if isinstance(rows, list) and rows and isinstance(rows[0], dict):
        keys = list(dict.fromkeys(k for r in rows for k in r))
        out.append("<h4>Rows</h4>" + _table(keys, [[r.get(k) for k in keys] for r in rows]))
    plan = result.detail.get("plan")
    if isinstance(plan, dict):
        out.append("<h4>Plan</h4><pre>" + escape(json.dumps(plan, indent=1, default=str)) + "</pre>")
    return "".join(out)


def _run_section(run: StoredRun, baselines: Baselines) -> str:
    r = run.result
    status = r.status.value
    said = verdict(r)
    head = (
        f'<h3 id="run-{run.id}">Run {run.id}: {escape(r.kind)} <span class="{status}">{status}</span>, '
        f'verdict <span class="{"ok" if said.code == 0 else "failed"}">{escape(said.word)} (exit {said.code})</span></h3>'
        + (f"<p class='verdict'>{escape(said.why)}</p>" if said.why and said.code else "")
        + f'<p class="meta">started {escape(r.started.isoformat())}, {r.duration_s:.2f} s, on {escape(r.host.hostname or "?")} '
        f"(fabricscope {escape(r.host.fabricscope_version)}, kernel {escape(r.host.kernel or '?')})</p>"
    )
    parts = [head]
    if r.reason:
        parts.append(f"<p><b>Reason:</b> {escape(r.reason)}</p>")
    parts.append(
        "<h4>Parameters</h4>" + _table(["parameter", "value"], [(k, v) for k, v in r.params.items()])
    )
    # per-size / per-pair metrics are shown by the entries table and the heat map instead
    structured = bool(r.entries) or r.matrix_gbps is not None
    metrics = {k: v for k, v in r.metrics.items() if not (structured and _per_item_metric(k))}
    if metrics:
        rows = []
        base = baselines.get(run.id)
        if base is not None:
            changes = {c.name: c for c in compare(r, base[1])}
            for name, value in metrics.items():
                c = changes.get(name)
                rows.append(
                    [
                        name,
                        value,
                        c.baseline if c else None,
                        f"{c.change_pct:+.1f} %" if c and c.change_pct is not None else "-",
                        c.verdict if c else "-",
                    ]
                )
            table = _mark_verdicts(
                _table(["metric", "value", f"baseline ({base[0]})", "change", "verdict"], rows)
            )
            parts.append("<h4>Metrics</h4>" + table)
        else:
            parts.append(
                "<h4>Metrics</h4>" + _table(["metric", "value"], [(k, v) for k, v in metrics.items()])
            )
        if len(metrics) > 16:  # long per-size tables: the rows table and the plot say it better
            parts[-1] = f"<details><summary>all {len(metrics)} metrics</summary>{parts[-1]}</details>"
    if r.thresholds.get("checks"):
        rows = [
            (c["option"], c["limit"], c["value"], "pass" if c["passed"] else "FAIL")
            for c in r.thresholds["checks"]
        ]
        parts.append("<h4>Thresholds</h4>" + _table(["option", "limit", "value", "result"], rows))
    for chart in (
        latency_plot(run) if r.kind == "latency" else "",
        connect_plot(run) if r.kind == "connect" else "",
        rdma_plot(run) if r.kind == "rdma" else "",
        collective_plot(run, baselines.get(run.id)) if r.kind == "collective" else "",
        _incast_html(run) if r.kind == "incast" else "",
    ):
        if chart:
            parts.append(chart)
    if r.kind == "collective" and r.entries:
        parts.append(_entries_html(run, baselines.get(run.id)))
    if r.kind == "matrix" and (r.matrix_gbps is not None or r.rdma is not None):
        parts.append(_matrix_html(run))
    parts.append(_counters_html(r))
    parts.append(_detail_tables(r))
    return "<section>" + "".join(parts) + "</section>"


def _verdict_cell(match: re.Match[str]) -> str:
    cls = {"pass": "ok", "FAIL": "failed", "no verdict": "failed", "skipped": "skipped"}[match.group(1)]
    return f'<td class="{cls}">{match.group(1)}{match.group(2)}'


def _incast_html(run: StoredRun) -> str:
    """The incast page as the CLI prints it: its verdict, then the per-sender-count table with the
    retransmits and timeouts behind the curve, then the charts."""
    r = run.result
    points = r.incast or []
    if not points:
        return ""
    said = collapse_verdict(points)
    rows = [
        (p.senders, p.goodput_gbps, p.round_p50_ms, p.round_p99_ms, p.round_max_ms, p.retransmits, p.timeouts)
        for p in points
    ]
    table = _table(
        [
            "senders",
            "goodput (Gb/s)",
            "p50 round (ms)",
            "p99 round (ms)",
            "max round (ms)",
            "retransmits",
            "timeouts",
        ],
        rows,
    )
    return (
        (f"<p class='verdict'><b>{escape(said)}</b></p>" if said else "")
        + "<h4>Sender counts</h4>"
        + table
        + incast_svg(r, name=f"incast-{run.id}")
    )


def _regression(run: StoredRun, baselines: Baselines) -> str:
    """``regression: busbw_avg_GBps -12.0 %`` against the run's baseline, ``none``, or ``-`` without one."""
    base = baselines.get(run.id)
    if base is None or run.result.status.value != "ok":
        return "-"
    worse = [c for c in compare(run.result, base[1]) if c.verdict == "regression"]
    if not worse:
        return "none"
    shown = ", ".join(
        f"{c.name} {c.change_pct:+.1f} %" if c.change_pct is not None else c.name for c in worse[:3]
    )
    return f"regression: {shown}" + (f" (+{len(worse) - 3} more)" if len(worse) > 3 else "")


def render_report(
    runs: Sequence[StoredRun], baselines: Baselines | None = None, generated: datetime | None = None
) -> str:
    """The whole HTML document for these runs (in the order given)."""
    baselines = baselines or {}
    generated = generated or datetime.now(timezone.utc)
    summary_rows = []
    for run in runs:
        r = run.result
        said = verdict(r)  # what the command exited with: the report cannot call a failed run ok
        summary_rows.append(
            [
                f"{run.id}",
                r.kind,
                r.status.value,
                f"{said.word} (exit {said.code})" + (f": {said.why}" if said.why else ""),
                r.started.strftime("%Y-%m-%d %H:%M:%S UTC"),
                r.peer or "-",
                headline_text(r) if r.status.value == "ok" else (r.reason or ""),
                baselines[run.id][0] if run.id in baselines else "-",
                _regression(run, baselines),
            ]
        )
    summary = _table(
        ["run", "kind", "status", "verdict", "started", "peer", "result", "baseline", "regression"],
        summary_rows,
    )
    for status in ("ok", "failed", "skipped"):
        summary = summary.replace(f"<td>{status}</td>", f'<td class="{status}">{status}</td>')
    summary = re.sub(r"<td>(pass|FAIL|no verdict|skipped)( \(exit)", _verdict_cell, summary)
    summary = re.sub(r"<td>regression: ", '<td class="regression">regression: ', summary)
    overview = [
        c for c in [throughput_plot(runs), collectives_overview(runs), *baseline_plots(runs, baselines)] if c
    ]
    body = [
        f"<h1>fabricscope bench report</h1><p class='meta'>{len(runs)} run(s); generated {escape(generated.isoformat(timespec='seconds'))} "
        f"by fabricscope {escape(__version__)}</p>",
        "<h2>Summary</h2>",
        summary,
    ]
    if overview:
        body.append("<h2>Plots</h2>" + "".join(overview))
    body.append("<h2>Runs</h2>")
    body += [_run_section(run, baselines) for run in runs]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>fabricscope report: runs {escape(', '.join(str(r.id) for r in runs))}</title>"
        f"<style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )
