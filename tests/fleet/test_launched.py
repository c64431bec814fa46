"""`fleet doctor` / `fleet collect` launched as a job: real ranks (``--launch local:N``) meeting at
the job's own store (no torch), each reading its own node (a per-node ``--root``), rank 0 judging. The same run
under real Slurm in the lab is tests/lab/test_slurm_lab.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fabricscope.fleet.launched import Received, node_label, own_root, to_nodes
from fabricscope.jobs.launch import DistEnv
from fabricscope.jobs.rendezvous import RendezvousError, gather, open_store
from tests.fleet.fleetbuilder import build_fleet


def fs(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def per_node_roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """local0..local2 as `--launch local:3` names its ranks; local1's NICs run older firmware."""
    base = tmp_path_factory.mktemp("launched")
    hosts = build_fleet(base / "built", 3, {2: ["firmware_behind"]})
    roots = base / "roots"
    roots.mkdir()
    for i, host in enumerate(hosts):
        (roots / f"local{i}").symlink_to(host)
    return roots


@pytest.mark.slow
def test_launched_fleet_doctor_names_exactly_the_node_that_drifted(per_node_roots: Path) -> None:
    proc = fs(
        "fleet",
        "doctor",
        "--launch",
        "local:3",
        "--root",
        f"{per_node_roots}/{{host}}",
        "--timeout",
        "60",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]  # firmware drift is a warning; --fail-on fail
    doc = json.loads(proc.stdout)
    assert sorted(n["name"] for n in doc["nodes"]) == ["local0", "local1", "local2"]
    drift = [d for d in doc["drift"] if d["id"] == "fleet.firmware"]
    assert drift and {x["node"] for d in drift for x in d["differing"]} == {"local1"}, doc["drift"]


@pytest.mark.slow
def test_launched_fleet_collect_keeps_every_nodes_document(per_node_roots: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept"
    proc = fs(
        "fleet",
        "collect",
        "--launch",
        "local:3",
        "--root",
        f"{per_node_roots}/{{host}}",
        "-o",
        str(out),
        "--timeout",
        "60",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in out.glob("*.json")) == ["local0.json", "local1.json", "local2.json"]
    fw = json.loads((out / "local1.json").read_text())["facts"]["nics"][0]["fw"]
    assert fw == "28.38.1900"
    # what was kept is what fleet doctor reads; --from names a node by the hostname its document
    # carries (local1's root is the fixture host node-02), the file by the node's name in the job
    again = fs("fleet", "doctor", "--from", str(out), "--json")
    assert {x["node"] for d in json.loads(again.stdout)["drift"] for x in d["differing"]} == {"node-02"}


@pytest.mark.slow
def test_launched_collect_sends_scrubbed_snapshots_too(per_node_roots: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept"
    proc = fs(
        "fleet",
        "collect",
        "--launch",
        "local:3",
        "--root",
        f"{per_node_roots}/{{host}}",
        "-o",
        str(out),
        "--snapshot",
        "--json",
        "--timeout",
        "60",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    kept = json.loads(proc.stdout)["nodes"]
    assert [Path(n["snapshot"]).name for n in kept] == ["local0.tar.gz", "local1.tar.gz", "local2.tar.gz"]
    judged = fs(
        "fleet", "doctor", "--from", str(out / "snapshots"), "--json"
    )  # the snapshots judge as the documents did
    assert judged.returncode == 0, judged.stderr
    assert {x["node"] for d in json.loads(judged.stdout)["drift"] for x in d["differing"]} == {"local1"}


@pytest.mark.slow
def test_a_node_that_cannot_be_read_is_a_finding_not_a_crash(per_node_roots: Path, tmp_path: Path) -> None:
    roots = tmp_path / "roots"
    roots.mkdir()
    for name in ("local0", "local1"):
        (roots / name).symlink_to((per_node_roots / "local0").resolve())
    proc = fs(
        "fleet", "doctor", "--launch", "local:3", "--root", f"{roots}/{{host}}", "--timeout", "60", "--json"
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    bad = [n for n in json.loads(proc.stdout)["nodes"] if n["name"] == "local2"]
    assert (
        bad and bad[0]["findings"][0]["id"] == "fleet.input" and "local2" in bad[0]["findings"][0]["message"]
    )


def test_outside_a_job_without_documents_is_a_clear_error() -> None:
    env = {
        k: ""
        for k in (
            "RANK",
            "WORLD_SIZE",
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "PMI_RANK",
            "PMI_SIZE",
            "FABRICSCOPE_LAUNCHER",
        )
    }
    proc = fs("fleet", "doctor", env=env)
    assert (
        proc.returncode == 2
        and "srun -N 4 fabricscope fleet" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_rank_that_dies_ends_the_gather_with_an_error_naming_it() -> None:
    """Rank 1 joins the store and dies before handing anything in: rank 0 stops at its deadline,
    naming it (and only it)."""
    port = _free_port()
    envs = [DistEnv(r, 3, 0, "127.0.0.1", port, "torchrun") for r in (0, 1, 2)]
    joined = threading.Event()

    def dying_rank() -> None:
        meeting = open_store(envs[1], 30, needs="test", environ={})
        joined.set()
        meeting.close()

    def good_rank() -> None:
        gather(open_store(envs[2], 30, needs="test", environ={}), {"document": "{}"}, timeout_s=10)

    threads = [threading.Thread(target=dying_rank), threading.Thread(target=good_rank)]
    for thread in threads:
        thread.start()
    meeting = open_store(envs[0], 30, needs="test", environ={})
    for thread in threads:
        thread.join(30)
    assert joined.is_set()
    with pytest.raises(RendezvousError, match=r"^rank 1 sent nothing within 1 s"):
        gather(meeting, {"document": "{}"}, timeout_s=1)
    meeting.close()


def test_nodes_are_named_as_the_scheduler_knows_them() -> None:
    env = DistEnv(0, 2, 0, "h1", 1, "slurm")
    assert node_label(env, {"SLURMD_NODENAME": "gpu017"}) == "gpu017"
    assert node_label(DistEnv(0, 2, 0, "h1", 1, "lab:x", "h3"), {"SLURMD_NODENAME": "gpu017"}) == "h3"
    assert node_label(env, {}) is None
    assert own_root("/data/{host}/snap", "gpu017") == "/data/gpu017/snap" and own_root(None, "x") is None
    doc = {
        "schema": "fabricscope.doctor/v1",
        "host": {"hostname": "node-07.example"},
        "findings": [],
        "facts": {},
    }
    nodes = to_nodes(
        [
            Received(0, None, doc, None, None),
            Received(1, "gpu017", doc, None, None),
            Received(2, None, doc, None, None),
        ]
    )
    assert [n.name for n in nodes] == ["node-07.example", "gpu017", "node-07.example#2"]
