"""``fabricscope job``: the verdict as a terminal summary and as an HTML page (ranks x collectives)."""

from __future__ import annotations

import html
from typing import Any

from rich.markup import escape

STATE_COLOURS = {"c": "#3a7d44", "o": "#e0a800", ".": "#d9d9d9"}


def terminal_lines(doc: dict[str, Any]) -> list[str]:
    """The summary: verdict, culprits, evidence, next action, and what it rests on (rich markup)."""
    v, act, rests = doc["verdict"], doc["next_action"], doc["rests_on"]
    colour = "green" if v["class"] == "healthy" else "red"
    lines = [f"[bold {colour}]{escape(v['class'].replace('_', ' ').upper())}[/]  {escape(v['headline'])}"]
    for c in v["culprits"][:16]:
        lines.append(
            f"  culprit: rank {c['rank']}"
            + (f" on {escape(c['host'])}" if c["host"] else "")
            + f": {escape(c['why'])}"
        )
    if len(v["culprits"]) > 16:
        lines.append(f"  ... and {len(v['culprits']) - 16} more")
    if v["waiting_ranks"]:
        lines.append(f"  waiting: rank {', '.join(map(str, v['waiting_ranks'][:32]))}")
    if v.get("slowdown"):
        lines.append(f"  slowdown: {v['slowdown']:.1f}x")
    for e in v["evidence"][:12]:
        lines.append(f"  [dim]evidence:[/] {escape(e)}")
    lines.append(f"[bold]next:[/] {escape(act['text'])}")
    for cmd in act.get("commands", [])[:4]:
        lines.append(f"  $ {escape(cmd)}")
    for d in doc.get("drain", []):
        what = "drained" if d["done"] else "not drained"
        argv = " ".join(d.get("argv", []))
        lines.append(
            f"  {what} {escape(d['host'])}: {escape(d['detail'] or 'ok')}"
            + (f" ({escape(argv)})" if argv else "")
        )
    rest = f"rests on {len(rests['ranks'])} rank dump(s)"
    if rests["missing_ranks"]:
        rest += f"; no dump from rank {', '.join(map(str, rests['missing_ranks'][:32]))}"
    if rests["ras_polls"]:
        rest += f"; {rests['ras_polls']} RAS poll(s)"
    if rests["logs"]:
        rest += f"; {len(rests['logs'])} log(s)"
    lines.append(f"[dim]{escape(rest)}[/]")
    for s in rests["skipped"][:16]:
        lines.append(f"[dim]  left out: {escape(s['path'])}: {escape(s['reason'])}[/]")
    if len(rests["skipped"]) > 16:
        lines.append(f"[dim]  ... {len(rests['skipped']) - 16} more left out (see --json)[/]")
    return lines


def _timeline_svg(tl: dict[str, Any]) -> str:
    ranks = list(tl["ranks"].items())
    cell, pad = 10, 60
    width = pad + cell * (tl["last"] - tl["first"] + 1) + 10
    height = 30 + cell * len(ranks) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="9">'
    ]
    out.append(
        f'<text x="{pad}" y="12">collective {tl["first"]} .. {tl["last"]} (process group {html.escape(str(tl["group"]))})</text>'
    )
    culprits = set(map(str, tl["culprits"]))
    for row, (rank, states) in enumerate(ranks):
        y = 20 + row * cell
        mark = culprits.__contains__(rank)
        out.append(
            f'<text x="2" y="{y + 8}" fill="{"#c00" if mark else "#000"}">{"&gt; " if mark else ""}rank {html.escape(rank)}</text>'
        )
        for col, state in enumerate(states):
            x = pad + col * cell
            out.append(
                f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell - 1}" fill="{STATE_COLOURS.get(state, "#fff")}"/>'
            )
        if mark:
            out.append(
                f'<rect x="{pad - 1}" y="{y - 1}" width="{cell * len(states) + 1}" height="{cell + 1}" fill="none" stroke="#c00" stroke-width="2"/>'
            )
    if tl.get("seq") is not None and tl["first"] <= tl["seq"] <= tl["last"]:
        x = pad + (tl["seq"] - tl["first"]) * cell
        out.append(
            f'<rect x="{x - 1}" y="18" width="{cell + 1}" height="{cell * len(ranks) + 3}" fill="none" stroke="#c00" stroke-dasharray="3,2"/>'
        )
    out.append("</svg>")
    return "\n".join(out)


def html_page(doc: dict[str, Any]) -> str:
    """One self-contained page: the verdict, next action, the timeline, and per-rank counters."""
    v, act = doc["verdict"], doc["next_action"]
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>fabricscope job</title>",
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}"
        ".bad{color:#c00}.legend span{display:inline-block;width:10px;height:10px;margin:0 4px}</style></head><body>",
        f"<h1>{e(v['class'].replace('_', ' '))}</h1><p>{e(v['headline'])}</p>",
    ]
    if v["culprits"]:
        parts.append(
            "<h2>Culprits</h2><ul>"
            + "".join(
                f"<li class='bad'>rank {c['rank']}{' on ' + e(c['host']) if c['host'] else ''}: {e(c['why'])}</li>"
                for c in v["culprits"][:64]
            )
            + "</ul>"
        )
    parts.append(
        "<h2>Next</h2><p>"
        + e(act["text"])
        + "</p>"
        + "".join(f"<pre>{e(c)}</pre>" for c in act.get("commands", []))
    )
    if doc.get("timeline"):
        parts.append(
            "<h2>Ranks x collectives</h2><p class='legend'>"
            + "".join(
                f"<span style='background:{c}'></span>{e(n)}"
                for n, c in (
                    ("completed", STATE_COLOURS["c"]),
                    ("entered, not completed", STATE_COLOURS["o"]),
                    ("never entered", STATE_COLOURS["."]),
                )
            )
            + "; culprits framed in red, the verdict's collective dashed</p>"
            + _timeline_svg(doc["timeline"])
        )
    parts.append("<h2>Evidence</h2><ul>" + "".join(f"<li>{e(x)}</li>" for x in v["evidence"][:64]) + "</ul>")
    parts.append(
        "<h2>Ranks</h2><table><tr><th>rank</th><th>host</th><th>last enqueued</th><th>last completed</th><th>dump age (s)</th></tr>"
    )
    culprits = {c["rank"] for c in v["culprits"]}
    for r in doc["ranks"][:4096]:
        cls = " class='bad'" if r["rank"] in culprits else ""
        parts.append(
            f"<tr{cls}><td>{r['rank']}</td><td>{e(str(r['host'] or ''))}</td><td>{r['last_enqueued']}</td>"
            f"<td>{r['last_completed']}</td><td>{'' if r['dump_age_s'] is None else r['dump_age_s']}</td></tr>"
        )
    parts.append("</table>")
    skipped = doc["rests_on"]["skipped"]
    if skipped:
        parts.append(
            "<h2>Left out</h2><ul>"
            + "".join(f"<li>{e(s['path'])}: {e(s['reason'])}</li>" for s in skipped[:256])
            + "</ul>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
