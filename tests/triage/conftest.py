"""Real job captures from tests/data/job, copied with their recorded file times (staleness is evidence)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "job"


def lab_case(name: str, dest: Path, with_log: bool = True) -> Path:
    """tests/data/job/lab/<name> under dest, dumps' mtimes as they were when captured."""
    src = DATA / "lab" / name
    out = dest / name
    shutil.copytree(
        src, out, ignore=shutil.ignore_patterns("mtimes.json", *(() if with_log else ("stderr.txt",)))
    )
    for rel, mtime in json.loads((src / "mtimes.json").read_text()).items():
        os.utime(out / rel, (mtime, mtime))
    return out


@pytest.fixture
def case(tmp_path):
    return lambda name, with_log=True: lab_case(name, tmp_path, with_log)
