"""What a job's stderr and NCCL logs say about its ranks: deaths, timeouts, lost peers, rank -> host.

Read line by line (bounded: :data:`MAX_LINES` per file, :data:`MAX_LINE` characters per line).
Formats, each from a real capture in tests/data/job/: PyTorch's ``[rankN]:`` prefixes and its
NCCL watchdog lines (without a launcher prefix, the rank of the default group's
``[PG ID 0 PG GUID 0(default_pg) Rank N]``), gloo's ``Connection closed by peer [ADDR]:PORT``
and its receive-size check (``op.preamble.length <= op.nbytes. A vs B``), torchrun's
ChildFailedError block (``host``, ``rank``, ``exitcode`` rows), srun's ``task N: Killed`` lines,
``fabricscope lab run``'s ``non-zero exit on h1=-15, ...``; NCCL's own lines go through
:func:`fabricscope.nccl.log.parse.parse_line` (WARN lines, and ``comm ... rank N`` for rank -> host).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass, field

from fabricscope.nccl.log.parse import parse_line
from fabricscope.nccl.log.place import PG_PREFIX

MAX_LINES = 2_000_000
MAX_LINE = 4096
# signals that end a process from outside or by a crash (SIGTERM from a launcher's cleanup is not death)
DEATH_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}

_RANK = re.compile(r"^\[rank(\d+)\]:")
_HOST_PREFIX = re.compile(r"^\[([A-Za-z0-9][\w.\-]{0,62})\] ")
_PG_PREFIX = re.compile(PG_PREFIX)
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: Work\w*\(SeqNum=(\d+), OpType=(\w+)")
_PEER_CLOSED = re.compile(r"Connection (?:closed|reset) by peer \[([0-9a-fA-F:.]+)\]:(\d+)")
# gloo's receive-size check (gloo/transport/tcp/pair.cc, GLOO_ENFORCE_LE): a peer sent more bytes
# than this rank's side of the collective expects; the rank then ends by std::terminate (SIGABRT)
_GLOO_SIZE = re.compile(
    r"op\.preamble\.length <= op\.nbytes\. (\d+) vs (\d+)\. Received data size doesn't match"
)
_LAB_EXIT = re.compile(r"non-zero exit on ((?:[\w.\-]+=-?\d+(?:, )?)+)")
_SRUN_TASK = re.compile(
    r"srun: error: ([\w.\-]+): tasks? (\d+)(?:-(\d+))?: (Killed|Segmentation fault|Aborted|Exited with exit code \d+)"
)
_TR_HOST = re.compile(r"^\s*host\s*:\s*(\S+)\s*\Z")
_TR_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_TR_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
_FAILURE = re.compile(
    r"^(?:\[rank\d+\]: )?(?:Traceback \(most recent call last\)|\w+(?:Error|Exception): )|terminate called after throwing"
)
_ERROR_WORDS = re.compile(
    r"DistBackendError|NCCL error|ncclRemoteError|ncclSystemError|ncclInternalError|Last error:"
)


@dataclass
class LogEvidence:
    """Deaths and waits the logs show, by rank and by host, plus rank -> host when a log names it."""

    dead_ranks: dict[int, str] = field(default_factory=dict)
    dead_hosts: dict[str, str] = field(default_factory=dict)
    timeouts: dict[int, str] = field(default_factory=dict)  # rank -> "collective 7 (ALLREDUCE)"
    lost_peers: dict[str, int] = field(default_factory=dict)  # address -> how many lines name it
    rank_hosts: dict[int, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # first lines of errors, capped
    failures: int = 0  # lines saying a rank failed: Python tracebacks, errors raised by torch
    # gloo's own words that a collective's sizes differ across ranks: "h1: received 32772 B, expected 32768 B"
    size_mismatches: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def merge(self, other: LogEvidence) -> None:
        self.dead_ranks.update(other.dead_ranks)
        self.dead_hosts.update(other.dead_hosts)
        self.timeouts.update(other.timeouts)
        for addr, n in other.lost_peers.items():
            self.lost_peers[addr] = self.lost_peers.get(addr, 0) + n
        self.rank_hosts.update(other.rank_hosts)
        self.errors.extend(other.errors[: 20 - len(self.errors)])
        self.failures += other.failures
        self.size_mismatches.extend(other.size_mismatches[: 20 - len(self.size_mismatches)])
        self.files.extend(other.files)


def _signal_text(code: int) -> str | None:
    """'SIGKILL' for a death by signal (exit -9 or 128+9), None for a clean exit or a launcher's SIGTERM."""
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        sig = signal.Signals(number)
    except ValueError:
        return None
    return sig.name if sig in DEATH_SIGNALS else None


def read_log(lines: Iterable[str], name: str = "<log>") -> LogEvidence:
    ev = LogEvidence(files=[name])
    torchrun: dict[str, str] = {}
    for count, raw in enumerate(lines):
        if count >= MAX_LINES:
            ev.errors.append(f"{name}: read only the first {MAX_LINES} lines")
            break
        line = raw[:MAX_LINE].rstrip("\n")
        host_match = _HOST_PREFIX.match(line)
        host = host_match.group(1) if host_match else None
        body = line[host_match.end() :] if host_match else line
        rank_match = _RANK.match(body)
        rank = int(rank_match.group(1)) if rank_match else None
        if rank is not None and host:
            ev.rank_hosts.setdefault(rank, host)
        _line(ev, body, rank, host, name)
        _torchrun(ev, torchrun, body)
    return ev


def _line(ev: LogEvidence, body: str, rank: int | None, host: str | None, name: str) -> None:
    if m := _WATCHDOG.search(body):
        if rank is None:  # no launcher prefix: PyTorch's own (2.3 on) for the default group, PG 0,
            # whose Rank is the global rank: [PG ID 0 PG GUID 0(default_pg) Rank 3], earlier [PG 0 Rank 3]
            pg = next((p for p in _PG_PREFIX.finditer(body) if p.group(1) == "0"), None)
            rank = int(pg.group(2)) if pg is not None else None
        if rank is not None:
            ev.timeouts.setdefault(rank, f"collective {m.group(1)} ({m.group(2)})")
    elif m := _GLOO_SIZE.search(body):
        if len(ev.size_mismatches) < 20:
            who = f"rank {rank}" if rank is not None else host or "?"
            ev.size_mismatches.append(f"{who}: received {m.group(1)} B where its call expects {m.group(2)} B")
    elif m := _PEER_CLOSED.search(body):
        ev.lost_peers[m.group(1)] = ev.lost_peers.get(m.group(1), 0) + 1
    elif m := _LAB_EXIT.search(body):
        for item in m.group(1).split(", "):
            who, _, code = item.partition("=")
            if (sig := _signal_text(int(code))) is not None:
                ev.dead_hosts[who] = f"its process ended by {sig} (exit {code}, {name})"
    elif m := _SRUN_TASK.search(body):
        if m.group(4) != "Exited with exit code 0" and not m.group(4).startswith("Exited"):
            first, last = int(m.group(2)), int(m.group(3) or m.group(2))
            for task in range(first, min(last, first + 4096) + 1):
                ev.dead_ranks[task] = f"srun: task {task} on {m.group(1)}: {m.group(4)}"
    elif " NCCL " in body and (event := parse_line(body)) is not None:
        if event.kind == "comm" and event.host and "rank" in event.data:
            ev.rank_hosts.setdefault(int(event.data["rank"]), event.host)
        elif event.is_warn and len(ev.errors) < 20:
            ev.errors.append(f"{event.host or '?'}: NCCL WARN {event.message[:200]}")
    elif _ERROR_WORDS.search(body) and len(ev.errors) < 20:
        ev.errors.append((f"{host}: " if host else "") + body.strip()[:240])
    if _FAILURE.search(body):
        ev.failures += 1


def _torchrun(ev: LogEvidence, block: dict[str, str], body: str) -> None:
    """torchrun's failure table: host, rank, exitcode rows of one failed child, in that order."""
    if m := _TR_HOST.match(body):
        block.clear()
        block["host"] = m.group(1)
    elif (m := _TR_RANK.match(body)) and "host" in block:
        block["rank"] = m.group(1)
    elif (m := _TR_EXIT.match(body)) and "rank" in block:
        code = int(m.group(1))
        if (sig := _signal_text(code)) is not None or code > 0:
            rank = int(block["rank"])
            ev.dead_ranks[rank] = f"torchrun: rank {rank} on {block['host']} exited {code}" + (
                f" ({sig})" if sig else ""
            )
            ev.rank_hosts.setdefault(rank, block["host"])
        block.clear()
