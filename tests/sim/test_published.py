"""The published-figure comparison table of docs/sim.md is what the model prints, and the rows
the issue names land within 10% of NVIDIA's published busbw."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from fabricscope.sim.scenario import run_collective

DOC = Path(__file__).resolve().parents[2] / "docs" / "sim.md"


def _rows() -> list[dict[str, str]]:
    text = DOC.read_text()
    block = text.split("<!-- sim-published-comparison:start -->")[1].split("<!-- sim-published-comparison:end -->")[0]
    lines = [ln for ln in block.strip().splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rows.append(dict(zip(head, cells, strict=True)))
    return rows


def _params(command: str) -> dict[str, str]:
    args = shlex.split(command.strip("`"))
    assert args[:3] == ["fabricscope", "sim", "collective"]
    it = iter(args[3:])
    return {a.lstrip("-").replace("-", "_"): next(it) for a in it}


ROWS = _rows()


def test_table_has_the_rows_the_issue_names() -> None:
    cases = " ".join(r["Case"] for r in ROWS)
    assert "400G NDR" in cases and "200G HDR" in cases
    assert sum(r["Within 10%"].startswith("asserted") for r in ROWS) == 2


@pytest.mark.parametrize("row", ROWS, ids=[r["Case"][:40] for r in ROWS])
def test_row_matches_the_model(row) -> None:
    doc = run_collective(_params(row["Command"]))
    assert doc["busbw_GBps"] == pytest.approx(float(row["Model busbw (GB/s)"]), abs=0.05)
    if row["Within 10%"].startswith("asserted"):
        nums = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", row["Published busbw (GB/s)"])]
        lo, hi = min(nums), max(nums)
        assert 0.9 * lo <= doc["busbw_GBps"] <= 1.1 * hi, (doc["busbw_GBps"], lo, hi)
