#!/usr/bin/env python3
"""Rewrite the `nccl lint` code table of docs/nccl.md from the rule registry, in place.

The table is :func:`fabricscope.nccl.lint.code_table` (one row per code bound in ``lint.RULES``);
tests/nccl/test_lint_codes.py fails while docs/nccl.md holds another. Only the table's lines are
replaced: from its header row to the first line that is not a table row.

Usage: python scripts/gen_lint_code_table.py [--check]   (--check: exit 1 if the file would change)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOP / "src"))  # this checkout's rules, whatever is installed

from fabricscope.nccl.lint import CODES, code_table  # noqa: E402 (after the path above)

DOC = TOP / "docs" / "nccl.md"
HEADER = "| code | worst severity | rule | finding |"


def rewritten(text: str, table: str) -> str:
    """``text`` with its code table replaced by ``table``; ValueError when it has none."""
    lines = text.split("\n")
    try:
        start = lines.index(HEADER)
    except ValueError:
        raise ValueError(f"{DOC.name} has no line {HEADER!r}") from None
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join([*lines[:start], *table.split("\n"), *lines[end:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the table is current")
    args = parser.parse_args()
    text = DOC.read_text()
    new = rewritten(text, code_table())
    if new == text:
        print(f"{DOC.relative_to(TOP)}: the code table is current")
        return 0
    if args.check:
        print(f"{DOC.relative_to(TOP)}: the code table differs; run python scripts/gen_lint_code_table.py")
        return 1
    DOC.write_text(new)
    print(f"{DOC.relative_to(TOP)}: code table rewritten ({len(CODES)} codes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
