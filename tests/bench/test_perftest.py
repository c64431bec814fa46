"""perftest parsers on the real captures in tests/data/samples, plus JSON and broken output."""

from __future__ import annotations

import pytest

from fabricscope.bench.rdma.perftest import (
    PerftestParseError,
    bw_to_gbps,
    failure_reason,
    gid_address,
    metrics_from,
    parse_json,
    parse_text,
)
from tests.conftest import samples_dir


def _sample(name: str) -> str:
    return (samples_dir() / name).read_text()


def test_send_bw_ib_pkey_server_side() -> None:
    out = parse_text(_sample("perftest_ib_send_bw_ib_pkey.txt"))
    assert out.test == "Send BW Test" and out.kind == "bw"
    assert (
        out.device == "mlx5_0" and out.link_type == "IB" and out.mtu_bytes == 4096 and out.gid_index is None
    )
    assert out.bw_unit == "MB/sec"
    assert out.local == {"LID": "0x9a", "QPN": "0x0083", "PSN": "0x585762"}
    assert out.remote["LID"] == "0x7d"
    (row,) = out.rows
    assert row["size_bytes"] == 65536 and row["iterations"] == 1000
    # 44756.50 MB/sec, perftest's MB = 2^20 bytes: 44756.50 * 1048576 * 8 / 1e9 Gb/s
    assert row["bw_average_gbps"] == pytest.approx(375.4447, rel=1e-6)
    assert row["msg_rate_mpps"] == pytest.approx(0.716104)
    # The CPU-frequency warning printed between header and row is kept, not parsed as data.
    assert any("Conflicting CPU frequency" in w for w in out.warnings)
    m = metrics_from(out, link_rate_gbps=400.0)
    assert m["throughput_gbps"] == pytest.approx(375.4447, rel=1e-6)
    assert m["link_utilization_pct"] == pytest.approx(93.861, abs=1e-3)


def test_write_bw_sweep_in_gbits() -> None:
    out = parse_text(_sample("perftest_ib_write_bw_ib_sweep.txt"))
    assert out.test == "RDMA_Write BW Test" and out.bw_unit == "Gb/sec"
    assert [r["size_bytes"] for r in out.rows] == [2, 4, 8]
    assert [r["bw_average_gbps"] for r in out.rows] == [0.042185, 0.084457, 0.17]
    assert out.header["TX depth"] == "128" and out.header["CQ Moderation"] == "100"
    m = metrics_from(out)
    assert (
        m["msg_size_bytes"] == 8
        and m["throughput_gbps"] == 0.17
        and m["msg_rate_mpps"] == pytest.approx(2.641399)
    )


def test_roce_header_with_gids_and_no_result_row() -> None:
    out = parse_text(_sample("perftest_ib_write_bw_roce_gid3_header.txt"))
    assert out.link_type == "Ethernet" and out.gid_index == 3
    assert gid_address(out.local["GID"]) == "10.255.255.5"
    assert gid_address(out.remote["GID"]) == "10.255.255.4"
    assert out.rows == [] and metrics_from(out) == {}


def test_latency_header_columns() -> None:
    out = parse_text(_sample("perftest_ib_send_lat_roce_header.txt"))
    assert out.test == "Send Latency Test" and out.kind == "lat"
    assert out.device == "mlx5_bond_0" and out.gid_index == 3 and out.mtu_bytes == 1024
    assert out.columns[-2:] == ["99% percentile[usec]", "99.9% percentile[usec]"]
    assert out.rows == []  # the capture stops inside the row


def test_latency_row_and_truncated_row() -> None:
    header = _sample("perftest_ib_send_lat_roce_header.txt")
    full = (
        header
        + "\n 2       1000          5.43           7.90         5.84     5.90     0.20     6.51     7.80\n"
    )
    out = parse_text(full)
    (row,) = out.rows
    assert row == {
        "size_bytes": 2.0, "iterations": 1000.0, "lat_min_us": 5.43, "lat_max_us": 7.90, "lat_typical_us": 5.84,
        "lat_avg_us": 5.90, "lat_stdev_us": 0.20, "lat_p99_us": 6.51, "lat_p999_us": 7.80,
    }  # fmt: skip
    m = metrics_from(out)
    assert m["lat_typical_us"] == 5.84 and m["lat_p999_us"] == 7.8 and "throughput_gbps" not in m
    cut = parse_text(header + "\n 2       1000          5.43           7.90         5.84\n")
    assert cut.rows == [] and cut.problems


# The pre-2023 --out_json format with bare strings and trailing commas (linux-rdma/perftest #216).
LEGACY_JSON = """{
test_info: {
test: RDMA_Write_Latency_Test,
Dual_port: OFF,
Device: "rxe0",
Number_of_qps: 1,
Mtu: 1024,
Link_type: Ethernet,
GID_index: 1,
},
results: {
MsgSize: 128,
n_iterations: 5000,
t_min: 2.37,
t_max: 5.39,
t_typical: 2.42,
t_avg: 2.42,
t_stdev: 0.05,
percentile_99: 2.47,
percentile_99.9: 4.03,
},
}"""


def test_legacy_json_latency() -> None:
    out = parse_json(LEGACY_JSON)
    assert out.kind == "lat" and out.device == "rxe0" and out.gid_index == 1
    assert out.rows == [
        {"size_bytes": 128, "iterations": 5000, "lat_min_us": 2.37, "lat_max_us": 5.39, "lat_typical_us": 2.42,
         "lat_avg_us": 2.42, "lat_stdev_us": 0.05, "lat_p99_us": 2.47, "lat_p999_us": 4.03}
    ]  # fmt: skip


def test_strict_json_bandwidth_units() -> None:
    doc = '{"test_info": {"test": "RDMA_Write_BW_Test", "Device": "mlx5_0"}, "results": {"MsgSize": 65536, "n_iterations": 5000, "BW_peak": 390.1, "BW_average": 389.5, "MsgRate": 0.742}}'
    gbits = parse_json(doc, "Gb/sec")
    assert gbits.kind == "bw" and gbits.rows[0]["bw_average_gbps"] == 389.5
    mbytes = parse_json(doc, "MB/sec")
    assert mbytes.rows[0]["bw_average_gbps"] == pytest.approx(389.5 * 1048576 * 8 / 1e9)


@pytest.mark.parametrize("text", ["", "hello world", "{}", '{"results": 3}', "{not json at all"])
def test_garbage_json_is_an_error(text: str) -> None:
    with pytest.raises(PerftestParseError):
        parse_json(text)


@pytest.mark.parametrize("text", ["", "Segmentation fault", "random\nlines\n"])
def test_garbage_text_is_an_error(text: str) -> None:
    with pytest.raises(PerftestParseError):
        parse_text(text)


def test_units() -> None:
    assert bw_to_gbps(1.0, "Gb/sec") == 1.0
    assert bw_to_gbps(1000.0, "MiB/sec") == pytest.approx(8.388608)
    with pytest.raises(PerftestParseError):
        bw_to_gbps(1.0, "furlongs")


def test_failure_reason_and_gid_address() -> None:
    text = " Couldn't connect to 10.0.0.2:18515\nUnable to open file descriptor for socket connection Unable to init the socket connection\n"
    assert "Unable to init the socket connection" in failure_reason(text)
    assert failure_reason("") == "no output"
    assert gid_address("254:128:00:00:00:00:00:00:148:109:174:03:00:50:07:120") == "fe80::946d:ae03:32:778"
    assert gid_address("not:a:gid") is None and gid_address(None) is None
