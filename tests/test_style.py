"""The code base stays ruff clean (configuration in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conftest import TESTS


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff") or str(__import__("pathlib").Path(sys.executable).parent / "ruff")
    proc = subprocess.run([ruff, "check", "src", "tests", "benchmarks"], cwd=TESTS.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_every_command_module_exists() -> None:
    import importlib.util

    from fabricscope.cli.main import COMMAND_MODULES

    missing = sorted({m for ms in COMMAND_MODULES.values() for m in ms if importlib.util.find_spec(m) is None})
    assert not missing
