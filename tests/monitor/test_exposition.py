"""The exposition of every fixture host: golden files, promtool lint, units and values."""

from __future__ import annotations

import os
import subprocess

import pytest

from fabricscope.monitor.exporter import ExporterOptions
from tests.conftest import FIXTURE_HOSTS
from tests.fixtures.make_hosts import PLANTED
from tests.monitor.conftest import GOLDEN, all_hosts, make_exporter, normalise, promtool, samples, value

HOSTS = all_hosts()
UPDATE = os.environ.get("FABRICSCOPE_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("host", HOSTS)
def test_exposition_matches_golden(host: str) -> None:
    text = normalise(make_exporter(FIXTURE_HOSTS / host).render().decode())
    golden = GOLDEN / f"{host}.prom"
    if UPDATE:
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with FABRICSCOPE_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


@pytest.mark.parametrize("host", HOSTS)
def test_promtool_check_metrics_is_clean(host: str, nccl_log) -> None:
    """Every family the exporter can produce on this host (doctor and NCCL log included) lints clean."""
    tool = promtool()
    exporter = make_exporter(
        FIXTURE_HOSTS / host, doctor_interval_s=300.0, nccl_globs=(str(nccl_log),), nccl_from_start=True
    )
    text = exporter.render().decode()
    assert "fabricscope_finding{" in text and "fabricscope_nccl_socket_fallbacks_total" in text
    proc = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""


@pytest.mark.parametrize("host", HOSTS)
def test_every_collector_succeeds_on_fixture_hosts(host: str, nccl_log) -> None:
    exporter = make_exporter(FIXTURE_HOSTS / host, doctor_interval_s=300.0, nccl_globs=(str(nccl_log),))
    health = exporter.health()
    assert set(health) == {"rdma", "netdev", "ethtool", "pcie", "tcp", "doctor", "nccl"}
    bad = {name: h.problems for name, h in health.items() if not h.success}
    assert bad == {}


def test_units_are_converted() -> None:
    """Data counters are 4-byte words in sysfs; rates are Gb/s; ethtool pause durations are µs."""
    root = FIXTURE_HOSTS / "roce-healthy"
    parsed = samples(make_exporter(root).render().decode())
    base = root / "sys/class/infiniband/mlx5_0/ports/1"
    words = int((base / "counters/port_xmit_data").read_text())
    assert (
        value(parsed, "fabricscope_rdma_port_transmitted_bytes_total", device="mlx5_0", port="1") == words * 4
    )
    rate_gbps = float((base / "rate").read_text().split()[0])
    assert (
        value(parsed, "fabricscope_rdma_port_rate_bytes_per_second", device="mlx5_0", port="1")
        == rate_gbps * 1e9 / 8
    )
    ethtool = next(p for p in (root / "cmd").iterdir() if p.name.endswith("ethtool_S_ens0np0")).read_text()
    stats = dict(line.strip().split(": ") for line in ethtool.splitlines() if ": " in line)
    assert value(
        parsed, "fabricscope_pfc_pause_duration_received_seconds_total", netdev="ens0np0", priority="3"
    ) == pytest.approx(int(stats["rx_prio3_pause_duration"]) * 1e-6)
    assert value(
        parsed, "fabricscope_pfc_pause_frames_transmitted_total", netdev="ens0np0", priority="3"
    ) == int(stats["tx_prio3_pause"])
    lifespan = int((base / "hw_counters/lifespan").read_text())
    assert (
        value(parsed, "fabricscope_rdma_hw_counters_lifespan_seconds", device="mlx5_0", port="1")
        == lifespan / 1000
    )


def test_degraded_host_shows_its_faults() -> None:
    """ib-degraded carries a slow port, a down port and a x8 NIC: the metrics make each an expression."""
    parsed = samples(make_exporter(FIXTURE_HOSTS / "ib-degraded").render().decode())
    rate = value(parsed, "fabricscope_rdma_port_rate_bytes_per_second", device="mlx5_3", port="1")
    expected = value(
        parsed, "fabricscope_rdma_port_expected_rate_bytes_per_second", device="mlx5_3", port="1"
    )
    assert (
        rate
        < expected
        == value(parsed, "fabricscope_rdma_port_rate_bytes_per_second", device="mlx5_0", port="1")
    )
    assert value(parsed, "fabricscope_rdma_port_state_id", device="mlx5_5", port="1") == 1
    labels = {"device": "mlx5_6", "kind": "nic", "pci_address": "0000:d4:00.0"}
    assert value(parsed, "fabricscope_pcie_link_width_lanes", **labels) < value(
        parsed, "fabricscope_pcie_max_link_width_lanes", **labels
    )
    # the healthy twin has none of it
    healthy = samples(make_exporter(FIXTURE_HOSTS / "ib-ndr-healthy").render().decode())
    for device in ("mlx5_3", "mlx5_5"):
        assert value(
            healthy, "fabricscope_rdma_port_rate_bytes_per_second", device=device, port="1"
        ) == value(healthy, "fabricscope_rdma_port_expected_rate_bytes_per_second", device=device, port="1")


def test_roce_broken_congestion_and_qos() -> None:
    parsed = samples(make_exporter(FIXTURE_HOSTS / "roce-broken").render().decode())
    ignored = {
        dict(labels)["device"]: v
        for (name, labels), v in parsed.items()
        if name == "fabricscope_roce_cnp_ignored_total"
    }
    assert ignored["mlx5_6"] > 0 and ignored["mlx5_0"] == 0
    pfc = {
        (dict(labels)["netdev"], dict(labels)["priority"]): v
        for (name, labels), v in parsed.items()
        if name == "fabricscope_pfc_enabled"
    }
    assert pfc[("ens0np0", "3")] == 1
    assert pfc[("ens5np0", "3")] == 0  # planted: PFC off on the RoCE priority
    assert value(parsed, "fabricscope_qos_trust_info", netdev="ens0np0", trust="dscp") == 1


@pytest.mark.parametrize("host", [h for h in HOSTS if PLANTED.get(h)])
def test_doctor_findings_are_exported(host: str) -> None:
    """Every fault planted in the fixture host appears as fabricscope_finding{id,severity,subject}."""
    exporter = make_exporter(FIXTURE_HOSTS / host, doctor_interval_s=300.0)
    parsed = samples(exporter.render().decode())
    for check_id, subject, severity in PLANTED[host]:
        assert value(parsed, "fabricscope_finding", id=check_id, severity=severity, subject=subject) == 1
    counts = {
        dict(labels)["severity"]: v for (name, labels), v in parsed.items() if name == "fabricscope_findings"
    }
    assert counts["fail"] == sum(1 for *_x, s in PLANTED[host] if s == "fail")


def test_doctor_runs_in_the_background_not_in_the_scrape(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    import fabricscope.monitor.exporter as exporter_module

    def counting_doctor(root):
        calls.append(1)
        from fabricscope.monitor.collectors.doctor import run_doctor_once

        return run_doctor_once(root)

    monkeypatch.setattr(exporter_module, "run_doctor_once", counting_doctor)
    exporter = exporter_module.Exporter(
        make_exporter(FIXTURE_HOSTS / "roce-healthy").root, ExporterOptions(doctor_interval_s=300.0)
    )
    exporter.prime(doctor=True)
    for _ in range(3):
        exporter.render()
    assert len(calls) == 1


def test_full_mlx5_statistics_map_to_every_ethtool_family(tmp_path) -> None:
    """A complete ConnectX ethtool -S listing produces every PFC/priority/port family of the table
    (the ENA allowance counters belong to cloud NICs and come from cloud-tcp)."""
    from fabricscope.monitor.names import PORT_STATS, PREFIX, PRIO_STATS
    from tests.monitor.conftest import full_mlx5_host

    root = full_mlx5_host(tmp_path)
    tool = promtool()
    text = make_exporter(root).render().decode()
    names = {name for name, _labels in samples(text)}
    wanted = {PREFIX + c.name for c in PRIO_STATS.values()}
    wanted |= {PREFIX + c.name for key, c in PORT_STATS.items() if "allowance" not in key}
    assert wanted <= names, wanted - names
    parsed = samples(text)
    assert value(parsed, "fabricscope_prio_ecn_marked_packets_total", netdev="ens0np0", priority="3") == 22533
    assert value(parsed, "fabricscope_pfc_pause_storm_warning_events_total", netdev="ens0np0") == 2
    proc = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr
