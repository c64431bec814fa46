"""The ``fabricscope.job/v1`` document: verdict, next action, what it rests on, per-rank state, timeline."""

from __future__ import annotations

import statistics
from typing import Any

from fabricscope.triage.collect import JobInputs
from fabricscope.triage.ras import ras_verdict
from fabricscope.triage.sequence import groups
from fabricscope.triage.slowlink import topology_crossing
from fabricscope.triage.verdict import (
    DIED,
    HEALTHY,
    MISMATCH,
    NETWORK_HANG,
    NEVER_ENTERED,
    SLOW_LINK,
    STALL_S,
    STOPPED,
    STRAGGLER,
    UNDETERMINED,
    Verdict,
    diagnose,
)

SCHEMA = "fabricscope.job/v1"
TIMELINE_SEQS = 48  # collectives shown before and up to the verdict's
TIMELINE_RANKS = 512


def inspector_evidence(records: list) -> list[str]:
    """NCCL Inspector: the rank with the lowest median bus bandwidth, as evidence (not a verdict of its own)."""
    by_rank: dict[int, list[float]] = {}
    for rec in records:
        if rec.busbw_gbs is not None:
            by_rank.setdefault(rec.rank, []).append(rec.busbw_gbs)
    if len(by_rank) < 2:
        return [f"Inspector: {len(records)} collective record(s)"] if records else []
    medians = {r: statistics.median(v) for r, v in by_rank.items()}
    low = min(medians, key=medians.__getitem__)
    return [
        f"Inspector: {len(records)} records from {len(by_rank)} ranks; lowest median busbw rank {low} "
        f"({medians[low]:.1f} GB/s, median of ranks {statistics.median(medians.values()):.1f} GB/s)"
    ]


def _flow_hosts(line: str) -> list[str]:
    """Hosts of "a -> b" ring flows named in an evidence line."""
    import re

    return [h for pair in re.findall(r"([\w.\-]+) -> ([\w.\-]+)", line) for h in pair]


def next_action(verdict: Verdict) -> dict[str, Any]:
    """What to do next, by class: drain, retest the link, or look at the application."""
    hosts = sorted({s.host for s in verdict.culprits if s.host})
    ranks = [s.rank for s in verdict.culprits]
    if verdict.kind == DIED and hosts:
        return {
            "kind": "drain",
            "hosts": hosts,
            "text": f"drain {', '.join(hosts)} and requeue the job from its last checkpoint; check the node "
            "(fabricscope doctor, kernel log) before resuming it",
            "commands": [f"fabricscope job diagnose DIR... --drain {h} --apply" for h in hosts],
        }
    if verdict.kind == STOPPED and hosts:
        return {
            "kind": "inspect_host",
            "hosts": hosts,
            "text": f"look at the stopped process on {', '.join(hosts)}: its state (ps -o stat: T stopped, D in I/O), "
            "a stack dump (py-spy dump --pid), the GPU (nvidia-smi); drain the node if it does not answer",
            "commands": [f"fabricscope job diagnose DIR... --drain {h}" for h in hosts],
        }
    flows = sorted({h for e in verdict.evidence for h in _flow_hosts(e)})
    slow_flows = verdict.kind == UNDETERMINED and bool(flows)  # slow ring flows no single host explains
    if verdict.kind in (NETWORK_HANG, STRAGGLER, SLOW_LINK) or slow_flows:
        hosts = flows if verdict.kind in (SLOW_LINK, UNDETERMINED) and flows else hosts
        peers = sorted(set(hosts))
        return {
            "kind": "retest_link",
            "hosts": peers,
            "elements": verdict.elements,
            "text": "retest "
            + (", ".join(verdict.elements) if verdict.elements else "the links between " + ", ".join(peers))
            + " with bench matrix limited to the hosts involved (--topology to place the cables); drain what it confirms",
            "commands": [
                f"srun --nodelist={','.join(peers)} --ntasks-per-node=1 fabricscope bench matrix --json"
            ]
            if peers
            else [],
        }
    if verdict.kind in (NEVER_ENTERED, MISMATCH):
        where = ", ".join(
            f"rank {r}" + (f" on {h}" if h else "")
            for r, h in ((s.rank, s.host) for s in verdict.culprits[:8])
        )
        return {
            "kind": "application",
            "hosts": hosts,
            "text": f"look at the application on {where or 'every rank'}: "
            + (
                "the call sequence differs (a code path taken on some ranks only)"
                if verdict.kind == MISMATCH
                else "a stack dump of its process (py-spy dump --pid), its data loader, an exception in its log"
            ),
            "commands": [],
            "ranks": ranks,
        }
    return {
        "kind": "none",
        "hosts": [],
        "text": "nothing to do"
        if verdict.kind == HEALTHY
        else "collect more evidence (every rank's dump, the job's stderr, two RAS polls) and diagnose again",
        "commands": [],
    }


def _rank_rows(inputs: JobInputs, group: str | None, written_max: float | None) -> list[dict[str, Any]]:
    rows = []
    for d in sorted(inputs.dumps, key=lambda d: d.rank):
        g = d.groups.get(group or "") or next(iter(d.groups.values()), None)
        rows.append(
            {
                "rank": d.rank,
                "host": d.host or inputs.logs.rank_hosts.get(d.rank),
                "format": d.fmt,
                "dump": d.path,
                "last_enqueued": g.last_enqueued if g else None,
                "last_started": g.last_started if g else None,
                "last_completed": g.last_completed if g else None,
                "dump_age_s": round(written_max - d.mtime, 3) if written_max and d.mtime else None,
                "notes": d.notes,
            }
        )
    return rows


def _timeline(inputs: JobInputs, verdict: Verdict) -> dict[str, Any] | None:
    """Per rank, the state of the last collectives up to the verdict's: c (completed), o (open), . (never entered)."""
    views = [v for v in groups(inputs.dumps) if v.name == verdict.group] or groups(inputs.dumps)
    if not views:
        return None
    view = views[0]
    top = max(view.enqueued(r) for r in view.status)
    lo = max(1, top - TIMELINE_SEQS + 1)
    rows = {}
    for rank in sorted(view.status)[:TIMELINE_RANKS]:
        enq, done = view.enqueued(rank), view.completed(rank)
        rows[str(rank)] = "".join("c" if s <= done else "o" if s <= enq else "." for s in range(lo, top + 1))
    return {
        "group": view.name,
        "first": lo,
        "last": top,
        "ranks": rows,
        "culprits": [s.rank for s in verdict.culprits],
        "seq": verdict.seq,
    }


def build(inputs: JobInputs, *, stall_s: float = STALL_S, topology: str | None = None) -> dict[str, Any]:
    crossing = None
    if topology is not None and inputs.dumps:
        crossing = topology_crossing(topology, sorted({d.host for d in inputs.dumps if d.host}))
    verdict = (
        diagnose(inputs.dumps, inputs.logs, stall_s=stall_s, crossing=crossing)
        if inputs.dumps
        else Verdict(UNDETERMINED, "no usable Flight Recorder dump")
    )
    ras_suspects, ras_evidence = ras_verdict(inputs.ras)
    verdict.evidence += ras_evidence
    if verdict.kind == HEALTHY and ras_suspects:
        verdict.evidence.append(
            f"RAS names rank {', '.join(map(str, ras_suspects))} while the dumps show no stall"
        )
    logs = inputs.logs
    verdict.evidence += [
        f"log: rank {r}: PyTorch's watchdog timed out in {what}"
        for r, what in sorted(logs.timeouts.items())[:8]
    ]
    verdict.evidence += [
        f"log: a peer at {addr} closed its connections ({n} line(s))"
        for addr, n in sorted(logs.lost_peers.items())[:8]
    ]
    verdict.evidence += [f"log: {line}" for line in logs.errors[:8]]
    verdict.evidence += inspector_evidence(inputs.inspector)
    written = [d.mtime for d in inputs.dumps if d.mtime]
    members = sorted({m for d in inputs.dumps for g in d.groups.values() for m in (g.ranks or [])})
    have = {d.rank for d in inputs.dumps}
    return {
        "schema": SCHEMA,
        "verdict": {
            "class": verdict.kind,
            "headline": verdict.headline,
            "group": verdict.group,
            "collective": verdict.seq,
            "op": verdict.op,
            "culprits": [{"rank": s.rank, "host": s.host, "why": s.why} for s in verdict.culprits],
            "waiting_ranks": verdict.waiting,
            "evidence": verdict.evidence,
            "slowdown": verdict.slowdown,
            "elements": verdict.elements,
        },
        "next_action": next_action(verdict),
        "rests_on": {
            "ranks": sorted(have),
            "missing_ranks": sorted(set(members) - have),
            "skipped": [{"path": s.path, "reason": s.reason} for s in inputs.skipped],
            "ras_polls": len(inputs.ras),
            "logs": inputs.logs.files[:64],
            "hidden_files": inputs.hidden,
            "dumps_read_whole": inputs.entries_read,
            "stall_after_s": stall_s,
        },
        "ranks": _rank_rows(inputs, verdict.group, max(written) if written else None),
        "timeline": _timeline(inputs, verdict) if inputs.dumps else None,
    }


def exit_code(doc: dict[str, Any]) -> int:
    """0 healthy, 1 a culprit (or a stall without one), 2 nothing usable."""
    if not doc["rests_on"]["ranks"] and not doc["rests_on"]["ras_polls"]:
        return 2
    return 0 if doc["verdict"]["class"] == HEALTHY else 1
