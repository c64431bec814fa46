"""`lab down` ends only what the lab itself started (issue 20: "any local user can make root's
`lab down NAME` kill a process of their choosing").

It used to run ``pgrep -f DIR`` for every ``$TMPDIR/fabricscope-slurm-NAME-*`` it found, and pgrep
reads its pattern as a regex: a local user who creates ``fabricscope-slurm-NAME-x|sleep 634.1``
makes root kill every process whose command line says ``sleep 634.1``. These tests plant such names
(and pid files naming an innocent process) and check that the innocent survives; a fake daemon
that the lab did record (its pid file, its argv naming the lab's slurm.conf) is still ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fabricscope.lab import slurm
from tests.lab.conftest import fs, lab_available
from tests.proctools import pids_with, wait_for, wait_gone

LAB = "tplant"
NOBODY = 65534


def _innocent(marker: str) -> subprocess.Popen[bytes]:
    """A harmless process of someone else's: ``sleep MARKER``."""
    proc = subprocess.Popen(["sleep", marker])
    assert wait_for(marker)
    return proc


def _plant(tmp: Path, marker: str, innocent_pid: int) -> list[Path]:
    """What a local user can leave in $TMPDIR: directory names that are regexes matching the
    innocent's command line, one with pid files naming it. Owned by nobody when we are root (as a
    local user's would be); owned by us otherwise, which must not help them either."""
    names = [
        f"{tmp}/{slurm.TEMP_PREFIX}{slurm.purpose(LAB)}-x|sleep {marker}",
        f"{tmp}/{slurm.TEMP_PREFIX}{slurm.purpose(LAB)}-.*{marker}",
    ]
    planted = [Path(n) for n in names]
    for folder in planted:
        folder.mkdir()
        (folder / "ctl").mkdir()
        (folder / "munged.pid").write_text(f"{innocent_pid}\n")
        (folder / "ctl" / "slurmctld.pid").write_text(f"{innocent_pid}\n")
    if os.geteuid() == 0:
        os.chown(
            planted[0], NOBODY, NOBODY
        )  # the second stays ours: its pid files must not be trusted either
    return planted


def test_planted_leftover_names_never_choose_what_is_killed(
    tmp_path: Path, proc_marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    innocent = _innocent(proc_marker)
    try:
        _plant(tmp_path, proc_marker, innocent.pid)
        slurm.stop_all(LAB, None)
        assert wait_gone(proc_marker, 1.0) == [innocent.pid]  # still running
    finally:
        innocent.kill()
        innocent.wait()


def test_a_recorded_daemon_is_still_ended_by_its_pid_file(tmp_path: Path, proc_marker: str) -> None:
    """The fake daemon's argv names the lab's slurm.conf, as slurmctld's does (``-f DIR/slurm.conf``)."""
    folder = tmp_path / "slurmdir"
    (folder / "ctl").mkdir(parents=True)
    script = "import time; time.sleep(600)"
    daemon = subprocess.Popen([sys.executable, "-c", script, "-f", str(slurm.conf_path(folder)), proc_marker])
    try:
        assert wait_for(proc_marker)
        (folder / "ctl" / "slurmctld.pid").write_text(f"{daemon.pid}\n")
        (folder / "munged.pid").write_text(f"{os.getppid()}\n")  # a live process that is not the lab's
        assert slurm.running(folder) == [daemon.pid]
        slurm.stop(folder)
        assert daemon.wait(5) != 0 and not folder.exists()
    finally:
        daemon.kill()
        daemon.wait()


def test_a_directory_of_another_user_or_a_symlink_is_not_a_leftover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ours = tmp_path / f"{slurm.TEMP_PREFIX}{slurm.purpose(LAB)}-ours"
    ours.mkdir()
    link = tmp_path / f"{slurm.TEMP_PREFIX}{slurm.purpose(LAB)}-link"
    link.symlink_to(ours)
    assert slurm.leftovers(LAB) == [ours]
    if os.geteuid() == 0:
        os.chown(ours, NOBODY, NOBODY)
        assert slurm.leftovers(LAB) == []


def test_lab_down_as_root_spares_the_process_a_planted_name_points_at(
    tmp_path: Path, proc_marker: str, lab_dir: Path
) -> None:
    """The whole command, as root (CI runs it): ``lab down`` with the plants in its $TMPDIR."""
    lab_available()
    innocent = _innocent(proc_marker)
    try:
        planted = _plant(tmp_path, proc_marker, innocent.pid)
        down = fs("lab", "down", LAB, env={"TMPDIR": str(tmp_path)})
        assert down.returncode == 0, down.stderr
        assert pids_with(proc_marker) == [innocent.pid] and innocent.poll() is None
        assert planted[0].exists()  # a directory of another user is not ours to remove
    finally:
        innocent.kill()
        innocent.wait()
