"""docs/nccl.md stays true: its example outputs are what the commands print today."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURE_HOSTS
from tests.nccl.test_lint import BLOG

DOC = Path(__file__).resolve().parents[2] / "docs" / "nccl.md"


def test_env_example_is_current(cli) -> None:
    out = cli("nccl", "env", "--root", str(FIXTURE_HOSTS / "roce-healthy"))
    assert out.exit_code == 0
    assert out.stdout in DOC.read_text()


@pytest.mark.parametrize("host", ["ib-ndr-healthy", "roce-healthy", "roce-broken"])
def test_worked_example_outputs_are_current(cli, tmp_path, monkeypatch, host: str) -> None:
    (tmp_path / "job.sh").write_text(BLOG)
    monkeypatch.chdir(tmp_path)
    out = cli("nccl", "lint", "--script", "job.sh", "--root", str(FIXTURE_HOSTS / host), "--no-pass")
    assert out.exit_code == 1
    assert out.stdout.strip() in DOC.read_text()
