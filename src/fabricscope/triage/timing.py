"""Who the others wait for: per collective type, each rank's arrival (``time_created_ns``) against
the median rank's, and the ranks that are consistently late.

In a synchronous job every rank waits inside a collective for the last to arrive. The collective
type whose arrivals spread most tells most: after a compute phase one slow rank (a straggler)
arrives late alone; after a gloo ring collective the ranks whose ring sends crossed a slow link
arrive late, two or more of them (a ring crosses any link both ways: :mod:`.slowlink`). Ranks'
clocks are compared directly, so ranks on different hosts need synchronised clocks (NTP/PTP).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fabricscope.triage.sequence import GroupView

MIN_COLLECTIVES = 20  # collectives every rank holds, with timestamps, before judging
MIN_PER_OP = 5
MIN_SPREAD_S = 0.005  # the latest and the earliest rank differ by at least this much, and by
MIN_SPREAD_SHARE = 0.05  # this share of the interval between collectives of that type
LATE_SHARE = (
    0.2  # a rank is late when above the median rank by a fifth of the latest rank's lead or more, and by
)
MIN_LATE_S = 0.002
ALONE_SHARE = 0.25  # a straggler: the other ranks arrive within this share of its lateness of each other


@dataclass
class Lateness:
    op: str  # the collective type judged: "gloo:all_reduce [[1]]"
    medians: dict[int, float]  # rank -> median arrival after the median rank, seconds
    interval_s: float  # median time between two collectives of this type on a rank
    late: list[int]  # the consistently late ranks
    count: int  # collectives of this type judged

    @property
    def spread_s(self) -> float:
        return max(self.medians.values()) - min(self.medians.values())


@dataclass
class Straggler:
    rank: int
    op: str
    lateness_s: float  # median arrival after the median rank
    interval_s: float
    slowdown: float  # T / (T - lateness): how much faster the job would run if it kept up
    collectives: int


def arrival_table(view: GroupView) -> tuple[list[int], dict[int, list[int]]]:
    """(sequence ids every rank holds with a timestamp, rank -> created_ns per id)."""
    per_rank = {
        r: {e.seq: e.created_ns for e in st.entries if e.created_ns}
        for r, st in view.status.items()
        if st.entries
    }
    if len(per_rank) < 3:
        return [], {}
    seqs = sorted(set.intersection(*(set(d) for d in per_rank.values())))
    return seqs, {r: [d[s] for s in seqs] for r, d in per_rank.items()}


def lateness(view: GroupView) -> Lateness | None:
    """The collective type whose arrivals spread most, and its late ranks (None: nothing to judge)."""
    seqs, table = arrival_table(view)
    if len(seqs) < MIN_COLLECTIVES:
        return None
    ref = {e.seq: e for e in view.status[min(table)].entries}
    ranks = sorted(table)
    by_op: dict[str, dict[int, list[float]]] = {}
    times: dict[str, dict[int, list[int]]] = {}
    for i, seq in enumerate(seqs):
        column = [table[r][i] for r in ranks]
        middle = statistics.median(column)
        key = f"{ref[seq].op} {ref[seq].in_sizes}"
        for r, t in zip(ranks, column, strict=True):
            by_op.setdefault(key, {}).setdefault(r, []).append((t - middle) / 1e9)
            times.setdefault(key, {}).setdefault(r, []).append(t)
    best: Lateness | None = None
    for op, per_rank in by_op.items():
        count = min(len(v) for v in per_rank.values())
        if count < MIN_PER_OP:
            continue
        gaps = [(b - a) / 1e9 for ts in times[op].values() for a, b in zip(ts, ts[1:], strict=False)]
        found = Lateness(
            op, {r: statistics.median(v) for r, v in per_rank.items()}, statistics.median(gaps), [], count
        )
        if best is None or found.spread_s > best.spread_s:
            best = found
    if (
        best is None
        or best.interval_s <= 0
        or best.spread_s < max(MIN_SPREAD_S, MIN_SPREAD_SHARE * best.interval_s)
    ):
        return None
    middle = statistics.median(best.medians.values())
    lead = max(best.medians.values()) - middle
    best.late = sorted(r for r, m in best.medians.items() if m - middle >= max(LATE_SHARE * lead, MIN_LATE_S))
    return best if 0 < len(best.late) < len(best.medians) else None


def find_straggler(late: Lateness) -> Straggler | None:
    """One rank late alone, the others together: they wait for it at every collective of that type.
    (A slow link makes the ranks spread: early receivers, late senders; see :mod:`.slowlink`.)"""
    if len(late.late) != 1:
        return None
    rank = late.late[0]
    others = [m for r, m in late.medians.items() if r != rank]
    behind = late.medians[rank] - statistics.median(others)
    if max(others) - min(others) > ALONE_SHARE * behind:
        return None
    slowdown = late.interval_s / max(late.interval_s - behind, late.interval_s * 0.01)
    return Straggler(
        rank, late.op, round(behind, 4), round(late.interval_s, 4), round(slowdown, 2), late.count
    )
