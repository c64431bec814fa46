"""A source that vanishes or turns to garbage between scrapes: that collector reports success 0,
the scrape still succeeds with everything else, and success returns once the source is back."""

from __future__ import annotations

import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from fabricscope.monitor.server import MetricsServer
from tests.monitor.conftest import make_exporter, samples, value


def success(exporter) -> dict[str, float]:
    parsed = samples(exporter.render().decode())
    return {
        dict(labels)["collector"]: v
        for (name, labels), v in parsed.items()
        if name == "fabricscope_collector_success"
    }


def problems(exporter, collector: str) -> float:
    parsed = samples(exporter.render().decode())
    return value(parsed, "fabricscope_collector_problems", collector=collector)


def all_ok(exporter) -> bool:
    return all(v == 1 for v in success(exporter).values())


def test_vanished_port_state_fails_rdma_but_not_the_scrape(host_copy) -> None:
    root = host_copy("ib-ndr-healthy")
    exporter = make_exporter(root)
    server = MetricsServer(exporter.render, "127.0.0.1", 0)
    server.start_in_thread()
    try:
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert response.status == 200
            before = samples(response.read().decode())
        assert value(before, "fabricscope_collector_success", collector="rdma") == 1
        state = root / "sys/class/infiniband/mlx5_3/ports/1/state"
        saved = state.read_text()
        state.unlink()
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert response.status == 200
            after = samples(response.read().decode())
        assert value(after, "fabricscope_collector_success", collector="rdma") == 0
        assert value(after, "fabricscope_collector_problems", collector="rdma") == 1
        assert value(after, "fabricscope_collector_success", collector="tcp") == 1
        # what could be read is still there: other ports, and this port's counters and rate
        assert value(after, "fabricscope_rdma_port_state_id", device="mlx5_0", port="1") == 4
        assert (
            "fabricscope_rdma_port_state_id",
            frozenset({"device": "mlx5_3", "port": "1"}.items()),
        ) not in after
        assert value(after, "fabricscope_rdma_port_rate_bytes_per_second", device="mlx5_3", port="1") > 0
        state.write_text(saved)
        with urllib.request.urlopen(server.url, timeout=10) as response:
            restored = samples(response.read().decode())
        assert value(restored, "fabricscope_collector_success", collector="rdma") == 1
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    ("rel", "content"),
    [
        ("sys/class/infiniband/mlx5_2/ports/1/counters/symbol_error", "garbage\n"),
        ("sys/class/infiniband/mlx5_2/ports/1/rate", "fast\n"),
        ("sys/class/infiniband/mlx5_2/ports/1/state", "\x00\x01\x02\xff"),
        ("sys/class/infiniband/mlx5_2/ports/1/phys_state", ""),
        ("sys/class/infiniband/mlx5_2/ports/1/link_layer", "Token Ring\n"),
    ],
)
def test_garbled_rdma_file(host_copy, rel: str, content: str) -> None:
    root = host_copy("ib-ndr-healthy")
    exporter = make_exporter(root)
    assert all_ok(exporter)
    target = root / rel
    saved = target.read_bytes()
    target.write_bytes(content.encode("latin-1"))
    assert success(exporter)["rdma"] == 0
    assert problems(exporter, "rdma") == 1
    assert {k: v for k, v in success(exporter).items() if k != "rdma"} == {
        "netdev": 1,
        "ethtool": 1,
        "pcie": 1,
        "tcp": 1,
    }
    target.write_bytes(saved)
    assert all_ok(exporter)


def test_counter_replaced_by_symlink_is_not_followed(host_copy, tmp_path: Path) -> None:
    """Confinement: a counter file turned into a symlink (to anything) is refused, not read."""
    root = host_copy("ib-ndr-healthy")
    exporter = make_exporter(root)
    secret = tmp_path / "outside"
    secret.write_text("12345\n")
    target = root / "sys/class/infiniband/mlx5_1/ports/1/counters/link_downed"
    target.unlink()
    target.symlink_to(secret)
    parsed = samples(exporter.render().decode())
    assert value(parsed, "fabricscope_collector_success", collector="rdma") == 0
    assert (
        "fabricscope_rdma_port_link_downed_total",
        frozenset({"device": "mlx5_1", "port": "1"}.items()),
    ) not in parsed


def test_vanished_rdma_device_is_reported_until_topology_refresh(host_copy) -> None:
    root = host_copy("ib-ndr-healthy")
    exporter = make_exporter(root)
    (root / "sys/class/infiniband/mlx5_7").unlink()
    assert success(exporter)["rdma"] == 0
    exporter.topology_task.run_once()  # the next topology refresh forgets the device
    assert success(exporter)["rdma"] == 1


def test_proc_net_snmp_vanishes_or_garbled(host_copy) -> None:
    root = host_copy("cloud-tcp")
    exporter = make_exporter(root)
    snmp = root / "proc/net/snmp"
    saved = snmp.read_text()
    snmp.unlink()
    assert success(exporter)["tcp"] == 0
    snmp.write_text("this is not /proc/net/snmp\n")
    assert success(exporter)["tcp"] == 0
    snmp.write_text(saved)
    assert success(exporter)["tcp"] == 1


def test_ethtool_output_garbled_then_restored(host_copy) -> None:
    root = host_copy("roce-healthy")
    exporter = make_exporter(root)
    captured = next(p for p in (root / "cmd").iterdir() if p.name.endswith("ethtool_S_ens3np0"))
    saved = captured.read_text()
    captured.write_text("\x1b[2J random bytes, no statistics here\n")
    exporter.ethtool_task.run_once()  # the background refresh picks it up
    assert success(exporter)["ethtool"] == 0
    parsed = samples(exporter.render().decode())
    # the other seven netdevs still report PFC counters, with the values their captures hold;
    # the garbled one reports none
    pause = "fabricscope_pfc_pause_frames_received_total"
    reporting = {dict(labels)["netdev"] for name, labels in parsed if name == pause}
    assert len(reporting) == 7 and "ens3np0" not in reporting
    for dev in reporting:
        capture = next(p for p in (root / "cmd").iterdir() if p.name.endswith(f"ethtool_S_{dev}"))
        expected = int(re.search(r"^\s*rx_prio3_pause:\s*(\d+)$", capture.read_text(), re.M).group(1))
        assert value(parsed, pause, netdev=dev, priority="3") == expected
    captured.unlink()
    exporter.ethtool_task.run_once()
    assert success(exporter)["ethtool"] == 0
    captured.write_text(saved)
    exporter.ethtool_task.run_once()
    assert success(exporter)["ethtool"] == 1


def test_stale_ethtool_refresh_is_a_failure(host_copy, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = make_exporter(host_copy("roce-healthy"))
    monkeypatch.setattr(exporter.ethtool_task, "age_s", lambda: 600.0)
    assert success(exporter)["ethtool"] == 0


def test_pci_device_and_netdev_vanish(host_copy) -> None:
    root = host_copy("roce-healthy")
    exporter = make_exporter(root)
    (root / "sys/bus/pci/devices/0000:14:00.0").unlink()
    assert success(exporter)["pcie"] == 0
    mtu = root / "sys/class/net/ens2np0/mtu"
    mtu.write_text("jumbo\n")
    assert success(exporter)["netdev"] == 0
    shutil.rmtree(root / "sys/class/net/ens2np0/", ignore_errors=True)
    (root / "sys/class/net/ens2np0").unlink(missing_ok=True)
    assert success(exporter)["netdev"] == 0


def test_crashing_collector_is_a_metric(host_copy, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = make_exporter(host_copy("cloud-tcp"))
    pcie = next(c for c in exporter.collectors if c.name == "pcie")

    def boom(ctx, out) -> None:
        raise RuntimeError("surprise")

    monkeypatch.setattr(pcie, "collect", boom)
    result = success(exporter)
    assert result["pcie"] == 0 and result["tcp"] == 1
    assert problems(exporter, "pcie") == 1


def test_failing_topology_refresh_marks_dependent_collectors(
    host_copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = make_exporter(host_copy("roce-healthy"))

    def broken(root):
        raise OSError("nvidia-smi wedged")

    monkeypatch.setattr("fabricscope.monitor.exporter.read_topology", broken)
    exporter.topology_task.run_once()
    result = success(exporter)
    assert result["rdma"] == result["netdev"] == result["pcie"] == result["ethtool"] == 0
    assert result["tcp"] == 1
    # the last good topology still labels the series
    parsed = samples(exporter.render().decode())
    assert (
        value(
            parsed,
            "fabricscope_rdma_port_info",
            device="mlx5_0",
            port="1",
            netdev="ens0np0",
            link_layer="Ethernet",
        )
        == 1
    )
