"""Helpers for tests about child processes: fake tools that hang and fork, and finding what is left.

A fake tool is a /bin/sh script that starts two background ``sleep`` grandchildren and then
execs a third: killing only the direct child (the old behaviour) leaves the two grandchildren
running. Every process of a fake carries a unique marker in its argv (the sleep duration, e.g.
``611.0384912``), so a test finds exactly its own processes in /proc, whatever else the machine runs.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path


def new_marker() -> str:
    """A sleep duration no other process will have: 600-700 s with seven random decimals.

    The last decimal is never 0: a command that takes the marker as a float option passes it on
    to its children as ``str(float)``, which drops a trailing zero (634.4834020 -> 634.483402),
    and the children would then not carry the marker (one run in ten failed that way)."""
    return f"{random.randint(600, 699)}.{random.randint(0, 999_999):06d}{random.randint(1, 9)}"


def write_hanging_tool(bindir: Path, name: str, marker: str) -> Path:
    """``bindir/name``: forks two grandchildren, then hangs (all three sleep ``marker`` seconds)."""
    sleep = shutil.which("sleep") or "/bin/sleep"
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text(f"#!/bin/sh\n{sleep} {marker} &\n{sleep} {marker} &\nexec {sleep} {marker}\n")
    path.chmod(0o755)
    return path


def pids_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose argv contains ``marker``."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state = stat.rpartition(")")[2].split()[0] if ")" in stat else "?"
        if needle in cmdline.split(b"\0") and state != "Z":
            found.append(int(entry))
    return found


def wait_gone(marker: str, timeout_s: float = 3.0) -> list[int]:
    """Processes still carrying ``marker`` after up to ``timeout_s`` (the kernel reaps orphans
    asynchronously: give it a moment before calling something a leak)."""
    end = time.monotonic() + timeout_s
    while True:
        left = pids_with(marker)
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.05)


def wait_for(marker: str, count: int = 1, timeout_s: float = 20.0) -> bool:
    """Wait until at least ``count`` processes carry ``marker`` (the fake tools have started)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if len(pids_with(marker)) >= count:
            return True
        time.sleep(0.05)
    return False


def kill_leftovers(marker: str) -> None:
    """Test cleanup: end what a failing test left behind (only processes carrying our marker)."""
    for pid in pids_with(marker):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
