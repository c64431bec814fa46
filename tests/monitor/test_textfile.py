"""Bench results to Prometheus names and base units."""

from __future__ import annotations

import pytest

from fabricscope.monitor.textfile import prometheus_name


@pytest.mark.parametrize(
    ("metric", "name", "scale"),
    [
        ("throughput_gbps", "fabricscope_bench_throughput_bytes_per_second", 1e9 / 8),
        ("busbw_GBps", "fabricscope_bench_busbw_bytes_per_second", 1e9),
        ("connect_per_s", "fabricscope_bench_connect_per_second", 1.0),
        ("rtt_p99_us", "fabricscope_bench_rtt_p99_seconds", 1e-6),
        ("setup_ms", "fabricscope_bench_setup_seconds", 1e-3),
        ("duration_s", "fabricscope_bench_duration_seconds", 1.0),
        ("loss_pct", "fabricscope_bench_loss_ratio", 0.01),
        ("retransmits_count", "fabricscope_bench_retransmits", 1.0),
        ("msg_rate_mpps", "fabricscope_bench_msg_rate_packets_per_second", 1e6),
        ("Weird-Name.v2_bytes", "fabricscope_bench_weird_name_v2_bytes", 1.0),
    ],
)
def test_prometheus_name(metric: str, name: str, scale: float) -> None:
    assert prometheus_name(metric) == (name, scale)


@pytest.mark.parametrize("metric", ["_gbps", "nounit", "x_furlongs"])
def test_no_unit_no_metric(metric: str) -> None:
    assert prometheus_name(metric) is None
