"""Every doctor check fires on a fault and stays quiet on a healthy host; fixtures report exactly
their planted faults."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricscope.checks.doctor import run_doctor
from fabricscope.checks.registry import all_checks
from fabricscope.findings import Severity
from fabricscope.host import Root
from fabricscope.host.pci import PciDevice, pcie_distance
from tests.conftest import FIXTURE_HOSTS, HEALTHY_HOSTS, HOST_NAMES
from tests.fixtures.make_hosts import PLANTED

PROBLEMS = (Severity.INFO, Severity.WARN, Severity.FAIL)


def set_file(path: Path, rel: str, value: str) -> None:
    target = path / rel
    target.write_text(value + "\n")


def set_command(path: Path, argv: list[str], transform: Callable[[str], str]) -> None:
    index = json.loads((path / "cmd/index.json").read_text())
    entry = next(e for e in index if e["argv"] == argv)
    out = path / "cmd" / entry["stdout"]
    out.write_text(transform(out.read_text()))


def bump_counter(path: Path, port_rel: str, name: str, by: int) -> None:
    target = path / port_rel / name
    target.write_text(f"{int(target.read_text()) + by}\n")


@functools.cache
def fixture_report(host: str):
    """Doctor on an unmodified fixture host; read once per test session."""
    return run_doctor(Root.at(FIXTURE_HOSTS / host))


def doctor(path: Path, interval: float | None = None, between: Callable[[], None] | None = None):
    return run_doctor(Root.at(path), interval_s=interval, sleep=lambda _s: between() if between else None)


# check id -> (fixture host, mutation of a copy or None, expected severity, expected subject)
Mutation = Callable[[Path], None] | None
FIRES: dict[str, tuple[str, Mutation, Severity, str]] = {
    "rdma.present": ("cloud-tcp", None, Severity.INFO, "node"),
    "rdma.port_state": ("ib-degraded", None, Severity.FAIL, "mlx5_5/1"),
    "rdma.port_rate": ("ib-degraded", None, Severity.FAIL, "mlx5_3/1"),
    "rdma.link_layer_mix": (
        "ib-ndr-healthy",
        lambda p: set_file(p, "sys/class/infiniband/mlx5_7/ports/1/link_layer", "Ethernet"),
        Severity.WARN,
        "node",
    ),
    "rdma.mtu": ("ib-degraded", None, Severity.WARN, "mlx5_7/1"),
    "rdma.netdev_up": ("ib-degraded", None, Severity.WARN, "mlx5_0/1"),
    "rdma.dev_files": ("ib-container", None, Severity.FAIL, "/dev/infiniband"),
    "rdma.memlock": ("ib-container", None, Severity.FAIL, "RLIMIT_MEMLOCK"),
    "rdma.firmware": (
        "ib-ndr-healthy",
        lambda p: set_file(p, "sys/class/infiniband/mlx5_4/fw_ver", "28.36.1010"),
        Severity.WARN,
        "mlx5_4",
    ),
    "roce.gid": ("roce-broken", None, Severity.WARN, "mlx5_1/1"),
    "roce.mtu": ("roce-broken", None, Severity.WARN, "ens2np0"),
    "roce.pfc": ("roce-broken", None, Severity.FAIL, "ens5np0"),
    "roce.trust": ("roce-broken", None, Severity.WARN, "ens3np0"),
    "roce.ecn": ("roce-broken", None, Severity.WARN, "ens4np0"),
    "roce.cnp_ignored": ("roce-broken", None, Severity.WARN, "mlx5_6/1"),
    "link.errors": ("ib-degraded", None, Severity.WARN, "mlx5_2/1"),
    "link.transceiver": ("roce-broken", None, Severity.WARN, "ens7np0"),
    "link.phy_errors": ("roce-broken", None, Severity.WARN, "ens6np0"),
    "pcie.link": ("ib-degraded", None, Severity.FAIL, "mlx5_6 (0000:d4:00.0)"),
    "pcie.affinity": (
        "ib-ndr-healthy",
        lambda p: set_file(p, "sys/bus/pci/devices/0000:13:00.0/numa_node", "1"),
        Severity.WARN,
        "GPU0 (0000:13:00.0)",
    ),
    "pcie.gpudirect": ("roce-broken", None, Severity.WARN, "kernel"),
    "pcie.aer": ("ib-degraded", None, Severity.WARN, "mlx5_4 (0000:94:00.0)"),
    "pcie.acs": ("roce-broken", None, Severity.WARN, "0000:b2:01.0"),
    "pcie.iommu": ("roce-broken", None, Severity.WARN, "kernel"),
    "tcp.somaxconn": ("roce-broken", None, Severity.WARN, "net.core.somaxconn"),
    "tcp.offloads": ("roce-broken", None, Severity.WARN, "ens0np0"),
    "tcp.buffers": (
        "roce-healthy",
        lambda p: set_file(p, "proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456"),
        Severity.WARN,
        "net.ipv4.tcp_rmem",
    ),
    "tcp.congestion_control": (
        "cloud-tcp",
        lambda p: set_file(p, "proc/sys/net/ipv4/tcp_congestion_control", "reno"),
        Severity.WARN,
        "net.ipv4.tcp_congestion_control",
    ),
    "tcp.retransmits": (
        "cloud-tcp",
        lambda p: set_file(
            p,
            "proc/net/snmp",
            "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
            "Tcp: 1 200 120000 -1 10 10 0 0 1 100000 100000 2500 0 0 0",
        ),
        Severity.WARN,
        "tcp",
    ),
    "kernel.link_flaps": ("ib-degraded", None, Severity.FAIL, "mlx5_5/1"),
    "kernel.xid": ("ib-degraded", None, Severity.FAIL, "GPU2 (0000:53:00.0)"),
    "kernel.nic_firmware": ("roce-broken", None, Severity.FAIL, "mlx5_3 (0000:74:00.0)"),
    "gpu.nvlink": ("ib-degraded", None, Severity.FAIL, "GPU4 (0000:93:00.0)"),
    "gpu.fabric": ("roce-broken", None, Severity.FAIL, "GPU6 (0000:d3:00.0)"),
    "rdma.subnet_manager": ("ib-degraded", None, Severity.FAIL, "subnet manager"),
    "rdma.nic_config": ("roce-broken", None, Severity.WARN, "mlx5_2 (0000:54:00.0)"),
    "host.sources": (
        "cloud-tcp",
        lambda p: set_file(p, "sys/class/net/ens5/mtu", "jumbo"),
        Severity.INFO,
        "host",
    ),
}
# Checks that only speak with --interval are exercised by the interval tests below.
INTERVAL_ONLY = {"link.congestion"}
MY_AREAS = {"host", "rdma", "roce", "link", "pcie", "tcp", "kernel", "gpu"}


def test_every_check_has_a_firing_and_a_quiet_case() -> None:
    ids = {c.id for c in all_checks() if c.area in MY_AREAS}
    assert ids == set(FIRES) | INTERVAL_ONLY


@pytest.mark.parametrize("check_id", sorted(FIRES))
def test_check_fires(check_id: str, host_copy) -> None:
    host, mutate, severity, subject = FIRES[check_id]
    path = host_copy(host)
    if mutate:
        mutate(path)
    report = doctor(path)
    hits = [(f.severity, f.subject) for f in report.findings if f.id == check_id]
    assert (severity, subject) in hits, hits
    fired = next(f for f in report.findings if f.id == check_id and f.subject == subject)
    assert fired.message and (fired.fix or severity is Severity.INFO)


@pytest.mark.parametrize("check_id", sorted(FIRES) + sorted(INTERVAL_ONLY))
@pytest.mark.parametrize("host", HEALTHY_HOSTS)
def test_check_quiet_on_healthy_hosts(check_id: str, host: str) -> None:
    report = fixture_report(host)
    bad = [f for f in report.findings if f.id == check_id and f.severity in PROBLEMS]
    if (check_id, host) in EXPECTED_INFO:
        assert [(f.severity, f.message.split(":")[0]) for f in bad] == [
            (Severity.INFO, EXPECTED_INFO[check_id, host])
        ]
        return
    assert not bad, [f.to_dict() for f in bad]


# What a healthy node still says, as info: a TCP-only node says so, and a cloud VM's virtual NIC
# reports no link speed, so the socket-buffer check cannot be evaluated there.
EXPECTED_INFO = {
    ("rdma.present", "cloud-tcp"): "no RDMA device",
    ("tcp.buffers", "cloud-tcp"): "not evaluated",
    ("pcie.aer", "cloud-tcp"): "not evaluated",  # a VM's virtual PCI devices have no AER statistics
    # The EFA node is a VM too (AWS p4d): no AER, no IOMMU groups in the guest, no speed on the ENA netdev.
    ("pcie.aer", "efa-p4d"): "not evaluated",
    ("pcie.iommu", "efa-p4d"): "not evaluated",
    ("tcp.buffers", "efa-p4d"): "not evaluated",
}


@pytest.mark.parametrize("host", HOST_NAMES)
def test_fixture_reports_exactly_its_planted_faults(host: str) -> None:
    report = fixture_report(host)
    got = sorted(
        (f.id, f.subject, f.severity.value)
        for f in report.findings
        if f.severity in (Severity.WARN, Severity.FAIL)
    )
    assert got == sorted(PLANTED[host])
    for finding in report.findings:
        assert finding.id != "doctor.check_error", finding.to_dict()
        if finding.severity in (Severity.WARN, Severity.FAIL):
            assert finding.fix, finding.to_dict()


def test_rising_error_counters_fail_with_interval(host_copy) -> None:
    path = host_copy("ib-degraded")
    port = "sys/class/infiniband/mlx5_2/ports/1/counters"
    report = doctor(path, interval=10, between=lambda: bump_counter(path, port, "symbol_error", 40))
    hits = [f for f in report.findings if f.id == "link.errors" and f.subject == "mlx5_2/1"]
    assert [f.severity for f in hits] == [Severity.FAIL]
    assert hits[0].evidence["increase"] == {"symbol_error": 40}
    assert "4.00/s" in hits[0].message


def test_static_counters_with_interval_stay_warn(host_copy) -> None:
    report = doctor(host_copy("ib-degraded"), interval=5)
    assert [f.severity for f in report.findings if f.id == "link.errors"] == [Severity.WARN]


def test_congestion_rates_reported_with_interval(host_copy) -> None:
    path = host_copy("roce-healthy")
    port = "sys/class/infiniband/mlx5_0/ports/1"

    def traffic() -> None:
        bump_counter(path, f"{port}/counters", "port_xmit_wait", 500)
        bump_counter(path, f"{port}/hw_counters", "np_cnp_sent", 120)
        set_command(
            path,
            ["ethtool", "-S", "ens0np0"],
            lambda t: t.replace("rx_prio3_pause: 11233", "rx_prio3_pause: 11333"),
        )

    report = doctor(path, interval=10, between=traffic)
    info = {f.subject: f for f in report.findings if f.id == "link.congestion"}
    assert info["mlx5_0/1"].severity is Severity.INFO
    assert info["mlx5_0/1"].evidence["per_second"] == {"port_xmit_wait": 50.0, "np_cnp_sent": 12.0}
    assert info["ens0np0"].evidence["per_second"] == {"rx_prio3_pause": 10.0}
    quiet = doctor(FIXTURE_HOSTS / "roce-healthy", interval=1)
    assert [f.severity for f in quiet.findings if f.id == "link.congestion"] == [Severity.PASS]


def test_cnp_ignored_rising_and_settled(host_copy) -> None:
    path = host_copy("roce-broken")
    hw = "sys/class/infiniband/mlx5_6/ports/1/hw_counters"
    rising = doctor(path, interval=2, between=lambda: bump_counter(path, hw, "rp_cnp_ignored", 10))
    hit = next(f for f in rising.findings if f.id == "roce.cnp_ignored" and f.subject == "mlx5_6/1")
    assert hit.severity is Severity.WARN and "5.0/s" in hit.message
    settled = doctor(FIXTURE_HOSTS / "roce-broken", interval=2)
    hit = next(f for f in settled.findings if f.id == "roce.cnp_ignored" and f.subject == "mlx5_6/1")
    assert hit.severity is Severity.PASS


def test_subnet_manager_missing_is_named(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    set_file(path, "sys/class/infiniband/mlx5_1/ports/1/state", "2: INIT")
    hit = next(f for f in doctor(path).findings if f.id == "rdma.port_state" and f.severity is Severity.FAIL)
    assert "subnet manager" in hit.message and "opensm" in hit.fix


def test_idle_gpu_link_speed_is_info_not_fail(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    set_file(path, "sys/bus/pci/devices/0000:33:00.0/current_link_speed", "2.5 GT/s PCIe")
    hits = [f for f in doctor(path).findings if f.id == "pcie.link" and f.subject.startswith("GPU1")]
    assert [f.severity for f in hits] == [Severity.INFO]


def test_pfc_off_with_ecn_on_is_warn(host_copy) -> None:
    path = host_copy("roce-broken")
    for point in ("roce_np", "roce_rp"):
        set_file(path, f"sys/class/net/ens5np0/ecn/{point}/enable/3", "1")
    hit = next(f for f in doctor(path).findings if f.id == "roce.pfc" and f.subject == "ens5np0")
    assert hit.severity is Severity.WARN and "ECN alone" in hit.message


def _pci(
    addr: str, rc: str, upstream: tuple[str, ...], numa: int | None, port_type: int | None = None
) -> PciDevice:
    return PciDevice(addr, None, None, None, None, None, None, None, numa, rc, upstream, port_type, None)


def test_pcie_distance_classes() -> None:
    rp, usp, dsp_a, dsp_b = "0000:10:01.0", "0000:11:00.0", "0000:12:00.0", "0000:12:01.0"
    usp2, dsp2 = "0000:13:00.0", "0000:14:00.0"
    devices = {
        rp: _pci(rp, "pci0000:10", (), 0, 4),
        usp: _pci(usp, "pci0000:10", (rp,), 0, 5),
        dsp_a: _pci(dsp_a, "pci0000:10", (rp, usp), 0, 6),
        dsp_b: _pci(dsp_b, "pci0000:10", (rp, usp), 0, 6),
        usp2: _pci(usp2, "pci0000:10", (rp, usp, dsp_b), 0, 5),
        dsp2: _pci(dsp2, "pci0000:10", (rp, usp, dsp_b, usp2), 0, 6),
    }
    gpu = _pci("0000:20:00.0", "pci0000:10", (rp, usp, dsp_a), 0)
    nic_same_switch = _pci("0000:21:00.0", "pci0000:10", (rp, usp, dsp_b), 0)
    nic_two_switches = _pci("0000:22:00.0", "pci0000:10", (rp, usp, dsp_b, usp2, dsp2), 0)
    nic_root_port = _pci("0000:23:00.0", "pci0000:10", ("0000:10:02.0",), 0)
    nic_other_rc_same_numa = _pci("0000:31:00.0", "pci0000:30", ("0000:30:01.0",), 0)
    nic_other_socket = _pci("0000:91:00.0", "pci0000:90", ("0000:90:01.0",), 1)
    assert pcie_distance(gpu, nic_same_switch, devices) == "PIX"
    assert pcie_distance(gpu, nic_two_switches, devices) == "PXB"
    assert pcie_distance(gpu, nic_root_port, devices) == "PHB"
    assert pcie_distance(gpu, nic_other_rc_same_numa, devices) == "NODE"
    assert pcie_distance(gpu, nic_other_socket, devices) == "SYS"


def test_fixture_inventory_affinity_matches_layout() -> None:
    from fabricscope.host import read_inventory

    inv = read_inventory(Root.at(FIXTURE_HOSTS / "ib-ndr-healthy"))
    assert [(a.gpu_index, a.nic, a.distance) for a in inv.affinity] == [
        (i, f"mlx5_{i}", "PIX") for i in range(8)
    ]
    assert inv.gpu_source == "nvidia-smi"
    assert [p.rate_gbps for p in inv.ports] == [400.0] * 8
