"""The Slurm layer: real captured `scontrol show node` output, argv lists, drain and resume decisions
through an injected runner (a later lab test drives the same calls against a real slurmctld)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.findings import Severity
from fabricscope.fleet.actions import plan_and_run
from fabricscope.fleet.doctor import judge_fleet
from fabricscope.fleet.inputs import expand_sources, load_nodes
from fabricscope.fleet.slurm import drain_argv, drain_reason, parse_show_node, resume_argv
from tests.conftest import SAMPLES


def _sample(name: str) -> str:
    return "".join(
        line for line in (SAMPLES / name).read_text().splitlines(keepends=True) if not line.startswith("# ")
    )


def test_parse_real_scontrol_show_node() -> None:
    nodes = parse_show_node(_sample("scontrol_show_node_drained.txt"))
    assert set(nodes) == {"f1n1", "f1n2"}
    assert nodes["f1n1"].state == "IDLE+DRAIN" and nodes["f1n1"].reason == "fabricscope: fleet.pfc ens5np0"
    assert nodes["f1n1"].drained_by_fabricscope
    assert nodes["f1n2"].reason == "NHC: check_fs_mount: /scratch not mounted"
    assert nodes["f1n2"].drained and not nodes["f1n2"].drained_by_fabricscope
    resumed = parse_show_node(_sample("scontrol_show_node_resumed.txt"))["f1n1"]
    assert resumed.state == "IDLE" and resumed.reason is None and not resumed.drained
    # The default sinfo -R cuts the reason: the reason we set cannot be recognised from it.
    assert "fabricscope: fleet.p " in _sample("sinfo_R_default.txt")


def test_argv_lists_and_node_name_validation() -> None:
    reason = drain_reason("fleet.pfc", "ens5np0")
    assert drain_argv("gpu-01", reason) == [
        "scontrol",
        "update",
        "NodeName=gpu-01",
        "State=DRAIN",
        "Reason=fabricscope: fleet.pfc ens5np0",
    ]
    assert resume_argv("gpu-01") == ["scontrol", "update", "NodeName=gpu-01", "State=RESUME"]
    for bad in ("gpu-01 State=DOWN", "gpu[01-04]", "a;reboot", "", "-x", "gpu-01\n"):
        with pytest.raises(FabricscopeError):
            drain_argv(bad, reason)
    assert "\n" not in drain_reason("x", "a\nb") and len(drain_reason("x", "y" * 500)) <= 120


class FakeSlurm:
    """Answers `scontrol show node` from a node table and records every other call."""

    def __init__(self, states: dict[str, tuple[str, str | None]]) -> None:
        self.states = states
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        if argv == ["scontrol", "show", "node"]:
            blocks = []
            for name, (state, reason) in self.states.items():
                block = f"NodeName={name} Arch=x86_64 CoresPerSocket=1 \n   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1\n"
                if reason:
                    block += f"   Reason={reason} [root@2026-12-02T18:58:55]\n"
                blocks.append(block)
            return 0, "\n".join(blocks), ""
        self.calls.append(argv)
        return 0, "", ""


def _report(directory: Path):
    return judge_fleet(load_nodes(expand_sources([str(directory)])))


def test_drain_only_failing_nodes_dry_run_then_apply(
    planted_fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "actions.log"
    monkeypatch.setenv("FABRICSCOPE_ACTION_LOG", str(log))
    report = _report(planted_fleet[1])
    names = [f"node-{i:02d}" for i in range(1, 11)]
    slurm = FakeSlurm(
        {n: ("IDLE", None) for n in names} | {"node-08": ("IDLE+DRAIN", "disk replaced, Kilian")}
    )
    dry = plan_and_run(
        report, Severity.FAIL, drain=True, resume=False, taint=None, label=None, apply=False, runner=slurm
    )
    # Failing: GID index (2, 4, 6), PFC (5, 8), 7 NICs (9), 200G (10); node-08 is already drained by an operator.
    assert [a["node"] for a in dry] == ["node-02", "node-04", "node-05", "node-06", "node-09", "node-10"]
    assert slurm.calls == [] and not log.exists() and all(not a["applied"] for a in dry)
    assert dry[0]["argv"] == [
        "scontrol",
        "update",
        "NodeName=node-02",
        "State=DRAIN",
        "Reason=fabricscope: fleet.gid_index ens0np0",
    ]
    assert (
        dry[0]["command"]
        == "scontrol update NodeName=node-02 State=DRAIN 'Reason=fabricscope: fleet.gid_index ens0np0'"
    )
    done = plan_and_run(
        report, Severity.FAIL, drain=True, resume=False, taint=None, label=None, apply=True, runner=slurm
    )
    assert slurm.calls == [a["argv"] for a in done] and all(a["ok"] for a in done)
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["node"] for e in logged] == [a["node"] for a in done] and all("time" in e for e in logged)


def test_resume_only_what_fabricscope_drained_and_is_now_clean(
    uniform_fleet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FABRICSCOPE_ACTION_LOG", str(tmp_path / "log"))
    report = _report(uniform_fleet[1])  # every node is clean now
    slurm = FakeSlurm(
        {
            "node-01": ("IDLE+DRAIN", "fabricscope: fleet.pfc ens5np0"),
            "node-02": ("IDLE+DRAIN", "NHC: check_fs_mount: /scratch not mounted"),
            "node-03": ("DOWN+DRAIN", "fabricscope: roce.mtu ens2np0"),
            "node-04": ("IDLE", None),
            "node-99": ("IDLE+DRAIN", "fabricscope: fleet.mtu ens0np0"),  # not in this fleet run: left alone
        }
    )
    actions = plan_and_run(
        report, Severity.FAIL, drain=True, resume=True, taint=None, label=None, apply=True, runner=slurm
    )
    assert [(a["kind"], a["node"]) for a in actions] == [
        ("slurm.resume", "node-01"),
        ("slurm.resume", "node-03"),
    ]
    assert slurm.calls == [
        ["scontrol", "update", "NodeName=node-01", "State=RESUME"],
        ["scontrol", "update", "NodeName=node-03", "State=RESUME"],
    ]


def test_without_scontrol_a_dry_run_still_plans_and_apply_fails_cleanly(planted_fleet) -> None:
    report = _report(planted_fleet[1])

    def missing(argv: list[str]) -> tuple[int, str, str]:
        return 127, "", "scontrol: not installed"

    dry = plan_and_run(
        report, Severity.FAIL, drain=True, resume=False, taint=None, label=None, apply=False, runner=missing
    )
    assert len(dry) == 7 and "node states unknown" in dry[0]["detail"]
    with pytest.raises(FabricscopeError, match="scontrol show node failed"):
        plan_and_run(
            report,
            Severity.FAIL,
            drain=True,
            resume=False,
            taint=None,
            label=None,
            apply=True,
            runner=missing,
        )


def test_cli_drain_runs_scontrol_without_a_shell(planted_fleet, tmp_path: Path) -> None:
    """The real subprocess runner, with a stand-in `scontrol` first on PATH that answers `show node`
    in Slurm 22.05's format and records every argv it gets (one argument per line)."""
    import os
    import subprocess
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    show = tmp_path / "show.txt"
    show.write_text(
        "".join(
            f"NodeName=node-{i:02d} Arch=x86_64 CoresPerSocket=1 \n   State=IDLE ThreadsPerCore=1 TmpDisk=0\n\n"
            for i in range(1, 11)
        )
    )
    fake = bindir / "scontrol"
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = show ]; then cat {show}; exit 0; fi\nprintf "%s\\n" "$@" >> {calls}\necho --- >> {calls}\n'
    )
    fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "FABRICSCOPE_ACTION_LOG": str(tmp_path / "log"),
        "COLUMNS": "200",
    }

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "fabricscope",
                "fleet",
                "doctor",
                "--from",
                str(planted_fleet[1]),
                "--slurm-drain",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    dry = run("--json")
    assert dry.returncode == 1 and not calls.exists()
    assert [a["node"] for a in json.loads(dry.stdout)["actions"]] == [
        "node-02",
        "node-04",
        "node-05",
        "node-06",
        "node-08",
        "node-09",
        "node-10",
    ]
    applied = run("--apply")
    assert applied.returncode == 1 and applied.stdout.count(" done      scontrol update NodeName=") == 7
    first = calls.read_text().split("---\n")[0].splitlines()
    assert first == [
        "update",
        "NodeName=node-02",
        "State=DRAIN",
        "Reason=fabricscope: fleet.gid_index ens0np0",
    ]
