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
    assert value(parsed, "fabricscope_collector_success", collector="rdma") == 1  # no RDMA devices is not a fault
    assert value(parsed, "fabricscope_tcp_sent_segments_total") > 0
    proc = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr
    exporter.stop()
