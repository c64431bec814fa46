"""Throughput and memory of the NCCL log reader on a generated multi-rank log.

Generates (once, cached) a log shaped like NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,COLL output of
a large job: R ranks on R/8 nodes interleaved line by line as one file, each rank with its init lines
(version, NET/IB device list, GPUDirect per HCA, env, comm, Init START/COMPLETE), 2 x 32 network
channel lines and 7 x 32 P2P channel lines, ring/tree lines, proxy lines, and COLL lines filling the
rest; a few ranks end with completion-error WARN cascades. Then it reads the file with
``fabricscope.nccl.log.read.feed_file`` on one core and prints:

* throughput in MB/s per CPU-second (10^6 bytes per second of this process's CPU time, one
  thread; on a shared machine wall time measures the neighbours) against the target of
  200 MB/s (issue 13, E26), and against GNU ``grep -c 'NCCL WARN'`` on the same file, in wall
  time and per CPU-second (a lower bound on what any line-oriented reader costs: the reference
  whose ratio to the reader must not fall, issue 22);
* peak resident memory after reading 1/8 of the file and after the whole file (flat = same).

Each full read runs in a fresh process, ``--repeat`` times (default 3); the median run is the
figure judged against the target, and every run's figure is printed (CPU time on a shared virtual
machine varies by tens of percent from run to run).

With ``--baseline-src DIR`` (the ``src`` folder of another checkout, e.g. a ``git worktree`` of an
older commit), every run of this reader is paired with one of that one, alternately, and the
per-pair CPU ratio is printed: the A/B that survives this VM's drifting CPU speed.

With ``--training-lines N`` it reads instead a training job's console log of N lines (N=100000
is the issue-22 case), nearly all of them without NCCL's prefix: progress and loss lines, tqdm
bars, warnings, ``[rank3]:`` and ``[trainer0|0]:`` prefixes, traceback frames, after a few NCCL INFO
lines. Each such line is matched against the message catalogue, so this is the reader's cost where
NCCL's header gives it no shortcut.

Usage:  python benchmarks/nccl_log_throughput.py [--size-mb 1024] [--ranks 4096] [--path /tmp/x.log] [--repeat 3]
                                                 [--baseline-src DIR] [--training-lines 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time

TARGET_MB_S = 200.0  # issue 13, E26: per CPU-second


def generate(path: str, size_bytes: int, ranks: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    nodes = max(1, ranks // 8)
    hosts = [f"gpu-node-{i:04d}" for i in range(nodes)]
    pids = [100000 + rng.randrange(800000) for _ in range(ranks)]

    def header(r: int, tid_off: int = 0) -> str:
        return f"{hosts[r // 8]}:{pids[r]}:{pids[r] + 60 + tid_off} [{r % 8}]"

    def init_lines(r: int) -> list[str]:
        h = header(r, 0)
        node = r // 8
        lines = [
            f"{h} NCCL INFO Bootstrap : Using eth0:10.{node // 250}.{node % 250}.1<0>",
            f"{h} NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
            f"{h} NCCL INFO cudaDriverVersion 12040",
            f"{h} NCCL INFO NCCL version 2.21.5+cuda12.4",
            f"{h} NCCL INFO NCCL_IB_HCA set by environment to =mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1",
            f"{h} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [4]mlx5_4:1/IB "
            f"[5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]; OOB eth0:10.{node // 250}.{node % 250}.1<0>",
            f"{h} NCCL INFO Using network IB",
            f"{h} NCCL INFO ncclCommInitRank comm 0x{rng.randrange(1 << 44):x} rank {r} nranks {ranks} cudaDev {r % 8} "
            f"nvmlDev {r % 8} busId {(r % 8) * 16 + 0x18:x}000 commId 0x3f0e2c1d5a6b7c8d - Init START",
        ]
        lines += [f"{h} NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA {i} 'mlx5_{i}'" for i in range(8)]
        lines.append(
            f"{h} NCCL INFO comm 0x55d0 rank {r} nRanks {ranks} nNodes {nodes} localRanks 8 localRank {r % 8} MNNVL 0"
        )
        return lines

    def channel_lines(r: int) -> list[str]:
        h = header(r, 1)
        nxt, prv = (r + 8) % ranks, (r - 8) % ranks
        out = []
        for c in range(32):
            out.append(
                f"{h} NCCL INFO Channel {c:02d}/0 : {r}[{r % 8}] -> {nxt}[{nxt % 8}] [send] via NET/IB/{r % 8}/GDRDMA"
            )
            out.append(
                f"{h} NCCL INFO Channel {c:02d}/0 : {prv}[{prv % 8}] -> {r}[{r % 8}] [receive] via NET/IB/{r % 8}/GDRDMA"
            )
            for peer in range(8):
                if peer != r % 8:
                    p = r - r % 8 + peer
                    out.append(
                        f"{h} NCCL INFO Channel {c:02d}/1 : {r}[{r % 8}] -> {p}[{peer}] via P2P/CUMEM/read"
                    )
        out.append(f"{h} NCCL INFO Connected all rings, use ring PXN 0 GDR 1")
        out.append(f"{h} NCCL INFO Connected all trees")
        return out

    def steady_line(r: int, op: int) -> str:
        h = header(r, 0)
        kind = op % 4
        if kind == 0:
            return (
                f"{h} NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f{rng.randrange(1 << 36):09x} recvbuff "
                f"0x7f{rng.randrange(1 << 36):09x} count 262144 datatype 7 op 0 root 0 comm 0x55d0 [nranks={ranks}] stream 0x5601"
            )
        if kind == 1:
            return f"{h} NCCL INFO New proxy send connection {op % 64} from local rank {r % 8}, transport 2"
        if kind == 2:
            return f"{h} NCCL INFO Connected to proxy localRank {r % 8} -> connection 0x7f{rng.randrange(1 << 36):09x}"
        return (
            f"{h} NCCL INFO AllReduce: 33554432 Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..31}}"
        )

    failing = set(rng.sample(range(ranks), k=min(4, ranks)))
    written = 0
    with open(path, "w", buffering=1 << 22) as fh:
        # Phase 1: init, interleaved across ranks.
        blocks = [init_lines(r) for r in range(ranks)]
        for i in range(max(len(b) for b in blocks)):
            for b in blocks:
                if i < len(b):
                    written += fh.write(b[i] + "\n")
        blocks = [channel_lines(r) for r in range(ranks)]
        for i in range(max(len(b) for b in blocks)):
            for b in blocks:
                if i < len(b):
                    written += fh.write(b[i] + "\n")
        for r in range(ranks):
            written += fh.write(
                f"{header(r, 0)} NCCL INFO comm 0x55d0 rank {r} nranks {ranks} cudaDev {r % 8} busId 18000 - Init COMPLETE\n"
            )
        # Phase 2: steady state until the size is reached.
        op = 0
        while written < size_bytes:
            lines = [steady_line(r, op) for r in range(ranks)]
            written += fh.write("\n".join(lines) + "\n")
            op += 1
        for r in sorted(failing):
            h = header(r, 2)
            written += fh.write(
                f"[2026-05-05 06:16:47] {h} transport/net_ib/p2p.cc:648 NCCL WARN NET/IB: Got completion from peer "
                f"10.0.0.{r % 250}<40554> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) "
                f"vendor_err=129 localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_{r % 8}\n"
                f"{h} NCCL INFO transport/net.cc:1227 -> 6\n{h} NCCL INFO proxy.cc:858 -> 6 [Proxy Thread]\n"
            )


def generate_training(path: str, lines: int, ranks: int = 8, seed: int = 7) -> None:
    """A training job's console log: ``lines`` lines of which all but a few NCCL INFO lines at the
    start carry no NCCL prefix (progress, loss, tqdm bars, warnings, launcher and rank prefixes):
    the lines the reader must look at and set aside, the common case when a user pastes a log."""
    rng = random.Random(seed)
    head = [
        f"gpu-node-0000:{4000 + r}:{4100 + r} [{r}] NCCL INFO {text}"
        for r in range(ranks)
        for text in (
            "Bootstrap : Using eth0:10.0.0.1<0>",
            "NCCL version 2.21.5+cuda12.4",
            "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>",
            "Using network IB",
        )
    ]

    def line(i: int) -> str:
        r, kind = rng.randrange(ranks), i % 7
        step, loss = i // 7, 2.0 + rng.random()
        if kind == 0:
            return (
                f"[rank{r}]: Epoch {step // 5000} | step {step % 5000}/5000 | loss {loss:.4f} | lr 3.0e-04 | "
                f"grad_norm {rng.random() * 2:.3f} | {0.5 + rng.random():.2f} s/it"
            )
        if kind == 1:
            return (
                f"2026-05-05 06:{step // 60 % 60:02d}:{step % 60:02d},{rng.randrange(1000):03d} - INFO - "
                f"train.py:210 - iteration {step}/500000 | consumed samples {step * 128} | elapsed time per "
                f"iteration (ms): {800 + rng.random() * 100:.1f} | learning rate 3.000E-04 | lm loss {loss:.6E} |"
            )
        if kind == 2:
            done = step % 5000
            return f" {done * 100 // 5000:2d}%|#####     | {done}/5000 [31:52<38:57,  1.18it/s]"
        if kind == 3:
            return f"[default{r}]:  warnings.warn(  # tokens {rng.randrange(1 << 20)} in batch {step}"
        if kind == 4:
            return (
                f"{{'loss': {loss:.4f}, 'grad_norm': {rng.random():.4f}, 'learning_rate': 2.9e-05, "
                f"'epoch': {step / 5000:.2f}}}"
            )
        if kind == 5:
            return f"[trainer{r}|{r}]: saving checkpoint to /checkpoints/step_{step}/model_{r}.pt"
        return f'  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line {1500 + r}, in _call_impl'

    with open(path, "w", buffering=1 << 22) as fh:
        fh.write("\n".join(head) + "\n")
        fh.write("\n".join(line(i) for i in range(lines - len(head))) + "\n")


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM: reset by exec, unlike ru_maxrss which a child
    inherits from the process that forked it)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _Stop(Exception):
    pass


def measure_reader(path: str, stop_after_bytes: int | None = None) -> tuple[float, float, int, object]:
    """Read the file the way ``fabricscope nccl log`` does (feed_file); optionally stop early."""
    try:
        from fabricscope.nccl.log.aggregate import LogAggregator
        from fabricscope.nccl.log.read import feed_file
        from fabricscope.nccl.log.report import build_report
    except ImportError:  # a --baseline-src checkout from before issue 21 moved the reader into nccl/log/
        from fabricscope.nccl.logfiles import feed_file  # type: ignore[no-redef]
        from fabricscope.nccl.logreport import build_report  # type: ignore[no-redef]
        from fabricscope.nccl.logstate import LogAggregator  # type: ignore[no-redef]

    agg = LogAggregator()

    def progress(nbytes: int) -> None:
        if stop_after_bytes is not None and nbytes >= stop_after_bytes:
            raise _Stop

    start = time.perf_counter()
    cpu = time.process_time()
    try:
        stats = feed_file(agg, path, progress=progress)
        nbytes = stats.bytes
    except _Stop:
        nbytes = agg.files[-1].bytes
    report = build_report(agg)
    elapsed = time.perf_counter() - start
    return elapsed, time.process_time() - cpu, nbytes, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size-mb", type=float, default=1024.0, help="size of the generated log (10^6 bytes)"
    )
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument(
        "--training-lines", type=int, default=0,
        help="instead: a training job's console log of this many lines, nearly all without NCCL's prefix",
    )  # fmt: skip
    parser.add_argument("--path", default=None, help="where to put the generated log (kept for reuse)")
    parser.add_argument(
        "--repeat", type=int, default=3,
        help="full reads, each in a fresh process: the median is judged against the target (the best is shown too)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-src", default=None,
        help="the src folder of another checkout: its reader runs alternately with this one, ratios printed",
    )  # fmt: skip
    args = parser.parse_args()
    if args.baseline_src and not os.path.isdir(os.path.join(args.baseline_src, "fabricscope")):
        parser.error(
            f"--baseline-src {args.baseline_src}: no fabricscope package there (give a checkout's src folder)"
        )
    size = int(args.size_mb * 1e6)
    if args.training_lines:
        path = args.path or f"/tmp/fabricscope-nccl-bench-training-{args.training_lines}.log"
        if not os.path.exists(path):
            generate_training(path, args.training_lines)
        size = 0
    else:
        path = args.path or f"/tmp/fabricscope-nccl-bench-{args.ranks}r-{int(args.size_mb)}MB.log"
    if not os.path.exists(path) or os.path.getsize(path) < size:
        t0 = time.perf_counter()
        generate(path, size, args.ranks)
        print(
            f"generated {path}: {os.path.getsize(path) / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
        )
    total = os.path.getsize(path)
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 22), b""))

    # Each measurement runs in a fresh process, so neither the generator nor the other run is counted.
    def run_reader(stop: int | None, src: str | None = None) -> dict:
        code = (
            "import json, sys, time; sys.path.insert(0, sys.argv[1]); import nccl_log_throughput as b; "
            "stop = int(sys.argv[3]) or None; e, c, n, r = b.measure_reader(sys.argv[2], stop); "
            "fails = sorted({f.id for f in r.findings if f.severity.value == 'fail'}); "
            "print(json.dumps({'wall_s': e, 'cpu_s': c, 'bytes': n, 'peak_mib': b.peak_rss_mib(), "
            "'ranks': len(r.ranks), 'hosts': r.summary['hosts'], 'findings': len(r.findings), 'fails': fails}))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__)), path, str(stop or 0)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": src} if src else None,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    load_before = os.getloadavg()[0]
    eighth = run_reader(total // 8)
    pairs = []
    for _ in range(max(1, args.repeat)):
        base = run_reader(None, args.baseline_src) if args.baseline_src else None
        pairs.append((base, run_reader(None)))
    runs = sorted((run for _base, run in pairs), key=lambda r: r["cpu_s"])
    full = runs[len(runs) // 2]  # the median run by CPU time
    rss_eighth, rss_full = eighth["peak_mib"], full["peak_mib"]
    elapsed, cpu_s, nbytes = full["wall_s"], full["cpu_s"], full["bytes"]
    mb_s = nbytes / 1e6 / elapsed
    cpu_mb_s = nbytes / 1e6 / cpu_s
    every = ", ".join(f"{r['bytes'] / 1e6 / r['cpu_s']:.0f}" for r in runs)

    grep = shutil.which("grep")
    grep_mb_s = grep_cpu_mb_s = None
    if grep:
        t0 = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([grep, "-c", "NCCL WARN", path], capture_output=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        grep_mb_s = total / 1e6 / (time.perf_counter() - t0)
        grep_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        grep_cpu_mb_s = total / 1e6 / grep_cpu if grep_cpu > 0 else None

    print(f"log: {total / 1e6:.0f} MB, {lines:,} lines, {full['ranks']} ranks, {full['hosts']} hosts")
    print(
        f"fabricscope nccl log reader (one thread, median of {len(runs)} runs): {cpu_s:.1f} s of CPU = "
        f"{cpu_mb_s:.1f} MB/s per core ({lines / cpu_s / 1e3:.0f} k lines/s); wall {elapsed:.1f} s = {mb_s:.1f} MB/s "
        f"(load average {load_before:.1f} on {os.cpu_count()} CPUs when it started)"
    )
    print(f"  every run, MB/s per CPU-second: {every}")
    if args.baseline_src:
        bases = [b["cpu_s"] for b, _r in pairs]
        ratios = ", ".join(f"{b['cpu_s'] / r['cpu_s']:.2f}" for b, r in pairs)
        print(
            f"  baseline {args.baseline_src}, alternately: {min(bases):.2f}-{max(bases):.2f} s of CPU vs "
            f"{min(r['cpu_s'] for _b, r in pairs):.2f}-{max(r['cpu_s'] for _b, r in pairs):.2f} s; "
            f"baseline/this per pair: {ratios}"
        )
    print(
        f"  vs target {TARGET_MB_S:.0f} MB/s: {cpu_mb_s / TARGET_MB_S:.2f}x per CPU-second, {mb_s / TARGET_MB_S:.2f}x wall"
    )
    if grep_mb_s:
        print(
            f"  vs GNU grep -c 'NCCL WARN' on the same file: {grep_mb_s:.0f} MB/s wall (reader/grep = {mb_s / grep_mb_s:.3f})"
            + (
                f", {grep_cpu_mb_s:.0f} MB/s per CPU-second (reader/grep = {cpu_mb_s / grep_cpu_mb_s:.3f})"
                if grep_cpu_mb_s
                else ""
            )
        )
    print(
        f"peak RSS: {rss_eighth:.0f} MiB after 1/8 of the file, {rss_full:.0f} MiB after all of it "
        f"(ratio {rss_full / rss_eighth:.2f}; flat memory means ~1.0)"
    )
    print(f"verdicts: {full['findings']} findings, {len(full['fails'])} fail ({', '.join(full['fails'])})")
    assert args.training_lines or full["ranks"] == args.ranks, (
        f"reader saw {full['ranks']} ranks, generator wrote {args.ranks}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
