"""The fabric drawn as inline SVG: switches by tier (top tier at the top), hosts along the bottom,
cables as lines whose width follows their capacity. No dependency, no script, every text escaped.

``highlight`` marks links (a pair of switch names, or a host and its switch) in red; the HTML
report embeds :func:`topology_html`, and marks the links that localization names as suspect.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape

from fabricscope.host.infiniband import natural_key
from fabricscope.topology.view import FabricView
from fabricscope.units import format_rate

ROW_GAP = 110
SWITCH_W, SWITCH_H = 104, 26
HOST_W, HOST_H = 76, 20
MARGIN = 30
MANY_HOSTS = 48  # above this, hosts are drawn as ticks and named in tooltips only
HIGHLIGHT = "#d62728"
TOPOLOGY_CSS = (
    "svg.topology{display:block;margin:.5em 0 1.5em 0;max-width:100%;height:auto}"
    "svg.topology .sw{fill:#e8f0fa;stroke:#1f77b4}svg.topology .host{fill:#f4f4f4;stroke:#777}"
    "svg.topology text{font:11px sans-serif;fill:#222}svg.topology .cable{stroke:#5b7fa6}"
    "svg.topology .nic{stroke:#bbb}svg.topology .suspect{stroke:" + HIGHLIGHT + "}"
)

Pair = frozenset[str]


def _pairs(highlight: Iterable[tuple[str, str]] | None) -> set[Pair]:
    return {frozenset(p) for p in (highlight or ())}


def _spread(names: list[str], width: float, pitch: float) -> dict[str, float]:
    """x centre of each name, evenly over ``width`` (at least ``pitch`` apart)."""
    if not names:
        return {}
    step = max(pitch, width / len(names))
    start = MARGIN + (width - step * len(names)) / 2 + step / 2
    return {n: start + i * step for i, n in enumerate(names)}


def _host_order(view: FabricView, leaves: list[str]) -> list[str]:
    rank = {leaf: i for i, leaf in enumerate(leaves)}
    first: dict[str, int] = {}
    for leaf in leaves:
        for host, _ in view.nics_of.get(leaf, []):
            first[host] = min(first.get(host, len(leaves)), rank[leaf])
    return sorted(view.hosts, key=lambda h: (first.get(h, len(leaves)), natural_key(h)))


CHAR_PX = 6.6  # 11 px sans-serif, an average character


def _box_width(names: Iterable[str], least: float) -> float:
    """Wide enough for the longest name: cutting names (from either end) lost the part that told
    spines apart on a real 37-switch fabric (issue 26)."""
    return max([least, *(CHAR_PX * len(n) + 12 for n in names)])


LARGE_SWITCHES = 16  # above this many switches (or MANY_HOSTS hosts), Graphviz lays the fabric out


def topology_svg(view: FabricView, highlight: Iterable[tuple[str, str]] | None = None, title: str | None = None,
                 layout: str = "auto") -> str:  # fmt: skip
    """The fabric as one ``<svg class="topology">``; ``highlight``: links to draw in red.

    ``layout``: ``auto`` lays a large fabric out with Graphviz when ``dot`` is installed
    (report/graphviz.py) and draws the others, or without ``dot``, here; ``plain`` always here."""
    marked = _pairs(highlight)
    caption = title or f"{view.name}: {len(view.hosts)} hosts, {len(view.switches)} switches"
    if layout == "auto" and (len(view.switches) > LARGE_SWITCHES or len(view.hosts) > MANY_HOSTS):
        from fabricscope.report.graphviz import graphviz_svg

        laid_out = graphviz_svg(
            view, marked, caption + ("; red: highlighted" if marked else ""), len(view.hosts) > MANY_HOSTS
        )
        if laid_out is not None:
            return laid_out
    at = _lay_out(view, caption)
    parts = _cables_svg(view, at, marked) + _boxes_svg(view, at)
    width = at.width
    height = at.host_y + HOST_H + MARGIN + 10
    note = "line width: capacity" + ("; red: highlighted" if marked else "")
    return (
        f'<svg class="topology" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width + 2 * MARGIN:.0f} {height:.0f}" '
        f'width="{width + 2 * MARGIN:.0f}" height="{height:.0f}" role="img">'
        f"<title>{escape(caption)}</title><style>{TOPOLOGY_CSS}</style>"
        f'<text x="{MARGIN}" y="{MARGIN - 8}" style="font-size:14px;font-weight:600">{escape(caption)}</text>'
        + "".join(parts)
        + f'<text x="{MARGIN}" y="{height - 10:.0f}">{escape(note)}</text></svg>'
    )


@dataclass
class _Layout:
    """Where the drawing puts things: switch rows by tier (top tier first), hosts along the bottom."""

    leaves: list[str]
    many: bool  # hosts drawn as ticks
    switch_w: float
    host_w: float
    width: float
    tier_y: dict[int, float]
    host_y: float
    switch_x: dict[str, float]
    switch_y: dict[str, float]
    host_x: dict[str, float]


def _lay_out(view: FabricView, caption: str) -> _Layout:
    by_tier = view.by_tier()
    tiers = sorted((t for t in by_tier if t), reverse=True) + ([0] if 0 in by_tier else [])
    leaves = by_tier.get(1, [])
    hosts = _host_order(view, leaves)
    many = len(hosts) > MANY_HOSTS
    switch_w = _box_width(view.switches, SWITCH_W)
    host_w = _box_width(hosts, HOST_W)
    host_pitch = 14.0 if many else host_w + 10
    widest_switch_row = max((len(by_tier[t]) for t in tiers), default=1)
    width = max(widest_switch_row * (switch_w + 14), len(hosts) * host_pitch, 400, 7.8 * len(caption))
    ys: dict[int, float] = {t: MARGIN + 24 + i * ROW_GAP for i, t in enumerate(tiers)}
    xs: dict[str, float] = {}
    for t in tiers:
        xs.update(_spread(by_tier[t], width, switch_w + 14))
    return _Layout(
        leaves=leaves,
        many=many,
        switch_w=switch_w,
        host_w=host_w,
        width=width,
        tier_y=ys,
        host_y=MARGIN + 24 + len(tiers) * ROW_GAP,
        switch_x=xs,
        switch_y={s: ys[view.tiers.get(s, 0)] for s in view.switches},
        host_x=_spread(hosts, width, host_pitch),
    )


def _cables_svg(view: FabricView, at: _Layout, marked: set[Pair]) -> list[str]:
    """Switch-to-switch cables (width by capacity) and host NIC cables; the marked ones red."""
    xs, y_of = at.switch_x, at.switch_y
    top = max((link.rate_bps * link.count for link in view.links), default=1.0)
    parts: list[str] = []
    for link in view.links:
        if link.a not in xs or link.b not in xs:
            continue
        suspect = frozenset((link.a, link.b)) in marked
        stroke = 1.0 + 4.0 * (link.rate_bps * link.count) / top + (2.0 if suspect else 0.0)
        cls = "cable suspect" if suspect else "cable"
        tip = f"{link.a} - {link.b}: {link.count} x {format_rate(link.rate_bps)}bit/s" + (
            " (highlighted)" if suspect else ""
        )
        parts.append(
            f'<line class="{cls}" x1="{xs[link.a]:.1f}" y1="{y_of[link.a]:.1f}" x2="{xs[link.b]:.1f}" y2="{y_of[link.b]:.1f}" '
            f'stroke-width="{stroke:.2f}"><title>{escape(tip)}</title></line>'
        )
    for leaf in at.leaves:
        for host, nic in view.nics_of.get(leaf, []):
            suspect = frozenset((host, leaf)) in marked
            cls = "nic suspect" if suspect else "nic"
            tip = f"{host} NIC {nic} - {leaf}: {format_rate(view.host_rate(host))}bit/s"
            parts.append(
                f'<line class="{cls}" x1="{at.host_x[host]:.1f}" y1="{at.host_y:.1f}" x2="{xs[leaf]:.1f}" y2="{at.tier_y[1]:.1f}" '
                f'stroke-width="{3 if suspect else 1}"><title>{escape(tip)}</title></line>'
            )
    return parts


def _boxes_svg(view: FabricView, at: _Layout) -> list[str]:
    """A named box per switch and per host (a tick with a tooltip when there are many hosts)."""
    parts: list[str] = []
    switch_w, host_w, host_y = at.switch_w, at.host_w, at.host_y
    for s, x in at.switch_x.items():
        y = at.switch_y[s]
        parts.append(
            f"<g><title>{escape(s)} (tier {view.tiers.get(s, 0)})</title>"
            f'<rect class="sw" x="{x - switch_w / 2:.1f}" y="{y - SWITCH_H / 2:.1f}" width="{switch_w:.0f}" height="{SWITCH_H}" rx="4"/>'
            f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{escape(s)}</text></g>'
        )
    for h, x in at.host_x.items():
        if at.many:
            parts.append(
                f'<rect class="host" x="{x - 4:.1f}" y="{host_y - 8:.1f}" width="8" height="16"><title>{escape(h)}</title></rect>'
            )
        else:
            parts.append(
                f'<g><title>{escape(h)}</title><rect class="host" x="{x - host_w / 2:.1f}" y="{host_y - HOST_H / 2:.1f}" '
                f'width="{host_w:.0f}" height="{HOST_H}" rx="3"/>'
                f'<text x="{x:.1f}" y="{host_y + 4:.1f}" text-anchor="middle">{escape(h)}</text></g>'
            )
    return parts


def topology_html(
    view: FabricView, highlight: Iterable[tuple[str, str]] | None = None, title: str | None = None
) -> str:
    """The embed hook for the HTML report: a section with the drawing of ``view``."""
    heading = title or f"Topology: {view.name}"
    return f'<section class="topology"><h2>{escape(heading)}</h2>{topology_svg(view, highlight, title)}</section>'
