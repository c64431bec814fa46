"""NVLink and NVSwitch fabric (issue 13 D19): parsers on real captures, and the checks' other verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Severity
from fabricscope.host import Root, read_inventory
from fabricscope.host.nvlink import parse_fabric, parse_nvlink_status
from fabricscope.host.snapshot import capture
from tests.conftest import FIXTURE_HOSTS, SAMPLES


def sample(name: str) -> str:
    return "\n".join(line for line in (SAMPLES / name).read_text().splitlines() if not line.startswith("# "))


def test_nvlink_status_real() -> None:
    v100 = parse_nvlink_status(sample("nvidia_smi_nvlink_s_v100_inactive.txt"))
    assert [(g.index, g.name) for g in v100] == [(3, "Tesla V100-SXM2-32GB")]
    assert v100[0].links == {0: 25.781, 1: 25.781, 2: 25.781, 3: None, 4: 25.781, 5: None}
    gb200 = parse_nvlink_status(sample("nvidia_smi_nvlink_s_gb200.txt"))
    assert len(gb200[0].links) == 18 and set(gb200[0].links.values()) == {53.125}


def test_fabric_section_real() -> None:
    unhealthy = parse_fabric(sample("nvidia_smi_q_fabric_unhealthy.txt"))
    assert [(f.state, f.status, f.clique_id, f.health) for f in unhealthy] == [
        ("Completed", "Success", "2", "Unhealthy")
    ]
    failed = parse_fabric(sample("nvidia_smi_q_fabric_insufficient.txt"))
    assert [(f.state, f.status, f.clique_id) for f in failed] == [
        ("Completed", "Insufficient Resources", "0")
    ]


def test_fixture_query_maps_fabric_to_gpus() -> None:
    inv = read_inventory(Root.at(FIXTURE_HOSTS / "roce-broken"))
    assert inv.nvlink is not None and len(inv.nvlink.fabric) == 8
    assert {f.pci for f in inv.nvlink.fabric} == {g.pci_address for g in inv.gpus}
    commands = capture(Root.at(FIXTURE_HOSTS / "roce-broken")).commands
    assert ("nvidia-smi", "nvlink", "-s") in commands and ("nvidia-smi", "-q") in commands


def set_command(path: Path, argv: list[str], text: str) -> None:
    index = json.loads((path / "cmd/index.json").read_text())
    entry = next(e for e in index if e["argv"] == argv)
    (path / "cmd" / entry["stdout"]).write_text(text)


def findings(path: Path, check_id: str):
    return [
        (f.severity, f.subject, f.message) for f in run_doctor(Root.at(path)).findings if f.id == check_id
    ]


def test_slow_link_warns_and_pending_fabric_fails(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    text = (
        (path / "cmd")
        .joinpath(
            next(
                e["stdout"]
                for e in json.loads((path / "cmd/index.json").read_text())
                if e["argv"] == ["nvidia-smi", "nvlink", "-s"]
            )
        )
        .read_text()
    )
    set_command(path, ["nvidia-smi", "nvlink", "-s"], text.replace("Link 3: 26.562", "Link 3: 13.281", 1))
    assert [(s, subj) for s, subj, _m in findings(path, "gpu.nvlink")] == [
        (Severity.WARN, "GPU0 (0000:13:00.0)")
    ]
    query = (
        FIXTURE_HOSTS
        / "ib-ndr-healthy"
        / "cmd"
        / next(
            e["stdout"]
            for e in json.loads((path / "cmd/index.json").read_text())
            if e["argv"] == ["nvidia-smi", "-q"]
        )
    )
    set_command(path, ["nvidia-smi", "-q"], query.read_text().replace("Completed", "In Progress"))
    got = findings(path, "gpu.fabric")
    assert len(got) == 8 and {s for s, _subj, _m in got} == {Severity.FAIL} and "In Progress" in got[0][2]


def test_without_nvidia_smi_output_not_evaluated(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    index = [
        e
        for e in json.loads((path / "cmd/index.json").read_text())
        if e["argv"][:2] not in (["nvidia-smi", "nvlink"], ["nvidia-smi", "-q"])
    ]
    (path / "cmd/index.json").write_text(json.dumps(index))
    for check_id in ("gpu.nvlink", "gpu.fabric"):
        assert [(s, m.split(":")[0]) for s, _subj, m in findings(path, check_id)] == [
            (Severity.INFO, "not evaluated")
        ]
