"""A slow link behind a job that completes, from gloo's ring order and the ranks' arrival times.

gloo's ring collectives pass data from rank r to rank r+1, and a rank returns from one only when
its own sends have gone out: the rank whose send to its successor crossed a slow link arrives
late at the next collective. Measured in the lab (tests/data/job/lab/slowhost: h3's link at a
tenth makes ranks 1 and 2, the senders into and out of h3, late; a slow leaf uplink makes the
senders across it late). So: late ranks mark their ring flow (r -> r+1) bad, the others good,
and the matrix's tomography (:mod:`fabricscope.bench.matrix.tomography`) names the fewest
hosts, cables or switches that explain the bad flows: hosts alone without a topology, cables
and switches with one (``--topology FILE`` or ``lab:NAME``). NCCL picks its own ring order,
so NCCL jobs are not judged this way.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from fabricscope.bench.matrix.tomography import Observation, localize
from fabricscope.topology.paths import element_label, host_element
from fabricscope.triage.sequence import GroupView
from fabricscope.triage.timing import MIN_COLLECTIVES, arrival_table

Crossing = Callable[[str, str], tuple[frozenset, frozenset]]  # hosts a, b -> (must, may) elements
MIN_SPREAD_S = 0.005  # the late and the early ranks differ by at least this much, and by
MIN_SPREAD_SHARE = 0.05  # this share of the interval between collectives
LATE_SHARE = 0.2  # a rank is late above the median rank by this share of the spread, and by
MIN_LATE_S = 0.002


@dataclass
class SlowLink:
    late: list[int]
    op: str
    spread_s: float
    interval_s: float
    elements: list[str] = field(default_factory=list)  # blamed: host names, "leaf2 - spine", ...
    hosts_blamed: list[str] = field(default_factory=list)
    unexplained: int = 0


def _lateness_by_op(view: GroupView) -> tuple[str, dict[int, float], float] | None:
    """For the collective type whose arrivals spread most: median lateness per rank, and the interval."""
    seqs, table = arrival_table(view)
    if len(seqs) < MIN_COLLECTIVES or not view.status.get(min(table)):
        return None
    ref = {e.seq: e for e in view.status[min(table)].entries}
    ranks = sorted(table)
    by_op: dict[str, dict[int, list[float]]] = {}
    for i, seq in enumerate(seqs):
        column = [table[r][i] for r in ranks]
        middle = statistics.median(column)
        key = f"{ref[seq].op} {ref[seq].in_sizes}"
        for r, t in zip(ranks, column, strict=True):
            by_op.setdefault(key, {}).setdefault(r, []).append((t - middle) / 1e9)
    best = None
    for op, per_rank in by_op.items():
        if min(len(v) for v in per_rank.values()) < 5:
            continue
        medians = {r: statistics.median(v) for r, v in per_rank.items()}
        spread = max(medians.values()) - min(medians.values())
        if best is None or spread > best[2]:
            best = (op, medians, spread)
    if best is None:
        return None
    gaps = [(b - a) / 1e9 for r in ranks for a, b in zip(table[r], table[r][1:], strict=False)]
    return best[0], best[1], statistics.median(gaps) if gaps else 0.0


def topology_crossing(spec: str, hosts: list[str]) -> Crossing:
    """What a flow between two of the job's hosts crosses in a topology (``FILE`` or ``lab:NAME``),
    placed as `bench matrix --topology` places its hosts."""
    from fabricscope.bench.matrix.localize import load_document, place

    document, source = load_document(spec)
    fabric = place(hosts, document, source)
    index = {h: i for i, h in enumerate(hosts)}

    def crossing(a: str, b: str) -> tuple[frozenset, frozenset]:
        c = fabric.crossings[(index[a], index[b])]
        return c.must, c.may

    return crossing


def find_slow_link(view: GroupView, hosts: dict[int, str | None], crossing: Crossing | None = None) -> SlowLink | None:
    """``crossing(a, b)`` -> (must, may) element sets from a topology, or None for hosts only."""
    if not all(e.op.startswith("gloo:") for st in view.status.values() for e in st.entries[-8:]):
        return None
    found = _lateness_by_op(view)
    if found is None:
        return None
    op, medians, interval = found
    spread = max(medians.values()) - min(medians.values())
    if spread < MIN_SPREAD_S or interval <= 0 or spread < MIN_SPREAD_SHARE * interval:
        return None
    middle = statistics.median(medians.values())
    late = sorted(r for r, m in medians.items() if m - middle > max(LATE_SHARE * spread, MIN_LATE_S))
    ring = sorted(medians)
    if not late or len(late) == len(ring) or any(hosts.get(r) is None for r in ring):
        return None
    observations = []
    for i, r in enumerate(ring):
        a, b = hosts[r], hosts[ring[(i + 1) % len(ring)]]
        if a == b:
            continue
        if crossing is None:
            must = may = frozenset({host_element(a), host_element(b)})
        else:
            must, may = crossing(a, b)
        observations.append(Observation((i, (i + 1) % len(ring)), r in late, frozenset(must), frozenset(may)))
    where = localize(observations)
    slow = SlowLink(late, op, round(spread, 4), round(interval, 4), unexplained=len(where.unexplained))
    for blame in where.blamed:
        labels = [element_label(e) for e in blame.elements]
        slow.elements.append(labels[0] if len(labels) == 1 else "one of " + ", ".join(labels))
        slow.hosts_blamed += [e[1] for e in blame.elements if e[0] == "host" and len(blame.elements) == 1]
    return slow
