"""`nccl log` on inputs that are not regular files ends (issue 15 item 12): a device is refused in
one line, a FIFO without a writer reads as empty instead of blocking the open, and pipes still
work (``<(zcat log.gz)``), gzip included. Each run has a deadline: a hang fails the test."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import samples_dir
from tests.nccl.conftest import run_cli

DEADLINE_S = 60
SAMPLE = samples_dir() / "nccl_log_socket_fallback.txt"  # a real NCCL log (source on its line 1)


def _one_line(result, needle: str) -> None:
    assert result.exit_code == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1 and needle in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this system")
def test_dev_zero_is_refused() -> None:
    _one_line(run_cli("nccl", "log", "/dev/zero", timeout=DEADLINE_S), "/dev/zero: a device, not a log")


def test_dev_zero_on_stdin_is_refused() -> None:
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([sys.executable, "-m", "fabricscope", "nccl", "log", "-"], stdin=zero,
                              capture_output=True, text=True, timeout=DEADLINE_S)  # fmt: skip
    assert proc.returncode == 2 and "-: a device, not a log" in proc.stderr, proc.stderr


def test_a_fifo_without_a_writer_ends(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    _one_line(run_cli("nccl", "log", str(fifo), timeout=DEADLINE_S), "no NCCL log line")


@pytest.mark.parametrize("compress", [False, True])
def test_a_fifo_with_a_writer_is_read(tmp_path: Path, compress: bool) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    data = SAMPLE.read_bytes()
    payload = gzip.compress(data) if compress else data

    def write() -> None:
        with open(fifo, "wb") as out:  # blocks until the reader opens it
            out.write(payload)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    result = run_cli("nccl", "log", str(fifo), "--json", timeout=DEADLINE_S)
    writer.join(DEADLINE_S)
    assert result.exit_code in (0, 1), result.stderr
    assert result.json()["summary"]["nccl_lines"] > 0
