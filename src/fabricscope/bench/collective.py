"""``bench collective``: nccl-tests' measurements over torch.distributed, for any launcher.

Definitions follow NVIDIA/nccl-tests doc/PERFORMANCE.md exactly:

* ``size`` is the buffer nccl-tests prints: the per-rank buffer for all_reduce, broadcast and
  sendrecv; the whole gathered output for all_gather; the whole input for reduce_scatter; the
  per-rank send buffer for alltoall, rounded down as nccl-tests does. The buffers and factors
  per operation are :mod:`fabricscope.collective_ops`' table.
* ``algbw = size / time`` (10^9 bytes/s); ``busbw = algbw x factor`` (2(n-1)/n for
  all_reduce, (n-1)/n for all_gather, reduce_scatter and alltoall, 1 for broadcast and sendrecv).
* ``time`` is the mean over ranks of each rank's mean iteration time (nccl-tests' default
  ``-a 1``); the slowest rank's time is reported beside it.
* ``#wrong`` counts result elements that differ from the exact expected value after a
  separate, freshly initialised run (values are small integers, so every dtype sums exactly).

The planning and arithmetic here are pure (tested without torch); :func:`run_worker` needs
torch and is what every rank runs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fabricscope.bench.launch import DistEnv
from fabricscope.bench.result import BenchResult, CollectiveEntry, RankInfo, Straggler, new_result
from fabricscope.collective_ops import Layout, MeasuredOp, bus_factor, find, layout
from fabricscope.errors import FabricscopeError

# nccl-tests type name -> (torch dtype name, bytes, largest integer summed exactly)
DTYPES: dict[str, tuple[str, int, int]] = {
    "float": ("float32", 4, 2**24),
    "half": ("float16", 2, 2**11),
    "bfloat16": ("bfloat16", 2, 2**8),
    "double": ("float64", 8, 2**53),
    "int32": ("int32", 4, 2**31 - 1),
    "int64": ("int64", 8, 2**63 - 1),
    "uint8": ("uint8", 1, 255),
    "int8": ("int8", 1, 127),
}
DTYPE_ALIASES = {
    "float32": "float",
    "float16": "half",
    "fp16": "half",
    "bf16": "bfloat16",
    "float64": "double",
    "int": "int32",
}
MAX_SIZE = 8 << 30


class CollectiveError(FabricscopeError):
    """A collective run could not complete (a peer died, a timeout, bad parameters)."""


# ----- factors, layout ----------------------------------------------------------------------
def pattern_modulus(dtype: str, n: int) -> int | None:
    """Largest m <= 3 with n*m exactly representable: values (rank+i) % m + 1 sum exactly."""
    limit = DTYPES[dtype][2]
    m = min(3, limit // n)
    return m if m >= 1 else None


# ----- straggler ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StragglerVerdict:
    rank: int | None
    lag_s: list[float]  # per rank: median over iterations of how late it arrived vs the earliest
    reason: str | None = None


def find_straggler(
    per_rank_times: Sequence[Sequence[float]], *, min_lag_s: float = 100e-6, rel: float = 0.10
) -> StragglerVerdict:
    """Which rank keeps the others waiting?

    In a synchronising collective every rank leaves at about the same time, so a rank's
    iteration time is (leave - arrive): the rank that arrives last has the *shortest* time,
    and the others' extra time is how long they waited for it. Per iteration, a rank's lag is
    the longest time of any rank minus its own; the straggler is the rank whose median lag
    exceeds ``rel`` of the median iteration time (and ``min_lag_s``), is at least twice
    anyone else's, and who arrives last in most iterations (a consistent pattern, not noise).
    """
    n = len(per_rank_times)
    if n < 2 or not per_rank_times[0]:
        return StragglerVerdict(None, [0.0] * n)
    iters = min(len(t) for t in per_rank_times)
    lags: list[list[float]] = [[] for _ in range(n)]
    all_times = []
    for i in range(iters):
        col = [per_rank_times[r][i] for r in range(n)]
        top = max(col)
        all_times.extend(col)
        for r in range(n):
            lags[r].append(top - col[r])
    med_lag = [statistics.median(x) for x in lags]
    worst = max(range(n), key=lambda r: med_lag[r])
    others = max((med_lag[r] for r in range(n) if r != worst), default=0.0)
    typical = statistics.median(all_times)
    threshold = max(min_lag_s, rel * typical)
    # consistency: the same rank must be the last to arrive in most iterations, not by chance
    last_count = sum(1 for i in range(iters) if max(range(n), key=lambda r: lags[r][i]) == worst)
    if med_lag[worst] > threshold and med_lag[worst] > 2 * others and last_count * 2 > iters:
        reason = (
            f"rank {worst} arrives {med_lag[worst] * 1e6:.0f} us late per iteration (median), "
            f"{med_lag[worst] / typical * 100:.0f}% of the iteration time; the others wait for it"
        )
        return StragglerVerdict(worst, med_lag, reason)
    return StragglerVerdict(None, med_lag)


# ----- parameters and results ---------------------------------------------------------------
class CollectiveParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: MeasuredOp = "all_reduce"
    sizes: list[int] = Field(default_factory=lambda: [1 << 20])
    dtype: str = "float"
    warmup: int = Field(default=5, ge=0, le=10000)
    iters: int = Field(default=20, ge=1, le=100000)
    backend: Literal["gloo", "nccl"] = "gloo"
    check: bool = True
    root: int = Field(default=0, ge=0)
    timeout_s: float = Field(default=300.0, gt=0, le=86400)
    straggle_rank: int | None = None  # self-test: this rank sleeps straggle_s before each iteration
    straggle_s: float = Field(default=0.0, ge=0, le=10)

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str) -> str:
        value = DTYPE_ALIASES.get(value, value)
        if value not in DTYPES:
            raise ValueError(f"dtype {value!r}: use one of {', '.join(DTYPES)}")
        return value


@dataclass
class SizeResult:
    size_bytes: int
    count: int
    time_s: float  # mean over ranks of each rank's mean iteration time (nccl-tests -a 1)
    max_rank_time_s: float  # the slowest rank's mean iteration time
    algbw_GBps: float
    busbw_GBps: float
    wrong: int | None  # None: not checked
    per_rank_time_s: list[float]
    straggler_rank: int | None
    straggler_reason: str | None
    lag_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "time_s": self.time_s,
            "max_rank_time_s": self.max_rank_time_s,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "wrong": self.wrong,
            "per_rank_time_s": self.per_rank_time_s,
            "per_rank_lag_s": self.lag_s,
            "straggler_rank": self.straggler_rank,
            "straggler_reason": self.straggler_reason,
        }


def size_result(
    op: str, n: int, lay: Layout, per_rank_times: Sequence[Sequence[float]], wrong: int | None
) -> SizeResult:
    """Turn every rank's iteration times into nccl-tests' numbers."""
    means = [sum(t) / len(t) for t in per_rank_times]
    avg = sum(means) / len(means)
    algbw = lay.size_bytes / avg / 1e9 if avg > 0 else 0.0
    verdict = find_straggler(per_rank_times)
    return SizeResult(
        size_bytes=lay.size_bytes,
        count=lay.count,
        time_s=avg,
        max_rank_time_s=max(means),
        algbw_GBps=algbw,
        busbw_GBps=algbw * bus_factor(op, n),
        wrong=wrong,
        per_rank_time_s=means,
        straggler_rank=verdict.rank,
        straggler_reason=verdict.reason,
        lag_s=verdict.lag_s,
    )


@dataclass
class CollectiveRun:
    params: CollectiveParams
    world_size: int
    launcher: str
    ranks: list[dict[str, Any]]  # rank, host, pid
    sizes: list[SizeResult]
    skipped_sizes: list[int]
    duration_s: float

    @property
    def avg_busbw_GBps(self) -> float:
        return sum(s.busbw_GBps for s in self.sizes) / len(self.sizes) if self.sizes else 0.0

    @property
    def wrong_total(self) -> int | None:
        checked = [s.wrong for s in self.sizes if s.wrong is not None]
        return sum(checked) if checked else None


def size_metrics(entries: Sequence[Any]) -> dict[str, float | int | None]:
    """Per-size metrics kept beside the structured ``entries``.

    ``size_<N>_busbw_GBps`` is what baselines and ``history compare`` judge per message size
    (median and MAD per size over the baseline runs; one name per size so SQL can query it);
    ``size_<N>_time_s`` is what ``sim calibrate`` fits. algbw, the slowest rank and #wrong
    per size stay in ``entries`` only (algbw = busbw / factor at a fixed rank count, so it
    would only repeat busbw's verdict).
    """
    metrics: dict[str, float | int | None] = {}
    for e in entries:
        metrics[f"size_{e.size_bytes}_busbw_GBps"] = e.busbw_GBps
        metrics[f"size_{e.size_bytes}_time_s"] = e.time_s
    return metrics


def to_bench_result(run: CollectiveRun) -> BenchResult:
    """The result that is printed (``--json``) and stored: summary metrics plus typed entries."""
    params = run.params.model_dump(mode="json")
    params.update(world_size=run.world_size, launcher=run.launcher, hosts=[r["host"] for r in run.ranks])
    if params.get("straggle_rank") is None:
        params.pop("straggle_rank", None)
        params.pop("straggle_s", None)
    result = new_result("collective", params)
    result.started = result.started.fromtimestamp(time.time() - run.duration_s, tz=result.started.tzinfo)
    entries = [CollectiveEntry.model_validate(s.to_dict()) for s in run.sizes]
    metrics: dict[str, float | int | None] = {
        "busbw_avg_GBps": run.avg_busbw_GBps,
        "busbw_max_GBps": max((s.busbw_GBps for s in run.sizes), default=None),
        "algbw_max_GBps": max((s.algbw_GBps for s in run.sizes), default=None),
        "wrong_count": run.wrong_total,
        "ranks_count": run.world_size,
        **size_metrics(entries),
    }
    result.finish(metrics, duration_s=run.duration_s)
    stragglers = sorted({s.straggler_rank for s in run.sizes if s.straggler_rank is not None})
    result.entries = entries
    result.ranks = [RankInfo.model_validate(r) for r in run.ranks]
    result.stragglers = [
        Straggler(
            rank=r,
            host=run.ranks[r]["host"],
            sizes_bytes=[s.size_bytes for s in run.sizes if s.straggler_rank == r],
        )
        for r in stragglers
    ]
    result.skipped_sizes_bytes = list(run.skipped_sizes)
    return result


# ----- the table ----------------------------------------------------------------------------
def _num(value: float, width: int) -> str:
    """nccl-tests' number format: 2 decimals while they fit, then fewer."""
    digits = len(str(int(abs(value)))) if value >= 1 else 1
    if digits < width - 2:
        return f"{value:{width}.2f}"
    if digits < width - 1:
        return f"{value:{width}.1f}"
    return f"{value:{width}.0f}"


def _redop_root(op: str, root: int) -> tuple[str, int]:
    """nccl-tests' redop and root columns: ``sum``/``none``, the root rank or -1."""
    row = find(op)
    return ("sum" if row and row.reduces else "none"), (root if row and row.rooted else -1)


def format_table(run: CollectiveRun, *, title: str | None = None) -> str:
    """The run as nccl-tests prints it (out-of-place columns; torch's all_reduce is in place)."""
    p = run.params
    lines = [
        f"# fabricscope bench collective: {p.op} over {p.backend}, {run.world_size} ranks ({run.launcher})"
        if title is None
        else title,
        f"# dtype {p.dtype} warmup iters: {p.warmup} iters: {p.iters} validation: {int(p.check)}",
        "#",
        "# Using devices",
    ]
    for r in run.ranks:
        lines.append(f"#  Rank {r['rank']:2d} Pid {r['pid']:7d} on {r['host']:>10} device {r['device']}")
    lines += [
        "#",
        f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}  {'':>7}  {'':>6}  {'':>6}  {'':>6}  {'slowest':>7}",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}  {'rank':>7}  straggler",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}  {'(us)':>7}",
    ]
    redop, root = _redop_root(p.op, p.root)
    for s in run.sizes:
        wrong = "N/A" if s.wrong is None else str(s.wrong)
        strag = f"rank {s.straggler_rank}" if s.straggler_rank is not None else "-"
        lines.append(
            f"{s.size_bytes:12d}  {s.count:12d}  {p.dtype:>8}  {redop:>6}  {root:>6}  {_num(s.time_s * 1e6, 7)}  "
            f"{_num(s.algbw_GBps, 6)}  {_num(s.busbw_GBps, 6)}  {wrong:>6}  {_num(s.max_rank_time_s * 1e6, 7)}  {strag}"
        )
    wrong_total = run.wrong_total
    lines.append(
        f"# {'Out of bounds values':<20} : {wrong_total if wrong_total is not None else 'N/A'} {'OK' if not wrong_total else 'FAILED'}"
    )
    lines.append(f"# {'Avg bus bandwidth':<20} : {run.avg_busbw_GBps:g}")
    for s in run.sizes:
        if s.straggler_reason:
            lines.append(f"# straggler at {s.size_bytes} B: {s.straggler_reason}")
    if run.skipped_sizes:
        lines.append(
            f"# skipped sizes too small for {run.world_size} ranks: {', '.join(map(str, run.skipped_sizes))}"
        )
    lines.append("#")
    return "\n".join(lines) + "\n"


def format_entries(result: BenchResult) -> str:
    """A stored collective result (measured or imported) as an nccl-tests-like table."""
    p = result.params
    entries = result.entries or []
    n = p.get("world_size") or result.metrics.get("ranks_count")
    source = f"imported from {p['source']}" if p.get("source") else f"{p.get('launcher', '?')}"
    lines = [f"# {p.get('op', '?')} over {p.get('backend', p.get('tool', '?'))}, {n or '?'} ranks ({source})"]
    lines.append(
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}  {'slowest':>7}  straggler"
    )
    lines.append(
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}  {'(us)':>7}"
    )
    op = str(p.get("op", ""))
    for e in entries:
        dtype = e.type or str(p.get("dtype") or "-")
        default_redop, default_root = _redop_root(op, p.get("root", 0))
        redop = e.redop or default_redop
        root = e.root if e.root is not None else default_root
        slowest = _num(e.max_rank_time_s * 1e6, 7) if e.max_rank_time_s is not None else f"{'-':>7}"
        strag = f"rank {e.straggler_rank}" if e.straggler_rank is not None else "-"
        lines.append(
            f"{e.size_bytes:12d}  {(e.count if e.count is not None else 0):12d}  {dtype:>8}  {redop:>6}  {root!s:>6}  "
            f"{_num(e.time_s * 1e6, 7)}  {_num(e.algbw_GBps, 6)}  {_num(e.busbw_GBps, 6)}  "
            f"{'N/A' if e.wrong is None else str(e.wrong):>6}  {slowest}  {strag}"
        )
    wrong = result.metrics.get("wrong_count")
    lines.append(f"# {'Out of bounds values':<20} : {wrong if wrong is not None else 'N/A'} {'OK' if not wrong else 'FAILED'}")
    if result.metrics.get("busbw_avg_GBps") is not None:
        lines.append(f"# {'Avg bus bandwidth':<20} : {result.metrics['busbw_avg_GBps']:g}")
    for s in result.stragglers or []:
        lines.append(f"# straggler: rank {s.rank} ({s.host or '?'}) at {', '.join(map(str, s.sizes_bytes))} B")
    if result.skipped_sizes_bytes:
        lines.append(f"# skipped sizes too small for the rank count: {', '.join(map(str, result.skipped_sizes_bytes))}")
    return "\n".join(lines) + "\n"


# ----- the worker (needs torch) -------------------------------------------------------------
class _Watchdog:
    """Ends the process if no progress is reported for ``limit_s``: a dead peer never hangs a run."""

    def __init__(self, limit_s: float, what: Callable[[], str]) -> None:
        self.limit_s = limit_s
        self.what = what
        self.last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def kick(self) -> None:
        self.last = time.monotonic()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            if time.monotonic() - self.last > self.limit_s:
                sys.stderr.write(
                    f"fabricscope: error: {self.what()}: no progress for {self.limit_s:g} s; giving up\n"
                )
                sys.stderr.flush()
                os._exit(2)


def _host_label(env: DistEnv) -> str:
    return env.host_label or socket.gethostname()


def run_worker(
    params: CollectiveParams, env: DistEnv, progress: Callable[[str], None] | None = None
) -> CollectiveRun | None:
    """Join the job, run every size, gather to rank 0. Rank 0 gets the run; others get None."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise CollectiveError("bench collective needs torch: pip install 'fabricscope[torch]'") from None

    n, rank = env.world_size, env.rank
    if params.op == "sendrecv" and n < 2:
        raise CollectiveError("sendrecv needs at least 2 ranks")
    if params.root >= n:
        raise CollectiveError(f"--root {params.root} is not a rank of a job of {n}")
    if params.backend == "nccl":
        if not torch.cuda.is_available():
            raise CollectiveError("--backend nccl needs CUDA GPUs; use --backend gloo on CPUs")
        torch.cuda.set_device(env.local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dtype = getattr(torch, DTYPES[params.dtype][0])
    elem = DTYPES[params.dtype][1]
    stage = {"what": f"rank {rank}: joining the job at {env.master_addr}:{env.master_port}"}
    dog = _Watchdog(params.timeout_s + 30.0, lambda: stage["what"])
    t_start = time.monotonic()
    try:
        dist.init_process_group(
            params.backend,
            init_method=f"tcp://{_bracket(env.master_addr)}:{env.master_port}",
            rank=rank,
            world_size=n,
            timeout=timedelta(seconds=params.timeout_s),
        )
    except Exception as exc:  # torch raises RuntimeError/DistStoreError/DistNetworkError
        dog.stop()
        raise CollectiveError(
            f"rank {rank}: cannot join the job at {env.master_addr}:{env.master_port}: {_short(exc)}"
        ) from None
    dog.kick()
    ops = _ops(dist, torch, params, n, rank)
    sizes: list[SizeResult] = []
    skipped: list[int] = []
    try:
        info = {"rank": rank, "host": _host_label(env), "pid": os.getpid(), "device": str(device)}
        ranks = [None] * n
        dist.all_gather_object(ranks, info)
        for size in params.sizes:
            lay = layout(params.op, size, n, elem)
            if lay is None:
                skipped.append(size)
                continue
            stage["what"] = f"rank {rank}: {params.op} of {lay.size_bytes} bytes"
            if progress and rank == 0:
                progress(stage["what"])
            times, wrong = _measure(torch, dist, ops, params, lay, n, rank, device, dtype, dog)
            all_times: list[Any] = [None] * n
            dist.all_gather_object(all_times, {"times": times, "wrong": wrong})
            dog.kick()
            if rank == 0:
                wrongs = [x["wrong"] for x in all_times]
                total_wrong = None if any(w is None for w in wrongs) else sum(wrongs)
                sizes.append(size_result(params.op, n, lay, [x["times"] for x in all_times], total_wrong))
        dist.barrier()
    except CollectiveError:
        dog.stop()
        raise
    except Exception as exc:
        dog.stop()
        raise CollectiveError(
            f"{stage['what']} failed: {_short(exc)} (a peer rank died, or the network or a timeout of "
            f"{params.timeout_s:g} s ended it)"
        ) from None
    dog.stop()
    with contextlib.suppress(Exception):
        dist.destroy_process_group()
    if rank != 0:
        return None
    return CollectiveRun(params, n, env.launcher, list(ranks), sizes, skipped, time.monotonic() - t_start)


def _bracket(addr: str) -> str:
    return f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def _ops(dist, torch, params: CollectiveParams, n: int, rank: int) -> Callable:
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    op = params.op
    if op == "all_reduce":
        return lambda send, recv: dist.all_reduce(send)
    if op == "all_gather":
        return lambda send, recv: gather(recv, send)
    if op == "reduce_scatter":
        return lambda send, recv: scatter(recv, send)
    if op == "alltoall":
        return lambda send, recv: dist.all_to_all_single(recv, send)
    if op == "broadcast":
        return lambda send, recv: dist.broadcast(send, src=params.root)
    nxt, prv = (rank + 1) % n, (rank - 1) % n

    def sendrecv(send, recv):
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)])
        for req in reqs:
            req.wait()

    return sendrecv


def _pattern(torch, rank: int, start: int, length: int, m: int, dtype, device):
    """Values ((rank + i) % m) + 1 for i in [start, start+length): periodic, built without an index tensor."""
    period = torch.tensor([((rank + start + j) % m) + 1 for j in range(m)], dtype=dtype, device=device)
    reps = -(-length // m)
    return period.repeat(reps)[:length]


def _sum_pattern(torch, n: int, start: int, length: int, m: int, dtype, device):
    """Sum over ranks of the pattern: exact, because n*m fits the dtype."""
    period = torch.tensor(
        [sum(((r + start + j) % m) + 1 for r in range(n)) for j in range(m)], dtype=dtype, device=device
    )
    reps = -(-length // m)
    return period.repeat(reps)[:length]


def _init_buffers(torch, params, lay: Layout, n: int, rank: int, device, dtype, m: int):
    send = _pattern(torch, rank, 0, lay.send, m, dtype, device).clone()
    if params.op == "broadcast" and rank != params.root:
        send.zero_()
    recv = torch.zeros(lay.recv, dtype=dtype, device=device)
    return send, recv


def _count_wrong(torch, params, lay: Layout, n: int, rank: int, send, recv, m: int, device, dtype) -> int:
    op = params.op
    if op == "all_reduce":
        return int((send != _sum_pattern(torch, n, 0, lay.count, m, dtype, device)).sum())
    if op == "broadcast":
        return int((send != _pattern(torch, params.root, 0, lay.count, m, dtype, device)).sum())
    if op == "sendrecv":
        return int((recv != _pattern(torch, (rank - 1) % n, 0, lay.count, m, dtype, device)).sum())
    c = lay.chunk
    if op == "all_gather":
        return sum(
            int((recv[q * c : (q + 1) * c] != _pattern(torch, q, 0, c, m, dtype, device)).sum())
            for q in range(n)
        )
    if op == "reduce_scatter":
        return int((recv != _sum_pattern(torch, n, rank * c, c, m, dtype, device)).sum())
    if op == "alltoall":
        return sum(
            int((recv[q * c : (q + 1) * c] != _pattern(torch, q, rank * c, c, m, dtype, device)).sum())
            for q in range(n)
        )
    raise CollectiveError(f"unknown operation {op!r}")


def _measure(
    torch,
    dist,
    run_op,
    params: CollectiveParams,
    lay: Layout,
    n: int,
    rank: int,
    device,
    dtype,
    dog: _Watchdog,
):
    m = pattern_modulus(params.dtype, n)
    send, recv = _init_buffers(torch, params, lay, n, rank, device, dtype, m or 1)
    cuda = device.type == "cuda"
    for _ in range(params.warmup):
        run_op(send, recv)
        dog.kick()
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    straggle = params.straggle_s if params.straggle_rank == rank else 0.0
    times: list[float] = []
    if cuda:
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(params.iters)
        ]
        for start, end in events:
            if straggle:
                torch.cuda.synchronize()
                time.sleep(straggle)
            start.record()
            run_op(send, recv)
            end.record()
            dog.kick()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) / 1e3 for s, e in events]
    else:
        clock = time.perf_counter
        for _ in range(params.iters):
            if straggle:
                time.sleep(straggle)
            t0 = clock()
            run_op(send, recv)
            times.append(clock() - t0)
            dog.kick()
    wrong: int | None = None
    if params.check and m is not None:
        send, recv = _init_buffers(torch, params, lay, n, rank, device, dtype, m)
        run_op(send, recv)
        if cuda:
            torch.cuda.synchronize()
        wrong = _count_wrong(torch, params, lay, n, rank, send, recv, m, device, dtype)
    del send, recv
    return times, wrong
