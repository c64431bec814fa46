"""Large fabrics laid out by Graphviz's ``dot`` when it is installed (Debian: ``graphviz``).

The hand-made drawing (report/topology.py) puts every switch of a tier on one row; a real
109-host, 37-switch fabric became a strip thousands of pixels wide whose names were unreadable
once the page scaled it down (issue 26). ``dot`` lays out the tiers as ranks and routes the
cables itself. It runs as a child process through ``fabricscope.host.command`` (deadline, own
process group), fed the graph on stdin: no Python binding is needed (the ``graphviz`` package
would start ``dot`` itself, outside that rule; ``pygraphviz`` needs the C headers to install).
Without ``dot``, or when it fails, the caller keeps today's drawing.
"""

from __future__ import annotations

import re
import shutil

from fabricscope.host import command
from fabricscope.topology.view import FabricView
from fabricscope.units import format_rate

DOT_TIMEOUT_S = 30.0
HIGHLIGHT = "#d62728"


def _q(text: str) -> str:
    """A DOT string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def dot_source(view: FabricView, marked: set[frozenset[str]], caption: str, host_points: bool) -> str:
    """The fabric as a DOT graph: tiers as columns, the top tier at the left, hosts at the right (a
    row per tier was a strip thousands of pixels wide: names are read, and switches counted, down a page)."""
    by_tier = view.by_tier()
    tiers = sorted((t for t in by_tier if t), reverse=True)
    top = max((link.rate_bps * link.count for link in view.links), default=1.0)
    out = [
        "graph fabric {",
        f"  graph [label={_q(caption)}, labelloc=t, fontname=sans, fontsize=14, rankdir=LR, nodesep=0.08, ranksep=2.0];",
        '  node [fontname=sans, fontsize=11, shape=box, style="rounded,filled", fillcolor="#e8f0fa", color="#1f77b4"];',
        '  edge [color="#5b7fa6"];',
    ]
    for t in tiers:
        out.append(
            "  { rank=same; "
            + " ".join(f"{_q(s)} [tooltip={_q(f'{s} (tier {t})')}];" for s in by_tier[t])
            + " }"
        )
    host_style = ('shape=point, width=0.08, fillcolor="#777777", color="#777777"' if host_points
                  else 'shape=box, fillcolor="#f4f4f4", color="#777777"')  # fmt: skip
    out.append("  { rank=same; " + " ".join(f"{_q('host:' + h)} [label={_q(h)}, tooltip={_q(h)}, {host_style}];"
                                          for h in view.hosts) + " }")  # fmt: skip
    for link in view.links:
        red = frozenset((link.a, link.b)) in marked
        width = 0.5 + 1.5 * (link.rate_bps * link.count) / top + (2.0 if red else 0.0)
        upper, lower = sorted(
            (link.a, link.b), key=lambda s: -view.tiers.get(s, 0)
        )  # dot ranks an edge's tail first
        tip = f"{link.a} - {link.b}: {link.count} x {format_rate(link.rate_bps)}bit/s"
        colour = f', color={_q(HIGHLIGHT)}, class="cable suspect"' if red else ', class="cable"'
        out.append(f"  {_q(upper)} -- {_q(lower)} [penwidth={width:.2f}, tooltip={_q(tip)}{colour}];")
    for leaf, items in view.nics_of.items():
        for host, nic in items:
            red = frozenset((host, leaf)) in marked
            tip = f"{host} NIC {nic} - {leaf}: {format_rate(view.host_rate(host))}bit/s"
            style = (
                f', color={_q(HIGHLIGHT)}, penwidth=3, class="nic suspect"'
                if red
                else ', color="#bbbbbb", class="nic"'
            )
            out.append(f"  {_q(leaf)} -- {_q('host:' + host)} [tooltip={_q(tip)}{style}];")
    out.append("}")
    return "\n".join(out) + "\n"


def graphviz_svg(
    view: FabricView, marked: set[frozenset[str]], caption: str, host_points: bool
) -> str | None:
    """``<svg class="topology">`` laid out by ``dot``, or None (no ``dot``, or it failed)."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    try:
        outcome = command.run(
            [dot, "-Tsvg"], DOT_TIMEOUT_S, input_bytes=dot_source(view, marked, caption, host_points).encode()
        )
    except OSError:
        return None
    if outcome.rc != 0 or b"<svg" not in outcome.stdout:
        return None
    svg = outcome.stdout_text
    svg = svg[svg.index("<svg") :]  # no XML prolog or DOCTYPE inside HTML
    svg = re.sub(r"<!--.*?-->\s*", "", svg, flags=re.S)
    return svg.replace("<svg ", '<svg class="topology" role="img" ', 1)
