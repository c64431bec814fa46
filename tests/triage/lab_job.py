"""Run tests/triage/train_job.py across a lab's hosts with one planted fault, and keep what it left.

Shared by the lab tests of `job diagnose` and `job watch`: the job is a real torch.distributed
(gloo) job started by `fabricscope lab run`; faults are planted from outside (SIGSTOP, SIGKILL)
or inside (JOB_FAULT), and the dumps and stderr are copied when the stall has lasted long enough.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from itertools import count
from pathlib import Path

TRAIN = Path(__file__).with_name("train_job.py")
# Each job its own rendezvous port: jobs follow one another in the same lab hosts.
_PORTS = count(29641)


@dataclass
class JobRun:
    dumps: Path  # the directory the ranks dump into (per host)
    stderr: Path
    proc: subprocess.Popen
    started: float


def host_pids(lab: str, host: str) -> list[int]:
    """Every process in the lab host's namespace."""
    out = subprocess.run(
        ["ip", "netns", "pids", f"fsl-{lab}-{host}"], capture_output=True, text=True, timeout=10
    ).stdout.split()
    return [int(pid) for pid in out]


def job_pids(lab: str, host: str) -> list[int]:
    pids = []
    for pid in host_pids(lab, host):
        try:
            if "train_job" in Path(f"/proc/{pid}/cmdline").read_text():
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def start(
    lab: str,
    work: Path,
    *,
    env: dict[str, str] | None = None,
    steps: int = 80,
    timeout: float = 90,
    port: int | None = None,
) -> JobRun:
    dumps = work / "dumps"
    dumps.mkdir(parents=True)
    full = {**os.environ, "DUMP_DIR": str(dumps), "STEPS": str(steps), **(env or {})}
    stderr = work / "stderr.txt"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fabricscope",
            "lab",
            "run",
            lab,
            "--timeout",
            str(timeout),
            "--grace",
            "3",
            "--master-port",
            str(port or next(_PORTS)),
            "--",
            sys.executable,
            str(TRAIN),
        ],
        env=full,
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("w"),
    )
    return JobRun(dumps, stderr, proc, time.monotonic())


def wait_training(run: JobRun, host: str, rank: int, limit: float = 90) -> None:
    """Until this rank has written its first dump (past start-up and rendezvous)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if any((run.dumps / host / f"fr_rank{rank}.{ext}").exists() for ext in ("json", "pkl")):
            return
        time.sleep(0.1)
    raise AssertionError(f"rank {rank} on {host} never dumped")


def plant_signal(lab: str, run: JobRun, host: str, rank: int, sig: int, settle: float = 2.0) -> list[int]:
    wait_training(run, host, rank)
    time.sleep(settle)  # in the middle of training
    pids = job_pids(lab, host)
    assert pids, f"no train_job process in {host}"
    for pid in pids:
        os.kill(pid, sig)
    return pids


def snapshot(run: JobRun, dest: Path) -> Path:
    """The dumps and the stderr as they are now (mtimes kept: a stale dump is evidence)."""
    shutil.copytree(run.dumps, dest)
    shutil.copy2(run.stderr, dest / "stderr.txt")
    return dest


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def finish(run: JobRun, pids: list[int] = ()) -> None:
    kill(pids)
    try:
        run.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        run.proc.wait(timeout=30)
