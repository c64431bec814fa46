"""`fabricscope ready --slurm-drain/--k8s-taint [--apply]`: the verdict's bad nodes through fleet's
drain path. The pure part with a stand-in runner and API; the whole command (three local ranks,
one reading a degraded fixture host) with a stand-in `scontrol` first on PATH, as
tests/fleet/test_slurm.py does for `fleet doctor --slurm-drain`. The real scontrol in the Slurm
lab: tests/ready/test_ready_slurm_lab.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fabricscope.ready.params import ReadyError
from fabricscope.ready.scheduler import actions
from fabricscope.ready.verdict import Culprit, Step, verdict
from tests.conftest import FIXTURE_HOSTS, require_torch
from tests.ready.test_cli import fs

SHOW = "".join(f"NodeName=n{i} Arch=x86_64\n   State={s} ThreadsPerCore=1\n\n" for i, s in
               [(1, "IDLE"), (2, "IDLE"), (3, "IDLE+DRAIN")])  # fmt: skip


def _verdict(node_of: dict[str, str] | None = None) -> list[dict]:
    bad = Culprit(
        "node", "h2", "link at 250 Mb/s where the fabric is built for 1 Gb/s", "drain it", "ready.slow_host"
    )
    gone = Culprit("node", "n3", "fw.mismatch mlx5_0: behind", "update it", "fw.mismatch")
    steps = [Step("doctor", "fail", "", [gone]), Step("matrix", "fail", "", [bad])]
    return verdict(steps, node_of).drain


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        if argv[:3] == ["scontrol", "show", "node"]:
            return 0, SHOW, ""
        self.calls.append(argv)
        return 0, "", ""


def test_drain_names_the_scheduler_node_and_skips_one_already_drained(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FABRICSCOPE_ACTION_LOG", str(tmp_path / "log"))
    drain = _verdict({"h2": "n2"})  # the matrix's host h2 is Slurm's n2
    assert [d["node"] for d in drain] == ["n3", "n2"]
    run = Recorder()
    dry = actions(drain, {"n2", "n3"}, slurm_drain=True, taint=None, apply=False, runner=run)
    assert [a["node"] for a in dry] == ["n2"] and not run.calls  # n3 is drained already: its reason kept
    done = actions(drain, {"n2", "n3"}, slurm_drain=True, taint=None, apply=True, runner=run)
    assert done[0]["ok"] and run.calls == [
        ["scontrol", "update", "NodeName=n2", "State=DRAIN", f"Reason={drain[1]['reason']}"]
    ]
    assert drain[1]["reason"].startswith("fabricscope: ready.slow_host link at 250")
    logged = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    assert [a["node"] for a in logged] == ["n2"]


def test_apply_acts_only_on_signed_nodes_and_needs_a_secret() -> None:
    run = Recorder()
    drain = _verdict({"h2": "n2"})
    with pytest.raises(ReadyError, match="signed by the job's own ranks"):
        actions(drain, None, slurm_drain=True, taint=None, apply=True, runner=run)
    assert (
        actions(drain, {"n1"}, slurm_drain=True, taint=None, apply=True, runner=run) == [] and not run.calls
    )


def test_taint_goes_through_fleets_kubernetes_layer(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FABRICSCOPE_ACTION_LOG", str(tmp_path / "log"))
    patched: list[tuple[str, dict]] = []
    api = SimpleNamespace(
        read_node=lambda name: SimpleNamespace(spec=SimpleNamespace(taints=None)),
        patch_node=lambda name, body: patched.append((name, body)),
    )
    drain = _verdict({"h2": "n2"})
    got = actions(
        drain, {"n2", "n3"}, slurm_drain=False, taint="fabricscope/bad=ready:NoSchedule", apply=True, kube=api
    )
    assert [(a["kind"], a["node"], a["ok"]) for a in got] == [
        ("k8s.taint", "n3", True),
        ("k8s.taint", "n2", True),
    ]
    assert patched[1] == (
        "n2",
        {"spec": {"taints": [{"key": "fabricscope/bad", "value": "ready", "effect": "NoSchedule"}]}},
    )


@pytest.mark.parametrize(("args", "says"), [
    (["--apply"], "--apply needs an action"),
    (["--k8s-taint", "bad"], "--k8s-taint 'bad'"),
])  # fmt: skip
def test_bad_scheduler_options_are_one_line(args: list[str], says: str) -> None:
    proc = fs("ready", "--launch", "local:2", "--nic-rate", "1G", "--backend", "gloo", *args)
    assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, (
        proc.stderr
    )


@pytest.mark.slow
def test_cli_drains_the_degraded_node_with_a_stand_in_scontrol(tmp_path: Path) -> None:
    """Three local ranks; local1 reads the degraded InfiniBand fixture host (doctor fails it), the
    others a healthy one. The dry run prints the command and calls nothing; --apply calls scontrol
    once, without a shell, with fleet's argv and a fabricscope: reason."""
    require_torch()
    roots = tmp_path / "roots"
    roots.mkdir()
    for name, fixture in (
        ("local0", "ib-ndr-healthy"),
        ("local1", "ib-degraded"),
        ("local2", "ib-ndr-healthy"),
    ):
        (roots / name).symlink_to(FIXTURE_HOSTS / fixture)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls, show = tmp_path / "calls", tmp_path / "show.txt"
    show.write_text(
        "".join(f"NodeName=local{i} Arch=x86_64\n   State=IDLE ThreadsPerCore=1\n\n" for i in range(3))
    )
    fake = bindir / "scontrol"
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = show ]; then cat {show}; exit 0; fi\nprintf "%s\\n" "$@" >> {calls}\n'
    )
    fake.chmod(0o755)
    import os

    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "FABRICSCOPE_ACTION_LOG": str(tmp_path / "log"),
           "FABRICSCOPE_DB": str(tmp_path / "history.db"), "COLUMNS": "200"}  # fmt: skip
    base = ["ready", "--launch", "local:3", "--root", f"{roots}/{{host}}", "--nic-rate", "1G", "--sizes", "1M",
            "--backend", "gloo", "--budget", "120", "--calibrate", "none", "--slurm-drain"]  # fmt: skip
    dry = fs(*base, "--json", env=env)
    assert dry.returncode == 1, dry.stderr[-3000:]
    doc = json.loads(dry.stdout)
    assert [d["node"] for d in doc["drain"]] == ["local1"] and not calls.exists()
    assert [(a["kind"], a["node"], a["applied"]) for a in doc["actions"]] == [
        ("slurm.drain", "local1", False)
    ]
    applied = fs(*base, "--apply", env=env)
    assert applied.returncode == 1, applied.stderr[-3000:]
    assert " done      scontrol update NodeName=local1 State=DRAIN" in applied.stdout, applied.stdout[-2000:]
    argv = calls.read_text().splitlines()
    assert argv[:3] == ["update", "NodeName=local1", "State=DRAIN"] and argv[3].startswith(
        "Reason=fabricscope: "
    )
    assert len(argv) == 4
