"""Kernel log checks (issue 13 D18): severities as documented, and 'not evaluated' without a log."""

from __future__ import annotations

import json
from pathlib import Path

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Severity
from fabricscope.host import Root


def set_dmesg(path: Path, text: str) -> None:
    index = json.loads((path / "cmd/index.json").read_text())
    entry = next(e for e in index if e["argv"] == ["dmesg"])
    (path / "cmd" / entry["stdout"]).write_text(text)


def findings(path: Path, check_id: str):
    return [
        (f.severity, f.subject, f.message) for f in run_doctor(Root.at(path)).findings if f.id == check_id
    ]


def test_one_link_down_after_boot_warns_and_boot_training_does_not(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    set_dmesg(
        path,
        "[   22.1] mlx5_core 0000:14:00.0 mlx5_0: Port: 1 Link DOWN\n"  # training at boot: ignored
        "[ 5000.0] mlx5_core 0000:94:00.0 mlx5_4: Port: 1 Link DOWN\n[ 5007.5] mlx5_core 0000:94:00.0 mlx5_4: Port: 1 Link ACTIVE\n"
        "[ 9000.0] mlx5_core 0000:14:00.0 ens0np0: Link down\n[ 9100.0] mlx5_core 0000:14:00.0 ens0np0: Link down\n"
        "[ 9200.0] mlx5_core 0000:14:00.0 ens0np0: Link down\n",
    )
    got = findings(path, "kernel.link_flaps")
    assert [(s, subj) for s, subj, _m in got] == [(Severity.FAIL, "ens0np0"), (Severity.WARN, "mlx5_4/1")]


def test_xid_severity_follows_the_catalog(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    set_dmesg(
        path,
        "[ 700.0] NVRM: Xid (PCI:0000:13:00): 13, pid=1, name=python3, Graphics SM Warp Exception\n"
        "[ 701.0] NVRM: Xid (PCI:0000:33:00): 45, pid=1, name=python3, Ch 00000001\n"
        "[ 702.0] NVRM: Xid (PCI:0000:53:00): 48, pid=1, name=python3, DBE (double bit error) ECC error\n",
    )
    got = {subj: (s, m) for s, subj, m in findings(path, "kernel.xid")}
    assert (
        got["GPU0 (0000:13:00.0)"][0] is Severity.WARN
        and "Graphics Engine Exception" in got["GPU0 (0000:13:00.0)"][1]
    )
    assert got["GPU1 (0000:33:00.0)"][0] is Severity.INFO
    assert got["GPU2 (0000:53:00.0)"] == (Severity.FAIL, "Xid 48 (Double Bit ECC Error (DBE)) x1")


def test_command_timeouts_warn(host_copy) -> None:
    path = host_copy("roce-healthy")
    set_dmesg(
        path,
        "[ 900.1] mlx5_core 0000:34:00.0: wait_func:964:(pid 112): ENABLE_HCA(0x104) timeout. Will cause a leak of a command resource\n",
    )
    assert [(s, subj) for s, subj, _m in findings(path, "kernel.nic_firmware")] == [
        (Severity.WARN, "mlx5_1 (0000:34:00.0)")
    ]


def test_no_kernel_log_is_not_evaluated(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    index = [e for e in json.loads((path / "cmd/index.json").read_text()) if e["argv"] != ["dmesg"]]
    (path / "cmd/index.json").write_text(json.dumps(index))
    for check_id in ("kernel.link_flaps", "kernel.xid", "kernel.nic_firmware"):
        got = findings(path, check_id)
        assert [(s, m.split(":")[0]) for s, _subj, m in got] == [(Severity.INFO, "not evaluated")], got
