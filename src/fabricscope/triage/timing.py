"""Who the others wait for: per collective type, each rank's arrival (``time_created_ns``) against
the median rank's, and the ranks that are consistently late.

In a synchronous job every rank waits inside a collective for the last to arrive. The collective
type whose arrivals spread most tells most: after a compute phase one slow rank (a straggler)
arrives late alone; after a gloo ring collective the ranks whose ring sends crossed a slow link
arrive late, two or more of them (a ring crosses any link both ways: :mod:`.slowlink`). Ranks'
clocks are compared directly, so ranks on different hosts need synchronised clocks (NTP/PTP).

Scheduler noise (a loaded CPU, a noisy neighbour) delays random ranks at random collectives and
shifts every rank a little at every collective type (a rank that pickles its dumps, one that
shares a core). Neither is a fault, so a late rank must pass three tests: it arrives after the
on-time ranks in a clear majority of that type's collectives (a one-sided sign test, which random
delays do not pass), by a margin (:data:`MIN_LATE_S`, a share of the lead), and the type's spread
stands :data:`NOISE_FACTOR` times above the spread the job shows at its other collective types
(rank offsets that are there everywhere are the host's, not this collective's).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from fabricscope.triage.model import Entry
from fabricscope.triage.sequence import GroupView

MIN_COLLECTIVES = 20  # collectives every rank holds, with timestamps, before judging
MIN_PER_OP = 5
MIN_SPREAD_S = 0.005  # the latest and the earliest rank differ by at least this much, and by
MIN_SPREAD_SHARE = 0.05  # this share of the interval between collectives of that type
LATE_SHARE = (
    0.2  # a rank is late when above the median rank by a fifth of the latest rank's lead or more, and by
)
MIN_LATE_S = 0.002
SIGN_ALPHA = 0.01  # a late rank arrives after the on-time ranks more often than chance allows, at this level
NOISE_FACTOR = 3.0  # the judged type's spread over the largest spread among the job's other types
ALONE_SHARE = 0.25  # a straggler: the other ranks arrive within this share of its lateness of each other


@dataclass
class Lateness:
    op: str  # the collective type judged: "gloo:all_reduce [[1]]"
    medians: dict[int, float]  # rank -> median arrival after the median rank, seconds
    interval_s: float  # median time between two collectives of this type on a rank
    late: list[int]  # the consistently late ranks
    count: int  # collectives of this type judged
    # judged type -> median bytes of the collective before each of its calls (:func:`data_before`)
    data_before: dict[str, float] = field(default_factory=dict)

    def follows_most_data(self) -> bool:
        """No other judged type follows a collective that moves more data than this type's does.
        A slow link delays a rank by what it sent just before, so lateness that shows after less
        data than another type follows, and not after that type, is not a link's (a rank waking
        late from compute, or CPU contention, is)."""
        mine = self.data_before.get(self.op)
        return mine is None or mine >= max(self.data_before.values())

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


def sign_p(above: int, count: int) -> float:
    """One-sided sign test: the chance of arriving after the on-time ranks ``above`` times or more in
    ``count`` collectives if a rank were as often before them as after (the binomial tail at 1/2)."""
    return sum(math.comb(count, k) for k in range(above, count + 1)) / float(2**count)


def op_key(e: Entry) -> str:
    """A collective type: its operation and input shapes ("gloo:all_reduce [[1]]")."""
    return f"{e.op} {e.in_sizes}"


def arrivals_by_op(view: GroupView) -> dict[str, dict[int, list[tuple[float, int]]]]:
    """collective type -> rank -> (arrival after the median rank in s, created_ns), per collective."""
    seqs, table = arrival_table(view)
    if len(seqs) < MIN_COLLECTIVES:
        return {}
    ref = {e.seq: e for e in view.status[min(table)].entries}
    ranks = sorted(table)
    by_op: dict[str, dict[int, list[tuple[float, int]]]] = {}
    for i, seq in enumerate(seqs):
        column = [table[r][i] for r in ranks]
        middle = statistics.median(column)
        per_rank = by_op.setdefault(op_key(ref[seq]), {})
        for r, t in zip(ranks, column, strict=True):
            per_rank.setdefault(r, []).append(((t - middle) / 1e9, t))
    return {op: per_rank for op, per_rank in by_op.items() if min(map(len, per_rank.values())) >= MIN_PER_OP}


def data_before(view: GroupView, ops: list[str]) -> dict[str, float]:
    """Collective type -> the median bytes of the collective the group ran just before each of
    its calls (on the lowest rank that holds entries, as :func:`arrivals_by_op` reads). A rank
    returns from a ring collective once its sends are out, so the data it moved in the previous
    collective is what a slow link makes it late by."""
    entries = next((st.entries for _, st in sorted(view.status.items()) if st.entries), [])
    by_seq = {e.seq: e for e in entries}
    before: dict[str, list[int]] = {}
    for e in entries:
        if (previous := by_seq.get(e.seq - 1)) is not None:
            before.setdefault(op_key(e), []).append(previous.in_bytes)
    return {op: float(statistics.median(before[op])) for op in ops if op in before}


def judge(op: str, per_rank: dict[int, list[tuple[float, int]]]) -> Lateness:
    """One collective type: medians, interval, and the late ranks: above the median rank by the
    margin, and after the on-time ranks' median arrival in a clear majority of the collectives."""
    count = min(len(v) for v in per_rank.values())
    gaps = [(b[1] - a[1]) / 1e9 for v in per_rank.values() for a, b in zip(v, v[1:], strict=False)]
    medians = {r: statistics.median(x for x, _ in v) for r, v in per_rank.items()}
    found = Lateness(op, medians, statistics.median(gaps), [], count)
    middle = statistics.median(medians.values())
    floor = max(LATE_SHARE * (max(medians.values()) - middle), MIN_LATE_S)
    behind = [r for r, m in medians.items() if m - middle >= floor]
    on_time = [r for r in medians if r not in behind]
    if not on_time:
        return found
    # per collective, the on-time ranks' median arrival: what a late rank is compared with
    ref = [statistics.median(per_rank[r][i][0] for r in on_time) for i in range(count)]
    found.late = sorted(
        r
        for r in behind
        if sign_p(sum(1 for i in range(count) if per_rank[r][i][0] > ref[i]), count) <= SIGN_ALPHA
    )
    return found


def lateness(view: GroupView) -> Lateness | None:
    """The collective type whose consistently late ranks spread most (None: nothing to judge, or
    nothing above the noise)."""
    judged = [judge(op, per_rank) for op, per_rank in arrivals_by_op(view).items()]
    candidates = [
        j
        for j in judged
        if j.interval_s > 0
        and j.spread_s >= max(MIN_SPREAD_S, MIN_SPREAD_SHARE * j.interval_s)
        and 0 < len(j.late) < len(j.medians)
    ]
    if not candidates:
        return None
    best = max(candidates, key=lambda j: j.spread_s)
    baseline = max((j.spread_s for j in judged if j is not best), default=0.0)
    if best.spread_s < NOISE_FACTOR * baseline:
        return None
    best.data_before = data_before(view, [j.op for j in judged])
    return best


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
