"""Property: garbling, truncating or deleting any files of a fixture host never crashes doctor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricscope.cli.main import _register, app
from tests.conftest import FIXTURE_HOSTS

_register()
SOURCE = FIXTURE_HOSTS / "roce-broken"
FILES = sorted(str(p.relative_to(SOURCE)) for p in SOURCE.rglob("*") if p.is_file() and not p.is_symlink())

garbage = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=64),
    st.sampled_from(
        ["", "\n", "N/A (not available)", "-1", "4: ", "99999999999999999999999", "{", "[1,2", "\x00\x00"]
    ),
)
edits = st.lists(
    st.tuples(st.sampled_from(FILES), st.sampled_from(["garble", "truncate", "delete"]), garbage),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def host_tree(tmp_path_factory) -> Path:
    """One copy of the host for every example: each example's edits are undone after it (copying
    the ~1,300-file tree per example was most of this test's time)."""
    path = tmp_path_factory.mktemp("host") / "h"
    shutil.copytree(SOURCE, path, symlinks=True)
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=edits)
def test_doctor_survives_damaged_snapshots(host_tree: Path, edits) -> None:
    originals: dict[Path, bytes] = {}
    try:
        for rel, action, junk in edits:
            target = host_tree / rel
            if not target.exists():
                continue
            originals.setdefault(target, target.read_bytes())
            if action == "delete":
                target.unlink()
            elif action == "truncate":
                data = target.read_bytes()
                target.write_bytes(data[: len(data) // 2])
            else:
                target.write_bytes(junk if isinstance(junk, bytes) else junk.encode())
        _judge(host_tree)
    finally:
        for target, data in originals.items():
            target.write_bytes(data)


def _judge(path: Path) -> None:
    result = CliRunner().invoke(app, ["doctor", "--root", str(path), "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1, 2)
    if result.exit_code in (0, 1):
        doc = json.loads(result.stdout)
        assert not [f for f in doc["findings"] if f["id"] == "doctor.check_error"], doc["findings"]
