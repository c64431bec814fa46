"""Commands under a deadline: the whole process group ends, output is capped, the inventory's
optional commands run in parallel under one deadline, snapshots run nothing."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fabricscope.host import Root, command, read_inventory
from fabricscope.host.tempfiles import PREFIX, atomic_write, private_dir
from tests.conftest import FIXTURE_HOSTS
from tests.proctools import pids_with, wait_for, wait_gone, write_hanging_tool

# Every optional command the inventory may run; a fake of each hangs (a hung driver does that).
INVENTORY_TOOLS = ("ethtool", "ip", "nvidia-smi", "mlnx_qos", "dcb")


@pytest.fixture
def fake_tools(tmp_path: Path, proc_marker: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only hanging fakes of the inventory's tools: nothing of this machine runs."""
    bindir = tmp_path / "bin"
    for tool in INVENTORY_TOOLS:
        write_hanging_tool(bindir, tool, proc_marker)
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


def test_timeout_kills_the_whole_process_group(tmp_path: Path, proc_marker: str) -> None:
    tool = write_hanging_tool(tmp_path, "ethtool", proc_marker)
    started = time.monotonic()
    outcome = command.run([str(tool), "-S", "eth0"], timeout_s=1.0)
    took = time.monotonic() - started
    assert outcome.timed_out and outcome.rc is None
    assert 0.9 <= took < 3.0
    assert wait_gone(proc_marker) == [], "grandchildren of a timed-out command outlived it"
    assert command.running() == []


def _leaves_child(tmp_path: Path, marker: str) -> Path:
    """A command that prints, leaves a child running (holding its stdout) and exits 0."""
    sleep = write_hanging_tool(tmp_path, "bg", marker).read_text().split()[1]
    script = tmp_path / "leaves-child"
    script.write_text(f"#!/bin/sh\n{sleep} {marker} &\necho done\n")
    script.chmod(0o755)
    return script


def test_without_pidfd_exit_is_polled(
    tmp_path: Path, proc_marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernels before 5.3 have no pidfd: the same behaviour, found by polling."""
    monkeypatch.setattr(command, "_pidfd", lambda pid: None)
    assert command.run([sys.executable, "-c", "print('hi')"], timeout_s=30).stdout_text == "hi\n"
    outcome = command.run([str(write_hanging_tool(tmp_path, "hang", proc_marker))], timeout_s=0.5)
    assert outcome.timed_out and outcome.seconds < 3.0
    assert wait_gone(proc_marker) == []


def test_leftovers_of_a_finished_probe_are_ended(tmp_path: Path, proc_marker: str) -> None:
    """A leader that exits but leaves a child holding its pipes: done after the linger, child gone."""
    outcome = command.run([str(_leaves_child(tmp_path, proc_marker))], timeout_s=20.0, kill_leftovers=True)
    assert outcome.rc == 0 and outcome.stdout_text.strip() == "done"
    assert outcome.seconds < command.LINGER_S + 2.0
    assert wait_gone(proc_marker) == []


def test_a_child_left_running_on_purpose_keeps_running(tmp_path: Path, proc_marker: str) -> None:
    """By default a finished command's leftovers are its business (lab daemons such as lldpd)."""
    outcome = command.run([str(_leaves_child(tmp_path, proc_marker))], timeout_s=20.0)
    assert outcome.rc == 0 and outcome.stdout_text.strip() == "done"
    assert outcome.seconds < command.LINGER_S + 2.0
    assert len(pids_with(proc_marker)) == 1  # the fixture ends it


def test_output_is_capped_and_an_endless_printer_is_stopped() -> None:
    argv = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 4096)"]
    outcome = command.run(argv, timeout_s=30.0, max_output_bytes=64 * 1024)
    assert outcome.overflowed and outcome.rc is None and not outcome.timed_out
    assert len(outcome.stdout) == 64 * 1024
    assert outcome.seconds < 10.0  # stopped at the cap, not at the deadline


def test_input_and_both_streams() -> None:
    data = os.urandom(300_000).hex().encode()  # more than a pipe buffer: written as the child reads
    argv = [
        sys.executable,
        "-c",
        "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d); sys.stderr.write('e')",
    ]
    outcome = command.run(argv, timeout_s=30.0, input_bytes=data)
    assert outcome.rc == 0 and outcome.stdout == data and outcome.stderr == b"e"


def test_exit_status_and_missing_program(tmp_path: Path) -> None:
    assert command.run([sys.executable, "-c", "raise SystemExit(3)"], timeout_s=30).rc == 3
    with pytest.raises(FileNotFoundError):
        command.run([str(tmp_path / "absent")], timeout_s=1)


def test_stop_all_ends_started_groups(tmp_path: Path, proc_marker: str) -> None:
    tool = write_hanging_tool(tmp_path, "hang", proc_marker)
    proc = command.Process([str(tool)])
    assert wait_for(proc_marker, 3)
    command.stop_all(grace_s=0.5)
    assert proc.returncode is not None
    assert wait_gone(proc_marker) == []


def test_shutdown_starts_nothing_more(
    tmp_path: Path, proc_marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker thread whose hung tool shutdown() ended goes on to its next tool (doctor's probes
    do): that one must not start, or it outlives fabricscope (CI caught exactly this)."""
    monkeypatch.setattr(command, "_closing", False)  # this test's shutdown must not end the session's
    tool = write_hanging_tool(tmp_path, "hang", proc_marker)
    second: list[BaseException | command.Outcome] = []

    def worker() -> None:
        command.run([str(tool)], timeout_s=60)  # ended by shutdown() below
        try:
            second.append(command.run([str(tool)], timeout_s=60))
        except OSError as exc:
            second.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    assert wait_for(proc_marker, 3)
    command.shutdown(grace_s=0.5)
    thread.join(30)
    assert not thread.is_alive()
    assert len(second) == 1 and isinstance(second[0], OSError) and "exiting" in str(second[0])
    assert wait_gone(proc_marker) == []


def test_root_commands_ahead_share_one_deadline(fake_tools: Path, proc_marker: str) -> None:
    root = Root.live()
    argvs = [["ethtool", "-S", "eth9"], ["ethtool", "-k", "eth9"], ["ethtool", "-m", "eth9"]]
    started = time.monotonic()
    with root.commands_ahead(argvs, timeout_s=1.5):
        results = [root.run(argv) for argv in argvs]
    took = time.monotonic() - started
    assert all(r.available and r.rc is None and "timed out" in str(r.reason) for r in results)
    assert took < 1.5 * 1.5, f"three hung commands took {took:.2f} s: they ran one after another"
    assert {p.source for p in root.problems} == {" ".join(a) for a in argvs}
    assert wait_gone(proc_marker) == []


def test_inventory_runs_hung_commands_in_parallel(fake_tools: Path, proc_marker: str) -> None:
    """A RoCE node (the fixture's sysfs) whose every optional tool hangs: about one timeout in all,
    not one per command (there are 3 per netdev, 3 per RoCE netdev, ip and nvidia-smi), no orphans."""
    snapshot = Root.at(FIXTURE_HOSTS / "roce-healthy")
    node = dataclasses.replace(snapshot, is_live=True, label="live fixture")
    timeout = 1.5
    started = time.monotonic()
    inv = read_inventory(node, command_timeout_s=timeout)
    took = time.monotonic() - started
    timed_out = [p.source for p in inv.problems if "timed out" in p.reason]
    assert len(timed_out) >= 5 and any(s.startswith("ethtool -S") for s in timed_out)
    assert took < 1.5 * timeout, f"{len(timed_out)} hung commands took {took:.2f} s"
    assert inv.ethtool and all(e.stats is None for e in inv.ethtool.values())
    assert wait_gone(proc_marker) == [], "processes of hung commands were left behind"


def test_snapshot_mode_runs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("a snapshot root started a process")

    monkeypatch.setattr(command, "Process", refuse)
    inv = read_inventory(Root.at(FIXTURE_HOSTS / "roce-healthy"))
    assert inv.qos and inv.ethtool  # read from cmd/index.json as before


def test_command_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from fabricscope.host import RootError

    monkeypatch.setenv("FABRICSCOPE_COMMAND_TIMEOUT", "2.5")
    assert Root.live().command_timeout_s == 2.5
    for bad in ("0", "abc", "99999"):
        monkeypatch.setenv("FABRICSCOPE_COMMAND_TIMEOUT", bad)
        with pytest.raises(RootError, match="FABRICSCOPE_COMMAND_TIMEOUT"):
            Root.live()


def test_private_dir_is_owner_only_and_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with private_dir("unit") as made:
        assert made.parent == tmp_path and made.name.startswith(f"{PREFIX}unit-")
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
        (made / "f").write_text("x")
    assert not made.exists()
    with pytest.raises(RuntimeError), private_dir("boom") as made:
        raise RuntimeError
    assert not made.exists()


def test_atomic_write_replaces_a_planted_symlink_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = tmp_path / "report.html"
    target.symlink_to(victim)
    atomic_write(target, b"new")
    assert victim.read_text() == "keep"
    assert not target.is_symlink() and target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "victim"]


# ----- a signal the kernel hands a worker thread ---------------------------------------------------
_WAITER = """
import signal, sys, threading, time
from concurrent.futures import Future
from fabricscope.host.command import result_of

signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
never = Future()
worker = threading.Thread(target=time.sleep, args=(30,), daemon=True)
worker.start()
# the kernel may give a process signal to any thread; here it goes to the worker, deliberately
threading.Timer(0.3, signal.pthread_kill, (worker.ident, signal.SIGTERM)).start()
result_of(never) if sys.argv[1] == "result_of" else never.result()
"""


@pytest.mark.parametrize("wait", ["result_of", "result"])
def test_a_signal_taken_by_a_worker_thread_still_ends_the_main_threads_wait(wait: str) -> None:
    """result_of waits in slices, so the handler (run by the main thread) runs within one slice;
    a plain Future.result() sleeps on through it (the case doctor hit under load: 2 signals of 48)."""
    proc = subprocess.Popen([sys.executable, "-c", _WAITER, wait])
    try:
        rc = proc.wait(5)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        proc.kill()
        proc.wait(5)
    assert rc == (143 if wait == "result_of" else None)
