"""Lab names reach `ip netns` and `tc`: validation full-matches (a trailing newline once passed a
`$`-anchored regex and made namespaces `lab down` could not find), and `lab down` sweeps every
namespace with the lab's prefix, odd names included (issue 15 item 10)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabricscope.lab.fabric import Labs
from fabricscope.lab.runner import RecordingRunner
from fabricscope.lab.spec import LabError, LabSpec, check_name
from tests.lab.conftest import fs, lab_available

REPO = Path(__file__).resolve().parents[2]
ODD = ["t1\n", "t1\r", "t1 ", "\nt1", "t1\x00", "T1", "t1-x", "t１"]


@pytest.mark.parametrize("name", ODD)
def test_odd_lab_names_are_refused(name: str) -> None:
    with pytest.raises(LabError, match="lab name"):
        check_name(name)
    with pytest.raises(ValueError, match="lab name"):
        LabSpec(name=name, hosts=2)


@pytest.mark.parametrize(
    "command", [["lab", "up", "--name", "t1\n", "--hosts", "2"], ["lab", "down", "t1\n"]]
)
def test_a_name_with_a_trailing_newline_is_one_line_exit_2(command: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", *command], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "FABRICSCOPE_LAB_DIR": "/nonexistent/labs"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "lab name 't1\\n'" in proc.stderr, proc.stderr


PLANTED = [
    "fsl-t1-h1",
    "fsl-t1-x\ny",
    "fsl-t1-a b",
    "fsl-t1\n-h1",
    "fsl-t1 -h2",
    "fsl-t12-h1",
    "fsl-t1x-h1",
    "other",
]


def _runner() -> RecordingRunner:
    listing = json.dumps([{"name": n} for n in PLANTED])
    return RecordingRunner(responses={("ip", "-j", "netns", "list"): listing})


def test_lab_namespaces_are_read_whole_and_swept_by_prefix(tmp_path: Path) -> None:
    labs = Labs(_runner(), tmp_path / "s", tmp_path / "n")
    assert labs.namespaces() == sorted(n for n in PLANTED if n.startswith("fsl-"))
    # lab t1 owns fsl-t1-* and the leftovers of names a lab can no longer have; never lab t12's or t1x's
    assert labs.lab_namespaces("t1") == sorted(
        ["fsl-t1-h1", "fsl-t1-x\ny", "fsl-t1-a b", "fsl-t1\n-h1", "fsl-t1 -h2"]
    )
    assert labs.lab_namespaces("t12") == ["fsl-t12-h1"]


def test_down_deletes_the_odd_ones_by_their_exact_names(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    runner = _runner()
    with pytest.raises(LabError, match="could not remove"):  # the recorded listing never changes
        Labs(runner, tmp_path / "s", tmp_path / "n")._remove("t1")
    deleted = {c[3] for c in runner.calls if c[:3] == ("ip", "netns", "del")}
    assert deleted == {"fsl-t1-h1", "fsl-t1-x\ny", "fsl-t1-a b", "fsl-t1\n-h1", "fsl-t1 -h2"}


def _kernel_namespaces() -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [e["name"] for e in json.loads(out or "[]")]


def test_lab_down_removes_planted_odd_namespaces_for_real(lab_dir) -> None:
    """Root and iproute2 (CI runs it; the lab lock is held by the caller, see docs/lab.md)."""
    lab_available()
    planted = ["fsl-tplant-h1\nx", "fsl-tplant-a b", "fsl-tplant\n-h1"]
    bystander = "fsl-tplant2-h1"
    try:
        for name in [*planted, bystander]:
            subprocess.run(["ip", "netns", "add", name], check=True)
        proc = fs("lab", "down", "tplant")
        assert proc.returncode == 0 and "removed 3 namespaces" in proc.stdout, proc.stderr
        left = _kernel_namespaces()
        assert not [n for n in planted if n in left] and bystander in left
    finally:
        for name in [*planted, bystander]:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
