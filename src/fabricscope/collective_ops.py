"""The collective operations, one row each, as nccl-tests defines them.

``bench collective`` measures them, ``bench import nccl-tests`` reads them and ``sim`` models
them; all three take from this table what an operation is, so they cannot disagree:

* ``bus_factor``: busbw = algbw x factor, from NVIDIA/nccl-tests ``doc/PERFORMANCE.md``
  ("Summary": AllReduce 2(n-1)/n; ReduceScatter, AllGather, AlltoAll (n-1)/n; Broadcast,
  Reduce 1) and each test's ``*GetBw`` in ``src/*.cu`` (v2.19.6: SendRecv 1, Gather and Scatter
  (n-1)/n).
* ``send``/``recv``: each rank's buffers, from each test's ``*GetCollByteCount``: the whole
  ``count`` (all_reduce, broadcast, reduce, sendrecv), or one per-rank ``chunk`` or ``n`` of
  them (all_gather sends 1 and receives n, reduce_scatter the reverse, alltoall n and n).
* ``size``, what nccl-tests prints and algbw divides: the ``count`` of the first kind, ``n``
  chunks of the second (the whole gathered output, the whole scattered input).
* ``reduces`` (a ``redop`` column other than ``none``) and ``rooted`` (a ``root`` column other
  than -1).

The chunk is rounded down to ``ALIGN`` = 4 elements per rank, as nccl-tests up to v2.13 did for
all_gather and reduce_scatter (``(count/(ALIGN*nranks))*ALIGN``); v2.14 and later align to 16
bytes (``& -(16/eltSize)``), which is the same for 4-byte types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from fabricscope.errors import FabricscopeError

ALIGN = 4  # elements per rank a chunk is rounded down to

Buffer = Literal["count", "chunk", "n*chunk"]
BusFactor = Literal["2(n-1)/n", "(n-1)/n", "1"]

_FACTOR: dict[str, Callable[[int], float]] = {
    "2(n-1)/n": lambda n: 2.0 * (n - 1) / n,
    "(n-1)/n": lambda n: (n - 1) / n,
    "1": lambda n: 1.0,
}
_RANKS: dict[str, Callable[[float], float | None]] = {  # the inverse: n from busbw/algbw
    "2(n-1)/n": lambda f: 2.0 / (2.0 - f) if f < 2 else None,
    "(n-1)/n": lambda f: 1.0 / (1.0 - f) if f < 1 else None,
    "1": lambda f: None,
}


class UnknownOpError(FabricscopeError, ValueError):
    """An operation name that is not in the table."""


@dataclass(frozen=True)
class CollectiveOp:
    name: str
    bus_factor: BusFactor
    send: Buffer
    recv: Buffer
    reduces: bool
    rooted: bool
    aliases: tuple[str, ...] = ()

    @property
    def chunked(self) -> bool:
        return "count" not in (self.send, self.recv)

    def factor(self, n: int) -> float:
        """busbw / algbw for ``n`` ranks."""
        return _FACTOR[self.bus_factor](n)

    def ranks_from_factor(self, factor: float) -> float | None:
        """``n`` from a measured busbw/algbw (None when the factor does not depend on ``n``)."""
        return _RANKS[self.bus_factor](factor)


TABLE: dict[str, CollectiveOp] = {
    op.name: op
    for op in (
        CollectiveOp(
            "all_reduce", "2(n-1)/n", "count", "count", reduces=True, rooted=False, aliases=("allreduce",)
        ),
        CollectiveOp(
            "all_gather", "(n-1)/n", "chunk", "n*chunk", reduces=False, rooted=False, aliases=("allgather",)
        ),
        CollectiveOp(
            "reduce_scatter",
            "(n-1)/n",
            "n*chunk",
            "chunk",
            reduces=True,
            rooted=False,
            aliases=("reducescatter",),
        ),
        CollectiveOp(
            "alltoall", "(n-1)/n", "n*chunk", "n*chunk", reduces=False, rooted=False, aliases=("all_to_all",)
        ),
        CollectiveOp("broadcast", "1", "count", "count", reduces=False, rooted=True),
        CollectiveOp("reduce", "1", "count", "count", reduces=True, rooted=True),
        CollectiveOp("sendrecv", "1", "count", "count", reduces=False, rooted=False),
        CollectiveOp("gather", "(n-1)/n", "chunk", "n*chunk", reduces=False, rooted=True),
        CollectiveOp("scatter", "(n-1)/n", "n*chunk", "chunk", reduces=False, rooted=True),
    )
}

# the operations bench collective runs and sim models; the others are read from nccl-tests files
MeasuredOp = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"]
MEASURED: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "sendrecv",
)

_BY_ALIAS = {alias: op for op in TABLE.values() for alias in (op.name, *op.aliases)}


def find(name: str) -> CollectiveOp | None:
    """The row for ``all_reduce``, ``allreduce`` or ``All-Reduce``; None if there is none."""
    return _BY_ALIAS.get(str(name).strip().lower().replace("-", "_"))


def lookup(name: str, among: tuple[str, ...] = tuple(TABLE)) -> CollectiveOp:
    """:func:`find`, restricted to ``among``; an unknown name raises UnknownOpError."""
    op = find(name)
    if op is None or op.name not in among:
        raise UnknownOpError(f"unknown operation {name!r} (choose from {', '.join(among)})")
    return op


def bus_factor(name: str, n: int) -> float:
    """busbw / algbw of operation ``name`` over ``n`` ranks."""
    return lookup(name).factor(n)


@dataclass(frozen=True)
class Layout:
    """Buffer sizes (elements) for one size of one operation."""

    size_bytes: int  # the size nccl-tests prints (after rounding)
    count: int  # elements in that size
    send: int  # elements in each rank's input
    recv: int  # elements in each rank's output
    chunk: int  # per-rank chunk (gather/scatter/alltoall), else == count


def layout(name: str, size_bytes: int, n: int, elem: int) -> Layout | None:
    """nccl-tests' buffers for a requested size; None when it is too small for one aligned chunk per rank."""
    op = lookup(name)
    count = size_bytes // elem
    if not op.chunked:
        return Layout(count * elem, count, count, count, count) if count else None
    chunk = (count // (ALIGN * n)) * ALIGN
    if chunk == 0:
        return None
    per = {"chunk": chunk, "n*chunk": chunk * n}
    return Layout(chunk * n * elem, chunk * n, per[op.send], per[op.recv], chunk)
