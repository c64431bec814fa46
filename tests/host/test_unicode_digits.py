"""Names in a snapshot that str.isdigit() accepts but int() refuses ("²") are simply not numbers:
doctor reads the rest and never ends in an internal error."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURE_HOSTS


def test_superscript_port_and_gid_names_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(FIXTURE_HOSTS / "roce-healthy", root, symlinks=True)
    device = next((root / "sys/class/infiniband").iterdir()).resolve()
    (device / "ports" / "²").mkdir()
    (device / "ports" / "²" / "state").write_text("4: ACTIVE\n")
    (device / "ports" / "1" / "gids" / "²").write_text("fe80::1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", "doctor", "--root", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
