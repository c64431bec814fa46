"""`fabricscope nccl log`: JSON schema, exit codes, and bad input (never a traceback)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from fabricscope.nccl.log.aggregate import MAX_WARN_GROUPS, LogAggregator
from fabricscope.nccl.log.read import feed_file, iter_lines
from fabricscope.nccl.log.report import build_report
from tests.conftest import SAMPLES, samples_dir
from tests.nccl.conftest import run_cli

GOOD = "node-a:10:11 [0] NCCL INFO Using network IB\nnode-a:10:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"


def test_json_document_shape(cli) -> None:
    res = cli("nccl", "log", "--json", str(samples_dir() / "nccl_log_socket_fallback.txt"))
    assert res.exit_code == 1  # a fail verdict, default --fail-on fail
    doc = res.json()
    assert doc["schema"] == "fabricscope.nccl_log/v1"
    assert {"files", "summary", "ranks", "findings", "counts"} <= set(doc)
    for f in doc["findings"]:
        assert set(f) == {"id", "severity", "subject", "message", "evidence", "fix"}
        assert f["severity"] in ("pass", "info", "warn", "fail")
    assert any(f["id"] == "nccl_log.socket_fallback" for f in doc["findings"])
    assert all(
        {"host", "pid", "cuda_dev", "rank", "network", "transports", "gpudirect_rdma"} <= set(r)
        for r in doc["ranks"]
    )


def test_exit_codes_follow_fail_on(cli) -> None:
    path = str(samples_dir() / "nccl_log_ib_gdrdma_a100.txt")  # warn, no fail
    assert cli("nccl", "log", path).exit_code == 0
    assert cli("nccl", "log", "--fail-on", "warn", path).exit_code == 1
    assert cli("nccl", "log", "--fail-on", "bogus", path).exit_code == 2


def test_human_output_names_ranks_and_verdicts(cli) -> None:
    res = cli("nccl", "log", str(samples_dir() / "nccl_log_roce_modify_qp_error.txt"))
    assert res.exit_code == 1
    assert "NCCL 2.19.3" in res.stdout
    assert "ibv_modify_qp failed: Network is unreachable" in res.stdout
    assert "fix:" in res.stdout


def test_several_files_and_stdin(cli) -> None:
    a = samples_dir() / "nccl_log_ib_gdrdma_h100_ibext.txt"
    res = cli("nccl", "log", "--json", str(a), "-", input=GOOD)
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert [f["name"] for f in doc["files"]] == [str(a), "-"]
    assert {r["host"] for r in doc["ranks"]} == {"h100clust-worker-1", "node-a"}


def test_gzip_log(cli, tmp_path: Path) -> None:
    path = tmp_path / "rank0.log.gz"
    path.write_bytes(gzip.compress(GOOD.encode()))
    doc = cli("nccl", "log", "--json", str(path)).json()
    assert doc["ranks"][0]["transports"] == {"NET/IB/GDRDMA": 1}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (os.urandom(4096).replace(b"\n", b"x") + b"\x00" * 64, "binary data"),
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8, "binary data"),
        (b"", "no NCCL log line"),
        (b"just some text\nwithout NCCL\n", "no NCCL log line"),
    ],
    ids=["random", "elf", "empty", "text"],  # stable ids: pytest-xdist workers must collect the same tests
)
def test_unusable_input_is_exit_2_with_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(content)
    res = run_cli("nccl", "log", str(path))
    assert res.exit_code == 2
    assert "Traceback" not in res.stderr
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_missing_directory_and_corrupt_gzip(tmp_path: Path) -> None:
    missing = run_cli("nccl", "log", str(tmp_path / "nope.log"))
    assert missing.exit_code == 2 and "No such file" in missing.stderr and "Traceback" not in missing.stderr
    directory = run_cli("nccl", "log", str(tmp_path))
    assert directory.exit_code == 2 and "is a directory" in directory.stderr
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(gzip.compress(GOOD.encode() * 100)[:60])  # cut in the middle of the stream
    res = run_cli("nccl", "log", str(bad))
    assert res.exit_code == 2 and "Traceback" not in res.stderr and str(bad) in res.stderr


def test_garbled_and_truncated_log_gives_findings(tmp_path: Path, cli) -> None:
    text = (samples_dir() / "nccl_log_roce_modify_qp_error.txt").read_bytes()
    garbled = (
        b"\x00\xff\xfe garbage \x00\n"
        + text[: len(text) // 2]
        + b"\xc3\x28 broken utf8\n"
        + text[len(text) // 2 : -25]
    )
    path = tmp_path / "garbled.log"
    path.write_bytes(garbled)
    res = cli("nccl", "log", "--json", str(path))
    assert res.exit_code in (0, 1)
    found = {f["id"] for f in res.json()["findings"]}
    assert {"nccl_log.garbled_lines", "nccl_log.truncated"} <= found
    assert res.json()["files"][0]["truncated"] is True


def test_a_file_without_nccl_lines_among_good_ones_is_a_finding(tmp_path: Path, cli) -> None:
    junk = tmp_path / "junk.log"
    junk.write_text("hello\nworld\n")
    good = tmp_path / "good.log"
    good.write_text(GOOD)
    doc = cli("nccl", "log", "--json", str(good), str(junk)).json()
    junk_finding = [f for f in doc["findings"] if f["id"] == "nccl_log.no_nccl_lines"]
    assert junk_finding and junk_finding[0]["subject"] == str(junk)


def test_overlong_lines_do_not_grow_memory() -> None:
    import io

    blob = io.BytesIO(b"a" * 5_000_000 + b"\n" + GOOD.encode())
    lines = list(iter_lines(blob, chunk_bytes=65536))
    assert max(len(line) for line in lines) <= 16385
    assert lines[-2:] == GOOD.strip("\n").split("\n")


def test_state_stays_bounded_with_many_distinct_warnings(tmp_path: Path) -> None:
    path = tmp_path / "many.log"
    with path.open("w") as fh:
        for i in range(5000):
            # Distinct text after normalising digits: letters vary.
            word = "".join(chr(97 + (i // 26**k) % 26) for k in range(3))
            fh.write(
                f"node-{i % 50}:{100 + i % 8}:{200 + i % 8} [{i % 8}] misc/x.cc:1 NCCL WARN weird {word} thing\n"
            )
    agg = LogAggregator()
    feed_file(agg, str(path))
    assert len(agg.warn_groups) <= MAX_WARN_GROUPS
    assert sum(g.count for g in agg.warn_groups.values()) == 5000
    assert len(agg.ranks) == 200  # lcm(50 hosts, 8 pids/devs): per-rank state, not per-line


def _report_via_feed(path: Path):
    agg = LogAggregator()
    agg.begin_file(str(path))
    with path.open("rb") as fh:
        for line in iter_lines(fh):
            agg.feed(line)
    agg.end_file()
    return build_report(agg)


def _generated_log(tmp_path: Path) -> Path:
    import importlib.util

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "nccl_log_throughput.py"
    spec = importlib.util.spec_from_file_location("nccl_log_throughput", bench)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "generated.log"
    module.generate(str(path), 2_000_000, 16)
    return path


@pytest.mark.parametrize("name", [*sorted(p.name for p in SAMPLES.glob("nccl_log_*.txt")), "generated"])
def test_fast_batch_path_agrees_with_line_by_line_feed(name: str, tmp_path: Path) -> None:
    path = _generated_log(tmp_path) if name == "generated" else samples_dir() / name
    slow = _report_via_feed(path)
    agg = LogAggregator()
    feed_file(agg, str(path))
    fast = build_report(agg)
    assert fast.ranks == slow.ranks
    assert [f.to_dict() for f in fast.findings] == [f.to_dict() for f in slow.findings]
    assert fast.summary["events"] == slow.summary["events"]
