"""The NCCL Inspector's documented outputs, verbatim from its README (tests/data/nccl_inspector/,
source on line 1 of each), through the parser triage and the exporter share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricscope.nccl.inspector import (
    InspectorFormatError,
    parse_line,
    parse_prom_line,
    read_dump,
    read_prom,
    size_bucket,
    size_bucket_lower_bytes,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "nccl_inspector"


def _body(name: str) -> str:
    lines = (DATA / name).read_text().splitlines()
    assert lines[0].startswith("# source: NVIDIA/nccl")
    return "\n".join(lines[1:])


def _as_jsonl(name: str) -> str:
    """The README pretty-prints the object; the plugin writes it compact, one per line."""
    return json.dumps(json.loads(_body(name)), separators=(",", ":"))


def test_readme_output_example() -> None:
    record = parse_line(_as_jsonl("readme_v2.30.7_output_example.json"))
    assert record is not None
    assert (record.comm_id, record.rank, record.n_ranks, record.n_nodes) == ("0x7f8c496ae9f661", 2, 8, 1)
    assert (record.op, record.seq, record.msg_size_bytes) == ("AllReduce", 1407, 17179869184)
    assert record.exec_time_us == 61974 and record.busbw_gbs == 485.119099
    assert record.hostname == "example-hostname" and record.pid == 1639453
    assert record.format_version == "v4.0" and not record.p2p
    # algbw is bytes / time: the README's own numbers agree with each other.
    assert record.msg_size_bytes / record.exec_time_s / 1e9 == pytest.approx(record.algbw_gbs, rel=1e-4)
    # AllReduce on 8 ranks: busbw = algbw x 2(n-1)/n (nccl-tests' PERFORMANCE.md)
    assert record.busbw_gbs == pytest.approx(record.algbw_gbs * 2 * 7 / 8, rel=1e-6)


def test_readme_verbose_example() -> None:
    record = parse_line(_as_jsonl("readme_v2.30.7_output_example_verbose.json"))
    assert record is not None
    assert (record.op, record.rank, record.timing_source) == ("ReduceScatter", 4, "kernel_gpu")
    # ReduceScatter: busbw = algbw x (n-1)/n
    assert record.busbw_gbs == pytest.approx(record.algbw_gbs * 7 / 8, rel=1e-6)


def test_readme_prometheus_example_v2_30() -> None:
    samples, bad = read_prom(_body("readme_v2.30.7_prometheus_example.prom").splitlines())
    assert bad == 0 and len(samples) == 4
    busbw, exec_time, p2p_bw, p2p_time = samples
    assert (busbw.metric, busbw.op, busbw.comm, busbw.node, busbw.gpu) == (
        "busbw_gbs",
        "AllReduce",
        "DP Group 0",
        "nvl72004-T01",
        "GPU0",
    )
    assert (busbw.n_ranks, busbw.n_nodes, busbw.size_bucket, busbw.algo_proto, busbw.value) == (
        4,
        1,
        "4-5GB",
        "Ring_ll",
        678.263,
    )
    assert exec_time.metric == "exec_time_us" and exec_time.value == 9498.47
    assert p2p_bw.p2p and p2p_bw.op == "Send" and p2p_bw.size_bucket == "512-513MB"
    assert p2p_time.metric == "exec_time_us" and p2p_time.p2p


def test_readme_prometheus_labels_v2_29() -> None:
    labels = _body("readme_v2.29.7_prometheus_labels.txt").strip()
    sample = parse_prom_line(f"nccl_bus_bandwidth_gbs{{{labels}}} 402.5")
    assert sample is not None
    assert (sample.comm, sample.rank, sample.node, sample.gpu, sample.n_ranks) == (
        "0xd152c00f111816",
        4,
        "pool0-0002",
        "GPU4",
        8,
    )
    assert sample.size_bucket == "2.00GB" and sample.value == 402.5


def test_size_buckets_as_the_inspector_writes_them() -> None:
    # The README's labels: 4-5GB and 512-513MB; inspectorPromFormatMessageSizeRange floors the
    # size in the largest binary unit that keeps it at least 1.
    assert size_bucket(int(4.5 * 2**30)) == "4-5GB"
    assert size_bucket(512 * 2**20) == "512-513MB"
    assert size_bucket(1023) == "1023-1024B"
    assert size_bucket(8192) == "8-9KB"
    assert size_bucket(0) == "0B"
    assert size_bucket_lower_bytes("4-5GB") == 4 * 2**30
    assert size_bucket_lower_bytes("2.00GB") is None


@pytest.mark.parametrize(
    "line",
    [
        "{",  # half a line: a file being written
        "[]",
        '{"header": {"id": "0x1", "rank": 0, "n_ranks": 2, "nnodes": 1}}',
        '{"header": {"id": "0x1", "rank": "0", "n_ranks": 2, "nnodes": 1}, "coll_perf": {"coll": "AllReduce"}}',
        '{"header": {"id": "0x1", "rank": 0, "n_ranks": 2, "nnodes": 1}, "coll_perf": {"coll": "AllReduce", '
        '"coll_sn": 1, "coll_msg_size_bytes": 8, "coll_exec_time_us": -1, "coll_algobw_gbs": 1, "coll_busbw_gbs": 1}}',
        "[" * 100_000,
    ],
)
def test_bad_lines_raise_one_clear_error(line: str) -> None:
    with pytest.raises(InspectorFormatError):
        parse_line(line)


def test_a_dump_counts_bad_lines_and_keeps_the_rest() -> None:
    good = _as_jsonl("readme_v2.30.7_output_example.json")
    reading = read_dump([good, "garbage", "", good, '{"header": 1}'])
    assert len(reading.records) == 2 and reading.bad_lines == 2
    assert reading.first_error is not None
