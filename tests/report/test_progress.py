"""Long runs say how far they are, also when launched (issue 26 item 3): plain lines on stderr
when it is not a terminal (a launched rank, srun's log, a pipe), nothing with --json off a
terminal, and a collective's rows as each size completes, as nccl-tests prints them."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from fabricscope.bench.collective import size_result
from fabricscope.collective_ops import layout
from fabricscope.report.bench import collective_columns
from fabricscope.report.progress import collective_row_sink, progress_sink

REPO = Path(__file__).resolve().parents[2]


def test_plain_lines_off_a_terminal_and_none_for_json() -> None:
    out = io.StringIO()
    with progress_sink(False, out) as show:
        assert show is not None
        show("tcp phase 1/3: h1->h2")
    assert out.getvalue() == "# tcp phase 1/3: h1->h2\n"
    with progress_sink(True, io.StringIO()) as show:
        assert show is None


def test_a_collective_prints_its_rows_as_sizes_complete() -> None:
    out = io.StringIO()
    with progress_sink(False, out) as show:
        sink = collective_row_sink(show, {"op": "all_reduce", "dtype": "float"})
        assert sink is not None
        sink("rank 0: all_reduce of 1048576 bytes")
        for size in (1 << 20, 4 << 20):
            lay = layout("all_reduce", size, 4, 4)
            sink(size_result("all_reduce", 4, lay, [[1e-3, 1e-3]] * 4, 0))
    lines = out.getvalue().splitlines()
    assert lines[0] == "# rank 0: all_reduce of 1048576 bytes"
    assert lines[1:4] == collective_columns()  # the heads once, before the first row
    rows = [line.split() for line in lines[4:]]
    assert [r[0] for r in rows] == ["1048576", "4194304"] and all(len(r) == 9 for r in rows)
    assert rows[0][2:5] == ["float", "sum", "-1"]


def test_sim_incast_says_how_far_it_is_in_a_log() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", "sim", "incast", "--transport", "tcp", "--senders", "1,2", "--rounds", "3"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "# sim incast 1/2: tcp, 1 senders",
        "# sim incast 2/2: tcp, 2 senders",
    ]
