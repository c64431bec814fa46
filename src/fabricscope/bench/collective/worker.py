"""What every rank of ``bench collective`` runs (needs torch): join, measure each size, gather to rank 0.

``#wrong`` counts result elements that differ from the exact expected value after a separate,
freshly initialised run (values are small integers, so every dtype sums exactly).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fabricscope.bench.collective.exchange import Exchange, RankIntro, Timings
from fabricscope.bench.collective.run import (
    DTYPES,
    CollectiveError,
    CollectiveParams,
    CollectiveRun,
    SizeResult,
    pattern_modulus,
    size_result,
)
from fabricscope.collective_ops import Layout, layout
from fabricscope.errors import one_line
from fabricscope.jobs.launch import DistEnv


class Watchdog:
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


def _bracket(addr: str) -> str:
    return f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr


class CollectiveWorker:
    """One rank: torch, its device and dtype, the operation, and the watchdog that ends a hung run."""

    def __init__(self, params: CollectiveParams, env: DistEnv) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError:
            raise CollectiveError("bench collective needs torch: pip install 'fabricscope[torch]'") from None
        self.torch, self.dist, self.params, self.env = torch, dist, params, env
        self.n, self.rank = env.world_size, env.rank
        if params.op == "sendrecv" and self.n < 2:
            raise CollectiveError("sendrecv needs at least 2 ranks")
        if params.root >= self.n:
            raise CollectiveError(f"--root {params.root} is not a rank of a job of {self.n}")
        if params.backend == "nccl":
            if not torch.cuda.is_available():
                raise CollectiveError("--backend nccl needs CUDA GPUs; use --backend gloo on CPUs")
            torch.cuda.set_device(env.local_rank % torch.cuda.device_count())
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            self.device = torch.device("cpu")
        self.dtype = getattr(torch, DTYPES[params.dtype][0])
        self.elem = DTYPES[params.dtype][1]
        self.stage = f"rank {self.rank}: joining the job at {env.master_addr}:{env.master_port}"
        self.dog = Watchdog(params.timeout_s + 30.0, lambda: self.stage)

    def join(self) -> None:
        env, p = self.env, self.params
        try:
            self.dist.init_process_group(
                p.backend, init_method=f"tcp://{_bracket(env.master_addr)}:{env.master_port}",
                rank=self.rank, world_size=self.n, timeout=timedelta(seconds=p.timeout_s),
            )  # fmt: skip
        except Exception as exc:  # torch raises RuntimeError/DistStoreError/DistNetworkError
            self.dog.stop()
            raise CollectiveError(
                f"rank {self.rank}: cannot join the job at {env.master_addr}:{env.master_port}: {one_line(exc)}"
            ) from None
        self.dog.kick()
        self.run_op = self._op()

    def sweep(self, progress: Callable[[Any], None] | None) -> tuple[list[Any], list[SizeResult], list[int]]:
        """Every size in turn: (every rank's info, rank 0's results, sizes too small for the job)."""
        dist, p = self.dist, self.params
        info = {
            "rank": self.rank,
            "host": self.env.host_label or socket.gethostname(),
            "pid": os.getpid(),
            "device": str(self.device),
        }
        exchange = Exchange(self.torch, dist, self.device, self.rank, self.n, self.env.launcher)
        intros = exchange.all_to_zero("ranks", info, RankIntro)
        ranks = [i.model_dump() for i in intros or []]
        sizes, skipped = [], []
        for size in p.sizes:
            lay = layout(p.op, size, self.n, self.elem)
            if lay is None:
                skipped.append(size)
                continue
            self.stage = f"rank {self.rank}: {p.op} of {lay.size_bytes} bytes"
            if progress and self.rank == 0:
                progress(self.stage)
            times, wrong = self.measure(lay)
            everyone = exchange.all_to_zero(f"times/{size}", {"times": times, "wrong": wrong}, Timings)
            self.dog.kick()
            if everyone is not None:
                got = [t for t in everyone if isinstance(t, Timings)]
                wrongs = [t.wrong for t in got]
                total_wrong = (
                    None if any(w is None for w in wrongs) else sum(w for w in wrongs if w is not None)
                )
                sizes.append(size_result(p.op, self.n, lay, [t.times for t in got], total_wrong))
                if progress:  # issue 26 item 3: rank 0 hands each size's row out as it completes
                    progress(sizes[-1])
        dist.barrier()
        return ranks, sizes, skipped

    def _op(self) -> Callable[[Any, Any], Any]:
        dist, p = self.dist, self.params
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        ops: dict[str, Callable[[Any, Any], Any]] = {
            "all_reduce": lambda send, recv: dist.all_reduce(send),
            "all_gather": lambda send, recv: gather(recv, send),
            "reduce_scatter": lambda send, recv: scatter(recv, send),
            "alltoall": lambda send, recv: dist.all_to_all_single(recv, send),
            "broadcast": lambda send, recv: dist.broadcast(send, src=p.root),
        }
        if p.op in ops:
            return ops[p.op]
        nxt, prv = (self.rank + 1) % self.n, (self.rank - 1) % self.n

        def sendrecv(send: Any, recv: Any) -> None:
            reqs = dist.batch_isend_irecv(
                [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
            )
            for req in reqs:
                req.wait()

        return sendrecv

    # -- buffers and their check
    def _pattern(self, rank: int, start: int, length: int, m: int) -> Any:
        """Values ((rank + i) % m) + 1 for i in [start, start+length): periodic, built without an index tensor."""
        period = self.torch.tensor(
            [((rank + start + j) % m) + 1 for j in range(m)], dtype=self.dtype, device=self.device
        )
        return period.repeat(-(-length // m))[:length]

    def _sum_pattern(self, start: int, length: int, m: int) -> Any:
        """Sum over ranks of the pattern: exact, because n*m fits the dtype."""
        sums = [sum(((r + start + j) % m) + 1 for r in range(self.n)) for j in range(m)]
        period = self.torch.tensor(sums, dtype=self.dtype, device=self.device)
        return period.repeat(-(-length // m))[:length]

    def _buffers(self, lay: Layout, m: int) -> tuple[Any, Any]:
        send = self._pattern(self.rank, 0, lay.send, m).clone()
        if self.params.op == "broadcast" and self.rank != self.params.root:
            send.zero_()
        return send, self.torch.zeros(lay.recv, dtype=self.dtype, device=self.device)

    def _count_wrong(self, lay: Layout, send: Any, recv: Any, m: int) -> int:
        op, n, rank, c = self.params.op, self.n, self.rank, lay.chunk
        if op == "all_reduce":
            return int((send != self._sum_pattern(0, lay.count, m)).sum())
        if op == "broadcast":
            return int((send != self._pattern(self.params.root, 0, lay.count, m)).sum())
        if op == "sendrecv":
            return int((recv != self._pattern((rank - 1) % n, 0, lay.count, m)).sum())
        if op == "all_gather":
            return sum(int((recv[q * c : (q + 1) * c] != self._pattern(q, 0, c, m)).sum()) for q in range(n))
        if op == "reduce_scatter":
            return int((recv != self._sum_pattern(rank * c, c, m)).sum())
        if op == "alltoall":
            return sum(
                int((recv[q * c : (q + 1) * c] != self._pattern(q, rank * c, c, m)).sum()) for q in range(n)
            )
        raise CollectiveError(f"unknown operation {op!r}")

    # -- one size
    def measure(self, lay: Layout) -> tuple[list[float], int | None]:
        """Warm up, time ``iters`` operations, then check a fresh run's result (None: not checkable)."""
        p, torch = self.params, self.torch
        m = pattern_modulus(p.dtype, self.n)
        send, recv = self._buffers(lay, m or 1)
        cuda = self.device.type == "cuda"
        for _ in range(p.warmup):
            self.run_op(send, recv)
            self.dog.kick()
        if cuda:
            torch.cuda.synchronize()
        self.dist.barrier()
        straggle = p.straggle_s if p.straggle_rank == self.rank else 0.0
        times = self._timed_cuda(send, recv, straggle) if cuda else self._timed_cpu(send, recv, straggle)
        wrong: int | None = None
        if p.check and m is not None:
            send, recv = self._buffers(lay, m)
            self.run_op(send, recv)
            if cuda:
                torch.cuda.synchronize()
            wrong = self._count_wrong(lay, send, recv, m)
        del send, recv
        return times, wrong

    def _timed_cuda(self, send: Any, recv: Any, straggle: float) -> list[float]:
        cuda = self.torch.cuda
        events = [
            (cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)) for _ in range(self.params.iters)
        ]
        for start, end in events:
            if straggle:
                cuda.synchronize()
                time.sleep(straggle)
            start.record()
            self.run_op(send, recv)
            end.record()
            self.dog.kick()
        cuda.synchronize()
        return [s.elapsed_time(e) / 1e3 for s, e in events]

    def _timed_cpu(self, send: Any, recv: Any, straggle: float) -> list[float]:
        clock = time.perf_counter
        times = []
        for _ in range(self.params.iters):
            if straggle:
                time.sleep(straggle)
            t0 = clock()
            self.run_op(send, recv)
            times.append(clock() - t0)
            self.dog.kick()
        return times


def run_worker(
    params: CollectiveParams, env: DistEnv, progress: Callable[[Any], None] | None = None
) -> CollectiveRun | None:
    """Join the job, run every size, gather to rank 0. Rank 0 gets the run; others get None."""
    worker = CollectiveWorker(params, env)
    t_start = time.monotonic()
    worker.join()
    try:
        ranks, sizes, skipped = worker.sweep(progress)
    except CollectiveError:
        raise
    except Exception as exc:
        raise CollectiveError(
            f"{worker.stage} failed: {one_line(exc)} (a peer rank died, or the network or a timeout of "
            f"{params.timeout_s:g} s ended it)"
        ) from None
    finally:
        worker.dog.stop()
    with contextlib.suppress(Exception):
        worker.dist.destroy_process_group()
    if env.rank != 0:
        return None
    return CollectiveRun(
        params, env.world_size, env.launcher, list(ranks), sizes, skipped, time.monotonic() - t_start
    )
