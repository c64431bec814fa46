"""Log verdicts that name the root cause (issue 13, C12-C15), on real captures in tests/data/samples."""

from __future__ import annotations

from fabricscope.nccl.log.aggregate import LogAggregator
from fabricscope.nccl.log.parse import parse_line
from fabricscope.nccl.log.read import read_files
from fabricscope.nccl.log.report import LogReport, build_report
from tests.conftest import samples_dir
from tests.nccl.test_log_samples import finding, ids, read


def read_together(*names: str, expect: str = "auto") -> LogReport:
    return build_report(read_files([str(samples_dir() / n) for n in names], expect))


def test_disabled_plugin_return_code_is_not_an_error() -> None:
    """NVIDIA/nccl#1053: NCCL_IBEXT_DISABLE=1 makes the HPC-X plugin's init return 3 (net.cc:79), NCCL goes on."""
    report = read("nccl_log_lo_ibext_disabled.txt")
    assert "nccl_log.error_return" not in ids(report)
    skipped = finding(report, "nccl_log.net_plugin_skipped")
    assert skipped.severity.value == "info" and skipped.evidence["sites"] == {"net.cc:79": 1}
    assert all(r["error"] is None for r in report.ranks)


def test_gdr_disabled_on_a_socket_interface_is_not_a_peermem_problem() -> None:
    """ "GPU Direct RDMA Disabled for HCA 0 'lo'" comes from NET/Socket, which never does GPUDirect."""
    report = read("nccl_log_lo_ibext_disabled.txt")
    assert "nccl_log.gdr_disabled_hca" not in ids(report)
    assert not any("peermem" in (f.fix or "") for f in report.findings)


def test_loopback_sockets_in_a_job_over_several_hosts_fail() -> None:
    alone = read("nccl_log_lo_ibext_disabled.txt")
    assert "nccl_log.socket_loopback" not in ids(alone)  # one host: lo may be right
    # The same process next to another host's log: 127.0.0.1 cannot reach it.
    report = read_together("nccl_log_lo_ibext_disabled.txt", "nccl_log_socket_fallback.txt")
    loop = finding(report, "nccl_log.socket_loopback")
    assert loop.severity.value == "fail"
    assert loop.evidence["interfaces"] == ["axa: lo 127.0.0.1"]
    assert "NCCL_SOCKET_IFNAME" in (loop.fix or "")


def test_missing_libibverbs_is_the_cause_not_a_tcp_only_node() -> None:
    """NVIDIA/nccl#1410: rdma-core missing in the pod; NCCL used sockets without looking for RDMA."""
    report = read("nccl_log_no_libibverbs.txt")
    verbs = finding(report, "nccl_log.no_libibverbs")
    assert verbs.severity.value == "warn" and verbs.evidence["processes"] == 3
    assert "rdma-core" in verbs.message and "libibverbs1" in (verbs.fix or "")
    assert not any("TCP-only" in f.message for f in report.findings)
    strict = read("nccl_log_no_libibverbs.txt", expect="rdma")
    assert finding(strict, "nccl_log.no_libibverbs").severity.value == "fail"


def test_missing_libibverbs_warn_line_of_old_versions() -> None:
    """horovod/horovod#685 (NCCL 2.3.7): the same failure printed as a WARN by misc/ibvwrap.cu:63."""
    agg = LogAggregator()
    agg.feed("ml3:32632:32662 [0] misc/ibvwrap.cu:63 NCCL WARN Failed to open libibverbs.so[.1]")
    report = build_report(agg)
    assert finding(report, "nccl_log.no_libibverbs").severity.value == "warn"
    warn = finding(report, "nccl_log.warn")
    assert "rdma-core" in warn.message


def test_bootstrap_without_interface_is_a_root_cause() -> None:
    """The text NCCL 2.14.3 gave PyTorch as "Last error" (EasonXiao-888/MambaTree#14), in NCCL's WARN line
    shape (bootstrap.cc:126 at v2.30.7-1); no public log with its header was found."""
    event = parse_line(
        "hqu-System-Product-Name:4242:4242 [0] bootstrap.cc:126 NCCL WARN Bootstrap : no socket interface found"
    )
    assert event is not None and event.is_warn
    agg = LogAggregator()
    agg.feed_event(event)
    # The socket-address rule names it, with NCCL's fix, instead of the generic WARN finding.
    found = [f for f in build_report(agg).findings if f.id == "nccl_log.socket_address"]
    assert len(found) == 1 and found[0].severity.value == "fail"
    assert "no usable address" in found[0].message and "NCCL_SOCKET_IFNAME" in (found[0].fix or "")


def test_async_port_notices_are_info_and_gid_change_is_explained() -> None:
    report = read("nccl_log_async_notices.txt")
    by_event = {
        f.evidence["example"].rsplit(": ", 1)[-1]: f
        for f in report.findings
        if f.id == "nccl_log.async_event"
    }
    assert by_event["port active"].severity.value == "info"
    assert by_event["SM change"].severity.value == "info"
    assert by_event["port active(9)"].severity.value == "info"
    gid = [f for f in report.findings if f.id == "nccl_log.async_event" and "GID table" in f.message]
    assert len(gid) == 1 and gid[0].severity.value == "warn" and "address" in gid[0].message
    assert ids(report, "fail") == set()


def test_fatal_async_events_still_fail() -> None:
    report = read("nccl_log_async_events.txt")
    events = [f for f in report.findings if f.id == "nccl_log.async_event"]
    assert len(events) == 3 and all(f.severity.value == "fail" for f in events)
    assert any("port error" in f.message for f in events)


def test_modify_qp_no_such_device_gets_its_own_explanation() -> None:
    """NVIDIA/nccl#799: ibv_modify_qp fails with ENODEV on RoCE."""
    report = read("nccl_log_modify_qp_no_such_device.txt")
    verbs = finding(report, "nccl_log.verbs_error")
    assert verbs.subject == "ibv_modify_qp failed: No such device"
    assert "net device behind its GID" in verbs.message and "namespace" in verbs.message
    assert verbs.evidence["led_to"] == ["ncclSystemError (2) at transport/net_ib.cc:395"]


def test_socket_fallback_names_net_socket_interface_and_hosts() -> None:
    """NVIDIA/nccl#226: 8 AWS hosts without RDMA, NET/Socket over ens3."""
    report = read("nccl_log_socket_no_device_8hosts.txt")
    sock = finding(report, "nccl_log.socket_transport")
    assert sock.severity.value == "info"
    assert sock.message.startswith(
        "8 process(es) on 8 host(s) found no RDMA device and fell back to NET/Socket over ens3"
    )
    assert sock.evidence["hosts"][:2] == ["ip-172-31-0-11", "ip-172-31-10-149"]
    strict = read("nccl_log_socket_no_device_8hosts.txt", expect="rdma")
    fallback = finding(strict, "nccl_log.socket_fallback")
    assert fallback.severity.value == "fail" and "NET/Socket over ens3" in fallback.message
