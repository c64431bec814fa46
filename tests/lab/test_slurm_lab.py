"""A real Slurm cluster over the lab (Debian's slurm-wlm and munge): srun places tasks in the lab
hosts' namespaces, `fleet doctor` under srun names the one host planted with drift, drains it,
and resumes it (only it) once fixed; `lab down` leaves nothing behind.

Needs root, iproute2, slurm-wlm, munge and torch (for bench collective; fleet needs none): skipped
outside CI, saying why; under CI=true it runs. fleet's ranks learn the job's secret through the
lab's munged (no token is exported), as on a real Slurm cluster. Run it under the lab lock: `flock /tmp/fabricscope-lab.lock pytest tests/lab/test_slurm_lab.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fabricscope.lab import slurm
from tests.conftest import skip_unless_ci
from tests.fleet.fleetbuilder import build_fleet
from tests.lab.conftest import lab_available

pytestmark = pytest.mark.slow

LAB = "slurmt"
HOSTS = ["h1", "h2", "h3", "h4"]
SRUN_WAIT_S = "30"  # srun waits forever for a drained or dead node: --immediate bounds it


def _available() -> None:
    lab_available()
    for tool, package in (
        ("slurmd", "slurm-wlm"),
        ("slurmctld", "slurm-wlm"),
        ("srun", "slurm-wlm"),
        ("munged", "munge"),
        ("nsenter", "util-linux"),
    ):
        if not shutil.which(tool):
            skip_unless_ci(f"the Slurm lab needs {tool} (Debian package {package})")
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        skip_unless_ci("bench collective under srun needs torch (pip install 'fabricscope[torch]')")


def run(argv: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env}, timeout=timeout)


def fs(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "fabricscope", *args], env, timeout)


def srun(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return run(["srun", "-N", str(len(HOSTS)), f"--immediate={SRUN_WAIT_S}", *command], env)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """The Slurm lab, per-host roots (h3's NICs run older firmware) and the clients' environment."""
    _available()
    base = tmp_path_factory.mktemp("slurmlab")
    built = build_fleet(base / "built", 5, {3: ["firmware_behind"]})  # node-05: h3 once repaired
    roots = base / "roots"
    roots.mkdir()
    for name, host in zip(HOSTS, built):
        (roots / name).symlink_to(host)
    env = {
        "FABRICSCOPE_LAB_DIR": str(base / "labstate"),
        "FABRICSCOPE_ACTION_LOG": str(base / "actions.log"),
        "FABRICSCOPE_DB": str(base / "history.db"),
    }
    up = fs("lab", "up", "--name", LAB, "--hosts", str(len(HOSTS)), "--slurm", "--json", env=env)
    try:
        assert up.returncode == 0, up.stderr
        doc = json.loads(up.stdout)
        env["SLURM_CONF"] = doc["slurm"]["conf"]
        env["FABRICSCOPE_MUNGE_SOCKET"] = str(
            slurm.munge_socket(Path(doc["slurm"]["conf"]).parent)
        )  # not munged's default
        env["FABRICSCOPE_JOB_TOKEN"] = ""  # the secret comes through munge
        yield {
            "env": env,
            "roots": roots,
            "spare": built[4],
            "dir": Path(doc["slurm"]["conf"]).parent,
            "status": doc,
        }
    finally:
        fs("lab", "down", LAB, env=env)


def test_lab_up_slurm_makes_every_host_an_idle_node(cluster) -> None:
    assert cluster["status"]["slurm"]["nodes"] == dict.fromkeys(HOSTS, "idle")
    out = run(["sinfo", "-h", "-N", "-o", "%N %T %P"], cluster["env"]).stdout.split("\n")
    assert sorted(line for line in out if line) == [f"{h} idle lab*" for h in HOSTS]


def test_srun_runs_each_task_inside_its_lab_hosts_namespace(cluster) -> None:
    names = srun(cluster["env"], "-l", "hostname")
    assert names.returncode == 0, names.stderr
    assert sorted(names.stdout.split("\n"))[1:] == [f"{r}: {h}" for r, h in enumerate(HOSTS)]
    addrs = srun(cluster["env"], "-l", "ip", "-4", "-o", "addr", "show", "dev", "eth0")
    assert addrs.returncode == 0, addrs.stderr
    for rank in range(len(HOSTS)):
        line = next(ln for ln in addrs.stdout.splitlines() if ln.startswith(f"{rank}: "))
        assert f"198.18.0.{rank + 1}/24" in line  # the lab fabric, not this machine's network


def _fleet_doctor(cluster, *extra: str) -> subprocess.CompletedProcess[str]:
    return srun(
        cluster["env"],
        sys.executable,
        "-m",
        "fabricscope",
        "fleet",
        "doctor",
        "--root",
        f"{cluster['roots']}/{{host}}",
        "--timeout",
        "60",
        *extra,
    )


def _drained(env: dict[str, str]) -> dict[str, str]:
    """Node -> reason, from `sinfo -R` with the reason column wide enough to read it whole."""
    out = run(["sinfo", "-R", "-h", "-o", "%N|%E"], env).stdout
    return {node: reason for node, _, reason in (ln.partition("|") for ln in out.splitlines() if ln)}


def test_fleet_doctor_under_srun_names_exactly_the_drifted_host(cluster) -> None:
    proc = _fleet_doctor(cluster, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]  # firmware drift is a warning
    doc = json.loads(proc.stdout)
    assert sorted(n["name"] for n in doc["nodes"]) == HOSTS
    differing = {d["node"] for item in doc["drift"] for d in item["differing"]}
    assert differing == {"h3"} and {item["id"] for item in doc["drift"]} == {"fleet.firmware"}


def _settled_states(env: dict[str, str], limit_s: float = 15.0) -> dict[str, str]:
    """Node -> state once no node shows as not responding: right after a resume, slurmctld shows
    "idle*" until the node's next ping (about half a second in the lab)."""
    import time

    end = time.monotonic() + limit_s
    while True:
        states = dict(
            line.split() for line in run(["sinfo", "-h", "-N", "-o", "%N %T"], env).stdout.splitlines()
        )
        if not any(s.endswith("*") for s in states.values()) or time.monotonic() > end:
            return states
        time.sleep(0.2)


def test_drain_then_resume_only_what_fabricscope_drained(cluster) -> None:
    env = cluster["env"]
    drained = _fleet_doctor(cluster, "--fail-on", "warn", "--slurm-drain", "--apply")
    assert drained.returncode == 1, drained.stderr[-2000:]
    assert "done      scontrol update NodeName=h3 State=DRAIN" in drained.stdout
    assert _drained(env) == {"h3": "fabricscope: fleet.firmware mlx5_0"}
    show = run(["scontrol", "show", "node", "h3"], env).stdout
    assert (
        "DRAIN" in show.split("State=", 1)[1].split()[0]
        and "Reason=fabricscope: fleet.firmware mlx5_0 [root@" in show
    )

    # someone else drains h4 for their own reason; h3's firmware is fixed
    assert (
        run(["scontrol", "update", "NodeName=h4", "State=DRAIN", "Reason=disk replacement"], env).returncode
        == 0
    )
    (cluster["roots"] / "h3").unlink()
    (cluster["roots"] / "h3").symlink_to(cluster["spare"])
    # srun cannot place a task on a drained node: the recheck runs on every lab host outside Slurm
    resumed = fs(
        "fleet",
        "doctor",
        "--launch",
        f"lab:{LAB}",
        "--root",
        f"{cluster['roots']}/{{host}}",
        "--timeout",
        "60",
        "--fail-on",
        "warn",
        "--slurm-resume",
        "--apply",
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (
        "done      scontrol update NodeName=h3 State=RESUME" in resumed.stdout and "h4" not in resumed.stdout
    )
    assert _drained(env) == {"h4": "disk replacement"}
    states = _settled_states(env)
    assert states["h3"] == "idle" and states["h4"] == "drained"
    logged = [json.loads(line) for line in Path(env["FABRICSCOPE_ACTION_LOG"]).read_text().splitlines()]
    assert [(a["kind"], a["node"], a["ok"]) for a in logged] == [
        ("slurm.drain", "h3", True),
        ("slurm.resume", "h3", True),
    ]
    assert run(["scontrol", "update", "NodeName=h4", "State=RESUME"], env).returncode == 0


def test_bench_collective_runs_through_slurm(cluster) -> None:
    proc = srun(
        cluster["env"],
        sys.executable,
        "-m",
        "fabricscope",
        "bench",
        "collective",
        "--sizes",
        "64K",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--timeout",
        "60",
        "--no-store",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["entries"][0]["wrong"] == 0 and len(doc["entries"][0]["per_rank_time_s"]) == len(HOSTS)
    assert doc["params"]["launcher"] == "slurm"


def test_up_again_changes_nothing_and_restarts_a_slurm_that_died(cluster) -> None:
    env = cluster["env"]
    again = fs("lab", "up", "--name", LAB, "--hosts", str(len(HOSTS)), "--slurm", "--json", env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False, again.stderr
    ctl = [p for p in slurm.running(cluster["dir"]) if "slurmctld" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(ctl) == 1
    os.kill(ctl[0], 15)
    revived = fs("lab", "up", "--name", LAB, "--hosts", str(len(HOSTS)), "--slurm", "--json", env=env)
    assert revived.returncode == 0, revived.stderr
    doc = json.loads(revived.stdout)
    assert doc["changed"] is True and doc["slurm"]["nodes"] == dict.fromkeys(HOSTS, "idle")
    assert not cluster["dir"].exists()  # the old daemons were ended and their directory removed
    cluster["dir"] = Path(doc["slurm"]["conf"]).parent
    env["SLURM_CONF"] = doc["slurm"]["conf"]
    env["FABRICSCOPE_MUNGE_SOCKET"] = str(slurm.munge_socket(cluster["dir"]))
    assert srun(env, "hostname").returncode == 0


def test_lab_down_leaves_nothing_behind(cluster) -> None:
    env, folder = cluster["env"], cluster["dir"]
    before = _naming(folder)
    assert len(before) == len(HOSTS) + 2  # munged, slurmctld and one slurmd per host
    assert slurm.running(folder) == before  # their pid files find every one of them
    down = fs("lab", "down", LAB, env=env)
    assert down.returncode == 0, down.stderr
    assert _naming(folder) == []  # no munged, slurmctld or slurmd naming the lab's directory
    assert not folder.exists() and not slurm.leftovers(LAB)
    assert not [ns for ns in run(["ip", "netns", "list"], {}).stdout.split() if ns.startswith(f"fsl-{LAB}-")]
    assert run(["ip", "link", "show", slurm.leg_name(LAB)], {}).returncode != 0
    assert not list(Path(env["FABRICSCOPE_LAB_DIR"]).glob(f"{LAB}.*"))


def _naming(folder: Path) -> list[int]:
    """Live processes with an argument inside ``folder`` (the test's own view, not the lab's)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.isdigit() and any(str(folder).encode() in arg for arg in argv):
            found.append(int(entry))
    return sorted(found)
