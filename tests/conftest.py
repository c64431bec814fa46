"""Shared test helpers: fixture hosts, mutable copies of them, and CI policy for skips."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURE_HOSTS = TESTS / "fixtures" / "hosts"
# Real captures from public sources, each with its source on line 1 (index: data/samples/README.md).
SAMPLES = TESTS / "data" / "samples"
IN_CI = os.environ.get("CI", "").lower() == "true"

sys.path.insert(0, str(TESTS / "fixtures"))

# The fixture hosts are generated (tests/fixtures/make_hosts.py), not tracked: build them once per
# source change, before anything lists them.
from make_hosts import ensure_built  # noqa: E402

ensure_built(FIXTURE_HOSTS)

HOST_NAMES = sorted(p.name for p in FIXTURE_HOSTS.iterdir() if p.is_dir())
HEALTHY_HOSTS = ["ib-ndr-healthy", "roce-healthy", "cloud-tcp", "efa-p4d"]


# Tests that build labs (network namespaces, shaped links, real rates) run one after another in a
# pytest-xdist lane of their own, beside the unit tests in the other lanes. Two lab lanes run side
# by side: each lab has its own namespaces and links, so two labs share only the CPU, which the
# rate tests already allow for (best_rate). Only one Slurm lab can run at a time (lab/slurm.py:
# two would route the same subnet from this machine), so every module that starts one (its text
# passes "--slurm") runs in the "lab-slurm" lane, and so do tests/lab/, whose tests look at this
# machine's own namespace (a Slurm lab's leg puts 198.18.0.254 there); the job-triage labs join it
# to balance the two (serial on an idle machine, 2026-12-05: 187 s of Slurm and tests/lab/ + 133 s
# of triage against 287 s for the rest; one lane took 614 s and was CI's critical path).
LAB_FIXTURES = {"lab_dir", "make_lab"}
SLURM_LANE, LAB_LANE = "lab-slurm", "lab"
LAB_LANES = (SLURM_LANE, LAB_LANE)


@functools.cache
def lab_lane(path: Path) -> str:
    """The xdist lane of a lab test module."""
    starts_slurm = '"--slurm"' in path.read_text(encoding="utf-8", errors="replace")
    return SLURM_LANE if starts_slurm or path.parent.name in ("lab", "triage") else LAB_LANE


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a lane per CPU for the unit tests plus the two lab lanes, which spend most of
    their time waiting on shaped links and timers (on 2 CPUs, auto once meant 2 lanes, both of
    them held by labs for their first five minutes)."""
    return (os.cpu_count() or 1) + len(LAB_LANES)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        uses_lab = LAB_FIXTURES & set(getattr(item, "fixturenames", ())) or "lab" in item.path.name
        if uses_lab:
            item.add_marker(pytest.mark.lab)
            item.add_marker(pytest.mark.xdist_group(lab_lane(item.path)))


def skip_unless_ci(reason: str) -> None:
    """Skip outside CI, saying why; under CI=true the requirement is a failure instead."""
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def host_copy(tmp_path: Path):
    """A writable copy of a fixture host (symlinks kept): ``host_copy("roce-healthy")``."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(FIXTURE_HOSTS / name, dest, symlinks=True)
        return dest

    return make


def samples_dir() -> Path:
    """The captures the project carries; they are part of the repository, so never skipped."""
    return SAMPLES


def require_torch() -> None:
    """torch (the `torch` extra) with torch.distributed: skip outside CI, fail inside it."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        skip_unless_ci("torch is not installed (pip install 'fabricscope[torch]')")


@pytest.fixture
def proc_marker():
    """A marker for the argv of processes a test starts (tests/proctools.py); whatever still
    carries it when the test ends is killed, so a failing test leaks nothing."""
    from tests.proctools import kill_leftovers, new_marker

    mark = new_marker()
    yield mark
    kill_leftovers(mark)


@pytest.fixture(autouse=True)
def _children_still_start():
    """fabricscope's main() ends with host.command.shutdown(), after which no child starts in that
    process: a test that runs main() in-process must put the flag back (monkeypatch), or every
    later test in the session that runs a command would fail far from the cause."""
    yield
    from fabricscope.host import command

    assert not command._closing, "host.command was left shut down: monkeypatch command._closing around main()"
