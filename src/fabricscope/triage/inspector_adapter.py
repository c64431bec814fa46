"""The fields a straggler verdict needs from the NCCL Inspector's JSONL, read by
:mod:`fabricscope.nccl.inspector` (the one reader, shared with the exporter).

Format: NCCL's plugins/profiler/inspector/README.md ("Output Example"): one JSON object per line
with ``header`` (id, rank, n_ranks, nnodes), ``metadata`` (hostname, pid, ...) and ``coll_perf``
(coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us, coll_algobw_gbs, coll_busbw_gbs).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import NamedTuple

from fabricscope.nccl.inspector import read_dump

MAX_RECORDS = 2_000_000


class CollRecord(NamedTuple):
    comm: str
    rank: int
    host: str | None
    coll: str
    seq: int
    exec_us: float
    busbw_gbs: float | None


def looks_like_inspector(head: str) -> bool:
    return head.lstrip().startswith("{") and '"coll_perf"' in head and '"header"' in head


def read_records(lines: Iterable[str]) -> list[CollRecord]:
    """Collective records through :func:`fabricscope.nccl.inspector.read_dump` (the one Inspector
    reader, shared with the exporter); lines that are not Inspector objects (or are cut) are
    passed over, P2P operations too (a straggler verdict judges collectives)."""
    out: list[CollRecord] = []
    for rec in read_dump(itertools.islice(lines, MAX_RECORDS)).records:
        if rec.p2p:
            continue
        out.append(
            CollRecord(rec.comm_id, rec.rank, rec.hostname, rec.op, rec.seq, rec.exec_time_us, rec.busbw_gbs)
        )
    return out
