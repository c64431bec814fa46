"""PCIe saturation: the ConnectX PCIe counters and a GPU's PCIe throughput from public captures,
and the link capacity they are judged against."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabricscope.host.gpu import parse_pcie_throughput
from fabricscope.monitor.collectors.pcie import link_capacity_bytes_per_second
from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import MONITOR_TESTS, add_gpu_pcie_capture, make_exporter, samples, value


def _capture(name: str) -> str:
    lines = (MONITOR_TESTS / "data" / name).read_text().split("\n", 1)
    assert lines[0].startswith("# source: ")
    return lines[1]


@pytest.mark.parametrize(
    ("gts", "width", "published_gbytes"),
    [
        # PCI-SIG's per-direction figures: Gen2 x8 4 GB/s, Gen3 x16 15.75, Gen4 x16 31.5, Gen5 x16 63
        (5.0, 8, 4.0),
        (8.0, 16, 15.75),
        (16.0, 16, 31.5),
        (32.0, 16, 63.0),
    ],
)
def test_link_capacity_matches_the_published_figures(gts: float, width: int, published_gbytes: float) -> None:
    assert link_capacity_bytes_per_second(gts, width) / 1e9 == pytest.approx(published_gbytes, rel=0.005)


def test_connectx_pcie_counters_from_a_public_capture(tmp_path: Path) -> None:
    host = tmp_path / "host"
    shutil.copytree(FIXTURE_HOSTS / "roce-healthy", host, symlinks=True)
    capture = next(p for p in (host / "cmd").iterdir() if p.name.endswith("ethtool_S_ens0np0"))
    capture.write_text(_capture("ethtool_S_mlx5_pci_counters.txt"))
    parsed = samples(make_exporter(host).render().decode())
    assert value(parsed, "fabricscope_nic_pcie_tx_signal_integrity_errors_total", netdev="ens0np0") == 1471
    assert value(parsed, "fabricscope_nic_pcie_rx_signal_integrity_errors_total", netdev="ens0np0") == 1
    assert value(parsed, "fabricscope_nic_pcie_outbound_stalled_read_ratio", netdev="ens0np0") == 0
    assert value(parsed, "fabricscope_nic_pcie_outbound_stalled_write_seconds_total", netdev="ens0np0") == 0


def test_gpu_pcie_throughput_from_nvidia_smi_or_not_available(tmp_path: Path) -> None:
    assert parse_pcie_throughput(_capture("nvidia_smi_q_pci_rtx5090.txt")) == {
        "0000:02:00.0": (483 * 1000, 387 * 1000)
    }
    host = tmp_path / "host"
    shutil.copytree(FIXTURE_HOSTS / "roce-healthy", host, symlinks=True)
    address = add_gpu_pcie_capture(host)
    parsed = samples(make_exporter(host).render().decode())
    assert value(parsed, "fabricscope_pcie_throughput_available", kind="gpu", source="nvidia-smi") == 1
    assert (
        value(
            parsed,
            "fabricscope_pcie_throughput_bytes_per_second",
            pci_address=address,
            kind="gpu",
            device="gpu0",
            direction="transmit",
        )
        == 483 * 1000
    )
    plain = samples(make_exporter(FIXTURE_HOSTS / "roce-healthy").render().decode())
    assert value(plain, "fabricscope_pcie_throughput_available", kind="gpu", source="nvidia-smi") == 0
    assert not [name for name, _labels in plain if name == "fabricscope_pcie_throughput_bytes_per_second"]


def test_a_snapshot_keeps_the_gpu_pcie_throughput(tmp_path: Path) -> None:
    """The inventory reads `nvidia-smi -q` (its PCI block) too, so a snapshot holds what the exporter shows."""
    from fabricscope.host import Root
    from fabricscope.host.snapshot import take_snapshot

    host = tmp_path / "host"
    shutil.copytree(FIXTURE_HOSTS / "roce-healthy", host, symlinks=True)
    address = add_gpu_pcie_capture(host)
    archive, _recording = take_snapshot(Root.at(host), tmp_path / "snap.tar.gz")
    parsed = samples(make_exporter(archive).render().decode())
    assert (
        value(
            parsed,
            "fabricscope_pcie_throughput_bytes_per_second",
            pci_address=address,
            kind="gpu",
            device="gpu0",
            direction="receive",
        )
        == 387 * 1000
    )
