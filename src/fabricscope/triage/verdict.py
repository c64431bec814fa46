"""The verdict: one class, its culprits and evidence, from how the ranks' sequence ids differ.

Order matters: a collective mismatch (or a skipped call) explains the crashes and waits that
follow it, so it is looked for first; then ranks behind the others (never entered collective K,
or dead when a log or RAS says so); then a collective every rank entered and some never left (the
network, or a peer stuck inside it); then timings (a straggler). Pure functions of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricscope.triage.joblog import LogEvidence
from fabricscope.triage.model import Entry, RankDump
from fabricscope.triage.sequence import Divergence, GroupView, first_divergence, groups
from fabricscope.triage.slowlink import Crossing, SlowLink, find_slow_link
from fabricscope.triage.timing import Lateness, Straggler, find_straggler, lateness

MAX_NAMED = 32  # ranks listed in a verdict's lists (the count is always given)

HEALTHY, NEVER_ENTERED, STOPPED, DIED, MISMATCH, NETWORK_HANG, STRAGGLER, SLOW_LINK, UNDETERMINED = (
    "healthy",
    "never_entered",
    "stopped",
    "died",
    "mismatch",
    "network_hang",
    "straggler",
    "slow_link",
    "undetermined",
)


@dataclass
class Suspect:
    rank: int
    host: str | None
    why: str


@dataclass
class Verdict:
    kind: str
    headline: str
    group: str | None = None
    seq: int | None = None
    op: str | None = None
    culprits: list[Suspect] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    slowdown: float | None = None
    elements: list[str] = field(default_factory=list)  # links/switches named through a topology

    @property
    def found(self) -> bool:
        return self.kind not in (HEALTHY, UNDETERMINED)


def describe(e: Entry) -> str:
    sizes = e.in_sizes if e.in_sizes == e.out_sizes else f"{e.in_sizes}->{e.out_sizes}"
    dtype = ",".join(map(str, e.dtypes or [])) or "?"
    return f"{e.op} {sizes} {dtype}"


def ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:MAX_NAMED]))
    return shown + (f" (+{len(ranks) - MAX_NAMED} more)" if len(ranks) > MAX_NAMED else "")


def _mismatch(view: GroupView, div: Divergence, hosts: dict[int, str | None]) -> Verdict:
    pg = f"process group {view.name}" + (f" ({view.desc})" if view.desc else "")
    if div.skipped:
        why = (
            f"skipped collective {div.seq} ({describe(div.theirs)}): its collective {div.seq} is "
            f"{describe(div.ours)}, the call the others' loop makes next"
        )
        return Verdict(
            NEVER_ENTERED,
            f"rank {ranks_text(div.ranks)} never entered collective {div.seq} of {pg}: "
            f"the application skipped the call ({describe(div.theirs)})",
            view.name,
            div.seq,
            div.theirs.op,
            [Suspect(r, hosts.get(r), why) for r in div.ranks],
            waiting=[r for r in view.status if r not in div.ranks][:MAX_NAMED],
            evidence=[
                f"rank {div.reference} and the others: collective {div.seq} = {describe(div.theirs)}",
                f"rank {div.ranks[0]}: collective {div.seq} = {describe(div.ours)}",
            ],
        )
    why = f"collective {div.seq}: {describe(div.ours)} where the others have {describe(div.theirs)}"
    return Verdict(
        MISMATCH,
        f"collective mismatch at collective {div.seq} of {pg}: rank {ranks_text(div.ranks)} "
        f"differs in {div.field} (a code bug, not the network)",
        view.name,
        div.seq,
        div.theirs.op,
        [Suspect(r, hosts.get(r), why) for r in div.ranks],
        evidence=[
            f"rank {div.reference} (with the majority): {describe(div.theirs)}",
            f"rank {div.ranks[0]}: {describe(div.ours)}",
        ],
    )


def _logged_mismatch(view: GroupView, logs: LogEvidence) -> Verdict:
    """gloo said a peer's data did not fit this rank's call, and no dump holds the divergent call.
    The ranks that said so are receivers, not the culprit (the sender may be any peer in gloo's
    algorithm): none is named, and none of the ranks it ended (SIGABRT) is called dead."""
    top = max(view.enqueued(r) for r in view.status)
    return Verdict(
        MISMATCH,
        f"collective mismatch near collective {top} of process group {view.name}: gloo received data of "
        "another size than the call expects (a code bug, not the network); no dump holds the divergent "
        "call, so the rank that diverged is not named: run with TORCH_DISTRIBUTED_DEBUG=DETAIL",
        view.name,
        top,
        evidence=list(logs.size_mismatches[:MAX_NAMED]),
    )


def _entry(view: GroupView, rank: int, seq: int) -> Entry | None:
    for e in reversed(view.status[rank].entries):
        if e.seq == seq:
            return e
        if e.seq < seq:
            break
    return None


STALL_S = 10.0  # a collective open this long at dump time is a stall, not a collective in flight
STALE_S = 3.0  # a dump this much older than the newest one stopped being refreshed


@dataclass
class Clocks:
    """When each dump was written (file mtime) and how long the newest open collective had been open."""

    written: dict[int, float]

    def stale(self, rank: int) -> float | None:
        """Seconds this rank's dump is older than the newest (None when it is not stale)."""
        if rank not in self.written or len(self.written) < 2:
            return None
        lag = max(self.written.values()) - self.written[rank]
        return lag if lag > STALE_S else None


def stall_age(view: GroupView, clocks: Clocks) -> float | None:
    """The longest any rank had been inside its newest collective when its dump was written."""
    ages = []
    for rank, status in view.status.items():
        if (status.last_completed or 0) >= (status.last_enqueued or 0) or not status.entries:
            continue
        open_entry = _entry(view, rank, status.last_enqueued or 0)
        if open_entry is not None and open_entry.created_ns and rank in clocks.written:
            ages.append(clocks.written[rank] - open_entry.created_ns / 1e9)
    return max(ages) if ages else None


def _why_behind(view: GroupView, rank: int, top: int, clocks: Clocks) -> str:
    why = f"last entered collective {view.enqueued(rank)}; the others are in {top}"
    if (lag := clocks.stale(rank)) is not None:
        why += f"; its dump stopped updating {lag:.1f} s before the others' (the process stopped)"
    return why


def _behind(
    view: GroupView, hosts: dict[int, str | None], clocks: Clocks, missing: list[int]
) -> Verdict | None:
    """Ranks that never entered the newest collective another rank entered (or left no dump)."""
    top = max(view.enqueued(r) for r in view.status)
    behind = sorted(r for r in view.status if view.enqueued(r) < top)
    if not behind and not missing:
        return None
    waiting = sorted(r for r in view.status if view.enqueued(r) == top and view.completed(r) < top)
    stale = [r for r in behind if clocks.stale(r) is not None]
    lowest = min((view.enqueued(r) for r in behind), default=top)
    culprit_ranks = stale or [r for r in behind if view.enqueued(r) == lowest]
    entry = next((e for r in waiting if (e := _entry(view, r, top)) is not None), None)
    what = describe(entry) if entry else "?"
    suspects = [Suspect(r, hosts.get(r), _why_behind(view, r, top, clocks)) for r in culprit_ranks]
    if not suspects:
        suspects = [Suspect(r, hosts.get(r), "left no usable dump; the others wait") for r in missing]
    names = ranks_text([s.rank for s in suspects])
    evidence = [
        f"last enqueued collective per rank: {top} on {len(view.status) - len(behind)} rank(s), "
        + ", ".join(f"{view.enqueued(r)} on rank {r}" for r in behind[:MAX_NAMED])
    ]
    if missing:
        evidence.append(f"no usable dump from rank {ranks_text(missing)}")
    if stale:  # its dump stopped updating: the process stopped, it did not just fall behind
        kind = STOPPED
        headline = (
            f"rank {names} stopped before collective {top} ({what}): its dump stopped updating; "
            f"{len(waiting)} rank(s) wait in it"
        )
    else:
        kind = NEVER_ENTERED
        headline = f"rank {names} never entered collective {top} ({what}); {len(waiting)} rank(s) wait in it"
    return Verdict(
        kind,
        headline,
        view.name,
        top,
        entry.op if entry else None,
        suspects,
        waiting[:MAX_NAMED],
        evidence,
    )


def _died(view: GroupView, dead: dict[int, str], hosts: dict[int, str | None]) -> Verdict:
    top = max(view.enqueued(r) for r in view.status)
    waiting = sorted(r for r in view.status if r not in dead and view.completed(r) < top)
    entry = next((e for r in waiting if (e := _entry(view, r, top)) is not None), None)
    suspects = [Suspect(r, hosts.get(r), why) for r, why in sorted(dead.items())]
    where = f"collective {top} ({describe(entry)})" if entry else f"collective {top}"
    return Verdict(
        DIED,
        f"rank {ranks_text(sorted(dead))} died; {len(waiting)} rank(s) were left waiting in {where}",
        view.name,
        top,
        entry.op if entry else None,
        suspects,
        waiting[:MAX_NAMED],
        [f"rank {r}: {why}" for r, why in list(sorted(dead.items()))[:MAX_NAMED]],
    )


def _death(rank: int, host: str | None, logs: LogEvidence) -> str | None:
    if rank in logs.dead_ranks:
        return logs.dead_ranks[rank]
    if host is not None and host in logs.dead_hosts:
        return f"{host}: {logs.dead_hosts[host]}"
    return None


def _stuck_inside(view: GroupView, hosts: dict[int, str | None], clocks: Clocks) -> Verdict | None:
    """Every rank entered the newest collective; some (or all) never completed it."""
    top = max(view.enqueued(r) for r in view.status)
    open_ranks = sorted(r for r in view.status if view.completed(r) < top)
    if not open_ranks:
        return None
    entry = next((e for r in open_ranks if (e := _entry(view, r, top)) is not None), None)
    what = describe(entry) if entry else "?"
    done = sorted(set(view.status) - set(open_ranks))
    stale = [r for r in open_ranks if clocks.stale(r) is not None]
    evidence = [
        f"last enqueued {top} on all {len(view.status)} rank(s); last completed below {top} on {len(open_ranks)}"
    ]
    if stale:
        suspects = [
            Suspect(
                r,
                hosts.get(r),
                f"inside collective {top}; its dump stopped updating {clocks.stale(r):.1f} s "
                "before the others' (the process stopped or lost its peers)",
            )
            for r in stale
        ]
        headline = (
            f"rank {ranks_text(stale)} stopped inside collective {top} ({what}); the others wait for it"
        )
        return Verdict(
            STOPPED,
            headline,
            view.name,
            top,
            entry.op if entry else None,
            suspects,
            waiting=[r for r in open_ranks if r not in stale][:MAX_NAMED],
            evidence=evidence,
        )
    elif done:
        suspects = [
            Suspect(
                r, hosts.get(r), f"entered collective {top} and never completed it; {len(done)} rank(s) did"
            )
            for r in open_ranks
        ]
        headline = f"network hang: every rank entered collective {top} ({what}); rank {ranks_text(open_ranks)} never completed it"
    else:
        suspects = []
        headline = (
            f"every rank entered collective {top} ({what}) and none completed it: the collective hangs in the "
            "network or inside a peer; the dumps alone cannot say which"
        )
    return Verdict(
        NETWORK_HANG, headline, view.name, top, entry.op if entry else None, suspects, evidence=evidence
    )


def _straggler(view: GroupView, slow: Straggler, hosts: dict[int, str | None]) -> Verdict:
    why = (
        f"arrives alone late at {slow.op}: a median {slow.lateness_s * 1e3:.1f} ms after the median rank over "
        f"{slow.collectives} of them (one every {slow.interval_s * 1e3:.1f} ms)"
    )
    return Verdict(
        STRAGGLER,
        f"straggler: rank {slow.rank} keeps the others waiting; the job runs {slow.slowdown:.2f}x slower "
        "than it would if it kept up",
        view.name,
        None,
        None,
        [Suspect(slow.rank, hosts.get(slow.rank), why)],
        evidence=[why],
        slowdown=slow.slowdown,
    )


def _slow_link(view: GroupView, link: SlowLink, hosts: dict[int, str | None]) -> Verdict:
    ring = sorted(view.status)
    flows = [f"{hosts.get(r)} -> {hosts.get(ring[(ring.index(r) + 1) % len(ring)])}" for r in link.late]
    evidence = [
        f"ranks {', '.join(map(str, link.late))} arrive late at {link.op} (spread {link.spread_s * 1e3:.1f} ms, "
        f"collectives every {link.interval_s * 1e3:.1f} ms): their ring sends {', '.join(flows)} are slow"
    ]
    by_host = {h: r for r, h in hosts.items() if h}
    suspects = [
        Suspect(by_host[h], h, f"its link explains the slow ring flows {', '.join(flows)}")
        for h in link.hosts_blamed
        if h in by_host
    ]
    if not link.elements:
        # nothing named explains nothing: "slow link" would send the operator to no link at all. The
        # late flows are real (they passed the sign and noise tests), so say what is known, undetermined.
        return Verdict(
            UNDETERMINED,
            f"slow ring flows {', '.join(flows)}: ranks {', '.join(map(str, link.late))} arrive late consistently, "
            "but no single host explains the flows; give --topology to name the cable or switch",
            view.name,
            evidence=evidence,
        )
    headline = (
        f"slow link: {', '.join(link.elements)} (every late ring flow crosses it, no on-time flow clears it)"
    )
    return Verdict(
        SLOW_LINK, headline, view.name, None, None, suspects, evidence=evidence, elements=link.elements
    )


def diagnose(
    dumps: list[RankDump], logs: LogEvidence, stall_s: float = STALL_S, crossing: Crossing | None = None
) -> Verdict:
    """The verdict over every process group; the first group with a fault decides."""
    hosts: dict[int, str | None] = {**logs.rank_hosts, **{d.rank: d.host for d in dumps if d.host}}
    clocks = Clocks({d.rank: d.mtime for d in dumps if d.mtime is not None})
    views = groups(dumps)
    if not views:
        return Verdict(UNDETERMINED, "no Flight Recorder dump with a process group")
    have = {d.rank for d in dumps}
    for view in views:
        if (div := first_divergence(view)) is not None:
            return _mismatch(view, div, hosts)
    if logs.size_mismatches:  # the dumps missed the divergent call (gloo ends a rank before it dumps)
        return _logged_mismatch(views[0], logs)
    for view in views:
        missing = sorted(set(view.members) - have)
        dead = {
            r: why for r in sorted(set(view.status) | set(missing)) if (why := _death(r, hosts.get(r), logs))
        }
        if dead:
            return _died(view, dead, hosts)
        age = stall_age(view, clocks)
        if age is None or age < stall_s:
            continue  # in flight: collectives open for less than stall_s, or none open
        verdict = _behind(view, hosts, clocks, missing) or _stuck_inside(view, hosts, clocks)
        if verdict is not None:
            verdict.evidence.append(f"the waiting ranks had been in it {age:.1f} s when they dumped")
            return verdict
    unexplained: list[str] = []  # consistent lateness that neither a straggler nor a link explains
    for view in views:
        if (late := lateness(view)) is None:
            continue
        if (slow := find_straggler(late)) is not None:
            return _straggler(view, slow, hosts)
        if (link := find_slow_link(view, late, hosts, crossing)) is not None:
            return _slow_link(view, link, hosts)
        unexplained.append(_late_unexplained(late))
    first = views[0]
    top = max(first.enqueued(r) for r in first.status)
    if logs.failures or logs.lost_peers:
        return Verdict(
            UNDETERMINED,
            f"the dumps show no stall (every rank reached collective {top}), but the logs show the job "
            f"failing ({logs.failures} error line(s), {len(logs.lost_peers)} lost peer(s)): an error outside the "
            "collectives; read the first traceback",
            first.name,
            top,
        )
    return Verdict(
        HEALTHY,
        f"no stall: every rank reached collective {top} of process group {first.name}, "
        f"none has been inside a collective for {stall_s:g} s",
        first.name,
        top,
        evidence=unexplained,
    )


def _late_unexplained(late: Lateness) -> str:
    """What the healthy verdict still says of ranks late together that name no culprit."""
    text = (
        f"rank {ranks_text(late.late)} arrive(s) late consistently at {late.op} (spread "
        f"{late.spread_s * 1e3:.1f} ms, collectives every {late.interval_s * 1e3:.1f} ms), which names "
        "neither a straggler (one rank late alone) nor a slow link"
    )
    if not late.follows_most_data():
        text += (
            f": the collective before it moves {late.data_before.get(late.op, 0):.0f} B, less than "
            f"{max(late.data_before.values()):.0f} B before another type that shows no such lateness "
            "(a link would delay that one most): CPU contention or slow compute on those ranks"
        )
    return text
