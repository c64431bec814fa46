"""CONTRIBUTING.md's recipes name real places (issue 21 item 7): every path under src/, tests/,
scripts/, docs/ or benchmarks/ it names exists, and every command it tells people to run names a
script or module that exists.

A recipe that sends a contributor to a file that moved is worse than none: they conclude the
recipe is stale and skip the rest of it. Placeholders (``<area>``, ``x_lines``) are not paths.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEXT = (REPO / "CONTRIBUTING.md").read_text()
# A path: one of the tracked top-level folders, then path characters; '<' marks a placeholder.
PATH = re.compile(r"(?<![\w/.-])((?:src|tests|scripts|docs|benchmarks)/[\w./<>-]*[\w/])")
# A module named inside the package, as the recipes write it: `sim/params.py`, `checks/facts.py`.
SHORT = re.compile(r"`((?!src/|tests/|scripts/|docs/|benchmarks/)[a-z_]+/[a-z_/]+\.py)`")


def _paths() -> list[str]:
    full = {p for p in PATH.findall(TEXT) if "<" not in p}
    return sorted(full | {f"src/fabricscope/{p}" for p in SHORT.findall(TEXT)})


def test_the_recipes_name_paths() -> None:
    """The pattern finds what the recipes name (a pattern that finds nothing checks nothing)."""
    found = _paths()
    assert "src/fabricscope/bench/results/kinds.py" in found and "tests/cli/test_doctor_cli.py" in found
    assert "scripts/gen_lint_code_table.py" in found and "src/fabricscope/sim/params.py" in found
    assert len(found) > 30


@pytest.mark.parametrize("path", _paths())
def test_every_named_path_exists(path: str) -> None:
    assert (REPO / path).exists(), f"CONTRIBUTING.md names {path}, which does not exist"


def test_every_recipe_lists_the_tests_it_runs() -> None:
    """Each recipe of issue 21 ends with the tests to run, and names at least one test file."""
    for title in (
        "Adding a doctor check",
        "Adding an `nccl lint` rule",
        "Adding a GPU",
        "Adding a system preset",
        "Adding a bench kind",
        "Adding a CLI option",
    ):
        section = TEXT.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        run = section[section.index("\nRun: ") :]
        assert re.search(r"tests/\S+\.py", run), title
