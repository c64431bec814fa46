"""Every client test against a server this test starts, on loopback: real sockets, real processes."""

from __future__ import annotations

import json

from fabricscope.bench.results.kinds import KIND_FIELDS, KINDS
from fabricscope.bench.results.schema import BenchResult, Status
from fabricscope.bench.sockets.connect import ConnectParams, run_connect
from fabricscope.bench.sockets.latency import LatencyParams, metric_name, run_latency
from fabricscope.bench.sockets.tcp import TcpParams, run_tcp
from fabricscope.bench.sockets.udp import UdpParams, run_udp
from fabricscope.report.bench import tcp_lines
from fabricscope.store import Store
from tests.bench.conftest import run_cli


def _ok(result: BenchResult) -> BenchResult:
    assert result.status == Status.OK, result.reason
    doc = json.loads(result.to_json())  # serialisable, schema-valid
    # no other kind's field, not even as null (every result once carried "topology": null, issue 21)
    assert set(doc) & set(KIND_FIELDS) <= set(KINDS[result.kind].fields), doc.keys()
    assert BenchResult.from_json(result.to_json()).metrics == result.metrics
    return result


def test_tcp_send_counts_every_byte(peer: str) -> None:
    ticks: list[float] = []
    result = _ok(run_tcp(TcpParams(peer=peer, duration_s=1.0, streams=2, interval_s=0.25), tick=ticks.append))
    m = result.metrics
    assert m["throughput_gbps"] > 0
    streams = result.detail["streams"]
    assert len(streams) == 2 and all(s["throughput_gbps"] > 0 for s in streams)
    assert sum(s["bytes"] for s in streams) == m["send_bytes"]
    assert m["retransmits_count"] >= 0 and m["client_cpu_pct"] is not None and m["server_cpu_pct"] is not None
    assert len(result.intervals) >= 3 and all(i.metrics["throughput_gbps"] > 0 for i in result.intervals)
    assert result.counters.window_s is not None and result.counters.interface == "lo"
    assert ticks, "progress callback was never called"
    line = tcp_lines(result)[0]
    assert "Gb/s" in line and "TCP retransmits during the run" in line


def test_tcp_reverse_and_bidirectional(peer: str) -> None:
    recv = _ok(run_tcp(TcpParams(peer=peer, duration_s=0.6, direction="recv")))
    assert recv.metrics["recv_throughput_gbps"] > 0 and "send_throughput_gbps" not in recv.metrics
    both = _ok(run_tcp(TcpParams(peer=peer, duration_s=0.6, direction="bidir")))
    m = both.metrics
    assert m["send_throughput_gbps"] > 0 and m["recv_throughput_gbps"] > 0
    assert abs(m["throughput_gbps"] - m["send_throughput_gbps"] - m["recv_throughput_gbps"]) < 1e-9


def test_udp_at_an_offered_rate_reports_loss_and_jitter(peer: str) -> None:
    result = _ok(run_udp(UdpParams(peer=peer, duration_s=1.0, rate_bps=100e6, size_bytes=1200)))
    m = result.metrics
    assert m["offered_gbps"] == 0.1
    # the pacing keeps the sender near the offered rate
    assert 0.05 < m["sent_gbps"] < 0.13
    assert m["datagrams_received_count"] <= m["datagrams_sent_count"]
    assert m["datagrams_lost_count"] == m["datagrams_sent_count"] - m["datagrams_received_count"]
    assert 0 <= m["loss_pct"] <= 100 and m["jitter_us"] is not None
    assert m["throughput_gbps"] <= m["sent_gbps"] + 1e-9


def test_udp_as_fast_as_possible(peer: str) -> None:
    result = _ok(run_udp(UdpParams(peer=peer, duration_s=0.5, rate_bps=0, streams=2)))
    assert result.metrics["offered_gbps"] is None and result.metrics["sent_gbps"] > 0
    assert len(result.detail["streams"]) == 2


def test_latency_tcp_and_udp_percentiles(peer: str) -> None:
    result = _ok(run_latency(LatencyParams(peer=peer, sizes=(64, 4096, 100_000), duration_s=1.5)))
    m = result.metrics
    for proto, size in (("tcp", 64), ("tcp", 4096), ("tcp", 100_000), ("udp", 64), ("udp", 4096)):
        p50, p99, p999, mx = (m[metric_name(proto, size, s)] for s in ("p50", "p99", "p999", "max"))
        assert 0 < p50 <= p99 <= p999 <= mx, (proto, size)
    skipped = [r for r in result.detail["rows"] if r.get("skipped")]
    assert [(r["proto"], r["size_bytes"]) for r in skipped] == [("udp", 100_000)]
    assert m["rtt_p99_us"] == m[metric_name("tcp", 64, "p99")]


def test_latency_one_mebibyte_messages(peer: str) -> None:
    result = _ok(run_latency(LatencyParams(peer=peer, protos=("tcp",), sizes=(1024 * 1024,), duration_s=0.5)))
    assert result.metrics["tcp_1MiB_samples_count"] > 5


def test_connect_per_request_versus_pooled(peer: str) -> None:
    result = _ok(run_connect(ConnectParams(peer=peer, duration_s=1.2)))
    m = result.metrics
    assert m["connect_per_s"] > 0 and m["pooled_requests_per_s"] > 0
    assert 0 < m["connect_p50_us"] <= m["connect_p99_us"]
    assert m["first_byte_p50_us"] > 0 and m["close_p50_us"] > 0
    assert m["pooling_speedup_ratio"] == round(m["pooled_requests_per_s"] / m["connect_per_s"], 3)


def test_connect_concurrency(peer: str) -> None:
    result = _ok(run_connect(ConnectParams(peer=peer, duration_s=0.6, concurrency=2, modes=("per_request",))))
    assert result.metrics["connections_count"] > 2 and "pooled_requests_per_s" not in result.metrics


def test_cli_json_result_is_stored(peer: str, isolated_db) -> None:
    proc = run_cli("bench", "tcp", "--peer", peer, "-t", "0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.bench/v1" and doc["kind"] == "tcp" and doc["status"] == "ok"
    assert doc["metrics"]["throughput_gbps"] > 0 and isinstance(doc["run_id"], int)
    with Store.open(isolated_db) as store:
        stored = store.get(doc["run_id"]).result
    assert stored.metrics == doc["metrics"]
    proc = run_cli("bench", "udp", "--peer", peer, "-t", "0.3", "--rate", "50M", "--no-store")
    assert proc.returncode == 0, proc.stderr
    assert "delivered" in proc.stdout and "stored as run" not in proc.stdout
    with Store.open(isolated_db) as store:
        assert store.count() == 1


def test_cli_latency_and_connect_human_output(peer: str) -> None:
    proc = run_cli("bench", "latency", "--peer", peer, "-t", "0.6", "--sizes", "64,1K")
    assert proc.returncode == 0, proc.stderr
    assert "p99 us" in proc.stdout and "tcp" in proc.stdout and "udp" in proc.stdout
    proc = run_cli("bench", "connect", "--peer", peer, "-t", "0.6")
    assert proc.returncode == 0, proc.stderr
    assert "per-request connections" in proc.stdout and "pooled connection" in proc.stdout


def test_data_ports_stay_in_the_given_range() -> None:
    import socket

    from tests.bench.conftest import start_server

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        low = probe.getsockname()[1]
    srv = start_server(data_ports=(low, low + 3))
    seen: list[int] = []
    original = srv._bound

    def spy(kind):
        sock = original(kind)
        seen.append(sock.getsockname()[1])
        return sock

    srv._bound = spy
    try:
        result = _ok(run_tcp(TcpParams(peer=f"127.0.0.1:{srv.port}", duration_s=0.3, direction="bidir")))
    finally:
        srv.stop()
    assert len(seen) == 2 and all(low <= p <= low + 3 for p in seen)
    assert result.counters.sockets["tcp_bytes_sent"] > 0
