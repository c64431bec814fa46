"""Stragglers from Flight Recorder timings: the rank the others keep waiting for.

In a synchronous job every rank waits inside each collective for the last one to arrive, so a
slow rank shows as the one whose ``time_created_ns`` (when it called the collective) is latest,
collective after collective. Its lateness is what the others lose each time: over a median
interval T between one collective and the next, the job runs T / (T - lateness) times slower
than it would if that rank kept up (the slowdown factor reported). Ranks' clocks are compared
directly, so ranks on different hosts need synchronised clocks (NTP/PTP: milliseconds).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fabricscope.triage.sequence import GroupView

MIN_COLLECTIVES = 20  # collectives every rank holds, with timestamps, before judging
LAST_SHARE = 0.6  # the straggler arrives last at this share of them or more
MIN_LATENESS_S = 0.005  # and by at least this much (median), and
MIN_LATENESS_SHARE = 0.2  # this share of the interval between collectives


@dataclass
class Straggler:
    rank: int
    last_share: float  # share of collectives it arrived last at
    lateness_s: float  # median arrival after the median rank
    interval_s: float  # median time between consecutive collectives
    slowdown: float
    collectives: int


def arrival_table(view: GroupView) -> tuple[list[int], dict[int, list[int]]]:
    """(sequence ids every rank holds with a timestamp, rank -> created_ns per id)."""
    per_rank = {r: {e.seq: e.created_ns for e in st.entries if e.created_ns} for r, st in view.status.items() if st.entries}
    if len(per_rank) < 3:
        return [], {}
    common = set.intersection(*(set(d) for d in per_rank.values()))
    seqs = sorted(common)
    return seqs, {r: [d[s] for s in seqs] for r, d in per_rank.items()}


def find_straggler(view: GroupView) -> Straggler | None:
    seqs, table = arrival_table(view)
    if len(seqs) < MIN_COLLECTIVES:
        return None
    ranks = sorted(table)
    last_count = dict.fromkeys(ranks, 0)
    lateness: dict[int, list[float]] = {r: [] for r in ranks}
    for i in range(len(seqs)):
        column = [table[r][i] for r in ranks]
        middle = statistics.median(column)
        latest = max(range(len(ranks)), key=column.__getitem__)
        last_count[ranks[latest]] += 1
        for r, t in zip(ranks, column, strict=True):
            lateness[r].append((t - middle) / 1e9)
    rank = max(ranks, key=lambda r: last_count[r])
    share = last_count[rank] / len(seqs)
    late = statistics.median(lateness[rank])
    gaps = [(b - a) / 1e9 for r in ranks for a, b in zip(table[r], table[r][1:], strict=False)]
    interval = statistics.median(gaps) if gaps else 0.0
    if share < LAST_SHARE or late < MIN_LATENESS_S or interval <= 0 or late < MIN_LATENESS_SHARE * interval:
        return None
    slowdown = interval / max(interval - late, interval * 0.01)
    return Straggler(rank, round(share, 3), round(late, 4), round(interval, 4), round(slowdown, 2), len(seqs))
