"""Every error a user sees is one line on stderr with exit 2, never click's usage box or a
traceback (issue 15 item 12), and it takes one path: FabricscopeError -> cli.main (issue 14 item 4)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "src" / "fabricscope" / "cli"


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args], capture_output=True, text=True, timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "FABRICSCOPE_DB": "/nonexistent/h.db"},
    )  # fmt: skip


def assert_one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fabricscope: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["doctor", "--interval", "-1"], "--interval"),
        (["bench", "serve", "--port", "70000"], "--port"),
        (["bench", "tcp", "--peer", "127.0.0.1", "-t", "0"], "--duration"),
        (["bench", "tcp", "--peer", "127.0.0.1", "--streams", "²"], "--streams"),
        (["history", "show", "abc"], "run_id"),
        (["bench", "tcpp"], "No such command"),
        (["bench", "tcp", "--no-such-option"], "--no-such-option"),
    ],
)
def test_usage_errors_are_one_line(args: list[str], option: str) -> None:
    line = assert_one_line(run(*args), option)
    assert "-h" in line  # where to read more, on the same line


def test_a_value_with_a_newline_stays_on_one_line() -> None:
    assert_one_line(run("bench", "tcp", "--peer", "127.0.0.1", "--streams", "1\n2"), "--streams")


def test_no_arguments_still_prints_the_help() -> None:
    proc = run("bench")
    assert proc.returncode == 2 and "Commands" in proc.stdout + proc.stderr


def test_commands_have_no_error_helpers_of_their_own() -> None:
    """One error path: commands raise FabricscopeError (cli.common.die) and cli.main prints it."""
    own = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in ("_err", "_error", "_fail", "err"):
                own.append(f"{path.name}:{node.lineno} {node.name}")
    assert not own, own


def test_a_rank_ends_at_once_with_the_same_one_line() -> None:
    """cli.common.end_rank: the exception to die() for ranks whose torch threads would keep them
    alive (here a plain non-daemon thread stands in for them), with the same one line."""
    code = (
        "import threading, time\n"
        "from fabricscope.cli.common import end_rank\n"
        "threading.Thread(target=time.sleep, args=(120,)).start()\n"
        "end_rank('store lost\\nrank 3 gone', 3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")})  # fmt: skip
    assert proc.returncode == 3
    assert proc.stderr == "fabricscope: error: store lost rank 3 gone\n"
