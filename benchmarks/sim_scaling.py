#!/usr/bin/env python3
"""How `fabricscope sim` scales: ring all_reduce of 1 GiB on a rail-optimized fat-tree of 8-GPU
nodes, 1,000 to 100,000 GPUs; wall time and peak memory of each run in a fresh process.

Reference: the issue's budget for 100,000 GPUs on this 2-core machine: < 30 s and < 4 GB.
Each point runs in its own subprocess, which reports its own peak RSS (ru_maxrss), imports included.

    .venv/bin/python benchmarks/sim_scaling.py            # full sweep, ~1 minute
    .venv/bin/python benchmarks/sim_scaling.py --quick    # up to 10,000 GPUs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from fabricscope.sim.scenario import run_collective
t1 = time.perf_counter()
doc = run_collective({"topology": "rail-optimized", "nodes": int(sys.argv[1]), "gpus_per_node": 8,
                      "nic_rate": "400G", "transport": sys.argv[2], "routing": sys.argv[3], "op": "all_reduce",
                      "algo": sys.argv[4], "size": "1G"})
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "solve_s": t2 - t1, "busbw_GBps": doc["busbw_GBps"],
                  "time_s": doc["time_s"], "limited_by": doc["limited_by"], "links": doc["model"]["topology"]["links"],
                  "transfers": doc["results"][-1]["solver"]["transfers"],
                  "tiers": doc["model"]["topology"].get("tiers"), "radix": doc["model"]["topology"].get("radix"),
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

BUDGET_S, BUDGET_BYTES = 30.0, 4e9


def point(nodes: int, transport: str, routing: str, algo: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(nodes), transport, routing, algo],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "2"})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run with {nodes} nodes failed: {proc.stderr.strip()[-500:]}")
    d = json.loads(proc.stdout)
    d.update(nodes=nodes, gpus=nodes * 8, wall_s=wall)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="stop at 10,000 GPUs")
    ap.add_argument("--json", action="store_true", help="print the points as JSON")
    args = ap.parse_args()
    sizes = [125, 250, 625, 1250, 3125, 6250, 12500]
    if args.quick:
        sizes = sizes[:4]
    runs = [("ib", "adaptive", "ring")] + ([] if args.quick else [("roce", "ecmp", "ring"), ("ib", "adaptive", "tree")])
    points = []
    print(f"{'GPUs':>8} {'transport':>9} {'routing':>8} {'algo':>5} {'transfers':>10} {'links':>9} "
          f"{'wall s':>7} {'solve s':>8} {'peak RSS':>9} {'busbw GB/s':>10}  limited by")
    for transport, routing, algo in runs:
        for n in sizes:
            if (transport, algo) != ("ib", "ring") and n != sizes[-1]:
                continue  # the other variants at full scale only
            d = point(n, transport, routing, algo)
            d.update(transport=transport, routing=routing, algo=algo)
            points.append(d)
            print(f"{d['gpus']:>8,} {transport:>9} {routing:>8} {algo:>5} {d['transfers']:>10,} {d['links']:>9,} "
                  f"{d['wall_s']:>7.2f} {d['solve_s']:>8.2f} {d['peak_rss_bytes'] / 2**20:>7.0f}MB "
                  f"{d['busbw_GBps']:>10.1f}  {d['limited_by']}")
    ib = [p for p in points if (p["transport"], p["algo"]) == ("ib", "ring")]
    if len(ib) >= 2:
        a, b = ib[0], ib[-1]
        exp = math.log(b["solve_s"] / a["solve_s"]) / math.log(b["gpus"] / a["gpus"])
        print(f"\nsolve time grows as GPUs^{exp:.2f} from {a['gpus']:,} to {b['gpus']:,} GPUs "
              f"({a['solve_s']:.2f} s -> {b['solve_s']:.2f} s)")
    big = [p for p in points if p["gpus"] == 100_000]
    for p in big:
        print(f"100,000 GPUs ({p['transport']}, {p['routing']}, {p['algo']}): wall {p['wall_s']:.2f} s = "
              f"{p['wall_s'] / BUDGET_S:.3f} of the 30 s budget; peak RSS {p['peak_rss_bytes'] / 1e9:.2f} GB = "
              f"{p['peak_rss_bytes'] / BUDGET_BYTES:.3f} of the 4 GB budget")
    print(f"machine: {os.cpu_count()} CPU(s), python {sys.version.split()[0]}")
    if args.json:
        print(json.dumps(points, indent=2))


if __name__ == "__main__":
    main()
