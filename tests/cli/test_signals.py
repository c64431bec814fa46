"""Signals and hung tools, end to end: ``fabricscope`` run as a user runs it.

SIGTERM/SIGHUP/SIGINT end every command promptly with its temporary directories removed and
no child process left; hung tools cost doctor one timeout, not one each. Each test sets TMPDIR
to its own directory and finds its own processes by a marker in their argv, so nothing here
depends on what the machine has or runs.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_HOSTS, skip_unless_ci
from tests.proctools import kill_leftovers, new_marker, wait_for, wait_gone, write_hanging_tool

INVENTORY_TOOLS = ("ethtool", "ip", "nvidia-smi", "mlnx_qos", "dcb")
PROMPT_S = 10.0  # a signalled command must be gone within this


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """The TMPDIR of the command under test: anything named fabricscope-* left here is a leak."""
    path = tmp_path / "tmp"
    path.mkdir()
    return path


def _env(tmp_path: Path, scratch: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(scratch), "FABRICSCOPE_DB": str(tmp_path / "h.db"), **extra}


def _default_signals() -> None:
    """In the child: the dispositions these tests rely on. A suite started under `nohup` (or in
    the background of a non-interactive shell) hands its children an ignored SIGHUP (SIGINT), and
    fabricscope rightly keeps an ignored signal ignored."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fabricscope", *argv], env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals,
    )  # fmt: skip


def _wait_line(proc: subprocess.Popen[str], needle: str, timeout_s: float = 60.0) -> list[str]:
    """Read stderr until a line containing ``needle`` (the command is up); the lines read so far."""
    lines: list[str] = []
    found = threading.Event()

    def reader() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if needle in line:
                found.set()
                return

    threading.Thread(target=reader, daemon=True).start()
    if not found.wait(timeout_s):
        proc.kill()
        pytest.fail(f"never printed {needle!r}: {''.join(lines)[-2000:]}")
    return lines


def _ended(proc: subprocess.Popen[str], sent: float) -> int:
    try:
        rc = proc.wait(PROMPT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running {PROMPT_S:g} s after the signal")
    assert time.monotonic() - sent < PROMPT_S
    return rc


def _leftovers(scratch: Path) -> list[str]:
    return sorted(p.name for p in scratch.iterdir() if p.name.startswith("fabricscope-"))


def _snapshot_archive(tmp_path: Path) -> Path:
    archive = tmp_path / "roce-healthy.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(FIXTURE_HOSTS / "roce-healthy", arcname="roce-healthy")
    return archive


def _fake_path(tmp_path: Path, proc_marker: str) -> str:
    for tool in INVENTORY_TOOLS:
        write_hanging_tool(tmp_path / "bin", tool, proc_marker)
    return str(tmp_path / "bin")


# ----- hung tools ------------------------------------------------------------------------------
def test_doctor_with_hung_tools_takes_one_timeout_and_leaves_nothing(
    tmp_path: Path, scratch: Path, proc_marker: str
) -> None:
    """ip and nvidia-smi run on every node (ethtool and dcb where there are NICs): at least two hung
    commands, so one after another would take at least twice the timeout."""
    timeout = 4.0
    env = _env(
        tmp_path, scratch, PATH=_fake_path(tmp_path, proc_marker), FABRICSCOPE_COMMAND_TIMEOUT=str(timeout)
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "fabricscope", "doctor", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert '"schema": "fabricscope.doctor/v1"' in done.stdout
    assert took < 1.5 * timeout, f"doctor took {took:.1f} s with a {timeout:g} s command timeout"
    assert wait_gone(proc_marker) == [], "hung tools' processes outlived doctor"
    assert _leftovers(scratch) == []


def test_bad_command_timeout_setting_is_one_line(tmp_path: Path, scratch: Path) -> None:
    env = _env(tmp_path, scratch, FABRICSCOPE_COMMAND_TIMEOUT="soon")
    done = subprocess.run(
        [sys.executable, "-m", "fabricscope", "doctor"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "FABRICSCOPE_COMMAND_TIMEOUT" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_doctor_signalled_while_tools_hang_ends_them(
    sig: signal.Signals, tmp_path: Path, scratch: Path, proc_marker: str
) -> None:
    env = _env(tmp_path, scratch, PATH=_fake_path(tmp_path, proc_marker), FABRICSCOPE_COMMAND_TIMEOUT="120")
    proc = _start(["doctor"], env)
    assert wait_for(proc_marker, 3), "the fake tools never started"
    sent = time.monotonic()
    proc.send_signal(sig)
    assert _ended(proc, sent) == 128 + sig
    assert wait_gone(proc_marker) == [], f"tools started by doctor outlived its {sig.name}"
    assert _leftovers(scratch) == []


# ----- long-running commands -------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_exporter_stops_cleanly_on_signals(sig: signal.Signals, tmp_path: Path, scratch: Path) -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        skip_unless_ci("prometheus-client is not installed (pip install 'fabricscope[prom]')")
    archive = _snapshot_archive(tmp_path)
    proc = _start(
        ["exporter", "--root", str(archive), "--listen", "127.0.0.1:0", "--log-level", "info"],
        _env(tmp_path, scratch),
    )
    _wait_line(proc, "serving")
    sent = time.monotonic()
    proc.send_signal(sig)
    assert _ended(proc, sent) == 0  # a daemon asked to stop: docs/monitoring.md
    assert _leftovers(scratch) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_bench_serve_stops_on_signals(sig: signal.Signals, tmp_path: Path, scratch: Path) -> None:
    proc = _start(["bench", "serve", "--port", "0"], _env(tmp_path, scratch))
    _wait_line(proc, "listening")
    sent = time.monotonic()
    proc.send_signal(sig)
    assert _ended(proc, sent) == 0
    assert _leftovers(scratch) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_signal_removes_temp_dirs_and_ends_children(
    sig: signal.Signals, tmp_path: Path, scratch: Path, proc_marker: str
) -> None:
    """The mechanism every command relies on: a command holding an owner-only scratch directory
    and a child process group, signalled, exits 128+signum with both gone."""
    tool = write_hanging_tool(tmp_path / "bin", "hang", proc_marker)
    script = tmp_path / "holder.py"
    script.write_text(
        "import sys, time\n"
        "from fabricscope.cli.main import app, main\n"
        "from fabricscope.host import command\n"
        "from fabricscope.host.tempfiles import make_private_dir\n"
        "TOOL = sys.argv.pop(1)\n"
        "@app.command('hold')\n"
        "def hold() -> None:\n"
        "    made = make_private_dir('sigtest')\n"
        "    command.Process([TOOL])\n"
        "    print(made, flush=True)\n"
        "    time.sleep(600)\n"
        "main()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tool), "hold"], env=_env(tmp_path, scratch),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals,
    )  # fmt: skip
    assert proc.stdout is not None
    made = Path(proc.stdout.readline().strip())
    assert made.parent == scratch and made.name.startswith("fabricscope-sigtest-")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert wait_for(proc_marker, 3)
    sent = time.monotonic()
    proc.send_signal(sig)
    assert _ended(proc, sent) == 128 + sig
    assert not made.exists() and _leftovers(scratch) == []
    assert wait_gone(proc_marker) == []


@pytest.mark.slow
def test_collective_launcher_signalled_ends_every_rank(tmp_path: Path, scratch: Path) -> None:
    """``bench collective --launch local:2`` runs each rank in its own session; SIGTERM to the
    launcher must end them too (they do not see the signal themselves)."""
    try:
        import torch.distributed as dist

        if not dist.is_gloo_available():
            skip_unless_ci("torch without gloo")
    except ImportError:
        skip_unless_ci("torch is not installed (pip install 'fabricscope[torch]')")
    mark = new_marker()  # the ranks' --timeout: in every rank's argv, unique to this test
    try:
        proc = _start(
            ["bench", "collective", "--launch", "local:2", "--sizes", "4K", "--iters", "1000", "--warmup", "0",
             "--straggle-rank", "1", "--straggle-ms", "1000", "--timeout", mark, "--no-store"],
            _env(tmp_path, scratch),
        )  # fmt: skip
        if not wait_for(mark, 3, timeout_s=60):
            proc.kill()
            pytest.fail(
                f"the ranks never started (launcher exit {proc.wait()}): {proc.communicate()[1][-2000:]}"
            )
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = _ended(proc, sent)
        assert proc.stderr is not None
        assert rc == 128 + signal.SIGTERM, proc.stderr.read()[-3000:]
        assert wait_gone(mark, timeout_s=5) == [], "ranks outlived the launcher's SIGTERM"
        assert _leftovers(scratch) == []
    finally:
        kill_leftovers(mark)
