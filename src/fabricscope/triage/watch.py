"""`job watch`: beside a running job, poll its dump directories (and NCCL RAS), export progress
metrics, and write the diagnosis when the job stalls.

A stall (a rank stopped, died, never entered a collective, a mismatch, a hang) is written at the
first poll that sees it: the job makes no progress, waiting helps no one. A slow job's verdict
(straggler, slow link, slow flows no host explains) is written only once it has held for
:data:`PERSIST_POLLS` polls in a row with the same culprits: the job still runs, and a verdict
that one poll's noise produced must not page anyone.

Never a burden on the job: a poll costs what reading the dumps' headers costs (the directories
are re-read only when a file changed), the next poll waits at least :data:`DUTY_FACTOR` times as
long as the last one took (at most ~10% of one core), RAS is asked no more often than every
:data:`~fabricscope.triage.ras.MIN_POLL_S` seconds, and memory is what one collect holds.
Metrics go to a node_exporter textfile (written atomically), as NCCL Inspector's Prometheus mode
does: no listening socket.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.triage.collect import collect
from fabricscope.triage.document import build
from fabricscope.triage.ras import MIN_POLL_S, RasSnapshot
from fabricscope.triage.ras import parse as parse_ras
from fabricscope.triage.ras import query as ras_query

DUTY_FACTOR = 10.0
MIN_INTERVAL_S = 1.0
PERSIST_POLLS = 3  # a slow job's verdict is written once the same one held this many polls in a row
VerdictKey = tuple[str, tuple[int, ...], tuple[str, ...]]  # class, culprit ranks, elements
STALL_CLASSES = frozenset({"stopped", "died", "mismatch", "never_entered", "network_hang"})


@dataclass
class WatchState:
    progress: dict[int, int] = field(default_factory=dict)  # rank -> last completed collective
    last_progress: float = field(default_factory=time.monotonic)
    stalled: bool = False  # a diagnosis was written for this stall; reset by progress
    polls: int = 0
    doc: dict[str, Any] | None = None
    ras: list[RasSnapshot] = field(default_factory=list)
    last_ras: float = 0.0
    signature: tuple[tuple[str, str, int, int], ...] = ()
    written: list[str] = field(default_factory=list)
    pending: VerdictKey | None = None  # (class, culprit ranks, elements) of the slow-job verdict being held
    pending_polls: int = 0  # polls in a row that verdict held
    reported: VerdictKey | None = (
        None  # the slow-job verdict last written (written again only when it changes)
    )


def due(state: WatchState) -> bool:
    """Whether the verdict of the poll just made is to be written: a stall at once, once per stall
    (again after progress resumed); a slow job's verdict once it held :data:`PERSIST_POLLS` polls."""
    verdict = (state.doc or {}).get("verdict")
    if verdict is None or verdict["class"] == "healthy" or verdict["class"] in STALL_CLASSES:
        state.pending, state.pending_polls = None, 0
        return verdict is not None and verdict["class"] in STALL_CLASSES and not state.stalled
    key = (verdict["class"], tuple(c["rank"] for c in verdict["culprits"]), tuple(verdict["elements"]))
    state.pending_polls = state.pending_polls + 1 if key == state.pending else 1
    state.pending = key
    return state.pending_polls >= PERSIST_POLLS and key != state.reported


def _signature(paths: list[Path]) -> tuple[tuple[str, str, int, int], ...]:
    """(path, mtime, size) of every file: a poll re-reads the dumps only when this changed."""
    items: list[tuple[str, str, int, int]] = []
    for root in paths:
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in names:
                if name.startswith("."):
                    continue
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:
                    continue
                items.append((folder, name, st.st_mtime_ns, st.st_size))
            if len(items) > 200_000:
                break
    return tuple(sorted(items))


def metrics_text(state: WatchState, now: float) -> str:
    """The job's progress and the suspect in Prometheus' text format (prometheus-client, the
    `prom` extra), for node_exporter's textfile collector."""
    try:
        from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
    except ImportError as exc:
        raise FabricscopeError("--textfile needs prometheus-client: pip install 'fabricscope[prom]'") from exc
    registry = CollectorRegistry()
    completed = Gauge(
        "fabricscope_job_last_completed_collective",
        "Last collective sequence id this rank completed (Flight Recorder).",
        ["rank", "host"],
        registry=registry,
    )
    hosts = {r["rank"]: r["host"] for r in (state.doc or {}).get("ranks", [])}
    for rank, seq in sorted(state.progress.items()):
        completed.labels(str(rank), hosts.get(rank) or "").set(seq)
    Gauge(
        "fabricscope_job_seconds_since_progress",
        "Seconds since any rank last completed a collective.",
        registry=registry,
    ).set(round(now - state.last_progress, 1))
    suspect = Gauge(
        "fabricscope_job_suspect",
        "A rank the current verdict names (1), by verdict class.",
        ["rank", "host", "class"],
        registry=registry,
    )
    verdict = (state.doc or {}).get("verdict", {})
    for c in verdict.get("culprits", [])[:64]:
        suspect.labels(str(c["rank"]), c["host"] or "", verdict["class"]).set(1)
    Gauge(
        "fabricscope_job_stalled", "1 while the job is stalled (a diagnosis was written).", registry=registry
    ).set(int(state.stalled))
    Counter("fabricscope_job_watch_polls", "Polls made by this watch.", registry=registry).inc(state.polls)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    Counter("fabricscope_job_watch_cpu_seconds", "CPU time this watch used.", registry=registry).inc(
        cpu.ru_utime + cpu.ru_stime
    )
    return generate_latest(registry).decode()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def poll(
    state: WatchState,
    paths: list[Path],
    *,
    stall_s: float,
    ras_addr: tuple[str, int] | None,
    host_map: dict[int, str] | None = None,
) -> None:
    """One poll: RAS when due, the dumps when they changed, progress bookkeeping."""
    now = time.monotonic()
    state.polls += 1
    if ras_addr is not None and now - state.last_ras >= MIN_POLL_S:
        state.last_ras = now
        try:
            snap = parse_ras(ras_query(*ras_addr, timeout_s=30.0), f"{ras_addr[0]}:{ras_addr[1]}")
        except OSError:
            snap = None
        if snap is not None:
            state.ras = (state.ras + [snap])[-2:]
    signature = _signature(paths)
    if signature == state.signature and state.doc is not None and not state.ras:
        return
    state.signature = signature
    inputs = collect(paths, host_map)
    inputs.ras = list(state.ras)
    advanced = False
    for dump in inputs.dumps:
        done = max((g.last_completed or 0 for g in dump.groups.values()), default=0)
        if done > state.progress.get(dump.rank, -1):
            advanced = advanced or dump.rank in state.progress
            state.progress[dump.rank] = done
    if advanced:
        state.last_progress, state.stalled = now, False
    state.doc = build(inputs, stall_s=stall_s) if inputs.dumps or inputs.ras else None


def watch(
    paths: list[Path],
    *,
    interval_s: float,
    stall_s: float,
    out_dir: Path,
    textfile: Path | None,
    ras_addr: tuple[str, int] | None,
    duration_s: float | None,
    exit_on_stall: bool,
    on_diagnosis: Callable[[dict[str, Any], Path], None],
    host_map: dict[int, str] | None = None,
) -> WatchState:
    """Poll until ``duration_s`` (or forever); write the diagnosis when :func:`due` says so."""
    state = WatchState()
    start = time.monotonic()
    while duration_s is None or time.monotonic() - start < duration_s:
        t0 = time.monotonic()
        poll(state, paths, stall_s=stall_s, ras_addr=ras_addr, host_map=host_map)
        doc = state.doc
        if doc is not None and due(state):
            if doc["verdict"]["class"] in STALL_CLASSES:
                state.stalled = True
            else:
                state.reported = state.pending
            path = out_dir / f"job-diagnosis-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
            _write_atomic(
                path,
                json.dumps(
                    {
                        **doc,
                        "watch": {
                            "seconds_since_progress": round(time.monotonic() - state.last_progress, 1),
                            "polls": state.polls,
                        },
                    },
                    indent=2,
                ),
            )
            state.written.append(str(path))
            on_diagnosis(doc, path)
        if textfile is not None:
            _write_atomic(textfile, metrics_text(state, time.monotonic()))
        if state.written and exit_on_stall:
            break
        spent = time.monotonic() - t0
        time.sleep(max(0.0, max(interval_s, MIN_INTERVAL_S, spent * DUTY_FACTOR) - spent))
    return state
