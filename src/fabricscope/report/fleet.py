"""Rendering of `fleet doctor`: the nodes x areas table and drift list on a terminal, and the fleet
page (node x check heat map, drift list, findings of the nodes that need attention) in HTML."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fabricscope import __version__
from fabricscope.findings import Finding, Severity, sort_key
from fabricscope.fleet.doctor import FleetReport
from fabricscope.fleet.drift import DriftItem
from fabricscope.fleet.inputs import NodeDoc
from fabricscope.report.terminal import SEVERITY_STYLE

AREA_ORDER = ("fleet", "expect", "rdma", "roce", "link", "pcie", "tcp", "nccl", "host", "doctor")
MAX_FINDINGS_PER_NODE = 6
MAX_DIFFERING_SHOWN = 8
HTML_ALL_NODES_UP_TO = 500  # above this, the heat map lists only the nodes that need attention


def _ordered_areas(report: FleetReport) -> list[str]:
    seen = {a for n in report.nodes for a in report.areas(n)}
    return [a for a in AREA_ORDER if a in seen] + sorted(seen - set(AREA_ORDER))


def _ranked_nodes(report: FleetReport) -> list[NodeDoc]:
    return sorted(report.nodes, key=lambda n: (-report.worst(n).rank, n.name))


def _cell(severity: str | None) -> Text:
    if severity is None:
        return Text("-", style="dim")
    label, style = SEVERITY_STYLE[Severity(severity)]
    return Text(label.lower(), style=style)


def _differing_text(item: DriftItem) -> str:
    by_node: dict[str, set[str]] = {}
    for node, value, _subject, _key in item.differing:
        by_node.setdefault(node, set()).add(value)
    parts = [f"{node} ({', '.join(sorted(values))})" for node, values in by_node.items()]
    more = len(parts) - MAX_DIFFERING_SHOWN
    return ", ".join(parts[:MAX_DIFFERING_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _keys_text(keys: list[str]) -> str:
    return keys[0] if len(keys) == 1 else f"{len(keys)} keys: {keys[0]} ... {keys[-1]}"


def render_fleet(report: FleetReport, out: Console, *, all_nodes: bool = False) -> None:
    """Nodes x areas (worst severity per cell), the drift list, then each node's problems."""
    areas = _ordered_areas(report)
    nodes = _ranked_nodes(report)
    shown = nodes if all_nodes else [n for n in nodes if report.worst(n).rank >= Severity.WARN.rank]
    out.print(Text(f"fabricscope fleet doctor: {len(nodes)} node(s)", style="bold"))
    if shown:
        table = Table(show_edge=False, pad_edge=False, header_style="bold")
        table.add_column("node")
        for area in areas:
            table.add_column(area)
        for node in shown:
            cells = report.areas(node)
            table.add_row(node.name, *(_cell(cells.get(a)) for a in areas))
        out.print(table)
    hidden = len(nodes) - len(shown)
    if hidden:
        out.print(
            Text(f"{hidden} more node(s) with nothing above info (--all-nodes lists them)", style="dim")
        )
    out.print()
    out.print(Text("Drift across nodes", style="bold underline"))
    if not report.drift:
        out.print(Text(" none: every compared fact agrees on every node", style="green"))
    for item in report.drift:
        label, style = SEVERITY_STYLE[item.rule.severity]
        line = Text()
        line.append(f" {label:<4} ", style=style)
        line.append(f"{item.rule.what} ", style="bold")
        line.append(
            f"[{_keys_text(item.keys)}]: {item.majority} on {item.majority_nodes} of {item.nodes_compared} nodes"
        )
        line.append(" (tie)" if item.tie else "")
        line.append(f"  [{item.check}]", style="dim")
        out.print(line)
        out.print(Text(f"       differ: {_differing_text(item)}"))
        out.print(
            Text(f"       fix: {item.fix_for(item.differing[0][2], item.differing[0][3])}", style="dim")
        )
    _render_node_findings(report, out, shown)
    summary = report.summary()
    out.print()
    out.print(
        Text(
            f"{summary['nodes']} node(s), {summary['failing_nodes']} failing; {len(report.drift)} drift item(s); "
            f"{summary['fail']} fail, {summary['warn']} warn, {summary['info']} info, {summary['pass']} pass"
        )
    )


def _not_drift(finding: Finding) -> bool:
    return not finding.id.startswith("fleet.") or finding.id == "fleet.input"


def _render_node_findings(report: FleetReport, out: Console, nodes: list[NodeDoc]) -> None:
    """Per node, its warn/fail findings that are not drift (the drift list already names them)."""
    printed_header = False
    for node in nodes:
        own = sorted(
            (f for f in node.all_findings if f.severity.rank >= Severity.WARN.rank and _not_drift(f)),
            key=sort_key,
        )
        if not own:
            continue
        if not printed_header:
            out.print()
            out.print(Text("Node findings", style="bold underline"))
            printed_header = True
        out.print(Text(node.name, style="bold"))
        for finding in own[:MAX_FINDINGS_PER_NODE]:
            label, style = SEVERITY_STYLE[finding.severity]
            line = Text()
            line.append(f" {label:<4} ", style=style)
            line.append(f"{finding.subject}: {finding.message}")
            line.append(f"  [{finding.id}]", style="dim")
            out.print(line)
        if len(own) > MAX_FINDINGS_PER_NODE:
            out.print(
                Text(f"       ... {len(own) - MAX_FINDINGS_PER_NODE} more (--json has them all)", style="dim")
            )


# ----- HTML -------------------------------------------------------------------------------------
FLEET_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1400px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}.meta{color:#666;font-size:.9em}
table{border-collapse:collapse;margin:.5em 0 1em 0;font-size:.85em}
th,td{border-bottom:1px solid #eee;padding:.2em .6em;text-align:left;vertical-align:top}
table.heat td.sev{width:1.4em;min-width:1.4em;padding:0;border:1px solid #fff}
table.heat th.check{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;white-space:nowrap;padding:.3em 0}
.s-pass{background:#2da44e}.s-info{background:#8ab4f8}.s-warn{background:#e3b341}.s-fail{background:#cf222e}.s-none{background:#f0f0f0}
.t-pass{color:#1a7f37}.t-info{color:#0969da}.t-warn{color:#9a6700;font-weight:bold}.t-fail{color:#cf222e;font-weight:bold}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.9em}
"""


def _heat_map(report: FleetReport, nodes: list[NodeDoc]) -> str:
    checks = sorted(
        {c for n in report.nodes for c in n.checks},
        key=lambda c: (AREA_ORDER.index(c.split(".")[0]) if c.split(".")[0] in AREA_ORDER else 99, c),
    )
    head = "<th>node</th>" + "".join(
        f"<th class='check' title='{escape(c)}'>{escape(c)}</th>" for c in checks
    )
    rows = []
    for node in nodes:
        cells = "".join(
            f"<td class='sev s-{escape(node.checks.get(c, 'none'))}' title='{escape(node.name)}: {escape(c)} {escape(node.checks.get(c, 'not run'))}'></td>"
            for c in checks
        )
        rows.append(f"<tr><td>{escape(node.name)}</td>{cells}</tr>")
    return f"<table class='heat'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _drift_html(report: FleetReport) -> str:
    if not report.drift:
        return "<p class='t-pass'>No drift: every compared fact agrees on every node.</p>"
    rows = []
    for item in report.drift:
        sev = item.rule.severity.value
        rows.append(
            f"<tr><td class='t-{sev}'>{sev}</td><td><code>{escape(item.check)}</code></td><td>{escape(item.rule.what)}</td>"
            f"<td>{escape(', '.join(item.keys))}</td><td>{escape(item.majority)} ({item.majority_nodes} of {item.nodes_compared})</td>"
            f"<td>{escape(_differing_text(item))}</td><td>{escape(item.fix_for(item.differing[0][2], item.differing[0][3]))}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("severity", "check", "what", "where", "majority", "nodes that differ", "fix")
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _finding_row(node: str, f: Finding) -> str:
    sev = f.severity.value
    return (
        f"<tr><td>{escape(node)}</td><td class='t-{sev}'>{sev}</td><td><code>{escape(f.id)}</code></td>"
        f"<td>{escape(f.subject)}</td><td>{escape(f.message)}</td><td>{escape(f.fix or '')}</td></tr>"
    )


def render_fleet_html(report: FleetReport, generated: datetime | None = None) -> str:
    """The fleet page: a self-contained HTML document (no script, nothing fetched)."""
    generated = generated or datetime.now(timezone.utc)
    nodes = _ranked_nodes(report)
    attention = [n for n in nodes if report.worst(n).rank >= Severity.WARN.rank]
    mapped = nodes if len(nodes) <= HTML_ALL_NODES_UP_TO else attention
    summary = report.summary()
    note = (
        ""
        if mapped is nodes
        else f"<p class='meta'>{len(nodes) - len(mapped)} node(s) with nothing above info are not drawn.</p>"
    )
    rows = [
        _finding_row(n.name, f)
        for n in attention
        for f in sorted(n.all_findings, key=sort_key)
        if f.severity.rank >= Severity.WARN.rank
    ]
    head = "".join(f"<th>{h}</th>" for h in ("node", "severity", "check", "subject", "message", "fix"))
    body = [
        f"<h1>fabricscope fleet doctor</h1><p class='meta'>{summary['nodes']} node(s), {summary['failing_nodes']} failing, "
        f"{len(report.drift)} drift item(s){'; manifest ' + escape(report.manifest) if report.manifest else ''}; "
        f"generated {escape(generated.isoformat(timespec='seconds'))} by fabricscope {escape(__version__)}</p>",
        "<h2>Node x check</h2><p class='meta'>Each cell is the worst severity of that check on that node "
        "(<span class='t-fail'>fail</span>, <span class='t-warn'>warn</span>, <span class='t-info'>info</span>, "
        "<span class='t-pass'>pass</span>; grey: not run there).</p>" + note + _heat_map(report, mapped),
        "<h2>Drift across nodes</h2>" + _drift_html(report),
        "<h2>Findings of the nodes that need attention</h2>"
        + (
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            if rows
            else "<p class='t-pass'>None.</p>"
        ),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>fabricscope fleet: {summary['nodes']} nodes</title><style>{FLEET_CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
