"""The examples in README.md and docs/ that are marked as checked are true (issue 26 item 6).

A fenced block whose info string says ``checked`` (```` ```console checked ````) is run: each
``$ fabricscope ...`` line is the command (no shell: a plain argument list), and each other line
of the block must appear in its output, in order; a line ``...`` stands for any lines. So the
summary lines and the rows shown are held to what the command prints today (README's
ib-degraded example said 3 fail / 1 warn / 21 pass long after doctor said 8 / 5 / 24).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)


def _examples() -> list[tuple[str, str, list[str]]]:
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            if "checked" not in match.group("info").split():
                continue
            line_no = text[: match.start()].count("\n") + 1
            found.append((f"{doc.relative_to(REPO)}:{line_no}", match.group("body"), []))
    return found


EXAMPLES = _examples()


def _runs(body: str) -> list[tuple[list[str], list[str]]]:
    """(command, expected lines) for each ``$`` line of a block."""
    runs: list[tuple[list[str], list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            argv = shlex.split(line[2:], comments=True)
            assert argv[0] == "fabricscope" and not {"|", ">", "<", "&&", ";"} & set(argv), line
            runs.append((argv[1:], []))
        elif runs:
            runs[-1][1].append(line.rstrip())
    return runs


def test_the_marked_examples_are_found() -> None:
    assert len(EXAMPLES) >= 2 and any(where.startswith("README.md") for where, _, _ in EXAMPLES)


@pytest.mark.parametrize(("where", "body", "_"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_a_checked_example_prints_what_it_shows(where: str, body: str, _) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "FABRICSCOPE_DB": os.devnull, "COLUMNS": "200"}
    for argv, expected in _runs(body):
        proc = subprocess.run([sys.executable, "-m", "fabricscope", *argv], capture_output=True, text=True, timeout=300,
                              cwd=REPO, env=env)  # fmt: skip
        actual = [line.rstrip() for line in proc.stdout.splitlines()]
        at = 0
        for want in expected:
            if want.strip() == "..." or not want.strip():
                continue
            try:
                at = actual.index(want, at) + 1
            except ValueError:
                pytest.fail(f"{where}: `fabricscope {' '.join(argv)}` no longer prints (in this order):\n{want}\n"
                            f"it prints:\n{proc.stdout[-3000:]}")  # fmt: skip


CITED = re.compile(r"(?<![\w/.\"-])((?:tests|src|benchmarks|docs)/[\w./-]+\.(?:py|md|yml|yaml|json))")


def test_every_file_the_docs_cite_exists() -> None:
    """A cited file that is gone sends a reader nowhere (the alert rules' unit-test file cited
    tests/monitor/test_alert_rules.py, which never existed)."""
    texts = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")),
             *sorted((REPO / "tests").rglob("*.yml"))]  # fmt: skip
    missing = {f"{path.relative_to(REPO)}: {cited}" for path in texts for cited in CITED.findall(path.read_text())
               if not (REPO / cited).exists() and "*" not in cited}  # fmt: skip
    assert not missing, sorted(missing)
