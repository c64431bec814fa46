"""Hostile documents handed to doctor and fleet (issue 20): a YAML "billion laughs" manifest (800
bytes that took all memory in `doctor --expect`, the documented NHC check), and one node's file of
nested brackets that ended the whole `fleet doctor --from DIR` verdict with a RecursionError.

Every bad input here is built by the test; the commands run as subprocesses under a 1 GiB
address-space limit, so a regression fails with a MemoryError instead of taking the machine.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.custom import load_document
from fabricscope.untrusted import MAX_DEPTH, yaml_load
from tests.conftest import FIXTURE_HOSTS

MEMORY_LIMIT = 1 << 30


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """A manifest whose ``gpus:`` expands to width**levels mappings (9**9 = 387 million) from
    under 1 KB: every level is a mapping of ``width`` aliases of the level below."""
    lines = ["x0: &x0 {" + ", ".join(f"k{j}: 1" for j in range(width)) + "}"]
    for i in range(1, levels):
        lines.append(f"x{i}: &x{i} {{" + ", ".join(f"k{j}: *x{i - 1}" for j in range(width)) + "}")
    lines.append(f"gpus: *x{levels - 1}")
    return "\n".join(lines) + "\n"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def fabricscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=_limited,
    )


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout[-500:] + proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


@pytest.fixture
def bomb(tmp_path: Path) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(billion_laughs())
    assert path.stat().st_size < 900
    return path


def test_doctor_expect_refuses_a_billion_laughs_manifest(bomb: Path) -> None:
    line = one_line(
        fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--expect", str(bomb))
    )
    assert f"{bomb}:1:" in line and "aliases are not accepted" in line


def test_doctor_nhc_expect_refuses_it_too(bomb: Path) -> None:
    proc = fabricscope(
        "doctor", "--nhc", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--expect", str(bomb)
    )
    assert proc.returncode != 0 and "aliases are not accepted" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr


def test_fleet_doctor_expect_refuses_a_billion_laughs_manifest(uniform_fleet, bomb: Path) -> None:
    line = one_line(fabricscope("fleet", "doctor", "--from", str(uniform_fleet[1]), "--expect", str(bomb)))
    assert "aliases are not accepted" in line


def test_a_deeply_nested_manifest_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("gpus: " + "[" * 3000 + "]" * 3000 + "\n")
    assert f"nested deeper than {MAX_DEPTH} levels" in one_line(
        fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--expect", str(deep))
    )


def test_topology_files_refuse_aliases_too(tmp_path: Path) -> None:
    path = tmp_path / "topo.yaml"
    path.write_text(billion_laughs().replace("gpus:", "switches:"))
    with pytest.raises(FabricscopeError, match="aliases are not accepted"):
        load_document(path)


def test_plain_yaml_still_loads() -> None:
    assert yaml_load("a: [1, {b: c}]\nd: 'x'\n") == {"a": [1, {"b": "c"}], "d": "x"}


def test_one_nested_document_fails_only_its_node(uniform_fleet, tmp_path: Path) -> None:
    """4 KB of brackets, and a valid doctor document whose facts nest 900 deep (under the JSON
    decoder's recursion limit, over what a walk of it may meet): each is one fleet.input finding."""
    for doc in sorted(uniform_fleet[1].glob("*.json"))[:3]:
        shutil.copy(doc, tmp_path / doc.name)
    (tmp_path / "brackets.json").write_text("[" * 4096)
    good = json.loads((tmp_path / "node-01.json").read_text())
    good["host"]["hostname"] = "deepfacts"
    good["facts"]["x"] = json.loads("[" * 900 + "]" * 900)
    (tmp_path / "deepfacts.json").write_text(json.dumps(good))
    proc = fabricscope("fleet", "doctor", "--from", str(tmp_path), "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    nodes = {n["name"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert sorted(nodes) == ["brackets", "deepfacts", "node-01", "node-02", "node-03"]
    for bad in ("brackets", "deepfacts"):
        finding = nodes[bad]["findings"][0]
        assert finding["id"] == "fleet.input" and f"nested deeper than {MAX_DEPTH}" in finding["message"], (
            finding
        )
    assert all(nodes[n]["worst"] == "pass" for n in ("node-01", "node-02", "node-03"))
