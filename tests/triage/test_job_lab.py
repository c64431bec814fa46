"""`job diagnose` on real torch.distributed (gloo) jobs across lab hosts, one planted fault at a time
(root; CI runs them). Each culprit is named exactly, with no innocent rank or host.

One 4-host star serves the module's jobs (a lab up and down per test cost 3-5 s each): every test
starts its own job on its own port, nothing of a job outlives its test (_no_job_left), and the
test that shapes a link puts it back."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.conftest import SLURM_LANE, require_torch
from tests.lab import conftest as lab_fixtures
from tests.lab.conftest import fs, planted
from tests.triage import lab_job

# one lab name for the module: its tests must run one after another, in the lane tests/conftest.py
# gives the triage labs (also marked here, statically: xdist joins every group name an item has)
pytestmark = [pytest.mark.slow, pytest.mark.lab, pytest.mark.xdist_group(SLURM_LANE)]

lab_dir = lab_fixtures.lab_dir
make_lab = lab_fixtures.make_lab


LAB = "tjob"
HOSTS = ("h1", "h2", "h3", "h4")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_torch()
    yield from lab_fixtures.module_lab(tmp_path_factory, LAB, "--hosts", "4", "--link-rate", "1gbit")


@pytest.fixture(autouse=True)
def _no_job_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """What a fresh lab per test gave: nothing of an earlier job (a stopped rank, a failed test's)
    is left in the hosts when the next job starts (`lab down` ends every process in them), and
    no TCP metrics an earlier job's connections cached (ssthresh, RTT) start the next one's."""
    yield
    if "lab" in request.fixturenames:
        for host in HOSTS:
            lab_job.kill(lab_job.host_pids(LAB, host))
            subprocess.run(["ip", "-n", f"fsl-{LAB}-{host}", "tcp_metrics", "flush", "all"], timeout=10)


def _diagnose(*paths) -> tuple[int, dict]:
    proc = fs("job", "diagnose", *map(str, paths), "--json", timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _shown(doc: dict) -> str:
    """The whole verdict, headline and evidence, for a failure message (a dict's repr is cut short)."""
    return json.dumps(doc["verdict"], indent=1)


def _named(doc: dict) -> list[tuple[int, str]]:
    return [(c["rank"], c["host"]) for c in doc["verdict"]["culprits"]]


def test_healthy_job_is_healthy(lab, tmp_path) -> None:
    run = lab_job.start(lab, tmp_path / "run", steps=40)
    lab_job.finish(run)
    assert run.proc.returncode == 0, run.stderr.read_text()[-2000:]
    rc, doc = _diagnose(run.dumps, run.stderr)
    assert rc == 0 and doc["verdict"]["class"] == "healthy", _shown(doc)


def test_sigstopped_rank_is_named(lab, tmp_path) -> None:
    run = lab_job.start(lab, tmp_path / "run", steps=400)
    pids = lab_job.plant_signal(lab, run, "h3", 2, signal.SIGSTOP)
    time.sleep(14)  # past --stall-after (10 s): the others wait, h3's dump stops changing
    snap = lab_job.snapshot(run, tmp_path / "snap")
    lab_job.finish(run, pids)
    rc, doc = _diagnose(snap)
    assert rc == 1 and doc["verdict"]["class"] == "stopped" and _named(doc) == [(2, "h3")], _shown(doc)


def test_killed_rank_is_named(lab, tmp_path) -> None:
    run = lab_job.start(lab, tmp_path / "run", steps=400)
    lab_job.plant_signal(lab, run, "h3", 2, signal.SIGKILL)
    lab_job.finish(run)  # the others fail on the lost peer; lab run reports the exits
    rc, doc = _diagnose(run.dumps, run.stderr)
    assert rc == 1 and doc["verdict"]["class"] == "died" and _named(doc) == [(2, "h3")], _shown(doc)


def test_skipped_collective_is_named(lab, tmp_path) -> None:
    run = lab_job.start(
        lab, tmp_path / "run", env={"JOB_FAULT": "skip:2:20", "DUMP_EACH": "1", "PG_TIMEOUT": "20"}
    )
    lab_job.finish(run)
    rc, doc = _diagnose(run.dumps, run.stderr)
    assert rc == 1 and doc["verdict"]["class"] == "never_entered" and _named(doc) == [(2, "h3")], _shown(doc)
    assert "skipped" in doc["verdict"]["culprits"][0]["why"]


def test_size_mismatch_is_named(lab, tmp_path) -> None:
    run = lab_job.start(
        lab, tmp_path / "run", env={"JOB_FAULT": "size:1:20", "DUMP_EACH": "1", "PG_TIMEOUT": "20"}
    )
    lab_job.finish(run)
    rc, doc = _diagnose(run.dumps, run.stderr)
    assert rc == 1 and doc["verdict"]["class"] == "mismatch" and _named(doc) == [(1, "h2")], _shown(doc)


def test_watch_writes_the_diagnosis_within_30_s_of_a_sigstop(lab, tmp_path) -> None:
    import sys

    run = lab_job.start(lab, tmp_path / "run", steps=400)
    lab_job.wait_training(run, "h3", 2)
    out = tmp_path / "out"
    out.mkdir()
    prom = tmp_path / "job.prom"
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fabricscope",
            "job",
            "watch",
            str(run.dumps),
            "--interval",
            "2",
            "--out",
            str(out),
            "--textfile",
            str(prom),
            "--exit-on-stall",
            "--duration",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pids = lab_job.plant_signal(lab, run, "h3", 2, signal.SIGSTOP, settle=4.0)
        stopped = time.time()
        stdout, stderr = watcher.communicate(timeout=150)
    finally:
        watcher.kill()
        lab_job.finish(run, pids if "pids" in locals() else [])
    assert watcher.returncode == 1, stderr
    written = sorted(out.glob("job-diagnosis-*.json"))
    assert len(written) == 1, stdout
    assert written[0].stat().st_mtime - stopped < 30, "diagnosis later than 30 s after the stall"
    doc = json.loads(written[0].read_text())
    assert doc["verdict"]["class"] == "stopped" and _named(doc) == [(2, "h3")], _shown(doc)
    metrics = prom.read_text()
    assert 'fabricscope_job_suspect{class="stopped",host="h3",rank="2"} 1.0' in metrics
    assert 'fabricscope_job_last_completed_collective{host="h1",rank="0"}' in metrics


def test_compute_straggler_is_named_with_its_slowdown(lab, tmp_path) -> None:
    """Rank 1's compute takes 3x as long (0.15 s vs 0.05 s a step): it arrives last at the collectives after it."""
    run = lab_job.start(lab, tmp_path / "run", env={"JOB_FAULT": "slow:1:3"}, steps=40)
    lab_job.finish(run)
    assert run.proc.returncode == 0, run.stderr.read_text()[-2000:]
    rc, doc = _diagnose(run.dumps, run.stderr)
    assert rc == 1 and doc["verdict"]["class"] == "straggler" and _named(doc) == [(1, "h2")], _shown(doc)
    assert doc["verdict"]["slowdown"] > 1.2


def test_link_shaped_host_is_named(lab, tmp_path) -> None:
    """h3's link at a tenth (100 of 1,000 Mbit/s): a slow link at h3, not its ring neighbour h2."""
    with planted(lab, "h3", ("--link-rate", "100mbit"), undo=("--link-rate", "1gbit")):
        run = lab_job.start(lab, tmp_path / "run", env={"GRAD": "262144"}, steps=40)
        lab_job.finish(run)
    assert run.proc.returncode == 0, run.stderr.read_text()[-2000:]
    rc, doc = _diagnose(run.dumps, run.stderr)
    v = doc["verdict"]
    assert rc == 1 and v["class"] == "slow_link" and v["elements"] == ["h3"] and _named(doc) == [(2, "h3")], (
        _shown(doc)
    )


def test_slow_leaf_uplink_is_named_through_the_topology(make_lab, tmp_path) -> None:
    require_torch()
    make_lab(
        "tjls", "--topology", "leaf-spine", "--hosts", "6", "--hosts-per-leaf", "2", "--link-rate", "1gbit"
    )
    assert fs("lab", "set", "tjls", "leaf2", "--link-rate", "100mbit").returncode == 0
    run = lab_job.start("tjls", tmp_path / "run", env={"GRAD": "262144"}, steps=40)
    lab_job.finish(run)
    assert run.proc.returncode == 0, run.stderr.read_text()[-2000:]
    proc = fs("job", "diagnose", str(run.dumps), "--topology", "lab:tjls", "--json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    v = json.loads(proc.stdout)["verdict"]
    # under load rank 2 (h3, which receives the slow sends) can turn late behind rank 1: its flow is
    # then left out and the switch stays open beside the uplink (tests/triage/test_noise.py)
    named = (["leaf2 - spine"], ["one of leaf2 - spine, switch leaf2"])
    assert v["class"] == "slow_link" and v["elements"] in named and not v["culprits"], _shown({"verdict": v})
