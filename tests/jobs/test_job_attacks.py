"""Whole commands against a stranger process on loopback (issue 20): the stranger
(tests/jobs/stranger.py) knows the job's port but not its secret, and tries what the review did.
The fleet, collective and incast attacks also run against the code before the fix (PYTHONPATH at
its src/), where the stranger won; the matrix one did not win there in our runs (its race against
the real rank 1's write was lost), so it holds the fix without having shown the hole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TESTS, skip_unless_ci
from tests.fleet.fleetbuilder import build_fleet
from tests.lab.conftest import fs


def _stranger(mode: str, port: int, arg: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.jobs.stranger", mode, str(port), arg], cwd=TESTS.parent,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent / "src"), str(TESTS.parent)])},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def _port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(10)


@pytest.mark.slow
def test_a_stranger_cannot_steer_what_fleet_doctor_drains(tmp_path: Path) -> None:
    """local1 runs older firmware than the others (drift: it should be drained, dry run); the
    stranger keeps writing a copy of local0's healthy document as rank 1's."""
    hosts = build_fleet(tmp_path / "built", 3, {2: ["firmware_behind"]})
    roots = tmp_path / "roots"
    roots.mkdir()
    for i, host in enumerate(hosts):
        (roots / f"local{i}").symlink_to(host)
    healthy = fs("doctor", "--root", str(roots / "local0"), "--json")
    (tmp_path / "forged.json").write_text(healthy.stdout)
    port = _port()
    stranger = _stranger("fleet", port, str(tmp_path / "forged.json"))
    try:
        proc = fs("fleet", "doctor", "--launch", "local:3", "--master-port", str(port), "--root", f"{roots}/{{host}}",
                  "--fail-on", "warn", "--slurm-drain", "--timeout", "60", "--json", timeout=240)  # fmt: skip
    finally:
        _stop(stranger)
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert {x["node"] for d in doc["drift"] if d["id"] == "fleet.firmware" for x in d["differing"]} == {
        "local1"
    }
    assert [a["node"] for a in doc["actions"] if a["kind"] == "slurm.drain"] == ["local1"], doc["actions"]


@pytest.mark.slow
def test_a_pickle_sent_to_bench_collective_runs_no_code(tmp_path: Path) -> None:
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        skip_unless_ci("torch is not installed (the stranger joins torch's process group)")
    canary = tmp_path / "canary"
    port = _port()
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "GLOO_SOCKET_IFNAME": "lo", "FABRICSCOPE_DB": str(tmp_path / "h.db")}  # fmt: skip
    rank0 = subprocess.Popen([sys.executable, "-m", "fabricscope", "bench", "collective", "--sizes", "1K", "--backend", "gloo",
                              "--timeout", "30", "--no-store"], env={**os.environ, **env}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    stranger = _stranger("pickle", port, str(canary))
    try:
        _, err = rank0.communicate(timeout=120)
    finally:
        _stop(stranger)
    assert not canary.exists(), "rank 0 unpickled the stranger's message and ran its code"
    assert rank0.returncode == 2 and "rank 1 sent a ranks message that is not ours" in err, err[-2000:]


@pytest.mark.slow
def test_a_stranger_cannot_move_a_matrix_endpoint(tmp_path: Path) -> None:
    """The stranger keeps publishing its own listener as rank 1's endpoint: no flow may reach it."""
    from tests.loopback_attacker import attacker_address

    attacker_address()
    log = tmp_path / "moved"
    port = _port()
    stranger = _stranger("matrix", port, str(log))
    try:
        proc = fs("bench", "matrix", "--launch", "local:3", "--master-port", str(port), "--duration", "0.3", "--warmup", "0.05",
                  "--no-rdma", "--no-store", "--json", "--timeout", "60", timeout=240)  # fmt: skip
    finally:
        _stop(stranger)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert json.loads(proc.stdout)["hosts"] == ["local0", "local1", "local2"]
    assert not log.exists(), "matrix traffic went to the stranger's endpoint"


def _munged(tmp_path: Path) -> dict[str, str]:
    """Our own munged (a key of its own, a socket under tmp_path), as every Slurm node runs one."""
    import shutil

    if not shutil.which("munged") or os.geteuid() != 0:
        skip_unless_ci("munged (Debian's munge) and root are needed")
    import tempfile

    base = Path(
        tempfile.mkdtemp(prefix="fabricscope-test-munge-", dir="/tmp")
    )  # munged wants every parent open to all
    os.chmod(base, 0o755)
    (base / "key").write_bytes(os.urandom(1024))
    os.chmod(base / "key", 0o600)
    sock = base / "sock"
    subprocess.run(["munged", f"--socket={sock}", f"--key-file={base / 'key'}", f"--log-file={base / 'log'}",
                    f"--pid-file={base / 'pid'}", f"--seed-file={base / 'seed'}"], check=True, timeout=30)  # fmt: skip
    return {"FABRICSCOPE_MUNGE_SOCKET": str(sock), "pidfile": str(base / "pid")}


def _stop_munged(munge: dict[str, str]) -> None:
    import shutil
    import signal

    pid = int(Path(munge["pidfile"]).read_text())
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.2)
    shutil.rmtree(Path(munge["pidfile"]).parent, ignore_errors=True)


@pytest.mark.slow
def test_under_slurm_without_a_token_incast_keeps_strangers_out_through_munge(tmp_path: Path) -> None:
    """srun gives no token; rank 0 hands the job's key to its ranks through munge. Before the fix the
    token was the Slurm job id, which anyone can learn (squeue), and the stranger became a sender."""
    munge = _munged(tmp_path)
    port = _port()
    try:
        base = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "3", "SLURM_JOB_NODELIST": "localhost", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "FABRICSCOPE_MUNGE_SOCKET": munge["FABRICSCOPE_MUNGE_SOCKET"],
                "FABRICSCOPE_JOB_TOKEN": "", "RANK": "", "WORLD_SIZE": "", "FABRICSCOPE_DB": str(tmp_path / "h.db")}  # fmt: skip
        args = [
            sys.executable,
            "-m",
            "fabricscope",
            "bench",
            "incast",
            "--rounds",
            "2",
            "--size",
            "16KiB",
            "--timeout",
            "30",
            "--json",
            "--no-store",
        ]
        ranks = [subprocess.Popen(args, env={**os.environ, **base, "SLURM_PROCID": str(r), "SLURM_LOCALID": str(r),
                                             "FABRICSCOPE_HOST": f"n{r}"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in (0,)]  # fmt: skip
        stranger = _stranger("incast", port, "4242")
        time.sleep(1.5)  # the stranger is in first
        ranks += [subprocess.Popen(args, env={**os.environ, **base, "SLURM_PROCID": str(r), "SLURM_LOCALID": str(r),
                                              "FABRICSCOPE_HOST": f"n{r}"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for r in (1, 2)]  # fmt: skip
        try:
            outs = [p.communicate(timeout=120) for p in ranks]
        finally:
            _stop(stranger)
    finally:
        _stop_munged(munge)
    assert [p.returncode for p in ranks] == [0, 0, 0], [o[1][-1500:] for o in outs]
    assert json.loads(outs[0][0])["hosts"] == ["receiver:n0", "n1", "n2"]
