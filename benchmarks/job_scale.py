"""job diagnose over 4,096 ranks of Flight Recorder dumps (2,000 entries each): wall time, peak memory.

Generates one dump per rank (pickle, 1 in 8 JSON, as PyTorch writes both) shaped like the real
NCCL dump captured on an H200 (tests/data/job/h200/healthy_nccl_fr_rank0.pkl: its keys, frames
and values), 8 ranks per host in per-host folders; every rank is 60 s inside collective 10,000
except one planted rank that never entered it. Then runs `fabricscope job diagnose DIR --json`
as a fresh process (interpreter start-up included), checks that exactly the planted rank and its
host are named with the right class, and prints wall time and peak resident memory against the
issue's targets (20 s, 2 GB).

    python benchmarks/job_scale.py [--ranks 4096] [--entries 2000] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from doctor_perf import WRAPPER  # the CLI as the console script runs it, reporting its own VmHWM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from fabricscope.triage.safe_pickle import loads_plain  # noqa: E402

REAL = ROOT / "tests" / "data" / "job" / "h200" / "healthy_nccl_fr_rank0.pkl"
TARGET_WALL_S = 20.0
TARGET_RSS_MB = 2048.0
LAST = 10_000  # the collective every rank but the planted one is in
RANKS_PER_HOST = 8


def dump_for(rank: int, ranks: int, entries: int, template: dict, now_ns: int, planted: int) -> dict:
    last = LAST - 1 if rank == planted else LAST
    base = template["entries"][0]
    out = []
    for seq in range(last - entries + 1, last + 1):
        created = now_ns - (LAST - seq) * 250_000_000 - 60_000_000_000 + rank * 1000
        done = seq < LAST
        out.append(
            {
                **base,
                "record_id": seq - 1,
                "collective_seq_id": seq,
                "op_id": seq,
                "time_created_ns": created,
                "time_discovered_started_ns": created + 20_000 if done else None,
                "time_discovered_completed_ns": created + 9_000_000 if done else None,
                "duration_ms": 8.9 if done else None,
                "state": "completed" if done else "scheduled",
                "retired": done,
            }
        )
    return {
        "version": template["version"],
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}},
        "comm_lib_version": template["comm_lib_version"],
        "pg_status": {
            "0": {
                "last_enqueued_collective": last,
                "last_started_collective": last,
                "last_completed_collective": LAST - 1,
            }
        },
        "entries": out,
    }


def generate(dest: Path, ranks: int, entries: int) -> tuple[int, str]:
    template = loads_plain(REAL.read_bytes())
    planted = (ranks * 2) // 3 + 1
    now_ns = time.time_ns()
    for rank in range(ranks):
        host = f"node{rank // RANKS_PER_HOST:04d}"
        folder = dest / host
        folder.mkdir(parents=True, exist_ok=True)
        doc = dump_for(rank, ranks, entries, template, now_ns, planted)
        if rank % 8 == 5:
            (folder / f"nccl_trace_rank_{rank}.json").write_text(
                json.dumps(doc, separators=(",", ":"), sort_keys=True)
            )
        else:
            (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(doc, protocol=2))
    same_time(dest)
    return planted, f"node{planted // RANKS_PER_HOST:04d}"


def same_time(dest: Path) -> None:
    """Every dump written at the same moment, as the ranks' watchdogs dump on one timeout (the
    generator takes a minute: spread file times would read as stale dumps)."""
    now = time.time()
    for path in dest.rglob("nccl_trace_rank_*"):
        os.utime(path, (now, now))


def one_run(directory: Path) -> tuple[float, float, dict, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, "job", "diagnose", str(directory), "--json", "--stall-after", "30"],
        capture_output=True,
        check=False,
        timeout=600,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"job diagnose failed (rc {proc.returncode}): {proc.stderr.decode()[:300]}")
    hwm = [line.split()[1] for line in proc.stderr.decode().splitlines() if line.startswith("VMHWM_KB ")]
    return wall, int(hwm[-1]) / 1024, json.loads(proc.stdout), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="generate here (or reuse what is there) and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="fabricscope-jobscale-"))
    marker = work / "planted.json"
    try:
        if marker.exists():
            planted, host = json.loads(marker.read_text())
            same_time(work)
        else:
            t0 = time.perf_counter()
            planted, host = generate(work, args.ranks, args.entries)
            marker.write_text(json.dumps([planted, host]))
            print(
                f"generated {args.ranks} dumps x {args.entries} entries in {time.perf_counter() - t0:.0f} s "
                f"({sum(p.stat().st_size for p in work.rglob('*')) / 2**20:.0f} MiB)"
            )
        walls, rss, cpus = [], [], []
        for _ in range(args.rounds):
            wall, mb, doc, cpu = one_run(work)
            walls.append(wall)
            cpus.append(cpu)
            rss.append(mb)
            named = [(c["rank"], c["host"]) for c in doc["verdict"]["culprits"]]
            assert doc["verdict"]["class"] == "never_entered" and named == [(planted, host)], doc["verdict"]
        print(
            f"culprit named: rank {planted} on {host} ({doc['verdict']['class']}); "
            f"dumps read whole: {doc['rests_on']['dumps_read_whole']} of {len(doc['rests_on']['ranks'])}"
        )
        print(
            f"wall: median {statistics.median(walls):.2f} s, max {max(walls):.2f} s (target {TARGET_WALL_S:g} s), "
            f"CPU median {statistics.median(cpus):.2f} s (load average {os.getloadavg()[0]:.1f}); "
            f"peak RSS: max {max(rss):.0f} MB (target {TARGET_RSS_MB:g} MB)"
        )
        if max(walls) > TARGET_WALL_S or max(rss) > TARGET_RSS_MB:
            raise SystemExit("over target")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
