"""Shared helpers of bench_tcp_vs_iperf3.py and bench_latency_vs_sockperf.py (not a benchmark itself)."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ensure_tool(binary: str, package: str) -> str:
    """The reference tool's path; installs the Debian package when missing and we may."""
    path = shutil.which(binary)
    if path:
        return path
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"{binary} missing: apt-get install -y {package}", file=sys.stderr)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", package], check=False, stdout=subprocess.DEVNULL, timeout=600
        )
        path = shutil.which(binary)
    if not path:
        sys.exit(f"{binary} is not installed (Debian package {package}); cannot compare")
    return path


class Background:
    """A server process started for the benchmark and always stopped afterwards."""

    def __init__(self, argv: list[str], ready_pattern: str | None = None, wait_s: float = 1.0) -> None:
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO
        )
        self.port = None
        if ready_pattern:
            assert self.proc.stderr is not None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                line = self.proc.stderr.readline()
                match = re.search(ready_pattern, line)
                if match:
                    self.port = int(match.group(1))
                    break
            if self.port is None:
                self.stop()
                sys.exit(f"{argv[0]} did not start")
        else:
            time.sleep(wait_s)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def fabricscope(*args: str, timeout: float = 300) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", *args, "--json", "--no-store"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    if proc.returncode != 0:
        sys.exit(f"fabricscope {' '.join(args)} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def serve_fabricscope() -> Background:
    return Background(
        [
            sys.executable,
            "-m",
            "fabricscope",
            "bench",
            "serve",
            "--port",
            "0",
            "--quiet",
            "--max-duration",
            "600",
        ],
        r"listening on \S+ port (\d+)",
    )


def summarize(name: str, ours: list[float], ref: list[float], ref_name: str, unit: str, better: str) -> float:
    """Print per-round figures and the median of per-round ratios (ours / reference)."""
    ratios = [o / r for o, r in zip(ours, ref) if r]
    print(f"\n{name}")
    print(f"  {'round':>5} {'fabricscope':>14} {ref_name:>14} {'ratio':>7}")
    for i, (o, r) in enumerate(zip(ours, ref), start=1):
        print(f"  {i:>5} {o:>11.3f} {unit:<2} {r:>11.3f} {unit:<2} {o / r if r else float('nan'):>7.3f}")
    median_ratio = statistics.median(ratios)
    print(
        f"  median fabricscope {statistics.median(ours):.3f} {unit}, {ref_name} {statistics.median(ref):.3f} {unit}"
    )
    print(f"  median ratio fabricscope/{ref_name} = {median_ratio:.3f} ({better})")
    return median_ratio
