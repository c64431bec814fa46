"""How the ranks of one process group stand against each other, collective by collective.

Pure functions of :class:`~fabricscope.triage.model.RankDump`s: the counters (last enqueued and
completed sequence id per rank) and the first sequence id where a rank's collective differs from
the others' (op, sizes, dtype), with the job's loop period to tell a skipped call from a wrong one.
Signatures are compared as whole lists first (C speed), entry by entry only where they differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

from fabricscope.triage.model import Entry, GroupStatus, RankDump

_SIG = itemgetter(1, 2, 3, 4)  # op, input sizes, output sizes, input dtypes
MAX_PERIOD = 64  # longest training-loop period (collectives per step) searched for


@dataclass
class GroupView:
    """One process group across the ranks that dumped it."""

    name: str
    desc: str
    members: list[int]  # global ranks the group has (pg_config), or the ranks that dumped it
    status: dict[int, GroupStatus]  # rank -> its view of the group

    def enqueued(self, rank: int) -> int:
        return self.status[rank].last_enqueued or 0

    def completed(self, rank: int) -> int:
        return self.status[rank].last_completed or 0


@dataclass
class Divergence:
    """The first collective where some ranks differ from the others."""

    seq: int
    ranks: list[int]  # the minority (the culprits)
    reference: int  # a rank of the majority
    field: str  # op | sizes | dtype
    theirs: Entry
    ours: Entry
    skipped: bool  # the culprit's collective at seq is the majority's next one: it skipped seq


def groups(dumps: list[RankDump]) -> list[GroupView]:
    """Every process group seen in the dumps, with its members."""
    views: dict[str, GroupView] = {}
    for dump in dumps:
        for name, status in dump.groups.items():
            view = views.get(name)
            if view is None:
                view = views[name] = GroupView(
                    name=name, desc=status.desc, members=list(status.ranks or []), status={}
                )
            view.status[dump.rank] = status
            if not view.members and status.ranks:
                view.members = list(status.ranks)
    for view in views.values():
        if not view.members:
            view.members = sorted(view.status)
    return sorted(views.values(), key=lambda v: (v.name != "0", v.name))


def _window(entries: list[Entry], lo: int, hi: int) -> list[Entry]:
    """Entries with lo <= seq <= hi; slices directly when the ring buffer is contiguous."""
    if not entries:
        return []
    first = entries[0].seq
    if entries[-1].seq - first + 1 == len(entries):
        return entries[max(lo - first, 0) : max(hi - first + 1, 0)]
    return [e for e in entries if lo <= e.seq <= hi]


def _sigs(entries: list[Entry]) -> list[tuple]:
    return list(map(_SIG, entries))


def first_divergence(view: GroupView) -> Divergence | None:
    """The earliest sequence id where a rank's collective differs from what most ranks holding it did.

    Each rank is compared with a reference (the furthest rank) over the ids both still hold (ring
    buffers, and stale dumps, cover different windows); the majority is then taken at that id."""
    ranks = [r for r in sorted(view.status) if view.status[r].entries]
    if len(ranks) < 2:
        return None
    reference = max(ranks, key=lambda r: (view.status[r].entries[-1].seq, -r))
    ref_entries = view.status[reference].entries
    earliest: int | None = None
    for r in ranks:
        mine = view.status[r].entries
        lo, hi = max(mine[0].seq, ref_entries[0].seq), min(mine[-1].seq, ref_entries[-1].seq)
        if lo > hi:
            continue
        a, b = _window(mine, lo, hi), _window(ref_entries, lo, hi)
        if (a_s := _sigs(a)) != _sigs(b) and (i := _first_difference(a_s, _sigs(b))) is not None:
            earliest = a[i].seq if earliest is None else min(earliest, a[i].seq)
    if earliest is None:
        return None
    at = {r: e for r in ranks if (e := _at(view.status[r].entries, earliest)) is not None}
    votes: list[tuple[tuple, list[int]]] = []
    for r, e in at.items():
        for sig, members in votes:
            if sig == _SIG(e):
                members.append(r)
                break
        else:
            votes.append((_SIG(e), [r]))
    votes.sort(key=lambda v: (-len(v[1]), v[1][0]))
    if len(votes) < 2 or len(votes[0][1]) == len(votes[1][1]):
        majority = [reference] if len(votes) >= 2 else votes[0][1]
        majority_sig = _SIG(at[reference])
    else:
        majority, majority_sig = votes[0][1], votes[0][0]
    culprits = sorted(r for r, e in at.items() if _SIG(e) != majority_sig)
    if not culprits:
        return None
    ours, theirs = at[culprits[0]], at[majority[0]]
    field = "op" if ours.op != theirs.op else "dtype" if ours.dtypes != theirs.dtypes else "sizes"
    period = loop_period(view.status[majority[0]].entries, ours.seq)
    expected_next = _predicted(view.status[majority[0]].entries, ours.seq + 1, period)
    skipped = expected_next is not None and _SIG(expected_next) == _SIG(ours)
    return Divergence(
        seq=ours.seq,
        ranks=culprits,
        reference=majority[0],
        field=field,
        theirs=theirs,
        ours=ours,
        skipped=skipped,
    )


def _at(entries: list[Entry], seq: int) -> Entry | None:
    window = _window(entries, seq, seq)
    return window[0] if window else None


def _first_difference(a: list[tuple], b: list[tuple]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


def loop_period(entries: list[Entry], before: int) -> int | None:
    """The smallest P for which the collectives before ``before`` repeat every P (the training loop)."""
    sigs = _sigs([e for e in entries if e.seq < before][-4 * MAX_PERIOD :])
    for period in range(1, min(MAX_PERIOD, len(sigs) // 2) + 1):
        if all(sigs[i] == sigs[i - period] for i in range(period, len(sigs))):
            return period
    return None


def _predicted(entries: list[Entry], seq: int, period: int | None) -> Entry | None:
    """The collective the loop would issue at ``seq``: the one a period earlier."""
    if period is None:
        return None
    for e in entries:
        if e.seq == seq - period:
            return e
    return None
