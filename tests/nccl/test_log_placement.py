"""The reader places NCCL's words wherever they stand, judges chains by what NCCL did, and gives the
failures around the core their own verdicts (issue 22). Inputs are real pastes from the case corpus
(tests/data/nccl_cases/logs, each with its source on line 1); the expectations here are what the
lines say, checked finding by finding, not the corpus' verdict (test_case_corpus_verdicts.py)."""

from __future__ import annotations

from pathlib import Path

from fabricscope.nccl.log.aggregate import LogAggregator
from fabricscope.nccl.log.read import read_files
from fabricscope.nccl.log.report import LogReport, build_report

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl_cases" / "logs"


def report_of(name: str) -> LogReport:
    return build_report(read_files([str(LOGS / name)], "auto", 1))


def ids(report: LogReport) -> dict[str, str]:
    return {f.id: f.severity.value for f in report.findings}


def lines(*text: str) -> LogReport:
    agg = LogAggregator()
    for line in text:
        agg.feed(line)
    agg.end_file()
    return build_report(agg)


def test_a_file_with_one_recognised_line_is_a_log() -> None:
    """The issue's example: only NCCL's WARN text, no header."""
    r = lines(
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<55028> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
    )
    assert r.recognised_lines == 1 and ids(r)["nccl_log.completion_error"] == "fail"


def test_unplaced_lines_are_counted_not_dropped() -> None:
    r = lines(
        "Epoch 3/10: loss 0.42",
        "NCCL WARN Cannot initialize CollNet, using point-to-point network instead",
        "",
    )
    assert r.summary["unrecognised_lines"] == 1 and r.summary["placed_lines"] == 1
    assert any(
        f.id == "nccl_log.unrecognised_lines" and "1 lines not recognised" in f.message for f in r.findings
    )


def test_pytorch_traceback_under_ray_and_vllm_prefixes() -> None:
    """vllm-3688: '(RayWorkerVllm pid=...) ERROR <time> ray_utils.py:44] DistBackendError ... Last error: ...'."""
    r = report_of("vllm-3688.log")
    found = ids(r)
    assert found.get("nccl_log.api_error") == "fail"  # ncclUnhandledCudaError reached the application
    assert found.get("nccl_log.cuda_error") == "fail"  # NCCL's last error, quoted after 'Last error:'
    assert r.verdict["fatal"] is True


def test_headerless_warn_keeps_its_source_and_nvls_is_named() -> None:
    """nccl-976: 'transport/nvls.cc:165 NCCL WARN Cuda failure ...' then the '-> 1' chain."""
    r = report_of("nccl-976.log")
    found = ids(r)
    assert found.get("nccl_log.nvls") == "fail"
    assert (
        "nccl_log.cuda_error" not in found
    )  # NCCL's own explanation (Fabric Manager), not 'check CUDA versions'
    nvls = next(f for f in r.findings if f.id == "nccl_log.nvls")
    assert "gpu.fabric" in (nvls.fix or "") and "Fabric Manager" in nvls.message


def test_lines_pasted_as_one_line_are_read_one_by_one() -> None:
    """llamafactory-6111: a run of '[0] NCCL INFO ...' lines pasted into one line."""
    r = report_of("llamafactory-6111.log")
    assert r.summary["placed_lines"] >= 3
    assert r.verdict["root_cause"] == "socket_fallback" and r.verdict["fatal"] is False


def test_collnet_failure_is_recovered_not_fatal() -> None:
    """sharp-plugins-151: SHARP group create fails; NCCL goes on over point-to-point."""
    r = report_of("sharp-plugins-151.log")
    collnet = next(f for f in r.findings if f.id == "nccl_log.collnet")
    assert collnet.severity.value == "warn" and "point-to-point" in collnet.message
    assert not [f for f in r.findings if f.severity.value == "fail"]


def test_chain_before_a_fallback_is_recovered() -> None:
    """Order as NCCL prints it (v2.21.5-1 src/transport.cc): the setup chain, then the fallback WARN."""
    r = lines(
        "h1:10:11 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init START",
        "h1:10:11 [0] NCCL INFO transport/coll_net.cc:1050 -> 2",
        "h1:10:11 [0] transport.cc:155 NCCL WARN Cannot initialize CollNet, using point-to-point network instead",
    )
    found = ids(r)
    assert "nccl_log.error_return" not in found
    recovered = next(f for f in r.findings if f.id == "nccl_log.recovered_error")
    assert "point-to-point" in recovered.evidence["instead"]


def test_chain_reaching_the_api_stays_fatal() -> None:
    r = lines(
        "h1:10:11 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer h2<33422>",
        "h1:10:11 [0] NCCL INFO misc/socket.cc:752 -> 6",
    )
    found = ids(r)
    assert found["nccl_log.error_return"] == "fail" and found["nccl_log.remote_exit"] == "fail"
    fixes = {f.fix for f in r.findings if f.id in ("nccl_log.error_return", "nccl_log.remote_exit")}
    assert len(fixes) == 1  # one cause, told the same way by both findings


def test_hosts_with_different_plugins() -> None:
    """nccl-1634-log: one host loads HPC-X's plugin, another finds none and uses the internal one."""
    found = ids(report_of("nccl-1634-log.log"))
    assert found.get("nccl_log.net_plugin_mismatch") == "fail"


def test_efa_failure_names_fi_info() -> None:
    r = report_of("aws-ofi-nccl-1020.log")
    efa = next(f for f in r.findings if f.id == "nccl_log.efa")
    assert "fi_info -p efa -c FI_HMEM" in (efa.fix or "")


def test_socket_interface_nccl_picked() -> None:
    r = lines(
        "h1:10:11 [0] NCCL INFO Bootstrap : Using ip6tnl0:fe80::1%ip6tnl0<0>",
        "h1:10:11 [0] NCCL INFO NET/Socket : Using [0]veth12ab:10.0.3.2<0>",
    )
    found = next(f for f in r.findings if f.id == "nccl_log.socket_interface")
    assert (
        "ip6tnl0" in found.message
        and "veth12ab" in found.message
        and "docker*, lo and virbr*" in found.message
    )


def test_nccl_tests_failure_lines() -> None:
    """nccl-tests' own check macros (src/common.h): the API's error, and a CUDA error under the test;
    CUDA's 'system not yet initialized' on an NVSwitch system is the Fabric Manager (nccl-tests #264)."""
    r = lines("node1: Test NCCL failure common.cu:874 'unhandled system error'")
    assert ids(r).get("nccl_log.api_error") == "fail" and r.verdict["fatal"] is True
    r = lines("node1: Test CUDA failure common.cu:941 'system not yet initialized'")
    assert ids(r).get("nccl_log.nvls") == "fail" and r.verdict["root_cause"] == "nvls_fabric_manager"


def test_known_unplaced_shapes_are_skipped_but_last_error_still_reads_the_next_line(tmp_path: Path) -> None:
    """The batch path sets aside a line whose shape (digits as 0) was not placed before, without
    decoding it, except right after a bare 'Last error:' (NCCL's text follows, in any shape)."""
    text = ["[rank0]: step 1 loss 2", "[rank0]: step 2 loss 3"] * 50
    text += ["Last error:", "[rank0]: step 3 loss 4", "[rank0]: step 9 loss 9"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(text) + "\n")
    from_file = build_report(read_files([str(path)], "auto", 1))
    line_by_line = lines(*text)
    for r in (from_file, line_by_line):
        assert r.summary["unrecognised_lines"] == 101, r.summary
        assert r.summary["placed_lines"] == 2  # 'Last error:' and the line after it, of a known shape


def test_an_internal_error_that_reached_the_api_is_named_as_nccl_calls_it() -> None:
    """nccl-379: 'graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found', then '-> 3' up to
    the API. ncclGetErrorString (src/init.cc) words ncclInternalError 'internal error - please report
    this issue to the NCCL developers': with no other cause, the verdict is a defect in NCCL."""
    r = report_of("nccl-379.log")
    returned = [f for f in r.findings if f.id == "nccl_log.error_return" and f.evidence.get("code") == 3]
    assert returned and all(
        "please report this issue to the NCCL developers" in (f.fix or "") for f in returned
    )
    assert r.verdict["root_cause"] == "nccl_bug"


def test_a_line_holding_a_rules_excerpt_is_recognised() -> None:
    """nccl-1267: the message as typed in an issue title (the address dropped), so no catalogue
    format prints it; it still holds NCCL's words 'is neither AF_INET', which the socket_address
    rule fires on: the file is a log with that finding, not 'no NCCL log line'."""
    r = report_of("nccl-1267.log")
    assert r.recognised_lines == 1 and r.summary["placed_lines"] == 1
    assert ids(r).get("nccl_log.socket_address") == "fail"
