"""The topology captures in tests/data/topology (source on line 1 of each, see its README)."""

from __future__ import annotations

from pathlib import Path

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "topology"


def path(name: str) -> Path:
    return CAPTURES / name


def body(name: str) -> str:
    """The capture without its two metadata lines (``# source:`` and ``# note:``)."""
    lines = path(name).read_text().splitlines(keepends=True)
    assert lines[0].startswith("# source: ") and lines[1].startswith("# note: "), name
    return "".join(lines[2:])
