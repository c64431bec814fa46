"""Unknown or unexpected inputs are reported as what they are: "not evaluated" (info) or
"unrecognised", never a pass and never a self-contradiction (issue 13, A1 and A5a)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Severity
from fabricscope.host import Root
from fabricscope.host.infiniband import PHYS_STATE_NAMES, PORT_STATE_NAMES
from fabricscope.host.sysfs import parse_id_name
from tests.conftest import FIXTURE_HOSTS, samples_dir


def procfs_sysfs_tree(dest: Path) -> Path:
    """The prometheus/procfs test tree (``<path> = <value>`` lines) written out as a snapshot."""
    for line in (samples_dir() / "sysfs_infiniband_fixture_procfs.txt").read_text().splitlines():
        if not line.startswith("/sys/"):
            continue
        path, _, value = line.partition(" = ")
        target = dest / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value.replace("\\n", "\n") + "\n")
    return dest


def test_procfs_phys_state_active_is_unrecognised_not_a_contradiction(tmp_path: Path) -> None:
    report = run_doctor(Root.at(procfs_sysfs_tree(tmp_path / "procfs")))
    hits = [f for f in report.findings if f.id == "rdma.port_state" and f.subject == "mlx5_0/1"]
    assert len(hits) == 1, [f.to_dict() for f in report.findings if f.id == "rdma.port_state"]
    hit = hits[0]
    assert "unrecognised physical state 'ACTIVE' (code 4 would be PortConfigurationTraining)" in hit.message
    # The logical state says ACTIVE: the link cannot be called down, nor up.
    assert hit.severity is Severity.WARN
    assert "physical state ACTIVE" not in hit.message and hit.fix
    # The ports the kernel would write as they are (hfi1_0, mlx4_0) are not flagged.
    flagged = {
        f.subject for f in report.findings if f.id == "rdma.port_state" and f.severity is not Severity.PASS
    }
    assert flagged == {"mlx5_0/1"}


def test_unrecognised_state_on_a_down_port_still_fails(tmp_path: Path, host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    port = path / "sys/class/infiniband/mlx5_3/ports/1"
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("9: Frobnicated\n")
    hit = next(
        f for f in run_doctor(Root.at(path)).findings if f.id == "rdma.port_state" and f.subject == "mlx5_3/1"
    )
    assert hit.severity is Severity.FAIL
    assert (
        hit.message == "port is DOWN; unrecognised physical state 'Frobnicated' (code 9 would be <unknown>)"
    )


def test_state_tables_are_the_kernels() -> None:
    """drivers/infiniband/core/sysfs.c: state_name[] and phys_state_to_str(); every real capture
    in the samples uses exactly these texts."""
    assert PORT_STATE_NAMES == {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
    assert PHYS_STATE_NAMES[4] == "PortConfigurationTraining" and PHYS_STATE_NAMES[5] == "LinkUp"
    assert PHYS_STATE_NAMES[7] == "Phy Test" and len(PHYS_STATE_NAMES) == 8
    text = (samples_dir() / "sysfs_infiniband_fixture_procfs.txt").read_text()
    for line in text.splitlines():
        if line.endswith("/state") or "/state = " in line:
            code, name = parse_id_name(line.partition(" = ")[2])
            assert PORT_STATE_NAMES[code] == name


def test_unprivileged_container_does_not_pass_acs() -> None:
    """Without CAP_SYS_ADMIN config space stops at 64 bytes: ACS is not evaluated, and the report
    says root is needed, instead of a silent nothing."""
    report = run_doctor(Root.at(FIXTURE_HOSTS / "ib-container"))
    acs = [f for f in report.findings if f.id == "pcie.acs"]
    assert [f.severity for f in acs] == [Severity.INFO]
    assert acs[0].message.startswith("not evaluated: ") and "64-byte header" in acs[0].message
    source = next(f for f in report.findings if f.id == "host.sources" and f.subject == "PCI config space")
    assert source.severity is Severity.WARN and "not root" in source.message and "root" in source.fix
    assert len(source.evidence["devices"]) == 20 and source.evidence["more"] > 0
    # Root reading the same node sees ACS and passes it.
    root_report = run_doctor(Root.at(FIXTURE_HOSTS / "ib-ndr-healthy"))
    assert [f.severity for f in root_report.findings if f.id == "pcie.acs"] == [Severity.PASS]


def test_acs_redirect_behind_truncated_config_is_not_passed(host_copy) -> None:
    """The roce-broken ACS fault, read without root: it cannot be seen, so it must not pass."""
    path = host_copy("roce-broken")
    for config in (path / "sys/devices").rglob("config"):
        config.write_bytes(config.read_bytes()[:64])
    acs = [f for f in run_doctor(Root.at(path)).findings if f.id == "pcie.acs"]
    assert [f.severity for f in acs] == [Severity.INFO]


@pytest.fixture
def garbled_host(tmp_path: Path) -> Path:
    """A node whose every file and captured output is garbage: every value is unknown."""
    dest = tmp_path / "garbled"
    shutil.copytree(FIXTURE_HOSTS / "ib-ndr-healthy", dest, symlinks=True)
    for path in dest.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.name != "index.json":
            path.write_text("??garbled??\n")
    return dest


def test_nothing_passes_on_garbled_input(garbled_host: Path) -> None:
    report = run_doctor(Root.at(garbled_host))
    passed = [(f.id, f.message) for f in report.findings if f.severity is Severity.PASS]
    # Devices and their /dev files are present (names, not contents); nothing else can be judged.
    assert sorted(passed) == [
        ("rdma.dev_files", "8 uverbs device file(s) for 8 RDMA device(s)"),
        ("rdma.present", "8 RDMA device(s): mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7"),
    ]
    said = {f.id for f in report.findings if f.message.startswith("not evaluated: ")}
    assert {
        "link.errors",
        "pcie.link",
        "rdma.firmware",
        "tcp.somaxconn",
        "tcp.retransmits",
        "tcp.congestion_control",
    } <= said


def test_nothing_passes_on_an_empty_root(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    report = run_doctor(Root.at(tmp_path))
    assert not [f.to_dict() for f in report.findings if f.severity is Severity.PASS]
