"""NCCL RAS output (NCCL 2.24+): the ``ncclras`` text and the 2.28+ JSON, and a bounded client.

Formats from NCCL's user guide (troubleshooting/ras.rst) and a real 2.28.9 capture in
tests/data/job/. RAS groups ranks by a property (collective counts, status) and lists the
outliers; a MISMATCH of counts is normal while collectives run ("as long as the counts increase
across repeated queries"), so :func:`ras_verdict` wants two polls and says so when it had one.
"""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any

RAS_PORT = 28028  # NCCL_RAS_ADDR's default
MAX_REPLY = 8 * 2**20
MIN_POLL_S = 10.0  # each query makes every RAS thread gather data (seconds on big jobs): no faster

_COMM_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+([\d\-]+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z]+)\s*\Z")
_COMM_HEAD = re.compile(r"^#(\d+-\d+) \((0x)?([0-9a-fA-F]+)\) ([A-Z]+)\s*\Z")
_LAUNCHED = re.compile(r"^\s*(\d+) ranks? ha(?:ve|s) launched up to operation (\d+)\s*\Z")
_RANK_LINE = re.compile(r"^\s*Rank (\d+) -- GPU (\d+) managed by process (\d+) on node (\S+)\s*\Z")
_MISSING = re.compile(r"^\s*The missing ranks?: ([\d, ]+)\s*\Z")
_PROCESS = re.compile(r"^\s*Process (\d+) on node (\S+) managing GPUs? ([\d, ]+)\s*\Z")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


@dataclass
class RasSnapshot:
    """One RAS answer, reduced to what a verdict needs."""

    source: str
    nccl_version: str | None = None
    statuses: list[tuple[str, str]] = field(default_factory=list)  # (status, errors) per communicator group
    counts: dict[int, int] = field(default_factory=dict)  # rank -> operations launched (outliers; JSON: all)
    most: int | None = None  # the highest count any group of ranks launched
    rank_hosts: dict[int, str] = field(default_factory=dict)
    missing: set[int] = field(default_factory=set)
    dead: list[str] = field(default_factory=list)  # "process P on node N (GPU g)"
    dead_ranks: set[int] = field(default_factory=set)
    errors: set[str] = field(default_factory=set)  # MISMATCH, INCOMPLETE, DEAD, TIMEOUT ...


def parse_text(text: str, source: str = "<ras>") -> RasSnapshot:
    snap = RasSnapshot(source=source)
    section, count, dead_block = "", None, False
    for line in text.splitlines()[:200_000]:
        if m := _VERSION.search(line):
            snap.nccl_version = snap.nccl_version or m.group(1)
        if m := _COMM_ROW.match(line):
            snap.statuses.append((m.group(7), m.group(8)))
            if m.group(8) != "OK":
                snap.errors.add(m.group(8))
        elif m := _COMM_HEAD.match(line.strip()):
            section, count, dead_block = m.group(4), None, False
            snap.errors.add(section)
        elif line.strip() in ("DEAD", "INCOMPLETE", "TIMEOUT", "MISMATCH"):
            section, dead_block = line.strip(), line.strip() == "DEAD"
            snap.errors.add(section)
        elif m := _LAUNCHED.match(line):
            count = int(m.group(2))
            snap.most = max(snap.most or 0, count)
        elif (m := _RANK_LINE.match(line)) and count is not None and section == "MISMATCH":
            snap.counts[int(m.group(1))] = count
            snap.rank_hosts[int(m.group(1))] = m.group(4)
        elif m := _MISSING.match(line):
            snap.missing.update(int(x) for x in m.group(1).replace(",", " ").split())
        elif (m := _PROCESS.match(line)) and dead_block:
            snap.dead.append(f"process {m.group(1)} on node {m.group(2)} (GPU {m.group(3).strip()})")
    return snap


def parse_json(obj: Any, source: str = "<ras>") -> RasSnapshot:
    """NCCL 2.28+'s ``SET FORMAT json`` answer."""
    snap = RasSnapshot(
        source=source, nccl_version=str(obj.get("nccl_version")) if obj.get("nccl_version") else None
    )
    for comm in obj.get("communicators") or []:
        for rank in comm.get("ranks") or []:
            r = int(rank["rank"])
            snap.rank_hosts[r] = str(rank.get("host"))
            counts = rank.get("collective_counts") or {}
            snap.counts[r] = sum(int(v) for v in counts.values() if isinstance(v, int))
            snap.most = max(snap.most or 0, snap.counts[r])
            status = rank.get("status") or {}
            if status.get("async_error") not in (0, None) or status.get("abort_flag"):
                snap.errors.add("ASYNC_ERROR")
        for rank in comm.get("missing_ranks") or []:
            r = int(rank["rank"])
            snap.missing.add(r)
            snap.rank_hosts[r] = str(rank.get("host"))
            status = rank.get("status") or {}
            if status.get("considered_dead"):
                snap.dead_ranks.add(r)
                snap.dead.append(
                    f"rank {r}: process {rank.get('pid')} on node {rank.get('host')} (GPU {rank.get('cuda_dev')})"
                )
        if comm.get("missing_ranks_count"):
            snap.errors.add("INCOMPLETE")
    return snap


_RAS_MARKS = re.compile(
    r"Job summary|Communicators|Group\s+Comms\s+Nodes|^#\d+-\d+ \(|\bconsidered dead \(unreachable via the RAS network\)"
    r'|"communicators"',
    re.MULTILINE,
)


def looks_like_ras(text: str) -> bool:
    """RAS output, by the headings and phrases its text and JSON forms always carry."""
    return _RAS_MARKS.search(text) is not None


def parse(data: bytes | str, source: str = "<ras>") -> RasSnapshot | None:
    """Text or JSON RAS output; None when it is neither."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    stripped = text.lstrip()
    if stripped.startswith("OK\n") or stripped.startswith("OK\r\n"):
        stripped = stripped.split("\n", 1)[1].lstrip()  # the wire answer to SET FORMAT, kept in captures
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            return None
        return parse_json(obj, source) if isinstance(obj, dict) and "communicators" in obj else None
    if looks_like_ras(text):
        return parse_text(text, source)
    return None


def query(
    host: str = "127.0.0.1", port: int = RAS_PORT, *, json_format: bool = True, timeout_s: float = 30.0
) -> bytes:
    """One STATUS query over RAS's text protocol (``echo status | nc localhost 28028``); bounded."""
    deadline = time.monotonic() + timeout_s
    out = bytearray()
    with socket.create_connection((host, port), timeout=min(5.0, timeout_s)) as sock:
        sock.sendall((b"SET FORMAT json\n" if json_format else b"") + b"STATUS\n")
        sock.shutdown(socket.SHUT_WR)
        while len(out) < MAX_REPLY:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"RAS at {host}:{port} did not answer within {timeout_s:g} s")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    text = bytes(out)
    if json_format and text.startswith(b"OK\n"):
        text = text[3:]  # the answer to SET FORMAT
    return text


def ras_verdict(polls: list[RasSnapshot]) -> tuple[list[int], list[str]]:
    """(suspect ranks, evidence lines): dead or missing ranks at once; count laggards only when two
    polls show the counts did not move (one poll: a MISMATCH is normal while counts rise)."""
    if not polls:
        return [], []
    last = polls[-1]
    evidence = [f"RAS ({last.source}): " + ", ".join(sorted(last.errors) or ["OK"])]
    if last.dead:
        evidence += [f"RAS: considered dead: {d}" for d in last.dead[:16]]
    suspects = sorted(last.dead_ranks | last.missing)
    if len(polls) < 2:
        if last.counts and any(c < (last.most or 0) for c in last.counts.values()):
            evidence.append("RAS: one poll only: its MISMATCH of operation counts may be counts still rising")
        return suspects, evidence
    first = polls[-2]
    common = set(first.counts) & set(last.counts)
    moved = any(first.counts[r] != last.counts[r] for r in common)
    most = last.most or 0
    if common and not moved and first.most == last.most and any(c < most for c in last.counts.values()):
        low = min(last.counts.values())
        laggards = sorted(r for r, c in last.counts.items() if c == low)
        evidence.append(
            f"RAS: counts unchanged across two polls; rank {', '.join(map(str, laggards))} launched {low}, "
            f"others up to {most}"
        )
        suspects = sorted(set(suspects) | set(laggards))
    return suspects, evidence
