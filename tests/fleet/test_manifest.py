"""The expected-hardware manifest: `fleet baseline` writes it, `--expect` holds nodes to it line by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.fleet.manifest import parse_manifest
from tests.conftest import FIXTURE_HOSTS
from tests.fleet.test_cli import fabricscope, one_error_line

MANIFEST = """\
# H100 RoCE nodes
gpus:
  count: 8
  model: NVIDIA H100 80GB HBM3
rdma:
  ports: 8
  link_layer: RoCE
  rate_gbps: 400
firmware:
  MT4129: "28.39.1002"
mtu: 9000
pfc_priority: 3
ecn: true
gpudirect: nvidia_peermem
"""


def test_baseline_of_a_healthy_fleet_is_what_the_fleet_meets(uniform_fleet, tmp_path: Path) -> None:
    out = tmp_path / "manifest.yaml"
    proc = fabricscope("fleet", "baseline", "--from", str(uniform_fleet[1]), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    manifest = parse_manifest(out.read_text(), str(out)).spec
    assert (manifest.gpus.count, manifest.gpus.model) == (8, "NVIDIA H100 80GB HBM3")
    assert (manifest.rdma.ports, manifest.rdma.link_layer, manifest.rdma.rate_gbps) == (8, "Ethernet", 400)
    assert manifest.firmware == {"MT4129": "28.39.1002"}
    assert (manifest.mtu, manifest.pfc_priority, manifest.ecn, manifest.gpudirect) == (9000, 3, True, True)
    assert (
        fabricscope("fleet", "doctor", "--from", str(uniform_fleet[1]), "--expect", str(out)).returncode == 0
    )
    assert "exists" in one_error_line(
        fabricscope("fleet", "baseline", "--from", str(uniform_fleet[1]), "-o", str(out))
    )


def test_fleet_doctor_expect_names_the_planted_nodes_and_the_line(planted_fleet, tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    doc = json.loads(
        fabricscope(
            "fleet", "doctor", "--from", str(planted_fleet[1]), "--expect", str(manifest), "--json"
        ).stdout
    )
    failing = {
        n["name"]: {(f["id"], f["evidence"]["line"]) for f in n["findings"] if f["id"].startswith("expect.")}
        for n in doc["nodes"]
    }
    assert failing == {
        "node-01": set(),
        "node-02": set(),
        "node-04": set(),
        "node-06": set(),  # the GID index is not a manifest entry
        "node-03": {("expect.firmware", 10)},
        "node-07": {("expect.firmware", 10)},
        "node-05": {("expect.pfc", 12)},
        "node-08": {("expect.pfc", 12)},
        "node-09": {("expect.rdma", 6)},
        "node-10": {("expect.rdma", 8)},
    }
    node5 = next(n for n in doc["nodes"] if n["name"] == "node-05")
    pfc = next(f for f in node5["findings"] if f["id"] == "expect.pfc")
    assert pfc["message"] == f"PFC on priority 4, breaks {manifest}:12: pfc_priority: 3"
    assert doc["manifest"] == str(manifest)


def test_doctor_expect_on_one_node(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    assert (
        fabricscope(
            "doctor", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--expect", str(manifest)
        ).returncode
        == 0
    )
    proc = fabricscope(
        "doctor", "--root", str(FIXTURE_HOSTS / "roce-broken"), "--expect", str(manifest), "--json"
    )
    found = {
        (f["id"], f["subject"])
        for f in json.loads(proc.stdout)["findings"]
        if f["id"].startswith("expect.") and f["severity"] == "fail"
    }
    assert found == {
        ("expect.mtu", "ens2np0"),
        ("expect.pfc", "ens5np0"),
        ("expect.ecn", "ens4np0"),
        ("expect.ecn", "ens5np0"),
        ("expect.gpudirect", "kernel modules"),
    }
    text = fabricscope(
        "doctor", "--root", str(FIXTURE_HOSTS / "roce-broken"), "--expect", str(manifest), "--no-pass"
    ).stdout
    assert f"Expected hardware ({manifest})" in text and f"MTU 1500, breaks {manifest}:11: mtu: 9000" in text
    # An InfiniBand node against a RoCE manifest: every port breaks the link layer line.
    ib = json.loads(
        fabricscope(
            "doctor", "--root", str(FIXTURE_HOSTS / "ib-ndr-healthy"), "--expect", str(manifest), "--json"
        ).stdout
    )
    assert sum(1 for f in ib["findings"] if f["id"] == "expect.rdma" and f["evidence"].get("line") == 7) == 8


def test_ecn_not_visible_is_a_warning_not_a_pass() -> None:
    from fabricscope.fleet.expect import check_manifest

    manifest = parse_manifest("ecn: true\npfc_priority: 3\n", "m.yaml")
    facts = {
        "nics": [
            {
                "device": "mlx5_0",
                "ports": [
                    {
                        "port": 1,
                        "link_layer": "Ethernet",
                        "netdev": "eth2",
                        "pfc_priorities": [3],
                        "ecn_priorities": None,
                    }
                ],
            }
        ]
    }
    ecn = next(f for f in check_manifest(manifest, facts) if f.id == "expect.ecn")
    assert ecn.severity.value == "warn" and "cannot verify" in ecn.message and "m.yaml:1" in ecn.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpus:\n  count: eight\n", "m.yaml:2: gpus.count: Input should be a valid integer"),
        ("gpus:\n  cuont: 8\n", "m.yaml:2: gpus.cuont: Extra inputs are not permitted"),
        (
            "firmware:\n  MT4129: 16.35\n",
            "m.yaml:2: firmware.MT4129: Input should be a valid string (quote version numbers",
        ),
        ("pfc_priority: 9\n", "m.yaml:1: pfc_priority: Value error, priorities are 0..7"),
        (
            "rdma:\n  link_layer: FDDI\n",
            "m.yaml:2: rdma.link_layer: Input should be 'Ethernet' or 'InfiniBand'",
        ),
        ("mtu: 9000\nmtu: 1500\n", "m.yaml:2: mtu given twice"),
        ("gpus: [\n", "m.yaml:2: not valid YAML"),
        ("- 1\n", "m.yaml:1: a manifest is a mapping"),
        ("", "m.yaml: empty manifest"),
    ],
)
def test_bad_manifest_is_one_line(text: str, message: str) -> None:
    with pytest.raises(FabricscopeError) as exc:
        parse_manifest(text, "m.yaml")
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)


def test_bad_manifest_from_the_cli_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus:\n  count: -1\n")
    assert f"{bad}:2: gpus.count" in one_error_line(
        fabricscope("doctor", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--expect", str(bad))
    )
    assert "no such file" in one_error_line(fabricscope("doctor", "--expect", str(tmp_path / "absent.yaml")))
