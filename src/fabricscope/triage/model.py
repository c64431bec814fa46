"""What the job left behind, per rank, reduced to what a verdict needs (compact: 4,096 ranks fit)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

# Bytes per element of the dtype names the Flight Recorder writes (c10's ScalarType names); an
# unknown name counts 4 (a float), which only matters where collectives are compared by size.
DTYPE_BYTES = {
    **dict.fromkeys(("Bool", "Byte", "Char", "QInt8", "QUInt8", "UInt8", "Int8"), 1),
    **dict.fromkeys(("Float8_e5m2", "Float8_e4m3fn", "Float8_e5m2fnuz", "Float8_e4m3fnuz"), 1),
    **dict.fromkeys(("Short", "Half", "BFloat16", "UInt16", "ComplexHalf"), 2),
    **dict.fromkeys(("Int", "Float", "QInt32", "UInt32"), 4),
    **dict.fromkeys(("Long", "Double", "ComplexFloat", "UInt64"), 8),
    "ComplexDouble": 16,
}


class Entry(NamedTuple):
    """One collective as a rank's Flight Recorder saw it (fields as PyTorch names them)."""

    seq: int  # collective_seq_id within its process group
    op: str  # profiling_name, e.g. nccl:all_reduce
    in_sizes: list
    out_sizes: list
    dtypes: list  # input_dtypes
    state: str  # scheduled | started | completed
    created_ns: int | None
    started_ns: int | None
    completed_ns: int | None
    duration_ms: float | None

    @property
    def in_bytes(self) -> int:
        """The input tensors' bytes: what this rank hands the collective to move."""
        dtypes = list(self.dtypes or [])
        total = 0
        for i, shape in enumerate(self.in_sizes or []):
            dims = shape if isinstance(shape, list) else [shape]
            count = math.prod(d if isinstance(d, int) else 0 for d in dims)
            total += count * DTYPE_BYTES.get(str(dtypes[i]) if i < len(dtypes) else "", 4)
        return total


@dataclass
class GroupStatus:
    """A process group on one rank: PyTorch's pg_status counters and the group's members."""

    name: str
    desc: str = ""
    ranks: tuple[int, ...] | None = None  # global ranks in the group (pg_config), None when unknown
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None
    entries: list[Entry] = field(default_factory=list)


@dataclass
class RankDump:
    """One rank's Flight Recorder dump."""

    rank: int
    path: str
    fmt: str  # pickle | json
    version: str
    comm_lib_version: str
    host: str | None = None
    groups: dict[str, GroupStatus] = field(default_factory=dict)
    mtime: float | None = None
    notes: list[str] = field(default_factory=list)  # e.g. entries cut at the cap
    header_only: bool = False  # counters read, entries not (large jobs: see triage.collect)


@dataclass(frozen=True)
class Skipped:
    """An input left out of the verdict, and why (truncated, empty, foreign, hostile, too big)."""

    path: str
    reason: str
