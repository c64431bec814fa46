"""What the lab does to the machine outside its namespaces (issue 20), for real as root (CI runs
these under the lab lock; they skip elsewhere):

- `lab up --slurm` used to delete any interface named like its leg (``fsl<lab>``) before adding
  its own; it must refuse instead, naming the interface, and leave it alone.
- `lab up` probes the kernel in a scratch namespace; one killed (SIGKILL) while probing left a
  ``fsl-_probe<pid>`` that no `lab down` removed. The probe is now named inside the lab's prefix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from fabricscope.lab import slurm
from tests.conftest import skip_unless_ci
from tests.lab.conftest import fs, lab_available

REPO = Path(__file__).resolve().parents[2]


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [e["name"] for e in json.loads(out or "[]")]


def _link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", "dev", name], capture_output=True).returncode == 0


def test_lab_up_slurm_refuses_an_interface_with_its_legs_name(lab_dir: Path) -> None:
    lab_available()
    for tool in ("slurmctld", "slurmd", "munged", "nsenter"):
        if not shutil.which(tool):
            skip_unless_ci(f"lab up --slurm needs {tool}")
    lab = "tleg"
    leg = slurm.leg_name(lab)
    assert not _link_exists(leg), f"{leg} exists before the test"
    # someone's interface: an empty bridge, down, no address (a bridge: kernels without the dummy module have it)
    subprocess.run(["ip", "link", "add", leg, "type", "bridge"], check=True)
    try:
        proc = fs("lab", "up", "--name", lab, "--hosts", "2", "--slurm")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
        assert f"an interface named {leg} already exists" in lines[0]
        assert _link_exists(leg)  # still there
        assert not [ns for ns in _namespaces() if ns.startswith(f"fsl-{lab}-")]  # refused before building
    finally:
        fs("lab", "down", lab)
        subprocess.run(["ip", "link", "del", leg], capture_output=True)


_PROBE_THEN_HANG = """
import sys, time
from fabricscope.lab.fabric import Labs
from fabricscope.lab.runner import Runner

class ProbeThenHang(Runner):
    def run(self, argv, **kwargs):
        done = super().run(argv, **kwargs)
        if list(argv[:3]) == ["ip", "netns", "add"]:
            print(argv[3], flush=True)
            time.sleep(600)
        return done

Labs(ProbeThenHang()).check_capabilities(False, sys.argv[1])
"""


def test_lab_down_removes_the_probe_of_a_lab_up_killed_while_probing(lab_dir: Path) -> None:
    # imported here: the Slurm test above also runs against code without it
    from fabricscope.lab.fabric import probe_namespace

    lab_available()
    lab = "tprobe"
    child = subprocess.Popen(
        [sys.executable, "-c", _PROBE_THEN_HANG, lab],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    probe = ""
    try:
        probe = child.stdout.readline().strip()  # the probe namespace exists once this is printed
        assert probe == probe_namespace(lab, child.pid), probe
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert probe in _namespaces()  # what the SIGKILL left
        down = fs("lab", "down", lab)
        assert down.returncode == 0, down.stderr
        deadline = time.monotonic() + 5
        while probe in _namespaces() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert probe not in _namespaces()
    finally:
        child.kill()
        child.wait()
        if probe:
            subprocess.run(["ip", "netns", "del", probe], capture_output=True)
