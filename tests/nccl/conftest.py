"""Helpers for the NCCL tests: run the CLI in-process and as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from fabricscope.cli.main import _register, app


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


@pytest.fixture(scope="session")
def cli():
    """Invoke ``fabricscope ARGS`` in-process (fast); stdout and stderr kept apart."""
    _register()
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates them
        runner = CliRunner()

    def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        res = runner.invoke(app, list(args), input=input, env=env, catch_exceptions=False)
        return Result(res.exit_code, res.stdout, res.stderr)

    return invoke


def run_cli(*args: str, input_bytes: bytes | None = None, timeout: float = 60) -> Result:
    """The installed entry point in a subprocess: what users see, tracebacks included if any."""
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", *args], input=input_bytes, capture_output=True, timeout=timeout
    )
    return Result(
        proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    )
