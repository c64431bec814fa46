"""fleet doctor over 4,096 node documents: wall time and peak memory of the whole command.

Generates N `doctor --json` documents (default 4,096) from the doctor's own output on the RoCE
fixture host, each with its hostname, and plants drift on a known set of nodes (firmware one
release behind on 1%, RoCE v2 GID index 5 on 0.5%, PFC on priority 4 on 0.25%, one NIC missing on
4 nodes, every port at 200G on 2 nodes). Then runs `fabricscope fleet doctor --from DIR --json` as
a fresh process (interpreter start-up included), checks that it named exactly the planted nodes,
and prints wall time and peak resident memory against the issue's targets (10 s, 1 GB).

    python benchmarks/fleet_scale.py [--nodes 4096] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from doctor_perf import WRAPPER  # the CLI as the console script runs it, reporting its own VmHWM
from fixture_hosts import fixture_hosts

TARGET_WALL_S = 10.0
TARGET_RSS_MB = 1024.0
HOSTS = fixture_hosts()


def base_document() -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", "doctor", "--root", str(HOSTS / "roce-healthy"), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if proc.returncode != 0:
        raise SystemExit(f"doctor on the fixture failed: {proc.stderr[:300]}")
    return json.loads(proc.stdout)


def plant(doc: dict, kind: str) -> None:
    nics = doc["facts"]["nics"]
    if kind == "firmware":
        for nic in nics:
            nic["fw"] = "28.38.1900"
    elif kind == "gid":
        for nic in nics:
            nic["ports"][0]["roce_v2_ipv4_gid_index"] = 5
    elif kind == "pfc":
        for nic in nics:
            nic["ports"][0]["pfc_priorities"] = [4]
    elif kind == "nic7":
        del nics[5]
    elif kind == "rate":
        for nic in nics:
            nic["ports"][0]["rate_gbps"] = 200.0


def planted_nodes(n: int) -> dict[str, set[str]]:
    """Which node names carry which plant: deterministic, disjoint."""
    names = [f"gpu-{i:05d}" for i in range(n)]
    plan = {
        "firmware": names[7::100],
        "gid": names[13::200],
        "pfc": names[29::400],
        "nic7": names[41 :: n // 4 or 1][:4],
        "rate": names[53 :: n // 2 or 1][:2],
    }
    taken: set[str] = set()
    out = {}
    for kind, chosen in plan.items():
        out[kind] = {c for c in chosen if c not in taken}
        taken |= out[kind]
    return out


def generate(dest: Path, n: int) -> dict[str, set[str]]:
    base = base_document()
    plan = planted_nodes(n)
    kind_of = {name: kind for kind, names in plan.items() for name in names}
    for i in range(n):
        name = f"gpu-{i:05d}"
        doc = copy.deepcopy(base) if name in kind_of else base
        doc["host"] = {**base["host"], "hostname": name}
        if name in kind_of:
            plant(doc, kind_of[name])
        (dest / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    return plan


def one_run(directory: Path) -> tuple[float, float, dict]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, "fleet", "doctor", "--from", str(directory), "--json"],
        capture_output=True,
        check=False,
        timeout=600,
    )
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"fleet doctor failed (rc {proc.returncode}): {proc.stderr.decode()[:300]}")
    hwm = [line.split()[1] for line in proc.stderr.decode().splitlines() if line.startswith("VMHWM_KB ")]
    return wall, int(hwm[-1]) / 1024, json.loads(proc.stdout)


CHECK_OF = {
    "firmware": "fleet.firmware",
    "gid": "fleet.gid_index",
    "pfc": "fleet.pfc",
    "nic7": "fleet.ports",
    "rate": "fleet.port_rate",
}


def verify(doc: dict, plan: dict[str, set[str]], n: int) -> None:
    found: dict[str, set[str]] = {}
    for item in doc["drift"]:
        found.setdefault(item["id"], set()).update(d["node"] for d in item["differing"])
    expected = {CHECK_OF[kind]: names for kind, names in plan.items() if names}
    if found != expected or doc["summary"]["nodes"] != n:
        raise SystemExit(
            f"fleet doctor did not name exactly the planted nodes: {sorted(found)} vs {sorted(expected)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Write the documents here and keep them.")
    args = parser.parse_args()
    directory = args.keep or Path(tempfile.mkdtemp(prefix="fabricscope-fleet-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        plan = generate(directory, args.nodes)
        size = sum(p.stat().st_size for p in directory.iterdir())
        print(
            f"generated {args.nodes} documents ({size / 1e6:.0f} MB) in {time.perf_counter() - start:.1f} s; "
            f"planted on {sum(len(v) for v in plan.values())} nodes"
        )
        walls, peaks = [], []
        for _ in range(args.rounds):
            wall, peak, doc = one_run(directory)
            verify(doc, plan, args.nodes)
            walls.append(wall)
            peaks.append(peak)
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)
    median, peak = statistics.median(walls), max(peaks)
    print(
        f"fleet doctor --from DIR --json over {args.nodes} documents, {args.rounds} fresh processes on {os.cpu_count()} CPU(s); "
        "named exactly the planted nodes every time"
    )
    print(
        f"  wall time: median {median:.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s "
        f"(target < {TARGET_WALL_S:.0f} s: ratio {median / TARGET_WALL_S:.2f})"
    )
    print(f"  peak RSS:  {peak:.0f} MB (target < {TARGET_RSS_MB:.0f} MB: ratio {peak / TARGET_RSS_MB:.2f})")
    ok = median < TARGET_WALL_S and peak < TARGET_RSS_MB
    print("  verdict:", "within targets" if ok else "OUTSIDE targets")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
