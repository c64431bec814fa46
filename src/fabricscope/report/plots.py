"""Hand-made inline SVG charts for the HTML report (no dependency, no script, no network).

Two shapes cover the report: a line chart (throughput over time, latency against message size)
and a grouped bar chart with optional error bars (percentiles, run against baseline). Every
text is escaped; every chart is an ``<svg class="plot">`` with a ``<title>`` for accessibility.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
WIDTH = 760
HEIGHT = 320
MARGIN_LEFT = 70
MARGIN_RIGHT = 170  # legend
MARGIN_TOP = 34
MARGIN_BOTTOM = 52


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 5 x 10^n steps)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while len(ticks) < 50:  # up to the first tick at or above ``high``: no value is drawn off the axis
        ticks.append(round(value, 12))
        if value >= high - step * 1e-9:
            break
        value += step
    return ticks


def log_ticks(low: float, high: float) -> list[float]:
    low = max(low, 1e-12)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(max(high, low * 10)))
    return [10.0**e for e in range(first, last + 1)]


def fmt_tick(value: float) -> str:
    """A tick as people read it: ``1M`` (bytes, binary), ``1,000,000``, ``2G``, ``0.0001``; never
    ``1e+06`` (issue 26)."""
    if value == 0:
        return "0"
    if abs(value) >= 1024 and float(value).is_integer() and int(value) % 1024 == 0:
        size = int(value)
        for unit, scale in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
            if size % scale == 0:
                return f"{size // scale}{unit}"
    if abs(value) >= 1e9:
        return f"{value / 1e9:g}G"
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) < 1e-3:
        return f"{value:.6f}".rstrip("0")
    return f"{value:g}"


TICK_CHAR_PX = 6.2  # 11 px sans-serif, an average character


def _tick_label(x: float, y: float, label: str, room: float) -> str:
    """A category label under the axis: on two lines when one would run into its neighbours."""
    words = label.split(" ")
    if len(label) * TICK_CHAR_PX <= room or len(words) < 2:
        return f'<text x="{x:.1f}" y="{y}" text-anchor="middle" class="tick">{escape(label)}</text>'
    cut = max(range(1, len(words)), key=lambda i: -abs(len(" ".join(words[:i])) - len(" ".join(words[i:]))))
    first, second = " ".join(words[:cut]), " ".join(words[cut:])
    return (
        f'<text x="{x:.1f}" y="{y}" text-anchor="middle" class="tick">{escape(first)}'
        f'<tspan x="{x:.1f}" dy="13">{escape(second)}</tspan></text>'
    )


class _Axes:
    def __init__(
        self, x_range: tuple[float, float], y_range: tuple[float, float], log_x: bool, log_y: bool
    ) -> None:
        self.log_x, self.log_y = log_x, log_y
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range
        self.pw = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
        self.ph = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    @staticmethod
    def _t(v: float, log: bool) -> float:
        return math.log10(max(v, 1e-12)) if log else v

    def x(self, v: float) -> float:
        a, b = self._t(self.x0, self.log_x), self._t(self.x1, self.log_x)
        return MARGIN_LEFT + (self._t(v, self.log_x) - a) / ((b - a) or 1.0) * self.pw

    def y(self, v: float) -> float:
        a, b = self._t(self.y0, self.log_y), self._t(self.y1, self.log_y)
        return MARGIN_TOP + self.ph - (self._t(v, self.log_y) - a) / ((b - a) or 1.0) * self.ph


def _frame(title: str, name: str) -> list[str]:
    return [
        f'<svg class="plot" data-plot="{escape(name)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
        f'<text x="{WIDTH / 2 - MARGIN_RIGHT / 2:.1f}" y="20" text-anchor="middle" class="ptitle">{escape(title)}</text>',
    ]


def _axes_svg(
    ax: _Axes,
    xticks: list[float],
    yticks: list[float],
    x_label: str,
    y_label: str,
    x_labels: dict[float, str] | None = None,
) -> list[str]:
    out = []
    bottom = MARGIN_TOP + ax.ph
    for t in yticks:
        y = ax.y(t)
        out.append(
            f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT + ax.pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        )
        out.append(
            f'<text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{escape(fmt_tick(t))}</text>'
        )
    room = ax.pw / max(1, len(xticks)) - 6  # the width each tick label may take
    for t in xticks:
        x = ax.x(t)
        label = x_labels.get(t, fmt_tick(t)) if x_labels else fmt_tick(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 4}" class="axis"/>')
        out.append(_tick_label(x, bottom + 17, label, room))
    out.append(
        f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT + ax.pw}" y1="{bottom}" y2="{bottom}" class="axis"/>'
    )
    out.append(f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" y1="{MARGIN_TOP}" y2="{bottom}" class="axis"/>')
    out.append(
        f'<text x="{MARGIN_LEFT + ax.pw / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle" class="label">{escape(x_label)}</text>'
    )
    out.append(
        f'<text x="16" y="{MARGIN_TOP + ax.ph / 2:.1f}" text-anchor="middle" class="label" '
        f'transform="rotate(-90 16 {MARGIN_TOP + ax.ph / 2:.1f})">{escape(y_label)}</text>'
    )
    return out


def _legend(labels: Sequence[str]) -> list[str]:
    out = []
    x = WIDTH - MARGIN_RIGHT + 14
    for i, label in enumerate(labels[:14]):
        y = MARGIN_TOP + 6 + i * 18
        out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(f'<text x="{x + 18}" y="{y + 1}" class="legend">{escape(label[:24])}</text>')
    return out


def line_chart(
    series: Sequence[Series],
    title: str,
    x_label: str,
    y_label: str,
    *,
    name: str,
    log_x: bool = False,
    log_y: bool = False,
) -> str:
    """Lines with markers, one colour per series; empty series are left out."""
    series = [s for s in series if s.points]
    xs = [p[0] for s in series for p in s.points]
    ys = [p[1] for s in series for p in s.points]
    if not xs:
        return ""
    if log_x:
        xticks = log_ticks(min(xs), max(xs))
    else:
        xticks = nice_ticks(min(0.0, min(xs)), max(xs))
    if log_y:
        yticks = log_ticks(min(y for y in ys if y > 0) if any(y > 0 for y in ys) else 1.0, max(ys))
    else:
        yticks = nice_ticks(0.0, max(ys) * 1.05 if max(ys) > 0 else 1.0)
    ax = _Axes((xticks[0], xticks[-1]), (yticks[0], yticks[-1]), log_x, log_y)
    out = _frame(title, name) + _axes_svg(ax, xticks, yticks, x_label, y_label)
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{ax.x(x):.1f},{ax.y(y):.1f}" for x, y in s.points if (not log_y or y > 0))
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2" class="series"/>'
        )
        for x, y in s.points:
            if log_y and y <= 0:
                continue
            out.append(
                f'<circle cx="{ax.x(x):.1f}" cy="{ax.y(y):.1f}" r="3" fill="{colour}"><title>{escape(s.label)}: {y:.4g}</title></circle>'
            )
    out += _legend([s.label for s in series])
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    title: str,
    y_label: str,
    *,
    name: str,
    errors: Sequence[Sequence[float | None]] | None = None,
    log_y: bool = False,
) -> str:
    """Grouped bars: ``series[i][1][g]`` is the bar of series i in group g (None: no bar)."""
    values = [v for _, vals in series for v in vals if v is not None and (v > 0 or not log_y)]
    if not groups or not values:
        return ""
    top = max(
        v + ((errors[i][g] or 0) if errors else 0)
        for i, (_, vals) in enumerate(series)
        for g, v in enumerate(vals)
        if v is not None
    )
    yticks = log_ticks(min(values), top) if log_y else nice_ticks(0.0, top * 1.05 if top > 0 else 1.0)
    ax = _Axes((0.0, float(len(groups))), (yticks[0], yticks[-1]), False, log_y)
    centres = {g + 0.5: label for g, label in enumerate(groups)}
    out = _frame(title, name) + _axes_svg(ax, list(centres), yticks, "", y_label, x_labels=centres)
    slot = ax.pw / len(groups)
    width = slot * 0.8 / max(1, len(series))
    base_y = ax.y(yticks[0])
    for i, (label, vals) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        for g, v in enumerate(vals):
            if v is None or (log_y and v <= 0):
                continue
            x = MARGIN_LEFT + g * slot + slot * 0.1 + i * width
            y = ax.y(v)
            out.append(
                f'<rect x="{x:.1f}" y="{min(y, base_y):.1f}" width="{max(width - 2, 1):.1f}" height="{abs(base_y - y):.1f}" '
                f'fill="{colour}" class="bar"><title>{escape(label)} {escape(groups[g])}: {v:.4g}</title></rect>'
            )
            err = errors[i][g] if errors else None
            if err:
                cx = x + (width - 2) / 2
                lo, hi = ax.y(max(v - err, yticks[0])), ax.y(v + err)
                out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{lo:.1f}" y2="{hi:.1f}" class="err"/>')
    out += _legend([label for label, _ in series])
    out.append("</svg>")
    return "\n".join(out)


# ----- heat map (pairwise matrices) ---------------------------------------------------------------
def _heat_colour(ratio: float | None) -> str:
    """Red (0) -> yellow (0.5) -> green (>= 1) of the fleet median."""
    if ratio is None:
        return "#dddddd"
    r = max(0.0, min(1.0, ratio))
    if r < 0.5:
        red, green = 215, int(48 + (r / 0.5) * (190 - 48))
    else:
        red, green = int(215 - ((r - 0.5) / 0.5) * (215 - 40)), int(190 - ((r - 0.5) / 0.5) * (190 - 160))
    return f"#{red:02x}{green:02x}{60:02x}"


def heatmap_svg(
    hosts: Sequence[str],
    matrix_gbps: Sequence[Sequence[float | None]],
    *,
    title: str | None = None,
    cell: int = 44,
    name: str | None = None,
    reference_gbps: float | None = None,
) -> str:
    """An N x N heat map (sender rows, receiver columns), coloured by fraction of the median.

    With ``name`` the SVG is marked as a report plot (``class="plot" data-plot=NAME``); cells
    are ``rect.cell``. ``reference_gbps`` (the blame's fleet median, from the pairs among the
    better hosts) is what the colours compare with; without it, the median of all pairs, which
    a bad host drags down in a small fleet.
    """
    n = len(hosts)
    vals = [v for i, row in enumerate(matrix_gbps) for j, v in enumerate(row) if i != j and v is not None]
    med = reference_gbps if reference_gbps else (statistics.median(vals) if vals else None)
    label_w = max(40, 8 * max((len(h) for h in hosts), default=2) + 10)
    top = 30 + label_w
    title = title or "pairwise TCP bandwidth (Gbit/s), rows send to columns"
    legend = (f"{'fleet median' if reference_gbps else 'median of all pairs'} {med:.3g} Gbit/s; "
              "red = far below it, green = at or above it") if med is not None else ""  # fmt: skip
    # Wide enough for the title (13 px) and the legend (11 px) whatever the host count: two hosts
    # used to give 236 px and cut them to "rows s" and "gre" (issue 26).
    slant = (
        0.5 * 6.6 * max((len(h) for h in hosts), default=0)
    )  # the last column's label leans right (-60 deg)
    width = int(max(label_w + n * cell + 20 + slant, 7.6 * len(title) + 12, 6.6 * len(legend) + 12))
    height = top + n * cell + 40
    marker = f' class="plot" data-plot="{escape(name)}" role="img"' if name else ""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg"{marker} width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<text x="4" y="16" font-size="13">{escape(title)}</text>',
    ]
    for j, h in enumerate(hosts):
        x = label_w + j * cell + cell / 2
        out.append(
            f'<text x="{x:.0f}" y="{top - 6}" text-anchor="start" transform="rotate(-60 {x:.0f} {top - 6})">{escape(h)}</text>'
        )
    for i, h in enumerate(hosts):
        y = top + i * cell
        out.append(f'<text x="{label_w - 6}" y="{y + cell / 2 + 4:.0f}" text-anchor="end">{escape(h)}</text>')
        for j in range(n):
            out += _heat_cell(hosts, matrix_gbps, i, j, med, label_w + j * cell, y, cell)
    if legend:
        out.append(f'<text x="4" y="{height - 12}">{escape(legend)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _heat_cell(
    hosts: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
    i: int,
    j: int,
    med: float | None,
    x: int,
    y: int,
    cell: int,
) -> list[str]:
    v = matrix[i][j] if i != j else None
    fill = "#ffffff" if i == j else _heat_colour((v / med) if (v is not None and med) else None)
    tip = f"{hosts[i]} -> {hosts[j]}: {v:.3f} Gbit/s" if v is not None else f"{hosts[i]} -> {hosts[j]}"
    out = [
        f'<rect class="cell" x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}" stroke="#999999" stroke-width="0.5">'
        f"<title>{escape(tip)}</title></rect>"
    ]
    if v is not None:
        out.append(
            f'<text x="{x + cell / 2 - 1:.0f}" y="{y + cell / 2 + 4:.0f}" text-anchor="middle">{v:.3g}</text>'
        )
    return out
