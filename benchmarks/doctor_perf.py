"""Doctor on the 8-GPU/8-HCA fixture host: wall time and peak memory of the whole command.

Runs `fabricscope doctor --root tests/fixtures/hosts/<host> --json` as a fresh process N times
(interpreter start-up included, as a user sees it) and prints the median wall time and the peak
resident memory against the targets of the doctor issue (1 s, 100 MB). With ``--archive`` the
root is the host packed as a .tar.gz (what `fabricscope snapshot` writes): the archive is read
from its index, never unpacked, and must meet the same targets.

    python benchmarks/doctor_perf.py [--rounds 10] [--host ib-ndr-healthy] [--archive]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from fixture_hosts import fixture_hosts

TARGET_WALL_S = 1.0
TARGET_RSS_MB = 100.0
HOSTS = fixture_hosts()


# Runs the CLI like the console script does, then reports the process's own peak RSS (VmHWM):
# ru_maxrss of a child would also count what it inherited from this process at fork time.
WRAPPER = """
import atexit, sys
def _hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            sys.stderr.write('VMHWM_KB ' + line.split()[1] + '\\n')
atexit.register(_hwm)
sys.argv = ['fabricscope'] + sys.argv[1:]
from fabricscope.cli.main import main
main()
"""


def one_run(root: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one doctor process."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, "doctor", "--root", str(root), "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        timeout=60,
    )
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"doctor failed (rc {proc.returncode}): {proc.stderr.decode()[:200]}")
    hwm = [line.split()[1] for line in proc.stderr.decode().splitlines() if line.startswith("VMHWM_KB ")]
    return wall, int(hwm[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--host", default="ib-ndr-healthy")
    parser.add_argument("--archive", action="store_true", help="Read the host packed as a .tar.gz.")
    args = parser.parse_args()
    from fabricscope.host.tempfiles import private_dir

    with private_dir("bench-doctor") as tmp:
        root = HOSTS / args.host
        if args.archive:
            root = tmp / f"{args.host}.tar.gz"
            with tarfile.open(root, "w:gz") as tar:
                tar.add(HOSTS / args.host, arcname=args.host)
        walls, peaks = [], []
        for _ in range(args.rounds):
            wall, peak = one_run(root)
            walls.append(wall)
            peaks.append(peak)
    median = statistics.median(walls)
    peak = max(peaks)
    what = f"{args.host}.tar.gz" if args.archive else args.host
    print(f"doctor --root {what} --json, {args.rounds} fresh processes on {os.cpu_count()} CPU(s)")
    print(
        f"  wall time: median {median:.3f} s, min {min(walls):.3f} s, max {max(walls):.3f} s "
        f"(target < {TARGET_WALL_S:.1f} s: ratio {median / TARGET_WALL_S:.2f})"
    )
    print(f"  peak RSS:  {peak:.1f} MB (target < {TARGET_RSS_MB:.0f} MB: ratio {peak / TARGET_RSS_MB:.2f})")
    ok = median < TARGET_WALL_S and peak < TARGET_RSS_MB
    print("  verdict:", "within targets" if ok else "OUTSIDE targets")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
