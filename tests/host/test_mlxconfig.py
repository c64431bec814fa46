"""mlxconfig (issue 13 D20): the query layout of NVIDIA's MFT documentation, and each rule firing."""

from __future__ import annotations

import json
from pathlib import Path

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Severity
from fabricscope.host import Root, read_inventory
from fabricscope.host.mlxconfig import parse_mlxconfig, value_code
from fabricscope.host.snapshot import capture
from tests.conftest import FIXTURE_HOSTS, SAMPLES


def test_mft_documentation_layouts() -> None:
    text = "\n".join(
        line
        for line in (SAMPLES / "mlxconfig_q_mft_doc.txt").read_text().splitlines()
        if not line.startswith("# ")
    )
    params = parse_mlxconfig(text)
    # Both examples: NAME VALUE, and with --enable_verbosity the last (Next Boot) column, '*' stripped.
    assert (
        params["WOL_MAGIC_EN_P1"] == "False(0)"
        and params["SRIOV_EN"] == "True(1)"
        and params["NUM_OF_VFS"] == "5"
    )
    assert [value_code(v) for v in ("True(1)", "per_mkey(0)", "128", "N/A")] == [1, 0, 128, None]


def test_read_through_the_host_model_and_snapshot() -> None:
    inv = read_inventory(Root.at(FIXTURE_HOSTS / "roce-broken"))
    assert (
        set(inv.mlxconfig) == {f"mlx5_{i}" for i in range(8)}
        and inv.mlxconfig["mlx5_2"]["ATS_ENABLED"] == "True(1)"
    )
    assert ("mlxconfig", "-d", "0000:54:00.0", "q") in capture(
        Root.at(FIXTURE_HOSTS / "roce-broken")
    ).commands


def edit(path: Path, device_pci: str, old: str, new: str) -> None:
    index = json.loads((path / "cmd/index.json").read_text())
    out = path / "cmd" / next(e["stdout"] for e in index if e["argv"] == ["mlxconfig", "-d", device_pci, "q"])
    out.write_text(out.read_text().replace(old, new))


def findings(path: Path):
    return [
        (f.severity, f.subject, f.message, f.fix)
        for f in run_doctor(Root.at(path)).findings
        if f.id == "rdma.nic_config"
    ]


def test_each_rule_fires(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    edit(
        path,
        "0000:14:00.0",
        "ADVANCED_PCI_SETTINGS                       True(1)",
        "ADVANCED_PCI_SETTINGS                       False(0)",
    )
    edit(
        path,
        "0000:34:00.0",
        "MAX_ACC_OUT_READ                            0 ",
        "MAX_ACC_OUT_READ                            8 ",
    )
    edit(path, "0000:54:00.0", "per_mkey(0) ", "force_relax(1)")
    got = {subj: (s, m, fix) for s, subj, m, fix in findings(path)}
    assert set(got) == {"mlx5_0 (0000:14:00.0)", "mlx5_1 (0000:34:00.0)", "mlx5_2 (0000:54:00.0)"}
    assert (
        "ADVANCED_PCI_SETTINGS is off" in got["mlx5_0 (0000:14:00.0)"][1]
        and "ADVANCED_PCI_SETTINGS=1" in got["mlx5_0 (0000:14:00.0)"][2]
    )
    assert "MAX_ACC_OUT_READ is 8" in got["mlx5_1 (0000:34:00.0)"][1]
    assert "force_relax(1)" in got["mlx5_2 (0000:54:00.0)"][1]
    assert {s for s, _m, _f in got.values()} == {Severity.WARN}


def test_without_mlxconfig_not_evaluated(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    index = [e for e in json.loads((path / "cmd/index.json").read_text()) if e["argv"][0] != "mlxconfig"]
    (path / "cmd/index.json").write_text(json.dumps(index))
    assert [(s, m.split(":")[0]) for s, _subj, m, _f in findings(path)] == [(Severity.INFO, "not evaluated")]
