"""The kernel log reader (issue 13 D18) on real captures, and its place in the host model and snapshots."""

from __future__ import annotations

import json

import pytest

from fabricscope.checks.xid_catalog import xid_meaning
from fabricscope.host import Root, read_inventory
from fabricscope.host.kernel_log import parse_kernel_log, read_kernel_log
from fabricscope.host.snapshot import capture
from tests.conftest import FIXTURE_HOSTS, SAMPLES


def sample(name: str):
    text = "\n".join(line for line in (SAMPLES / name).read_text().splitlines() if not line.startswith("# "))
    return parse_kernel_log(text)


def test_xid_lines_real() -> None:
    log = sample("kernel_log_xid79_journal.txt")
    # The Xid line and the driver's own "fallen off the bus" line are one event.
    assert [(x.pci, x.code) for x in log.xids] == [("0000:01:00", 79)]
    nvlink = sample("kernel_log_xid_nvlink_gb200.txt")
    assert [(x.pci, x.code) for x in nvlink.xids] == [
        ("0000:01:00", 144),
        ("0000:00:00", 149),
        ("0000:00:00", 149),
    ]
    assert [xid_meaning(x.code, x.text)[1] for x in nvlink.xids] == [
        "warn",
        "fail",
        "fail",
    ]  # Nonfatal / Fatal
    cleanup = sample("kernel_log_xid45_after_149.txt")
    assert {x.code for x in cleanup.xids} == {45} and len(cleanup.xids) == 4
    assert xid_meaning(45)[1] == "info" and xid_meaning(48) == ("Double Bit ECC Error (DBE)", "fail")
    assert xid_meaning(999)[1] == "warn" and "catalog" in xid_meaning(999)[0]


def test_fallen_off_the_bus_without_xid_is_xid_79() -> None:
    log = sample("kernel_log_fallen_off_multiline.txt")
    assert [(x.pci, x.code, x.at_s) for x in log.xids] == [("0000:b3:00", 79, 1843.308145)]
    assert log.last_s == pytest.approx(1843.439669)


def test_mlx5_link_and_health_lines_real() -> None:
    states = sample("kernel_log_mlx5_ib_link_states.txt")
    assert [(e.port, e.pci, e.state, e.up) for e in states.links] == [
        ("mlx5_5/1", "0000:ab:00.0", "INIT", False),
        ("mlx5_5/1", "0000:ab:00.0", "ACTIVE", True),
    ]
    boot = sample("kernel_log_mlx5_boot.txt")
    assert (
        boot.nic == () and boot.links == () and boot.last_s == pytest.approx(11.097626)
    )  # "Cable plugged" is no event
    health = sample("kernel_log_mlx5_health.txt")
    assert [(n.pci, n.kind) for n in health.nic] == [
        ("0000:03:00.0", "command_timeout"),
        ("0000:41:00.0", "health"),
        ("0000:41:00.0", "health"),
    ]
    assert health.nic[0].at_s == pytest.approx(66.816635)  # the syslog "kernel: " prefix before the stamp
    timeouts = sample("kernel_log_mlx5_cmd_timeout.txt")
    assert {(n.pci, n.kind) for n in timeouts.nic} == {("0000:61:00.0", "command_timeout")} and len(
        timeouts.nic
    ) == 4


def test_ethernet_carrier_lines() -> None:
    log = parse_kernel_log(
        "[ 400.5] mlx5_core 0000:4b:00.0 ens1f0np0: Link down\n[ 402.1] mlx5_core 0000:4b:00.0 ens1f0np0: Link up\n"
    )
    assert [(e.port, e.up) for e in log.links] == [("ens1f0np0", False), ("ens1f0np0", True)]


def test_journal_used_when_dmesg_is_refused(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    index = json.loads((path / "cmd/index.json").read_text())
    dmesg = next(e for e in index if e["argv"] == ["dmesg"])
    dmesg["rc"] = 1  # kernel.dmesg_restrict=1 and not root
    (path / "cmd/journal").write_text(
        "[ 3001.2] gpu-ib-01 kernel: mlx5_core 0000:14:00.0 mlx5_0: Port: 1 Link DOWN\n"
    )
    index.append(
        {
            "argv": ["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"],
            "stdout": "journal",
            "rc": 0,
        }
    )
    (path / "cmd/index.json").write_text(json.dumps(index))
    log, why = read_kernel_log(Root.at(path))
    assert why is None and log is not None and log.source.startswith("journalctl")
    assert [(e.port, e.at_s) for e in log.links] == [("mlx5_0/1", 3001.2)]
    dmesg["rc"], index[-1]["stdout"] = 1, "missing"
    (path / "cmd/index.json").write_text(json.dumps(index))
    log, why = read_kernel_log(Root.at(path))
    assert log is None and "dmesg: exit status 1" in why


def test_kernel_log_in_inventory_and_snapshot() -> None:
    root = Root.at(FIXTURE_HOSTS / "ib-degraded")
    inv = read_inventory(root)
    assert inv.kernel_log is not None and inv.kernel_log.source == "dmesg"
    assert ("dmesg",) in capture(Root.at(FIXTURE_HOSTS / "ib-degraded")).commands
