"""InfiniBand subnet manager (issue 13 D22): sminfo on a real capture, SM LID from sysfs, and the verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Severity
from fabricscope.host import Root, read_inventory
from fabricscope.host.subnet import parse_sminfo
from tests.conftest import FIXTURE_HOSTS, SAMPLES


def test_sminfo_real_line() -> None:
    info = parse_sminfo((SAMPLES / "sminfo_master.txt").read_text())
    assert (info.lid, info.guid, info.activity, info.priority, info.state, info.state_name) == (
        2,
        "0x2c90200259201",
        6881,
        0,
        3,
        "SMINFO_MASTER",
    )
    assert parse_sminfo("sminfo: iberror: failed: query") is None


def test_sm_lid_read_from_sysfs() -> None:
    inv = read_inventory(Root.at(FIXTURE_HOSTS / "ib-ndr-healthy"))
    assert {p.sm_lid for p in inv.ports} == {1} and inv.sminfo.info.lid == 1


def findings(path: Path):
    return [
        (f.severity, f.subject, f.message)
        for f in run_doctor(Root.at(path)).findings
        if f.id == "rdma.subnet_manager"
    ]


def set_sminfo(path: Path, text: str | None, rc: int = 0) -> None:
    index = json.loads((path / "cmd/index.json").read_text())
    if text is None:
        index = [e for e in index if e["argv"] != ["sminfo"]]
    else:
        entry = next(e for e in index if e["argv"] == ["sminfo"])
        entry["rc"] = rc
        (path / "cmd" / entry["stdout"]).write_text(text)
    (path / "cmd/index.json").write_text(json.dumps(index))


def test_port_stuck_in_init_blames_the_sm(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    port = path / "sys/class/infiniband/mlx5_2/ports/1"
    (port / "state").write_text("2: INIT\n")
    (port / "sm_lid").write_text("0x0\n")
    got = findings(path)
    assert (Severity.FAIL, "mlx5_2/1") in [(s, subj) for s, subj, _m in got]
    assert "stuck in INIT" in next(m for s, subj, m in got if subj == "mlx5_2/1")
    assert not [x for x in got if x[0] is Severity.PASS]


def test_active_port_without_sm_lid_fails(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    (path / "sys/class/infiniband/mlx5_6/ports/1/sm_lid").write_text("0x0\n")
    assert [(s, subj) for s, subj, _m in findings(path)] == [(Severity.FAIL, "mlx5_6/1")]


def test_standby_sm_warns_and_sysfs_alone_passes(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    set_sminfo(
        path,
        "sminfo: sm lid 1 sm guid 0x98039b0300a1b2c0, activity count 12 priority 14 state 2 SMINFO_STANDBY\n",
    )
    assert [s for s, _subj, _m in findings(path)] == [Severity.WARN]
    set_sminfo(path, None)
    got = findings(path)
    assert [s for s, _subj, _m in got] == [Severity.PASS] and "not available" in got[0][2]
