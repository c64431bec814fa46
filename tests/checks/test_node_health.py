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
        "DMA", "DMA-FQ", "identity", "blocked", None, None, None,
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
    stats = {"rx_packets": 5, "rx_crc_errors_phy": 3, "rx_prio3_discards": 1, "rx_prio3_pause": 9, "rx_prio9_discards": 2}
    assert link_error_stats(stats) == {"rx_crc_errors_phy": 3, "rx_prio3_discards": 1}


def test_rising_phy_errors_fail_with_interval(host_copy) -> None:
    from tests.checks.test_checks import set_command

    path = host_copy("roce-healthy")
    argv = ["ethtool", "-S", "ens4np0"]

    def flap() -> None:
        set_command(path, argv, lambda t: t.replace("rx_prio3_discards: 0", "rx_prio3_discards: 120").replace("link_down_events_phy: 0", "link_down_events_phy: 1"))

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
    assert [(f.severity, f.subject, f.evidence["totals"]) for f in hit] == [(Severity.WARN, "mlx5_4/1", {"port_xmit_discards": 77})]


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
    assert total == 2 and counts["Receiver Error"] == 2 and counts["RELAY_NUM Rollover"] == 0 and len(counts) == 8
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

    hit = [f for f in findings(path, "pcie.aer", interval_s=10, sleep=lambda _s: errors()) if f.severity is not Severity.PASS]
    assert [(f.severity, f.subject) for f in hit] == [(Severity.FAIL, "bridge 0000:12:00.0")]
    assert hit[0].evidence["increase"] == {"correctable": 10} and "1.00/s" in hit[0].message
    static = [f for f in findings(FIXTURE_HOSTS / "ib-degraded", "pcie.aer", interval_s=5) if f.severity is not Severity.PASS]
    assert [(f.severity, f.subject) for f in static] == [(Severity.WARN, "mlx5_4 (0000:94:00.0)")]


def test_uncorrectable_aer_errors_are_named(host_copy) -> None:
    from tests.fixtures.hostbuilder import aer_file

    path = host_copy("roce-healthy")
    (path / "sys/bus/pci/devices/0000:33:00.0/aer_dev_nonfatal").write_text(aer_file("nonfatal", {"CmpltTO": 1}) + "\n")
    hit = next(f for f in findings(path, "pcie.aer") if f.severity is Severity.WARN)
    assert hit.subject == "GPU1 (0000:33:00.0)" and "nonfatal 1" in hit.message and "CmpltTO 1" in hit.message


def test_switch_uplink_is_checked_not_only_endpoints() -> None:
    hit = [f for f in findings(FIXTURE_HOSTS / "ib-degraded", "pcie.link") if f.subject.startswith("switch uplink")]
    assert [(f.severity, f.subject) for f in hit] == [(Severity.FAIL, "switch uplink 0000:31:00.0")]
    assert hit[0].evidence["below"] == ["0000:34:00.0", "0000:33:00.0"] and hit[0].evidence["width"] == 8


def test_aer_counters_survive_a_snapshot(tmp_path: Path) -> None:
    inv = snapshot_inventory("ib-degraded", tmp_path)
    assert inv.pci["0000:94:00.0"].aer.correctable == 44
    assert inv.pci["0000:94:00.0"].aer.details == {"correctable": {"RxErr": 37, "BadTLP": 2, "Timeout": 5}}
