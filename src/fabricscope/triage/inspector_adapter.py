"""A stand-in for :mod:`fabricscope.nccl.inspector` (the exporter helper's NCCL Inspector reader,
not yet on main): just the fields a straggler verdict needs from Inspector's JSONL. Replace the
body of :func:`read_records` with a call to that reader when it lands; nothing else here.

Format: NCCL's plugins/profiler/inspector/README.md ("Output Example"): one JSON object per line
with ``header`` (id, rank, n_ranks, nnodes), ``metadata`` (hostname, pid, ...) and ``coll_perf``
(coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us, coll_algobw_gbs, coll_busbw_gbs).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import NamedTuple

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
    """Collective records; lines that are not Inspector objects (or are cut) are passed over."""
    out: list[CollRecord] = []
    for line in lines:
        if len(out) >= MAX_RECORDS:
            break
        try:
            obj = json.loads(line)
            header, perf = obj["header"], obj["coll_perf"]
            out.append(CollRecord(str(header["id"]), int(header["rank"]), (obj.get("metadata") or {}).get("hostname"),
                                  str(perf["coll"]), int(perf["coll_sn"]), float(perf["coll_exec_time_us"]),
                                  float(perf["coll_busbw_gbs"]) if perf.get("coll_busbw_gbs") is not None else None))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out
