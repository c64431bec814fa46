"""Drift across nodes: fleet doctor names exactly the planted nodes, and nothing on a uniform fleet."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from fabricscope.findings import Severity
from fabricscope.fleet.doctor import judge_fleet
from fabricscope.fleet.inputs import expand_sources, load_nodes, reduce_document
from tests.fleet.conftest import PLANTED


def _judge(directory: Path):
    return judge_fleet(load_nodes(expand_sources([str(directory)])))


def _differing(report, check: str) -> set[str]:
    return {node for item in report.drift if item.check == check for node, *_rest in item.differing}


def test_uniform_fleet_has_no_drift_and_no_problem(uniform_fleet) -> None:
    report = _judge(uniform_fleet[1])
    assert report.drift == []
    assert [report.worst(n) for n in report.nodes] == [Severity.PASS] * 10
    # Every node was compared on every area of facts (the heat map shows them as pass).
    for node in report.nodes:
        assert {
            "fleet.firmware",
            "fleet.gid_index",
            "fleet.pfc",
            "fleet.ports",
            "fleet.port_rate",
            "fleet.mtu",
            "fleet.kernel",
            "fleet.driver",
            "fleet.rdma_core",
            "fleet.nccl_version",
            "fleet.gpus",
            "fleet.sysctl",
        } <= node.checks.keys()


def test_planted_drift_names_exactly_the_planted_nodes(planted_fleet) -> None:
    report = _judge(planted_fleet[1])
    names = {n: f"node-{n:02d}" for n in range(1, 11)}
    expected = {
        "fleet.gid_index": {names[2], names[4], names[6]},
        "fleet.firmware": {names[3], names[7]},
        "fleet.pfc": {names[5], names[8]},
        "fleet.ports": {names[9]},
        "fleet.port_rate": {names[10]},
    }
    assert {item.check for item in report.drift} == set(expected)
    for check, nodes in expected.items():
        assert _differing(report, check) == nodes, check
    majority = {item.check: item.majority for item in report.drift}
    assert majority == {
        "fleet.gid_index": "3",
        "fleet.firmware": "28.39.1002",
        "fleet.pfc": "3",
        "fleet.ports": "8",
        "fleet.port_rate": "400 Gb/s",
    }
    # Only planted nodes have anything at warn or above; node-01 carries no plant at all.
    flagged = {n.name for n in report.nodes if report.worst(n).rank >= Severity.WARN.rank}
    assert flagged == {names[n] for n in PLANTED}
    # The node without rail 5 is told which NIC is missing, and nothing else shifts onto other rails.
    node9 = next(n for n in report.nodes if n.name == names[9])
    assert {f.id for f in node9.extra} == {"fleet.ports"}
    assert "rail 5 (0000:b4:00.0)" in node9.extra[0].subject
    # Each planted node gets findings naming its devices and the fix.
    node5 = next(n for n in report.nodes if n.name == names[5])
    pfc = sorted(f.subject for f in node5.extra if f.id == "fleet.pfc")
    assert pfc == [f"ens{i}np0" for i in range(8)]
    assert all("--pfc 0,0,0,1,0,0,0,0" in f.fix for f in node5.extra if f.id == "fleet.pfc")


def test_drift_items_merge_the_same_difference_on_every_rail(planted_fleet) -> None:
    report = _judge(planted_fleet[1])
    rate = next(item for item in report.drift if item.check == "fleet.port_rate")
    assert len(rate.keys) == 8 and rate.keys[0] == "rail 0 (0000:14:00.0) port 1"
    assert (rate.majority_nodes, rate.nodes_compared) == (9, 10)
    firmware = next(item for item in report.drift if item.check == "fleet.firmware")
    assert (firmware.majority_nodes, firmware.nodes_compared) == (8, 10)  # counted in nodes, not NICs


def _doc(directory: Path, name: str) -> dict:
    return json.loads((directory / f"{name}.json").read_text())


def test_devices_are_matched_by_position_not_by_name(uniform_fleet, tmp_path: Path) -> None:
    """A node whose mlx5_* names came up in another order, with the NIC of rail 2 on old firmware:
    the difference is found on that NIC (its position), not on whichever device is named mlx5_2."""
    docs = uniform_fleet[1]
    for path in docs.iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    doc = _doc(docs, "node-04")
    nics = doc["facts"]["nics"]
    names = [n["device"] for n in nics]
    for nic, name in zip(nics, reversed(names)):
        nic["device"] = name  # rail 0 is now called mlx5_7, ...
    nics[2]["fw"] = "28.38.1900"
    (tmp_path / "node-04.json").write_text(json.dumps(doc))
    report = _judge(tmp_path)
    assert [item.check for item in report.drift] == ["fleet.firmware"]
    assert report.drift[0].differing == [("node-04", "28.38.1900", "mlx5_5", "MT4129")]


def test_a_node_on_other_pci_addresses_is_matched_rail_by_rail(uniform_fleet, tmp_path: Path) -> None:
    docs = uniform_fleet[1]
    for path in docs.iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    doc = _doc(docs, "node-06")
    for nic in doc["facts"]["nics"]:
        bus = int(nic["pci"][5:7], 16)
        nic["pci"] = f"0001:{bus + 1:02x}:00.0"  # another board revision: every NIC elsewhere
    doc["facts"]["nics"][6]["ports"][0]["mtu_bytes"] = 4200
    (tmp_path / "node-06.json").write_text(json.dumps(doc))
    report = _judge(tmp_path)
    assert [item.check for item in report.drift] == ["fleet.mtu"]
    assert report.drift[0].keys == ["rail 6 (0000:d4:00.0) port 1"]
    assert [d[0] for d in report.drift[0].differing] == ["node-06"]


def test_versions_sysctls_and_nccl_conf_drift(uniform_fleet, tmp_path: Path) -> None:
    docs = uniform_fleet[1]
    for path in docs.iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    doc = _doc(docs, "node-01")
    facts = doc["facts"]
    facts["kernel"] = "5.15.0-91-generic"
    facts["drivers"]["mlx5_core"] = "23.07-0.5.1"
    facts["rdma_core"] = "2304mlnx44-1.2304066"
    facts["nccl_version"] = "2.19.3"
    facts["sysctls"]["net.core.somaxconn"] = "128"
    facts["nccl_conf"] = {"settings": {"NCCL_IB_GID_INDEX": "3"}, "sha256": "x"}
    facts["gpus"]["gpudirect_module"] = "none"
    (tmp_path / "node-01.json").write_text(json.dumps(doc))
    report = _judge(tmp_path)
    assert {item.check for item in report.drift} == {
        "fleet.kernel",
        "fleet.driver",
        "fleet.rdma_core",
        "fleet.nccl_version",
        "fleet.sysctl",
        "fleet.nccl_conf",
        "fleet.gpudirect",
    }
    assert all(_differing(report, item.check) == {"node-01"} for item in report.drift)
    sysctl = next(i for i in report.drift if i.check == "fleet.sysctl")
    assert "sysctl -w net.core.somaxconn='4096'" in sysctl.to_dict()["fix"]


def test_a_tie_is_reported_as_such(uniform_fleet, tmp_path: Path) -> None:
    docs = sorted(uniform_fleet[1].iterdir())[:4]
    for i, path in enumerate(docs):
        doc = json.loads(path.read_text())
        if i >= 2:
            doc["facts"]["kernel"] = "6.8.0-45-generic"
        (tmp_path / path.name).write_text(json.dumps(doc))
    item = _judge(tmp_path).drift[0]
    assert item.tie and item.check == "fleet.kernel" and (item.majority_nodes, item.nodes_compared) == (2, 4)


def test_reduce_document_keeps_only_what_the_fleet_needs(uniform_fleet) -> None:
    doc = _doc(uniform_fleet[1], "node-01")
    bad = copy.deepcopy(doc)
    bad["findings"].append(
        {
            "id": "roce.mtu",
            "severity": "warn",
            "subject": "ens2np0",
            "message": "m",
            "evidence": {},
            "fix": "f",
        }
    )
    node = reduce_document(bad, "x.json")
    assert [f.id for f in node.findings] == ["roce.mtu"] and node.checks["roce.mtu"] == "warn"
    assert node.summary["warn"] == 1 and node.summary["pass"] == len(doc["findings"])


def test_nccl_conf_is_read_as_nccl_reads_it() -> None:
    """`export` lines set nothing for NCCL (setEnvFile takes the name verbatim) and quotes stay part
    of the value: the fleet compares what NCCL will use, not what a shell would."""
    from fabricscope.checks.facts import _nccl_conf

    conf = _nccl_conf(
        'export NCCL_IB_HCA=mlx5_0\nNCCL_SOCKET_IFNAME="eth0"\nNCCL_IB_GID_INDEX=3\n# NCCL_DEBUG=INFO\n'
    )
    assert conf is not None
    assert conf["settings"] == {"NCCL_SOCKET_IFNAME": '"eth0"', "NCCL_IB_GID_INDEX": "3"}
