"""The node-health checks of issue 13 (B6, A4, D17, D21, D23, D24): each on its planted fixture
fault, on real output formats, and the inputs captured in snapshots."""

from __future__ import annotations

import shutil
from pathlib import Path

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Severity
from fabricscope.host import Root, read_inventory
from fabricscope.host.iommu import group_of, parse_group_type
from fabricscope.host.snapshot import take_snapshot
from tests.conftest import FIXTURE_HOSTS


def findings(path: Path, check_id: str, **kwargs):
    return [f for f in run_doctor(Root.at(path), **kwargs).findings if f.id == check_id]


def snapshot_inventory(host: str | Path, tmp_path: Path):
    """The fixture host captured by `fabricscope snapshot` and read back: what doctor needs survives."""
    source = host if isinstance(host, Path) else FIXTURE_HOSTS / host
    archive, _recording = take_snapshot(Root.at(source), tmp_path / f"{source.name}.tar.gz")
    return read_inventory(Root.at(archive))


# ----- B6: IOMMU groups ---------------------------------------------------------------------------
def test_iommu_group_type_parser() -> None:
    assert [parse_group_type(t) for t in ("DMA", "DMA-FQ\n", "identity", "blocked", "auto", "", None)] == [
        "DMA",
        "DMA-FQ",
        "identity",
        "blocked",
        None,
        None,
        None,
    ]
    assert group_of("sys/kernel/iommu_groups/17") == 17 and group_of(None) is None


def test_iommu_on_by_default_does_not_pass() -> None:
    """ib-degraded boots without any IOMMU flag, yet its groups translate (DMA-FQ)."""
    hit = findings(FIXTURE_HOSTS / "ib-degraded", "pcie.iommu")
    assert [(f.severity, f.subject) for f in hit] == [(Severity.WARN, "kernel")]
    assert "on by default" in hit[0].message and "DMA-FQ" in hit[0].evidence["group_types"]


def test_iommu_without_groups_and_without_flags_is_not_evaluated(host_copy) -> None:
    path = host_copy("ib-degraded")
    shutil.rmtree(path / "sys/kernel/iommu_groups")
    hit = findings(path, "pcie.iommu")
    assert [f.severity for f in hit] == [Severity.INFO] and hit[0].message.startswith("not evaluated: ")


def test_iommu_groups_survive_a_snapshot(tmp_path: Path, host_copy) -> None:
    inv = snapshot_inventory("ib-degraded", tmp_path)
    gpu = inv.pci[inv.gpus[0].pci_address]
    assert inv.iommu.visible and inv.iommu.type_of(gpu.iommu_group) == "DMA-FQ"
    # No IOMMU in use: the kernel shows an empty directory (git keeps none, so the copy gets one here).
    path = host_copy("cloud-tcp")
    (path / "sys/kernel/iommu_groups").mkdir(parents=True)
    empty = snapshot_inventory(path, tmp_path)
    assert empty.iommu.visible and empty.iommu.types == {}


# ----- A4: RoCE physical-port errors from ethtool -S -------------------------------------------------
def test_phy_error_stats_are_one_definition_with_the_exporter() -> None:
    from fabricscope.host.ethtool import LINK_ERROR_STATS, PRIO_DISCARDS_HELP, link_error_stats
    from fabricscope.monitor.names import PORT_STATS, PRIO_STATS

    for name, meaning in LINK_ERROR_STATS.items():
        assert PORT_STATS[name].help == meaning  # the exporter exports each, with the same meaning
    assert PRIO_STATS[("rx", "discards")].help == PRIO_DISCARDS_HELP
    stats = {
        "rx_packets": 5,
        "rx_crc_errors_phy": 3,
        "rx_prio3_discards": 1,
        "rx_prio3_pause": 9,
        "rx_prio9_discards": 2,
    }
    assert link_error_stats(stats) == {"rx_crc_errors_phy": 3, "rx_prio3_discards": 1}


def test_rising_phy_errors_fail_with_interval(host_copy) -> None:
    from tests.checks.test_checks import set_command

    path = host_copy("roce-healthy")
    argv = ["ethtool", "-S", "ens4np0"]

    def flap() -> None:
        set_command(
            path,
            argv,
            lambda t: t.replace("rx_prio3_discards: 0", "rx_prio3_discards: 120").replace(
                "link_down_events_phy: 0", "link_down_events_phy: 1"
            ),
        )

    hit = findings(path, "link.phy_errors", interval_s=10, sleep=lambda _s: flap())
    assert [(f.severity, f.subject) for f in hit] == [(Severity.FAIL, "ens4np0")]
    assert hit[0].evidence["increase"] == {"link_down_events_phy": 1, "rx_prio3_discards": 120}
    assert "cable/transceiver" in hit[0].fix
    static = findings(FIXTURE_HOSTS / "roce-broken", "link.phy_errors", interval_s=5)
    assert [(f.severity, f.subject) for f in static] == [(Severity.WARN, "ens6np0")]


def test_port_xmit_discards_is_a_link_error(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    (path / "sys/class/infiniband/mlx5_4/ports/1/counters/port_xmit_discards").write_text("77\n")
    hit = [f for f in findings(path, "link.errors") if f.severity is not Severity.PASS]
    assert [(f.severity, f.subject, f.evidence["totals"]) for f in hit] == [
        (Severity.WARN, "mlx5_4/1", {"port_xmit_discards": 77})
    ]


# ----- D17: PCIe AER and switch uplinks -------------------------------------------------------------
def sample_sections(name: str) -> list[str]:
    from tests.conftest import samples_dir

    text = (samples_dir() / name).read_text()
    body = [line for line in text.splitlines() if not line.startswith(("# source:", "# note:"))]
    return "\n".join(body).split("# [excerpt gap]")


def test_aer_parser_on_the_kernel_abi_sample() -> None:
    from fabricscope.host.aer import parse_aer_stats

    correctable, fatal, nonfatal = sample_sections("sysfs_aer_dev_stats_kernel_abi.txt")
    total, counts = parse_aer_stats(correctable)
    assert (
        total == 2
        and counts["Receiver Error"] == 2
        and counts["RELAY_NUM Rollover"] == 0
        and len(counts) == 8
    )
    assert parse_aer_stats(fatal)[0] == 0 and len(parse_aer_stats(fatal)[1]) == 17
    assert parse_aer_stats(nonfatal)[0] == 0
    assert parse_aer_stats("RxErr 3\nBadTLP 1\nTOTAL_ERR_COR 4\n") == (4, {"RxErr": 3, "BadTLP": 1})
    assert parse_aer_stats("garbage") == (None, {})


def test_rising_aer_errors_fail_with_interval(host_copy) -> None:
    from tests.fixtures.hostbuilder import aer_file

    path = host_copy("ib-ndr-healthy")
    target = path / "sys/bus/pci/devices/0000:12:00.0/aer_dev_correctable"  # the GPU's downstream port

    def errors() -> None:
        target.write_text(aer_file("correctable", {"BadDLLP": 9, "Rollover": 1}) + "\n")

    hit = [
        f
        for f in findings(path, "pcie.aer", interval_s=10, sleep=lambda _s: errors())
        if f.severity is not Severity.PASS
    ]
    assert [(f.severity, f.subject) for f in hit] == [(Severity.FAIL, "bridge 0000:12:00.0")]
    assert hit[0].evidence["increase"] == {"correctable": 10} and "1.00/s" in hit[0].message
    static = [
        f
        for f in findings(FIXTURE_HOSTS / "ib-degraded", "pcie.aer", interval_s=5)
        if f.severity is not Severity.PASS
    ]
    assert [(f.severity, f.subject) for f in static] == [(Severity.WARN, "mlx5_4 (0000:94:00.0)")]


def test_uncorrectable_aer_errors_are_named(host_copy) -> None:
    from tests.fixtures.hostbuilder import aer_file

    path = host_copy("roce-healthy")
    (path / "sys/bus/pci/devices/0000:33:00.0/aer_dev_nonfatal").write_text(
        aer_file("nonfatal", {"CmpltTO": 1}) + "\n"
    )
    hit = next(f for f in findings(path, "pcie.aer") if f.severity is Severity.WARN)
    assert hit.subject == "GPU1 (0000:33:00.0)" and "nonfatal 1" in hit.message and "CmpltTO 1" in hit.message


def test_switch_uplink_is_checked_not_only_endpoints() -> None:
    hit = [
        f
        for f in findings(FIXTURE_HOSTS / "ib-degraded", "pcie.link")
        if f.subject.startswith("switch uplink")
    ]
    assert [(f.severity, f.subject) for f in hit] == [(Severity.FAIL, "switch uplink 0000:31:00.0")]
    assert hit[0].evidence["below"] == ["0000:34:00.0", "0000:33:00.0"] and hit[0].evidence["width"] == 8


def test_aer_counters_survive_a_snapshot(tmp_path: Path) -> None:
    inv = snapshot_inventory("ib-degraded", tmp_path)
    assert inv.pci["0000:94:00.0"].aer.correctable == 44
    assert inv.pci["0000:94:00.0"].aer.details == {"correctable": {"RxErr": 37, "BadTLP": 2, "Timeout": 5}}


# ----- D21: active RDMA MTU from ibv_devinfo -v -----------------------------------------------------
def test_ibv_devinfo_parser_on_real_captures() -> None:
    from fabricscope.host.verbs import parse_ibv_devinfo
    from tests.conftest import samples_dir

    text = (samples_dir() / "ibv_devinfo_vv_ib_cx6_ucx9908.txt").read_text()
    ports = parse_ibv_devinfo("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    assert sorted(ports) == ["mlx5_0/1", "mlx5_1/1"]
    up, down = ports["mlx5_0/1"], ports["mlx5_1/1"]
    assert (up.state, up.active_mtu_bytes, up.max_mtu_bytes, up.link_layer) == (
        "PORT_ACTIVE",
        4096,
        4096,
        "InfiniBand",
    )
    assert down.state == "PORT_DOWN"
    # The short (non -v) form prints the same lines with spaces: the RoCE CX-7 capture.
    roce = parse_ibv_devinfo((samples_dir() / "ibv_devinfo_roce_cx7.txt").read_text())
    assert roce["mlx5_2/1"].active_mtu_bytes == 4096 and roce["mlx5_2/1"].link_layer == "Ethernet"
    assert parse_ibv_devinfo("garbage") == {}


def test_roce_mtu_follows_the_kernel() -> None:
    from fabricscope.host.verbs import roce_mtu_for

    assert [roce_mtu_for(m) for m in (9000, 4192, 4191, 1500, 1100)] == [4096, 4096, 2048, 1024, 512]


def test_roce_active_mtu_below_what_the_netdev_allows_warns(host_copy) -> None:
    from tests.checks.test_checks import set_command

    path = host_copy("roce-healthy")
    set_command(
        path,
        ["ibv_devinfo", "-v"],
        lambda t: t.replace("active_mtu:\t\t4096 (5)", "active_mtu:\t\t1024 (3)", 1),
    )
    hit = [f for f in findings(path, "rdma.mtu") if f.severity is not Severity.PASS]
    assert [(f.severity, f.subject) for f in hit] == [(Severity.WARN, "mlx5_0/1")]
    assert "ens0np0's MTU 9000 allows 4096" in hit[0].message


def test_active_mtu_without_ibv_devinfo_is_not_evaluated(host_copy) -> None:
    import json

    path = host_copy("ib-ndr-healthy")
    index = json.loads((path / "cmd/index.json").read_text())
    (path / "cmd/index.json").write_text(json.dumps([e for e in index if e["argv"][0] != "ibv_devinfo"]))
    hit = findings(path, "rdma.mtu")
    assert [f.severity for f in hit] == [Severity.INFO] and "ibverbs-utils" in hit[0].fix


# ----- D23: containers (/dev/infiniband, RLIMIT_MEMLOCK) and D24: netdevs down ---------------------
def test_limits_parser_on_a_real_capture() -> None:
    from fabricscope.host.procfs import Rlimit, parse_limits
    from tests.conftest import samples_dir

    limits = parse_limits((samples_dir() / "proc_self_limits_gc3pie.txt").read_text())
    assert limits["Max locked memory"] == Rlimit(65536, 65536)
    assert limits["Max stack size"] == Rlimit(8388608, None) and limits["Max nice priority"] == Rlimit(0, 0)
    assert parse_limits("garbage") == {}


def test_container_without_devices_and_memlock(tmp_path: Path) -> None:
    report = run_doctor(Root.at(FIXTURE_HOSTS / "ib-container"))
    dev = next(f for f in report.findings if f.id == "rdma.dev_files")
    lock = next(f for f in report.findings if f.id == "rdma.memlock")
    assert (dev.severity, lock.severity) == (Severity.FAIL, Severity.FAIL)
    assert "--device=/dev/infiniband" in dev.fix and "64 KiB" in lock.message and "memlock" in lock.fix
    # A snapshot records /dev (names only) and /proc/self/limits: absent stays absent, not unknown.
    inv = snapshot_inventory("ib-container", tmp_path)
    assert inv.char_devices == () and inv.kernel.memlock.soft == 65536
    healthy = snapshot_inventory("ib-ndr-healthy", tmp_path)
    assert "uverbs7" in healthy.char_devices and healthy.kernel.memlock.soft is None


def test_finite_memlock_above_the_minimum_warns(host_copy) -> None:
    from tests.fixtures.make_hosts import proc_limits

    path = host_copy("ib-ndr-healthy")
    (path / "proc/4711/limits").write_text(proc_limits(8 * 2**30))
    hit = findings(path, "rdma.memlock")
    assert [f.severity for f in hit] == [Severity.WARN] and "8192 MiB" in hit[0].message


def test_snapshot_lists_device_nodes_without_opening_them(tmp_path: Path) -> None:
    """A character device under /dev/infiniband becomes an empty placeholder named like it."""
    import os
    import stat
    import tarfile

    from tests.conftest import skip_unless_ci

    src = tmp_path / "src"
    shutil.copytree(FIXTURE_HOSTS / "ib-ndr-healthy", src, symlinks=True)
    node = src / "dev/infiniband/uverbs0"
    node.unlink()
    try:
        os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(231, 192))  # uverbs' major/minor
    except PermissionError:
        skip_unless_ci("creating a character device needs root (CAP_MKNOD)")
    archive, _ = take_snapshot(Root.at(src), tmp_path / "snap.tar.gz")
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("dev/infiniband/uverbs0"))
    assert member.isfile() and member.size == 0


def test_ipoib_down_on_an_active_port_warns() -> None:
    hit = [
        f
        for f in findings(FIXTURE_HOSTS / "ib-degraded", "rdma.netdev_up")
        if f.severity is not Severity.PASS
    ]
    assert [(f.severity, f.subject) for f in hit] == [(Severity.WARN, "mlx5_0/1")]
    assert "IPoIB netdev ibp20s0 is down" in hit[0].message and "ip link set ibp20s0 up" in hit[0].fix


def test_iommu_evidence_keeps_only_the_iommu_parameters(host_copy) -> None:
    """Doctor documents travel unscrubbed (fleet collect, tickets): a secret on the kernel command
    line must not ride along in pcie.iommu's evidence."""
    root = host_copy("roce-broken")
    (root / "proc" / "cmdline").write_text(
        "BOOT_IMAGE=/vmlinuz ro intel_iommu=on vault.token=s3cr3t rd.luks.key=/k\n"
    )
    found = findings(root, "pcie.iommu")
    assert found and all(f.evidence.get("cmdline") == "intel_iommu=on" for f in found)
    assert "s3cr3t" not in repr([f.evidence for f in found])
