"""Bench test helpers: a server in this process or in its own process group, isolated history."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricscope.bench.sockets.protocol import ServerLimits
from fabricscope.bench.sockets.server import BenchServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def isolated_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every bench test writes its history into its own database."""
    db = tmp_path / "history.sqlite3"
    monkeypatch.setenv("FABRICSCOPE_DB", str(db))
    return db


def start_server(**kwargs) -> BenchServer:
    server = BenchServer(port=0, **kwargs)
    server.start()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def server() -> Iterator[BenchServer]:
    srv = start_server(limits=ServerLimits(max_duration_s=30, max_tests=2))
    yield srv
    srv.stop()


@pytest.fixture
def peer(server: BenchServer) -> str:
    return f"127.0.0.1:{server.port}"


class ServerProcess:
    """``fabricscope bench serve`` as a separate process group (so a test can kill all of it)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fabricscope", "bench", "serve", "--port", "0", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            cwd=REPO,
        )
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        self.port = 0
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            match = re.search(r"listening on \S+ port (\d+)", line)
            if match:
                self.port = int(match.group(1))
                break
        if not self.port:
            self.kill()
            raise RuntimeError("bench serve did not start")
        # Keep draining its log so it never blocks on a full pipe.
        self.log: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    @property
    def peer(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL the whole process group: the server and its data-plane workers, like a dead host."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


@pytest.fixture
def server_process() -> Iterator[ServerProcess]:
    srv = ServerProcess("--quiet")
    yield srv
    srv.kill()


def run_cli(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command line, in a child process (exit codes and stderr as a user sees them)."""
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
