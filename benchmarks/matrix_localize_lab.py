"""Benchmark: `bench matrix --topology` localizing a bad uplink and a slow host on 8 lab hosts.

Needs root (it builds a lab) and iproute2. A leaf-spine of 8 hosts, 3 per leaf (leaf1 h1-h3, leaf2
h4-h6, leaf3 h7-h8, one spine), links at 200 Mbit/s, 0.5 s flows. For each fault planted (none;
leaf2's uplink at 50 Mbit/s; that and h3 at 30 Mbit/s) it prints the run's wall time, what it
named and whether that is exactly the planted fault, against the reference: the same matrix
without --topology (its wall time, the ratio, and what it names). Then the tomography alone on
synthetic leaf-spines of 64..512 hosts (placing the hosts and explaining the flows, no network).

    sudo .venv/bin/python benchmarks/matrix_localize_lab.py [--discover] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

LAB = "benchloc"
FLOW = ["--duration", "0.5", "--warmup", "0.1", "--no-rdma", "--no-store", "--timeout", "60"]


def fs(*args: str, timeout: float = 600, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", *args], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode not in ok:
        raise SystemExit(
            f"fabricscope {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-800:]}"
        )
    return proc


def named(doc: dict) -> list[str]:
    return [f"{s['kind']} {s['host']}" + (f"-{s['peer']}" if s.get("peer") else "") for s in doc["suspects"]]


def matrix_json(topology: str | None) -> tuple[float, dict]:
    extra = ["--topology", topology] if topology else []
    started = time.monotonic()
    doc = json.loads(
        fs("bench", "matrix", "--launch", f"lab:{LAB}", *extra, *FLOW, "--json", ok=(0, 1)).stdout
    )
    return time.monotonic() - started, doc


def lab_part(discover: bool, out: Path | None) -> None:
    fs(
        "lab",
        "up",
        "--name",
        LAB,
        "--topology",
        "leaf-spine",
        "--hosts",
        "8",
        "--hosts-per-leaf",
        "3",
        "--link-rate",
        "200mbit",
        "--replace",
        *(["--lldp"] if discover else []),
    )
    topology = "discover" if discover else f"lab:{LAB}"
    try:
        print(f"8 lab hosts, 3 per leaf, 200 Mbit/s links, 0.5 s flows; --topology {topology}")
        print(
            f"{'planted':<26} {'with s':>7} {'plain s':>7} {'ratio':>6}  {'named with --topology':<34} {'exact':>5}  named without"
        )
        faults: list[tuple[str, list[str], set[str]]] = [
            ("nothing", [], set()),
            ("leaf2 uplink 50mbit", ["leaf2", "50mbit"], {"link leaf2-spine"}),
            ("+ h3 30mbit", ["h3", "30mbit"], {"link leaf2-spine", "host h3"}),
        ]
        for label, setting, expected in faults:
            if setting:
                fs("lab", "set", LAB, setting[0], "--link-rate", setting[1])
            took, doc = matrix_json(topology)
            plain_took, plain = matrix_json(None)
            got = named(doc)
            print(
                f"{label:<26} {took:>7.1f} {plain_took:>7.1f} {took / plain_took:>6.2f}  {', '.join(got) or '-':<34} "
                f"{'yes' if set(got) == expected else 'NO':>5}  {', '.join(named(plain)) or '-'}"
            )
            if out:
                from fabricscope.bench.results.schema import BenchResult
                from fabricscope.report.bench import matrix_lines

                tag = label.replace(" ", "_").replace("+", "and")
                (out / f"{tag}.json").write_text(json.dumps(doc, indent=1))
                (out / f"{tag}.txt").write_text(
                    "\n".join(matrix_lines(BenchResult.model_validate(doc))) + "\n"
                )
    finally:
        fs("lab", "down", LAB)


def tomography_part(sizes: list[int]) -> None:
    """Placement and tomography alone: per-leaf 16 hosts, 8 spines (ECMP), leaf2's uplinks bad."""
    from fabricscope.bench.matrix.blame import analyze
    from fabricscope.bench.matrix.localize import place

    print("\ntomography alone (leaf-spine, 16 hosts per leaf, 8 spines; every flow through leaf2 slow)")
    print(f"{'hosts':>6} {'flows':>8} {'place s':>8} {'analyze s':>9}  named")
    for n in sizes:
        leaves = n // 16
        spines = [f"spine{j + 1}" for j in range(8)]
        doc = {"name": "synthetic", "nodes": n, "nics_per_node": 1, "gpus_per_node": 1, "gpu": "none",
               "switches": [f"leaf{i + 1}" for i in range(leaves)] + spines,
               "links": [{"a": f"leaf{i + 1}", "b": s} for i in range(leaves) for s in spines],
               "attach": {f"leaf{i + 1}": [f"{16 * i}-{16 * i + 15}"] for i in range(leaves)},
               "hosts": [f"n{i}" for i in range(n)]}  # fmt: skip
        hosts = doc["hosts"]
        leaf = [i // 16 for i in range(n)]
        m = [
            [
                None if i == j else (10.0 if 1 in (leaf[i], leaf[j]) and leaf[i] != leaf[j] else 100.0)
                for j in range(n)
            ]
            for i in range(n)
        ]
        t0 = time.monotonic()
        fabric = place(hosts, doc, "synthetic")
        t1 = time.monotonic()
        verdict = analyze(hosts, m, None, fabric=fabric)
        t2 = time.monotonic()
        print(
            f"{n:>6} {n * (n - 1):>8} {t1 - t0:>8.2f} {t2 - t1:>9.2f}  {'; '.join(s.label if len(s.label) < 60 else f'one of {len(s.alternatives or [])}: {s.label[:40]} ...' for s in verdict.suspects)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--discover", action="store_true", help="--topology discover (lab with lldpd) instead of lab:NAME"
    )
    parser.add_argument(
        "--out", type=Path, help="also keep each run's text and JSON here (the docs quote them)"
    )
    parser.add_argument(
        "--sizes", default="64,128,256,512", help="synthetic fabric sizes for the tomography alone"
    )
    parser.add_argument(
        "--no-lab", action="store_true", help="only the tomography on synthetic fabrics (no root)"
    )
    args = parser.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_lab:
        if os.geteuid() != 0:
            raise SystemExit("needs root: it builds a lab of network namespaces (or give --no-lab)")
        lab_part(args.discover, args.out)
    tomography_part([int(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    main()
