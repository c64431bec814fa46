"""Benchmark: the `bench collective` harness against a plain torch.distributed loop, in the lab.

Needs root (it builds a lab), iproute2 and torch. Prints, for a 4-host star at 1 Gbit/s:

1. busbw of `fabricscope bench collective` vs a plain ``for i in range(iters): all_reduce(t)``
   loop timed the nccl-tests way (reference), same lab, same size, same iterations, runs
   alternated; the harness overhead is 1 - harness/plain (target: at most 2%).
2. busbw for all_reduce 1 MiB .. 256 MiB against the link rate (reference: 1 Gbit/s, and the
   TCP goodput ceiling 1448/1514 of it at MTU 1500).

    sudo .venv/bin/python benchmarks/collective_lab.py [--rounds 3] [--size 64M] [--iters 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LAB = "benchcoll"
RATE_GBPS = 1.0
GOODPUT = 1448 / 1514


def worker() -> None:
    """The reference: the loop a user would write, nothing else."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    size, iters = int(os.environ["BENCH_SIZE"]), int(os.environ["BENCH_ITERS"])
    t = torch.ones(size // 4, dtype=torch.float32)
    dist.all_reduce(t)  # warm-up, as the harness does (--warmup 1)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    elapsed = (time.perf_counter() - t0) / iters
    mine = torch.tensor([elapsed], dtype=torch.float64)
    times = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(times, mine)  # a tensor, never all_gather_object (which unpickles what peers send)
    if dist.get_rank() == 0:
        n = dist.get_world_size()
        mean = sum(float(x) for x in times) / n  # nccl-tests: mean over ranks
        print(json.dumps({"busbw_GBps": size / mean / 1e9 * 2 * (n - 1) / n}))
    dist.destroy_process_group()


def fs(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=1800,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="64M")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--curve", default="1M:256M")
    args = ap.parse_args()
    size = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[args.size[-1]] * int(args.size[:-1])
    up = fs("lab", "up", "--name", LAB, "--hosts", "4", "--link-rate", "1gbit", "--replace")
    if up.returncode != 0:
        sys.exit(up.stderr.strip())
    try:
        plain, harness = [], []
        for _ in range(args.rounds):
            p = fs(
                "lab",
                "run",
                LAB,
                "--",
                sys.executable,
                os.path.abspath(__file__),
                "--worker",
                env={"BENCH_SIZE": str(size), "BENCH_ITERS": str(args.iters)},
            )
            line = next(ln for ln in p.stdout.splitlines() if ln.startswith("[h1] {"))
            plain.append(json.loads(line[5:])["busbw_GBps"])
            h = fs(
                "bench",
                "collective",
                "--launch",
                f"lab:{LAB}",
                "--sizes",
                args.size,
                "--iters",
                str(args.iters),
                "--warmup",
                "1",
                "--json",
                "--no-store",
            )
            if h.returncode != 0:
                sys.exit(h.stderr[-2000:])
            harness.append(json.loads(h.stdout)["entries"][0]["busbw_GBps"])
        p_med, h_med = statistics.median(plain), statistics.median(harness)
        print(
            f"# harness overhead, all_reduce {args.size} x {args.iters} iters, 4 hosts star 1 Gbit/s, gloo, {args.rounds} alternated rounds"
        )
        print(
            f"plain torch.distributed loop busbw  : {p_med * 8:.4f} Gbit/s  (runs: {', '.join(f'{x * 8:.4f}' for x in plain)})"
        )
        print(
            f"fabricscope bench collective busbw  : {h_med * 8:.4f} Gbit/s  (runs: {', '.join(f'{x * 8:.4f}' for x in harness)})"
        )
        print(
            f"harness / plain                     : {h_med / p_med:.4f}  (overhead {(1 - h_med / p_med) * 100:+.2f}%, target <= 2%)"
        )

        c = fs(
            "bench",
            "collective",
            "--launch",
            f"lab:{LAB}",
            "--sizes",
            args.curve,
            "--iters",
            "3",
            "--warmup",
            "1",
            "--json",
            "--no-store",
        )
        if c.returncode != 0:
            sys.exit(c.stderr[-2000:])
        print(
            f"\n# busbw vs link rate ({RATE_GBPS:g} Gbit/s; TCP goodput ceiling at MTU 1500 = {GOODPUT:.3f} of it)"
        )
        print(f"{'size':>10}  {'time (ms)':>10}  {'busbw Gbit/s':>12}  {'/ link':>7}  {'/ goodput':>9}")
        for e in json.loads(c.stdout)["entries"]:
            g = e["busbw_GBps"] * 8
            print(
                f"{e['size_bytes']:>10}  {e['time_s'] * 1e3:>10.1f}  {g:>12.4f}  {g / RATE_GBPS:>7.3f}  {g / RATE_GBPS / GOODPUT:>9.3f}"
            )
    finally:
        fs("lab", "down", LAB)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        main()
