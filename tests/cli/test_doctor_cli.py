"""End to end: `fabricscope doctor|inventory|checks|snapshot` as subprocesses, against golden files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_HOSTS, HOST_NAMES, TESTS
from tests.fixtures.make_hosts import PLANTED

GOLDEN = TESTS / "golden" / "doctor"
UPDATE = os.environ.get("FABRICSCOPE_UPDATE_GOLDEN") == "1"


def fabricscope(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
        env={**os.environ, "COLUMNS": "200"},
    )


def normalised(doc: dict) -> dict:
    doc = dict(doc)
    doc["started"] = "<started>"
    doc["host"] = {**doc["host"], "root": "<root>"}
    doc["fabricscope_version"] = "<version>"
    return doc


def assert_contains(actual: object, golden: object, path: str = "$") -> None:
    """``actual`` holds everything ``golden`` holds: same keys with the same values, recursively."""
    if isinstance(golden, dict):
        assert isinstance(actual, dict), f"{path}: expected an object"
        for key, value in golden.items():
            assert key in actual, f"{path}.{key}: missing (a field was removed)"
            assert_contains(actual[key], value, f"{path}.{key}")
    elif isinstance(golden, list):
        assert isinstance(actual, list) and len(actual) == len(golden), f"{path}: list differs in length"
        for i, (a, g) in enumerate(zip(actual, golden)):
            assert_contains(a, g, f"{path}[{i}]")
    else:
        assert actual == golden, f"{path}: {actual!r} != {golden!r}"


def test_structural_comparison_catches_removed_and_changed_fields() -> None:
    golden = {"a": 1, "b": [{"c": "x"}]}
    assert_contains({"a": 1, "b": [{"c": "x", "new": 2}], "added": True}, golden)
    for broken in (
        {"b": [{"c": "x"}]},
        {"a": 2, "b": [{"c": "x"}]},
        {"a": 1, "b": [{"c": "y"}]},
        {"a": 1, "b": []},
    ):
        with pytest.raises(AssertionError):
            assert_contains(broken, golden)


@pytest.mark.parametrize("host", HOST_NAMES)
def test_doctor_json_matches_golden(host: str) -> None:
    proc = fabricscope("doctor", "--root", str(FIXTURE_HOSTS / host), "--json")
    assert proc.stderr == ""
    doc = normalised(json.loads(proc.stdout))
    expected_rc = 1 if any(sev == "fail" for _i, _s, sev in PLANTED[host]) else 0
    assert proc.returncode == expected_rc
    golden = GOLDEN / f"{host}.json"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(doc, indent=2) + "\n")
    # Structural: every field of the golden file is there with the same value (fields are only
    # ever added within fabricscope.doctor/v1, e.g. "facts"); lists keep their length and order.
    assert_contains(doc, json.loads(golden.read_text()))
    assert doc["schema"] == "fabricscope.doctor/v1"
    for finding in doc["findings"]:
        assert set(finding) >= {"id", "severity", "subject", "message", "evidence", "fix"}


def test_fail_on_warn_changes_exit_code() -> None:
    root = str(FIXTURE_HOSTS / "roce-broken")
    assert fabricscope("doctor", "--root", root, "--fail-on", "warn").returncode == 1
    assert (
        fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--fail-on", "warn").returncode
        == 0
    )
    bad = fabricscope("doctor", "--root", root, "--fail-on", "sometimes")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_human_report_groups_and_fixes() -> None:
    proc = fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "ib-degraded"), "--no-pass")
    assert proc.returncode == 1
    out = proc.stdout
    assert "RDMA devices and ports" in out and "PCIe and GPUDirect" in out
    assert "FAIL mlx5_3/1: link runs at 200 Gb/s" in out
    fails = sum(1 for _i, _s, sev in PLANTED["ib-degraded"] if sev == "fail")
    warns = sum(1 for _i, _s, sev in PLANTED["ib-degraded"] if sev == "warn")
    assert "fix:" in out and f"{fails} fail, {warns} warn" in out


@pytest.mark.parametrize("root", ["/nonexistent/root", str(TESTS)])
def test_unusable_root_is_one_line_exit_2(root: str) -> None:
    proc = fabricscope("doctor", "--root", root)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("fabricscope: error:")
    assert "Traceback" not in proc.stderr


def test_doctor_on_this_machine_gives_a_consistent_document() -> None:
    """The live machine may be a laptop, a VM or an 8-GPU RDMA node: assert only what holds on all."""
    proc = fabricscope("doctor", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.doctor/v1"
    for finding in doc["findings"]:
        assert set(finding) >= {"id", "severity", "subject", "message", "evidence", "fix"}
        assert finding["severity"] in ("pass", "info", "warn", "fail")
    inventory = json.loads(fabricscope("inventory", "--json", check=True).stdout)
    assert doc["host"]["rdma_devices"] == len(inventory["rdma_devices"])
    ids = {f["id"] for f in doc["findings"]}
    assert "rdma.present" in ids and any(i.startswith("tcp.") for i in ids)


def test_doctor_on_a_tcp_only_node_says_so() -> None:
    proc = fabricscope("doctor", "--json", "--root", str(FIXTURE_HOSTS / "cloud-tcp"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    ids = {f["id"]: f for f in doc["findings"]}
    assert ids["rdma.present"]["severity"] == "info" and "TCP-only" in ids["rdma.present"]["message"]
    assert doc["host"]["rdma_devices"] == 0 and doc["host"]["gpus"] == 4  # 4 GPUs, no RDMA: a cloud VM


def test_inventory_json_and_table() -> None:
    proc = fabricscope("inventory", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--json", check=True)
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.inventory/v1"
    port = doc["rdma_devices"][0]["ports"][0]
    assert port["rate_gbps"] == 400.0 and port["link_layer"] == "Ethernet"
    assert [g["index"] for g in port["gids"]] == [0, 1, 2, 3]
    assert port["netdev"] == "ens0np0"
    assert port["gids"][3] == {
        "index": 3,
        "gid": "0000:0000:0000:0000:0000:ffff:0a14:000b",
        "type": "RoCE v2",
        "netdev": "ens0np0",
        "ipv4": "10.20.0.11",
        "roce_version": 2,
    }
    assert {"nvidia_peermem", "mlx5_ib"} <= set(doc["kernel"]["modules"])
    assert doc["affinity"][0] == {
        "gpu_index": 0,
        "gpu_pci": "0000:13:00.0",
        "nic": "mlx5_0",
        "distance": "PIX",
        "gpu_numa": 0,
        "nic_numa": 0,
    }
    table = fabricscope("inventory", "--root", str(FIXTURE_HOSTS / "roce-healthy"), check=True).stdout
    assert "mlx5_7/1" in table and "10.20.7.11" in table and "PIX" in table


def test_checks_markdown_is_what_docs_hold() -> None:
    proc = fabricscope("checks", "--markdown", check=True)
    docs = TESTS.parent / "docs" / "checks.md"
    assert proc.stdout == docs.read_text(), "regenerate: fabricscope checks --markdown > docs/checks.md"
    listing = fabricscope("checks", "--json", check=True)
    assert {c["id"] for c in json.loads(listing.stdout)} >= {"rdma.port_state", "roce.pfc", "tcp.buffers"}


def test_snapshot_roundtrip_and_scrub(tmp_path: Path) -> None:
    source = FIXTURE_HOSTS / "roce-broken"
    out = tmp_path / "node.tar.gz"
    proc = fabricscope("snapshot", "-o", str(out), "--root", str(source), "--scrub", "--json", check=True)
    assert json.loads(proc.stdout)["scrubbed"] is True
    original = json.loads(fabricscope("doctor", "--root", str(source), "--json").stdout)
    copied = json.loads(fabricscope("doctor", "--root", str(out), "--json").stdout)
    key = lambda doc: sorted((f["id"], f["subject"], f["severity"]) for f in doc["findings"])  # noqa: E731
    assert key(copied) == key(original)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        blob = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
        links = [m for m in tar.getmembers() if m.issym()]
    assert any(n.endswith("sys/class/infiniband/mlx5_0") for n in names)
    assert all(not m.linkname.startswith("/") for m in links)
    for secret in (
        b"10.20.0.11",
        b"a0:88:c2:5b:03:e0",
        b"a088:c203:005b:03e0",
        b"gpu-roce-02",
        b"172.16.1.21",
        b"6a1c0b7e",
    ):
        assert secret not in blob, secret
    assert b"0000:0000:0000:0000:0000:ffff:0a14:000b" not in blob  # IPv4 inside the GID scrubbed too


def test_snapshot_of_this_machine(tmp_path: Path) -> None:
    out = tmp_path / "live.tar.gz"
    fabricscope("snapshot", "-o", str(out), check=True)
    live = json.loads(fabricscope("doctor", "--json").stdout)
    snap = json.loads(fabricscope("doctor", "--root", str(out), "--json").stdout)
    assert {f["id"] for f in snap["findings"]} == {f["id"] for f in live["findings"]}


def test_snapshot_to_unwritable_place_is_exit_2(tmp_path: Path) -> None:
    proc = fabricscope("snapshot", "-o", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
