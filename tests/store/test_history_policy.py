"""The history's two policies (issue 15 item 12, issue 14 item 4): a command that only reads the
history never creates it, and a result that cannot be stored is an error (exit 2, one line) unless
--no-store, with the result still printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabricscope.bench.results.schema import BenchResult
from fabricscope.store import Store

REPO = Path(__file__).resolve().parents[2]
NCCL_TESTS = REPO / "tests" / "data" / "samples" / "nccl_tests_all_reduce_header_v2_20.txt"


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {"FABRICSCOPE_DB": str(db), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args], capture_output=True, text=True, timeout=60, env=env
    )


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("fabricscope: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["history", "show", "1"],
        ["history", "compare", "1", "2"],
        ["history", "baseline", "show", "x"],
        ["history", "baseline", "set", "x", "1"],
        ["history", "baseline", "delete", "x"],
        ["report", "1", "-o", "OUT/r.html"],
    ],
)
def test_a_read_of_a_missing_history_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "not" / "there" / "history.sqlite3"
    args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
    line = _one_error_line(_cli(*args, db=db))
    assert f"no history at {db}" in line
    assert not (tmp_path / "not").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("what", [["history", "list"], ["history", "baseline", "list"]])
def test_listing_a_missing_history_is_empty_and_creates_nothing(tmp_path: Path, what: list[str]) -> None:
    db = tmp_path / "not" / "there" / "history.sqlite3"
    text = _cli(*what, db=db)
    assert text.returncode == 0 and f"no history at {db}" in text.stdout, text.stderr
    as_json = _cli(*what, "--json", db=db)
    assert as_json.returncode == 0, as_json.stderr
    assert [v for k, v in json.loads(as_json.stdout).items() if k != "schema"] == [[]]
    assert not (tmp_path / "not").exists()


def test_a_missing_history_is_not_created_by_the_store_either(tmp_path: Path) -> None:
    from fabricscope.store import MissingHistory

    with pytest.raises(MissingHistory):
        Store.open(tmp_path / "a" / "h.sqlite3", create=False)
    assert list(tmp_path.iterdir()) == []


def test_a_run_id_beyond_sqlite_integers_is_no_run(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    with Store.open(db):
        pass
    line = _one_error_line(_cli("history", "show", "99999999999999999999999", db=db))
    assert "no run with id 99999999999999999999999" in line
    line = _one_error_line(
        _cli("report", "5", "99999999999999999999999", "-o", str(tmp_path / "r.html"), db=db)
    )
    assert "no run with id 5, 99999999999999999999999" in line


def _corrupt(db: Path) -> None:
    db.write_bytes(b"this is not an SQLite database, it is a test's garbage" * 100)


def test_import_into_a_corrupt_history_fails_but_prints_the_result(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    _corrupt(db)
    proc = _cli("bench", "import", "nccl-tests", str(NCCL_TESTS), "--json", db=db)
    line = _one_error_line(proc)
    assert "result not stored" in line and str(db) in line and "--no-store" in line
    assert json.loads(proc.stdout)["kind"] == "collective"  # the result is not lost
    assert _cli("bench", "import", "nccl-tests", str(NCCL_TESTS), "--no-store", db=db).returncode == 0


def test_bench_tcp_into_a_corrupt_history_fails_but_prints_the_result(tmp_path: Path) -> None:
    """Same policy for the two-host benchmarks: a run against a peer that is not there fails (2)
    either way, so the store error must win the one line and the result be on stdout."""
    db = tmp_path / "h.sqlite3"
    _corrupt(db)
    proc = _cli("bench", "tcp", "--peer", "127.0.0.1:1", "-t", "0.2", "--timeout", "1", "--json", db=db)
    line = _one_error_line(proc)
    assert "result not stored" in line
    assert BenchResult.from_json(proc.stdout).kind == "tcp"
