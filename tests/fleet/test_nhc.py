"""`doctor --nhc`: NHC's convention (silent and 0 when healthy, one reason line and non-zero when not),
and the NHC check function docs/fleet.md gives, run in bash with NHC's `die` stubbed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fabricscope.findings import Finding, Severity
from fabricscope.fleet.nhc import MAX_REASON_CHARS, nhc_reason
from tests.conftest import FIXTURE_HOSTS, TESTS
from tests.fleet.test_cli import fabricscope

DOCS = TESTS.parent / "docs" / "fleet.md"


def test_nhc_mode_is_silent_when_healthy_and_one_line_when_not() -> None:
    healthy = fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--nhc")
    assert (healthy.returncode, healthy.stdout, healthy.stderr) == (0, "", "")
    broken = fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "roce-broken"), "--nhc")
    assert broken.returncode == 1
    assert (
        broken.stdout
        == "fabricscope: gpu.fabric GPU6 (0000:d3:00.0): fabric registration Completed with status Insufficient Resources (+2 more)\n"
    )
    warn = fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "roce-broken"), "--nhc", "--fail-on", "warn")
    assert (
        warn.returncode == 1
        and warn.stdout.startswith("fabricscope: gpu.fabric GPU6 ")
        and warn.stdout.rstrip().endswith("more)")
    )


def test_reason_is_capped_and_single_line() -> None:
    findings = [Finding("x.y", Severity.FAIL, "s", "a\nb " * 200), Finding("x.z", Severity.FAIL, "t", "m")]
    reason = nhc_reason(findings, Severity.FAIL)
    assert "\n" not in reason and len(reason) <= MAX_REASON_CHARS and reason.endswith("... (+1 more)")


def _docs_nhc_function() -> str:
    text = DOCS.read_text()
    match = re.search(r"```bash\n(# /etc/nhc/scripts/fabricscope\.nhc.*?)```", text, re.S)
    assert match, "docs/fleet.md shows the NHC check file"
    return match.group(1)


@pytest.mark.parametrize(("host", "expected_rc"), [("roce-healthy", 0), ("roce-broken", 1)])
def test_the_documented_nhc_check_runs_under_bash(host: str, expected_rc: int, tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash not installed")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    launcher = bindir / "fabricscope"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m fabricscope "$@"\n')
    launcher.chmod(0o755)
    script = tmp_path / "check.sh"
    # NHC's die(): log the reason and return the code (nhc itself then marks the node offline).
    script.write_text(
        'die() { local rc=$1; shift; echo "DIE $rc $*"; return $rc; }\n'
        + _docs_nhc_function()
        + f"\ncheck_fabricscope --root {FIXTURE_HOSTS / host}\n"
    )
    proc = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"},
    )
    assert proc.returncode == expected_rc, proc.stdout + proc.stderr
    if expected_rc:
        assert (
            proc.stdout
            == "DIE 1 fabricscope: gpu.fabric GPU6 (0000:d3:00.0): fabric registration Completed with status Insufficient Resources (+2 more)\n"
        )
    else:
        assert proc.stdout == ""
