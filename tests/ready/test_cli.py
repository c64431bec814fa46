"""`fabricscope ready` from the command line: bad input gives one line and exit 2; a real run of
three ranks on this machine (--launch local:3, loopback) gives one verdict with its culprit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_torch


def fs(
    *args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
    }
    return subprocess.run([sys.executable, "-m", "fabricscope", *args], capture_output=True, text=True, timeout=timeout,
                          env={**clean, **(env or {})}, cwd=cwd)  # fmt: skip


@pytest.mark.parametrize(("args", "says"), [
    ([], "run it as the job runs"),
    (["--fail-on", "info"], "--fail-on 'info'"),
    (["--script", "/nonexistent/job.sh"], "--script /nonexistent/job.sh"),
    (["--sizes", "12Q"], "--sizes"),
    (["--topology", "/nonexistent.yaml"], "no such file"),
    (["--budget", "5"], "--budget"),
    (["--launch", "local:16", "--budget", "40"], "too short for"),
    (["--expect", "/nonexistent.yaml"], "nonexistent"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    proc = fs("ready", *args, "--backend", "gloo")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fabricscope: error: ") and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_three_local_ranks_name_the_bad_setting(tmp_path: Path) -> None:
    """Loopback is far faster than the 100 Mbit/s the nodes are said to have: the measured steps
    pass, and the job's setting that names no interface is the one culprit."""
    require_torch()
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 3\nexport NCCL_SOCKET_IFNAME=ib9\nsrun python train.py\n")
    env = {"FABRICSCOPE_DB": str(tmp_path / "history.db")}
    proc = fs("ready", "--launch", "local:3", "--nic-rate", "100mbit", "--sizes", "1M", "--backend", "gloo", "--budget", "120",
              "--script", str(script), "--json", env=env)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.ready/v1" and doc["verdict"] == "not ready" and doc["exit_code"] == 1
    steps = {s["name"]: s for s in doc["steps"]}
    assert list(steps) == ["doctor", "lint", "matrix", "collective"]
    assert (
        steps["lint"]["status"] == "fail"
        and steps["matrix"]["status"] == "pass"
        and steps["collective"]["status"] == "pass"
    )
    culprit = steps["lint"]["culprits"][0]
    assert (
        culprit["kind"] == "setting"
        and culprit["finding"] == "NCCL020"
        and culprit["nodes"] == ["local0", "local1", "local2"]
    )
    assert doc["drain"] == []  # a job setting is the job's to fix, not a node to drain
    assert steps["matrix"]["predicted"] and steps["collective"]["predicted"]
    again = fs(
        "ready",
        "--launch",
        "local:3",
        "--nic-rate",
        "100mbit",
        "--sizes",
        "1M",
        "--backend",
        "gloo",
        "--budget",
        "120",
        env=env,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    text = again.stdout
    assert (
        text.index("[doctor]")
        < text.index("[lint]")
        < text.index("[predict]")
        < text.index("[matrix]")
        < text.index("[collective]")
    )
    assert "fabricscope ready: READY" in text
