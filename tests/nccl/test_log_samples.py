"""Each real NCCL log in tests/data/samples/ read with the right network, transports and verdicts."""

from __future__ import annotations

from pathlib import Path

from fabricscope.nccl.log.aggregate import LogAggregator
from fabricscope.nccl.log.read import feed_file
from fabricscope.nccl.log.report import LogReport, build_report
from tests.conftest import samples_dir


def read(name: str, expect: str = "auto") -> LogReport:
    agg = LogAggregator(expect=expect)
    feed_file(agg, str(samples_dir() / name))
    return build_report(agg)


def ids(report: LogReport, severity: str | None = None) -> set[str]:
    return {f.id for f in report.findings if severity is None or f.severity.value == severity}


def finding(report: LogReport, fid: str):
    matches = [f for f in report.findings if f.id == fid]
    assert matches, f"{fid} not in {sorted(ids(report))}"
    return matches[0]


def test_all_sample_logs_are_covered() -> None:
    names = {p.name for p in samples_dir().glob("nccl_log_*.txt")}
    tested = {
        "nccl_log_ib_gdrdma_a100.txt",
        "nccl_log_ib_gdrdma_h100_ibext.txt",
        "nccl_log_intranode_p2p_shm.txt",
        "nccl_log_roce_gid_index.txt",
        "nccl_log_roce_modify_qp_error.txt",
        "nccl_log_socket_fallback.txt",
        # tests/nccl/test_log_root_causes.py:
        "nccl_log_async_events.txt",
        "nccl_log_async_notices.txt",
        "nccl_log_lo_ibext_disabled.txt",
        "nccl_log_modify_qp_no_such_device.txt",
        "nccl_log_no_libibverbs.txt",
        "nccl_log_socket_no_device_8hosts.txt",
    }
    assert names <= tested, f"new sample logs without a test: {sorted(names - tested)}"


def test_ib_gdrdma_a100() -> None:
    report = read("nccl_log_ib_gdrdma_a100.txt")
    assert report.summary["nccl_versions"] == ["2.7.6"]
    assert [r["rank"] for r in report.ranks] == [0, 1, 2, 3]
    for rank in report.ranks:
        assert rank["host"] == "10-90-43-152" and rank["cuda_dev"] == rank["rank"]
        assert rank["network"] == "IB" and rank["nccl_version"] == "2.7.6"
        assert set(rank["transports"]) == {"NET/IB/GDRDMA"}
        assert rank["gpudirect_rdma"] is True
        layers = [d["link_layer"] for d in rank["net_devices"]]
        assert layers.count("IB") == 7 and layers.count("RoCE") == 2
    assert ids(report, "fail") == set()
    mixed = finding(report, "nccl_log.mixed_link_layers")
    assert mixed.severity.value == "warn" and "mlx5_16:1" in mixed.evidence["roce"]
    assert mixed.fix is not None and "NCCL_IB_HCA==" in mixed.fix and "mlx5_16" not in mixed.fix
    assert finding(report, "nccl_log.gdr").severity.value == "pass"
    # Single node with P2P and SHM disabled: the log's env lines are linted (debug settings left in).
    env = [f for f in report.findings if f.id == "nccl_log.env"]
    assert {f.evidence["code"] for f in env} == {"NCCL062"}
    assert {f.subject for f in env} == {"NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"}


def test_ib_gdrdma_h100_ibext_plugin_with_launcher_prefix() -> None:
    report = read("nccl_log_ib_gdrdma_h100_ibext.txt")
    assert len(report.ranks) == 1
    rank = report.ranks[0]
    assert (rank["host"], rank["rank"], rank["network"]) == ("h100clust-worker-1", 0, "IBext_v8")
    assert rank["transports"] == {"NET/IBext_v8/GDRDMA": 12}
    assert rank["net_devices_used"] == [7]
    assert ids(report, "fail") == set() and ids(report, "warn") == set()
    assert "nccl_log.network" in ids(report, "pass")


def test_intranode_p2p_and_shm() -> None:
    report = read("nccl_log_intranode_p2p_shm.txt")
    assert sorted(r["rank"] for r in report.ranks) == list(range(8))
    assert {r["pid"] for r in report.ranks} == {3884652}  # one process drives 8 GPUs
    seen = set().union(*(r["transports"] for r in report.ranks))
    assert seen == {"SHM", "P2P/direct pointer"}
    assert all(r["network"] is None and r["gpudirect_rdma"] is None for r in report.ranks)
    assert ids(report, "fail") == set() and ids(report, "warn") == set()
    assert "nccl_log.shm_instead_of_p2p" in ids(report, "info")
    assert finding(report, "nccl_log.transports").evidence["channels"] == {"SHM": 17, "P2P/direct pointer": 5}


def test_roce_forced_link_local_gid() -> None:
    report = read("nccl_log_roce_gid_index.txt")
    rank = report.ranks[0]
    assert rank["network"] == "IB" and rank["transports"] == {"NET/IB": 1}
    assert rank["gpudirect_rdma"] is False
    assert rank["env"]["NCCL_IB_GID_INDEX"] == "0" and rank["env"]["NCCL_SOCKET_IFNAME"] == "net1"
    gid = finding(report, "nccl_log.gid_link_local")
    assert gid.severity.value == "fail"
    assert gid.evidence == {"gid_index": 0, "gid": "fe80::5ea7:21ff:fe41:8a1a", "forced": True}
    gdr = finding(report, "nccl_log.gdr_off")
    assert gdr.severity.value == "warn"
    assert "NCCL >= 2.13" in gdr.fix and "2.19" not in gdr.fix  # DMA-BUF since 2.13 (issue 13 B9)


def test_roce_modify_qp_error_cascade() -> None:
    report = read("nccl_log_roce_modify_qp_error.txt")
    assert report.summary["nccl_versions"] == ["2.19.3"]
    hosts = {r["host"] for r in report.ranks}
    assert hosts == {"dgxh100-3"}  # the only host with rank-level lines in this excerpt
    verbs = finding(report, "nccl_log.verbs_error")
    assert verbs.severity.value == "fail"
    assert verbs.subject == "ibv_modify_qp failed: Network is unreachable"
    assert "route" in verbs.message and verbs.evidence["source"] == "misc/ibvwrap.cc:187"
    assert verbs.evidence["led_to"] == ["ncclSystemError (2) at transport/net_ib.cc:579"]
    err = finding(report, "nccl_log.error_return")
    assert err.subject == "ncclInternalError" and err.evidence["code"] == 3
    # The socket WARNs that follow are consequences (warn), not the cause (fail).
    connection = [f for f in report.findings if f.id == "nccl_log.connection"]
    assert len(connection) == 2 and all(f.severity.value == "warn" for f in connection)
    assert finding(report, "nccl_log.proxy_error").severity.value == "warn"
    assert finding(report, "nccl_log.version").severity.value == "pass"


def test_socket_fallback_with_ib_disabled() -> None:
    report = read("nccl_log_socket_fallback.txt")
    fallback = finding(report, "nccl_log.socket_fallback")
    assert fallback.severity.value == "fail"
    assert fallback.evidence["cause"] == "NCCL_IB_DISABLE=1 is set"
    assert fallback.evidence["interfaces"] == ["ib0", "ibs85f0"]
    assert fallback.fix is not None and "unset NCCL_IB_DISABLE" in fallback.fix
    by_rank = {r["rank"]: r for r in report.ranks if r["rank"] is not None}
    assert by_rank[15]["transports"] == {"NET/Socket": 2} and by_rank[15]["network"] == "Socket"
    assert by_rank[0]["transports"] == {"P2P/IPC": 2} and by_rank[0]["network"] == "Socket"
    assert by_rank[10]["transports"] == {"P2P/IPC": 2}
    env = [f for f in report.findings if f.id == "nccl_log.env"]
    assert [f.evidence["code"] for f in env] == ["NCCL060"]


def test_expect_socket_turns_the_fallback_into_a_fact() -> None:
    report = read("nccl_log_socket_fallback.txt", expect="socket")
    assert "nccl_log.socket_fallback" not in ids(report)
    assert "nccl_log.socket_transport" in ids(report, "info")


def test_files_read_together_keep_hosts_apart(tmp_path: Path) -> None:
    agg = LogAggregator()
    for name in ("nccl_log_ib_gdrdma_a100.txt", "nccl_log_roce_modify_qp_error.txt"):
        feed_file(agg, str(samples_dir() / name))
    report = build_report(agg)
    mismatch = finding(report, "nccl_log.version_mismatch")
    assert mismatch.severity.value == "fail" and set(mismatch.evidence) == {"2.7.6", "2.19.3"}
    assert len(report.files) == 2
