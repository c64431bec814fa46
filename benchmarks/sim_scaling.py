#!/usr/bin/env python3
"""How `fabricscope sim` scales, each point in a fresh process with its own peak memory:

* all_reduce of 1 GiB with ``--algo auto`` (NCCL's choice among ring, tree and NVLSTree, each
  solved on the topology) on DGX H100 nodes in a rail-optimized fat-tree, 1,000 to 100,000 GPUs;
* alltoall of 1 GiB, 512 to 8,192 ranks (per-link aggregation above ~140 ranks), rail-optimized
  over InfiniBand and a non-rail fat-tree over RoCE with ECMP.

References (issue 10 item 7 and issue 23, on this 2-core machine): 100,000-GPU all_reduce with auto
< 30 s, also on a non-rail RoCE fat-tree with ECMP; a 16,384-rank alltoall < 30 s; 4 GB of memory.
Peak RSS is ru_maxrss of the child, imports included.

    .venv/bin/python benchmarks/sim_scaling.py            # full sweep, ~1 minute
    .venv/bin/python benchmarks/sim_scaling.py --quick    # up to 10,000 GPUs
    .venv/bin/python benchmarks/sim_scaling.py --issue23  # the two points issue 23 budgets
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
doc = run_collective({"system": "dgx-h100", "topology": sys.argv[5], "nodes": int(sys.argv[1]),
                      "transport": sys.argv[2], "routing": sys.argv[3], "op": sys.argv[6],
                      "algo": sys.argv[4], "size": "1G"})
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "solve_s": t2 - t1, "busbw_GBps": doc["busbw_GBps"], "algo": doc["algo"],
                  "proto": doc["proto"],
                  "time_s": doc["time_s"], "limited_by": doc["limited_by"], "links": doc["model"]["topology"]["links"],
                  "transfers": doc["results"][-1]["solver"]["transfers"],
                  "tiers": doc["model"]["topology"].get("tiers"), "radix": doc["model"]["topology"].get("radix"),
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

BUDGET = {"all_reduce": 30.0, "alltoall": 30.0}  # issue 23: both under 30 s
BUDGET_BYTES = 4e9


def point(nodes: int, transport: str, routing: str, algo: str, topology: str, op: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(nodes), transport, routing, algo, topology, op],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "2"},
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run with {nodes} nodes failed: {proc.stderr.strip()[-500:]}")
    d = json.loads(proc.stdout)
    d.update(
        nodes=nodes,
        gpus=nodes * 8,
        wall_s=wall,
        op=op,
        transport=transport,
        routing=routing,
        topology=topology,
    )
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="stop at 10,000 GPUs and 2,048 alltoall ranks")
    ap.add_argument("--json", action="store_true", help="print the points as JSON")
    ap.add_argument(
        "--issue23",
        action="store_true",
        help="only the two points issue 23 budgets: a 100,000-GPU all_reduce on a RoCE fat-tree with ECMP "
        "and a 16,384-rank alltoall",
    )
    args = ap.parse_args()
    reduce_nodes = [125, 250, 625, 1250, 3125, 6250, 12500]
    a2a_nodes = [64, 128, 256, 512, 1024]
    if args.quick:
        reduce_nodes, a2a_nodes = reduce_nodes[:4], a2a_nodes[:3]
    runs = [(n, "ib", "adaptive", "auto", "rail-optimized", "all_reduce") for n in reduce_nodes]
    runs += [(reduce_nodes[-1], "ib", "adaptive", "ring", "rail-optimized", "all_reduce")]
    runs += [(n, "ib", "adaptive", "auto", "rail-optimized", "alltoall") for n in a2a_nodes]
    runs += [(a2a_nodes[-1], "roce", "ecmp", "auto", "fat-tree", "alltoall")]
    issue23 = [
        (12500, "roce", "ecmp", "auto", "fat-tree", "all_reduce"),
        (2048, "ib", "adaptive", "auto", "rail-optimized", "alltoall"),
    ]
    runs = issue23 if args.issue23 else runs + issue23
    points = []
    print(
        f"{'op':>10} {'GPUs':>8} {'fabric':>14} {'transport':>9} {'routing':>8} {'algorithm':>16} {'transfers':>12} "
        f"{'links':>9} {'wall s':>7} {'solve s':>8} {'peak RSS':>9} {'busbw GB/s':>10}  limited by"
    )
    for nodes, transport, routing, algo, topology, op in runs:
        d = point(nodes, transport, routing, algo, topology, op)
        points.append(d)
        pair = f"{d['algo']}/{d['proto']}"
        print(
            f"{op:>10} {d['gpus']:>8,} {topology:>14} {transport:>9} {routing:>8} {pair:>16} {d['transfers']:>12,} "
            f"{d['links']:>9,} {d['wall_s']:>7.2f} {d['solve_s']:>8.2f} {d['peak_rss_bytes'] / 2**20:>7.0f}MB "
            f"{d['busbw_GBps']:>10.1f}  {d['limited_by']}"
        )
    for op in ("all_reduce", "alltoall"):
        pts = [p for p in points if p["op"] == op and p["transport"] == "ib" and p["algo"] != "ring"]
        if len(pts) >= 2:
            a, b = pts[0], pts[-1]
            exp = math.log(b["solve_s"] / a["solve_s"]) / math.log(b["gpus"] / a["gpus"])
            print(
                f"{op}: solve time grows as GPUs^{exp:.2f} from {a['gpus']:,} to {b['gpus']:,} GPUs "
                f"({a['solve_s']:.2f} s -> {b['solve_s']:.2f} s)"
            )
    for p in points:
        if p["gpus"] in (100_000, 16_384):
            print(
                f"{p['op']} {p['gpus']:,} GPUs ({p['topology']}, {p['transport']}, {p['algo']}): wall {p['wall_s']:.2f} s "
                f"= {p['wall_s'] / BUDGET[p['op']]:.3f} of the {BUDGET[p['op']]:.0f} s budget; peak RSS "
                f"{p['peak_rss_bytes'] / 1e9:.2f} GB = {p['peak_rss_bytes'] / BUDGET_BYTES:.3f} of 4 GB"
            )
    print(f"machine: {os.cpu_count()} CPU(s), python {sys.version.split()[0]}")
    if args.json:
        print(json.dumps(points, indent=2))


if __name__ == "__main__":
    main()
