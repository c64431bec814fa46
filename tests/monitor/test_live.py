"""The exporter on this very machine (no RDMA here): it must run, lint clean and read procfs."""

from __future__ import annotations

import subprocess

from fabricscope.host import Root
from fabricscope.monitor.exporter import Exporter, ExporterOptions
from tests.monitor.conftest import promtool, samples, value


def test_live_root() -> None:
    exporter = Exporter(Root.live(), ExporterOptions(doctor_interval_s=0))
    exporter.prime()
    text = exporter.render().decode()
    parsed = samples(text)
    assert value(parsed, "fabricscope_collector_success", collector="tcp") == 1
    assert (
        value(parsed, "fabricscope_collector_success", collector="rdma") == 1
    )  # no RDMA devices is not a fault
    assert value(parsed, "fabricscope_tcp_sent_segments_total") > 0
    proc = subprocess.run(
        [promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr
    exporter.stop()


def test_scrape_reads_are_recorded_for_snapshots() -> None:
    """The port reader reads through per-directory handles (host.sysfs.SysDir); a recording Root
    (used by `fabricscope snapshot`) still sees every file and directory it read."""
    from fabricscope.host.infiniband import read_port
    from fabricscope.host.root import Recording
    from tests.conftest import FIXTURE_HOSTS

    root = Root.at(FIXTURE_HOSTS / "ib-ndr-healthy")
    root.recording = Recording()
    status = read_port(root, "mlx5_0", 1, gids=False)
    assert status is not None and status.state_id == 4
    base = "sys/class/infiniband/mlx5_0/ports/1"
    assert root.recording.files[f"{base}/state"] == b"4: ACTIVE\n"
    assert f"{base}/counters/port_xmit_data" in root.recording.files
    assert f"{base}/counters" in root.recording.dirs
