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
