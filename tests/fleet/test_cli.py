"""`fabricscope fleet doctor|collect|baseline` and `doctor --expect/--nhc` end to end, as subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURE_HOSTS


def fabricscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def test_fleet_doctor_json_terminal_and_html(planted_fleet, tmp_path: Path) -> None:
    docs = planted_fleet[1]
    proc = fabricscope("fleet", "doctor", "--from", str(docs), "--json")
    assert proc.returncode == 1 and proc.stderr == ""
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.fleet/v1"
    assert (
        doc["summary"]["nodes"] == 10 and doc["summary"]["failing_nodes"] == 7
    )  # GID x3, PFC x2, 7 NICs, 200G
    worst = {n["name"]: n["worst"] for n in doc["nodes"]}
    assert worst["node-01"] == "pass" and worst["node-03"] == "warn" and worst["node-05"] == "fail"
    gid = next(d for d in doc["drift"] if d["id"] == "fleet.gid_index")
    assert gid["majority"] == "3" and {d["node"] for d in gid["differing"]} == {
        "node-02",
        "node-04",
        "node-06",
    }
    assert "NCCL_IB_GID_INDEX=3" in gid["fix"]
    node5 = next(n for n in doc["nodes"] if n["name"] == "node-05")
    assert node5["areas"]["fleet"] == "fail" and node5["areas"]["roce"] == "pass"

    html = tmp_path / "fleet.html"
    proc = fabricscope("fleet", "doctor", "--from", str(docs), "--html", str(html))
    assert proc.returncode == 1
    out = proc.stdout
    assert "node-05" in out and "Drift across nodes" in out and "PFC priorities" in out
    assert "differ: node-02 (5), node-04 (5), node-06 (5)" in out
    assert "node-01" not in out.split("Drift across nodes")[0]  # only nodes with warn/fail in the table
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "class='heat'" in page and "s-fail" in page and "fleet.gid_index" in page and "node-01" in page
    assert fabricscope("fleet", "doctor", "--from", str(docs), "--fail-on", "warn", "--json").returncode == 1


def test_uniform_fleet_exits_0(uniform_fleet) -> None:
    proc = fabricscope("fleet", "doctor", "--from", str(uniform_fleet[1]))
    assert proc.returncode == 0, proc.stdout
    assert "none: every compared fact agrees on every node" in proc.stdout


def test_snapshots_and_documents_mixed(uniform_fleet, tmp_path: Path) -> None:
    hosts, docs = uniform_fleet
    archive = tmp_path / "node-11.tar.gz"
    assert (
        fabricscope("snapshot", "--root", str(FIXTURE_HOSTS / "roce-broken"), "-o", str(archive)).returncode
        == 0
    )
    proc = fabricscope(
        "fleet",
        "doctor",
        "--from",
        str(docs / "node-01.json"),
        str(docs / "node-02.json"),
        str(hosts[2]),
        str(archive),
        "--json",
    )
    doc = json.loads(proc.stdout)
    assert [n["name"] for n in doc["nodes"]] == ["node-01", "node-02", "node-03", "gpu-roce-02"]
    broken = doc["nodes"][3]
    assert broken["worst"] == "fail" and broken["areas"]["roce"] == "fail"
    mtu = next(d for d in doc["drift"] if d["id"] == "fleet.mtu")
    assert mtu["differing"] == [
        {"node": "gpu-roce-02", "value": "1500", "subject": "ens2np0", "key": "rail 2 (0000:54:00.0) port 1"}
    ]


def test_unusable_documents(uniform_fleet, tmp_path: Path) -> None:
    docs = uniform_fleet[1]
    shutil.copy(docs / "node-01.json", tmp_path / "node-01.json")
    (tmp_path / "garbled.json").write_text('{"schema": "fabricscope.doctor/v1", "findings": [')
    (tmp_path / "other.json").write_text('{"schema": "fabricscope.bench/v1"}')
    proc = fabricscope("fleet", "doctor", "--from", str(tmp_path), "--json")
    assert proc.returncode == 1
    nodes = {n["name"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert (
        nodes["garbled"]["findings"][0]["id"] == "fleet.input"
        and "not JSON" in nodes["garbled"]["findings"][0]["message"]
    )
    assert "not a fabricscope.doctor/v1 document" in nodes["other"]["findings"][0]["message"]
    assert nodes["node-01"]["worst"] == "pass"
    (tmp_path / "node-01.json").unlink()
    assert "no usable node document" in one_error_line(
        fabricscope("fleet", "doctor", "--from", str(tmp_path))
    )
    assert "no such file" in one_error_line(
        fabricscope("fleet", "doctor", "--from", str(tmp_path / "absent"))
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no node documents" in one_error_line(fabricscope("fleet", "doctor", "--from", str(empty)))
    assert "give the nodes" in one_error_line(fabricscope("fleet", "doctor"))


def test_duplicate_hostnames_fall_back_to_file_names(uniform_fleet, tmp_path: Path) -> None:
    docs = uniform_fleet[1]
    shutil.copy(docs / "node-01.json", tmp_path / "a.json")
    shutil.copy(docs / "node-01.json", tmp_path / "b.json")
    doc = json.loads(fabricscope("fleet", "doctor", "--from", str(tmp_path), "--json").stdout)
    assert [n["name"] for n in doc["nodes"]] == ["a", "b"]


def test_collect_keeps_documents_and_scrubbed_snapshots(uniform_fleet, tmp_path: Path) -> None:
    out = tmp_path / "collected"
    proc = fabricscope(
        "fleet",
        "collect",
        "-o",
        str(out),
        "--root",
        str(FIXTURE_HOSTS / "roce-broken"),
        "--snapshot",
        "--from",
        str(uniform_fleet[1] / "node-01.json"),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    kept = json.loads(proc.stdout)
    assert [n["node"] for n in kept["nodes"]] == ["gpu-roce-02", "node-01"]
    assert (out / "gpu-roce-02.json").is_file() and (out / "snapshots" / "gpu-roce-02.tar.gz").is_file()
    assert json.loads((out / "node-01.json").read_text()) == json.loads(
        (uniform_fleet[1] / "node-01.json").read_text()
    )
    doc = json.loads(fabricscope("fleet", "doctor", "--from", str(out), "--json").stdout)
    assert sorted(n["name"] for n in doc["nodes"]) == [
        "gpu-roce-02",
        "node-01",
    ]  # the snapshot is not read twice
    # The kept snapshot is scrubbed and still judges the same.
    snap = json.loads(
        fabricscope("doctor", "--root", str(out / "snapshots" / "gpu-roce-02.tar.gz"), "--json").stdout
    )
    assert (
        snap["host"]["hostname"] == "node-1"
        and snap["summary"] == json.loads((out / "gpu-roce-02.json").read_text())["summary"]
    )
    assert "no such file" in one_error_line(
        fabricscope("fleet", "collect", "-o", str(out), "--no-local", "--from", str(tmp_path / "x.json"))
    )
