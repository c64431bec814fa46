"""The pure line parser: every format NCCL has printed since 2.3, and never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricscope.nccl.log.parse import WARN_KINDS, classify_transport, decode_gid, parse_line


def test_plain_info_header() -> None:
    ev = parse_line("dgxh100-4:460770:460842 [0] NCCL INFO Using network IB\n")
    assert ev is not None
    assert (ev.kind, ev.level, ev.host, ev.pid, ev.tid, ev.cuda_dev) == (
        "network",
        "INFO",
        "dgxh100-4",
        460770,
        460842,
        0,
    )
    assert ev.data == {"name": "IB"}
    assert ev.prefix is None and ev.timestamp is None


@pytest.mark.parametrize(
    ("line", "prefix"),
    [
        ("[0] h100clust-worker-1:497888:498098 [0] NCCL INFO Using network IB", "[0]"),  # Intel MPI -l
        (
            "[1,0]<stdout>:5873af64cf59:10158:10560 [0] NCCL INFO Using network IB",
            "[1,0]<stdout>:",
        ),  # Open MPI --tag-output
        ("0: node-01:1:2 [0] NCCL INFO Using network IB", "0:"),  # srun --label
        ("[default0]:node-01:1:2 [0] NCCL INFO Using network IB", "[default0]:"),  # torchrun
        ("[155] crow-ib-new-nccl-256-info-19:5330:5330 [3] NCCL INFO Using network IB", "[155]"),
    ],
)
def test_launcher_prefixes_are_kept_apart(line: str, prefix: str) -> None:
    ev = parse_line(line)
    assert ev is not None and ev.kind == "network"
    assert ev.prefix == prefix
    assert ev.host and ev.pid is not None and ev.cuda_dev is not None


def test_timestamp_prefix_nccl_2_26_warn() -> None:
    line = "[2026-05-05 06:16:47] node-01:189884:189884 [3] plugin/net.cc:334 NCCL WARN Failed to initialize any NET plugin"
    ev = parse_line(line)
    assert ev is not None
    assert ev.level == "WARN" and ev.host == "node-01" and ev.cuda_dev == 3
    assert ev.timestamp == "2026-05-05 06:16:47"
    assert ev.source == "plugin/net.cc:334"
    assert ev.prefix is None


def test_kubectl_timestamp_and_launcher_prefix() -> None:
    ev = parse_line("2024-05-01T12:00:00.123456789Z [3] node-7:11:12 [3] NCCL INFO Using network Socket")
    assert ev is not None and ev.data == {"name": "Socket"}
    assert ev.timestamp == "2024-05-01T12:00:00.123456789Z"
    assert ev.prefix == "[3]"


def test_redacted_empty_hostname() -> None:
    ev = parse_line(":22901:22901 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/4")
    assert ev is not None and ev.kind == "channel" and ev.host is None and ev.pid == 22901


def test_call_trace_line_without_device() -> None:
    ev = parse_line("node-01:986207:986207 NCCL CALL ncclGroupStart()")
    assert ev is not None and ev.level == "CALL" and ev.cuda_dev is None and ev.kind == "info"


@pytest.mark.parametrize(
    ("via", "label", "tclass", "net", "dev", "gdr"),
    [
        ("NET/IB/5/GDRDMA", "NET/IB/GDRDMA", "net_rdma", "IB", 5, True),
        ("NET/IB/0", "NET/IB", "net_rdma", "IB", 0, False),
        ("NET/IBext_v8/7/GDRDMA", "NET/IBext_v8/GDRDMA", "net_rdma", "IBext_v8", 7, True),
        ("NET/IB/0(1)/GDRDMA", "NET/IB/GDRDMA", "net_rdma", "IB", 0, True),  # proxied through rank 1 (PXN)
        ("NET/IB/2/GDRDMA(PCI)/Shared", "NET/IB/GDRDMA", "net_rdma", "IB", 2, True),
        ("NET/Socket/3", "NET/Socket", "net_socket", "Socket", 3, False),
        ("NET/AWS Libfabric/0/GDRDMA", "NET/AWS Libfabric/GDRDMA", "net_rdma", "AWS Libfabric", 0, True),
        ("P2P/IPC/read", "P2P/IPC", "p2p", None, None, False),
        ("P2P/IPC", "P2P/IPC", "p2p", None, None, False),
        ("P2P/CUMEM", "P2P/CUMEM", "p2p", None, None, False),
        ("P2P/direct pointer", "P2P/direct pointer", "p2p", None, None, False),
        ("P2P/direct pointer/read", "P2P/direct pointer", "p2p", None, None, False),
        ("SHM/direct/direct", "SHM", "shm", None, None, False),
        ("SHM/direct", "SHM", "shm", None, None, False),
        ("direct shared memory", "SHM", "shm", None, None, False),
    ],
)
def test_transport_labels(via: str, label: str, tclass: str, net, dev, gdr) -> None:
    assert classify_transport(via) == (label, tclass, net, dev, gdr)


@pytest.mark.parametrize(
    ("msg", "src", "dst", "direction", "local"),
    [
        ("Channel 07/0 : 0[0] -> 8[0] [send] via NET/IBext_v8/7/GDRDMA", 0, 8, "send", 0),
        ("Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA", 2, 0, "receive", 0),  # 2.7: busId
        ("Ring 00 : 15 -> 0 [receive] via NET/IB/0", 15, 0, "receive", 0),  # 2.4: no [dev]
        ("Ring 00 : 155[3d000] -> 157[b2000] via P2P/IPC", 155, 157, None, 155),  # 2.5
        ("Channel 00/1 : 7[7] -> 6[6] via P2P/direct pointer", 7, 6, None, 7),
    ],
)
def test_channel_lines_across_versions(msg: str, src: int, dst: int, direction, local: int) -> None:
    ev = parse_line(f"h:1:2 [0] NCCL INFO {msg}")
    assert ev is not None and ev.kind == "channel"
    assert (ev.data["src"], ev.data["dst"], ev.data["direction"], ev.data["local_rank"]) == (
        src,
        dst,
        direction,
        local,
    )


def test_ring_listing_is_not_a_channel() -> None:
    ev = parse_line("node-01:1:2 [0] NCCL INFO Ring 00 : 1 -> 0 -> 1")
    assert ev is not None and ev.kind == "info"


def test_net_ib_using_line() -> None:
    ev = parse_line(
        "dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>"
    )
    assert ev is not None and ev.kind == "net_devices"
    assert ev.data["devices"] == [(0, "mlx5_10", 1, "RoCE"), (1, "mlx5_11", 1, "RoCE")]
    assert ev.data["relaxed_ordering"] is True and ev.data["oob"] == "enp220s0np0"


def test_net_ib_using_with_rail_and_plane() -> None:
    ev = parse_line(
        "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1:0:1/IB [1]mlx5_1:1:-1:-1/IB ; OOB eth0:10.0.0.1<0>"
    )
    assert ev is not None and [d[1] for d in ev.data["devices"]] == ["mlx5_0", "mlx5_1"]


def test_per_device_lines_nccl_2_3_and_2_2x() -> None:
    old = parse_line("learnfair0536:46393:46393 [0] NCCL INFO NET/IB: [3] mlx5_2:1/IB")
    assert old is not None and old.kind == "net_devices" and old.data["devices"] == [(3, "mlx5_2", 1, "IB")]
    new = parse_line(
        "h:1:2 [0] NCCL INFO NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 context=0x1 pciPath=x ar=1"
    )
    assert new is not None and new.data["devices"] == [(0, "mlx5_0", 1, "IB")]


def test_socket_using_and_no_device() -> None:
    ev = parse_line(
        "user:852750:852802 [0] NCCL INFO NET/Socket : Using [0]ibs85f0:192.168.1.14<0> [1]ib0:192.168.1.15<0>"
    )
    assert ev is not None and ev.kind == "socket_devices"
    assert ev.data["interfaces"] == [("ibs85f0", "192.168.1.14"), ("ib0", "192.168.1.15")]
    nodev = parse_line("[1,0]<stdout>:5873af64cf59:10158:10560 [0] NCCL INFO NET/IB : No device found.")
    assert nodev is not None and nodev.kind == "no_device" and nodev.data == {"net": "IB"}


def test_versions_bare_and_in_header() -> None:
    bare = parse_line("NCCL version 2.7.6+cuda11.1")
    assert (
        bare is not None
        and bare.kind == "version"
        and bare.data == {"version": "2.7.6", "build": "+cuda11.1"}
    )
    assert bare.host is None
    tagged = parse_line("[1,0]<stdout>:NCCL version 2.5.6+cuda10.2")
    assert tagged is not None and tagged.data["version"] == "2.5.6" and tagged.prefix == "[1,0]<stdout>:"
    header = parse_line("h:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3")
    assert header is not None and header.kind == "version" and header.data["version"] == "2.19.3"
    assert parse_line("torch says NCCL version is fine") is None


def test_env_lines_drop_nccl_trailing_period() -> None:
    ev = parse_line("h:88:159 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 0.")
    assert ev is not None and ev.data == {"name": "NCCL_IB_GID_INDEX", "value": "0"}
    ev2 = parse_line("h:88:88 [0] NCCL INFO NCCL_SOCKET_IFNAME set to net1")
    assert ev2 is not None and ev2.data == {"name": "NCCL_SOCKET_IFNAME", "value": "net1"}


def test_comm_lines() -> None:
    new = parse_line(
        "h:1:2 [0] NCCL INFO comm 0x55d5 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0"
    )
    assert new is not None and new.kind == "comm"
    assert (new.data["rank"], new.data["nranks"], new.data["nnodes"], new.data["phase"]) == (3, 16, 2, None)
    done = parse_line("h:1:2 [1] NCCL INFO comm 0x55 rank 1 nranks 4 cudaDev 1 busId 1b000 - Init COMPLETE")
    assert done is not None and done.data["phase"] == "complete" and done.data["nranks"] == 4
    start = parse_line(
        "h:1:2 [0] NCCL INFO [Rank 0] ncclCommInitRankConfig comm 0x7 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1 - Init START"
    )
    assert start is not None and start.data["phase"] == "start"
    old = parse_line("learnfair0536:46393:46393 [0] NCCL INFO rank 0 nranks 8")
    assert old is not None and old.kind == "comm" and old.data["nranks"] == 8


def test_retcode_lines() -> None:
    ev = parse_line("dgxh100-3:225140:225289 [0] NCCL INFO group.cc:65 -> 3 [Async thread]")
    assert ev is not None and ev.kind == "retcode"
    assert ev.data == {"site": "group.cc:65", "code": 3, "thread": "Async thread"}


@pytest.mark.parametrize(
    ("msg", "status", "vendor", "hca"),
    [
        # 2.30: symbolic status with the number in parentheses
        (
            "NET/IB: Got completion from peer 10.153.235.13<40554> with status=IBV_WC_RETRY_EXC_ERR(12) "
            "opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) vendor_err=129 localGid ::ffff:1.1.2.2 remoteGids::ffff:1.1.1.4 hca mlx5_1",
            12,
            129,
            "mlx5_1",
        ),
        # 2.19-2.2x
        (
            "NET/IB: Got completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send) "
            "localGid ::ffff:10.99.92.59 remoteGids::ffff:10.99.91.63 hca mlx5_1",
            4,
            81,
            "mlx5_1",
        ),
        # 2.12-2.18
        (
            "NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)",
            12,
            129,
            None,
        ),
        # before 2.12
        ("NET/IB : Got completion with error 5, opcode 1, len 0, vendor err 249", 5, 249, None),
    ],
)
def test_completion_error_formats(msg: str, status: int, vendor: int, hca) -> None:
    ev = parse_line(f"node:1:2 [1] transport/net_ib.cc:1296 NCCL WARN {msg}")
    assert ev is not None and ev.kind == "completion_error" and ev.is_warn
    assert (ev.data["status"], ev.data["vendor_err"], ev.data["hca"]) == (status, vendor, hca)
    assert ev.source == "transport/net_ib.cc:1296"


@pytest.mark.parametrize(
    ("msg", "kind"),
    [
        ("Call to ibv_modify_qp failed with error Network is unreachable", "verbs_error"),
        ("Call to ibv_create_qp failed", "verbs_error"),
        ("NET/IB : Got async event : port error", "async_event"),
        ("socketProgress: Connection closed by remote peer dgxh100-3<41109>", "connection"),
        ("Call to connect returned Connection timed out, retrying", "timeout"),
        ("Cuda failure 'out of memory'", "cuda_error"),
        ("[Proxy Service 1] Failed to execute operation Connect from rank 1, retcode 2", "proxy_error"),
        ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000", "warn"),
    ],
)
def test_warn_classification(msg: str, kind: str) -> None:
    ev = parse_line(f"h:1:2 [0] misc/x.cc:1 NCCL WARN {msg}")
    assert ev is not None and ev.kind == kind and kind in WARN_KINDS


def test_verbs_error_fields() -> None:
    ev = parse_line(
        "h:1:2 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable"
    )
    assert ev is not None and ev.data == {"call": "ibv_modify_qp", "error": "Network is unreachable"}


def test_roce_qp_line_gid_decoding() -> None:
    ev = parse_line(
        "a:88:159 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1047 mtu 5 query_ece={supported=1, vendor_id=0x15b3, "
        "options=0x0, comp_mask=0x0} GID 0 (80FE/1A8A41FEFF21A75E) fifoRkey=0x15e6c5 fifoLkey=0x15e6c5"
    )
    assert ev is not None and ev.kind == "qp"
    assert ev.data["gid_index"] == 0 and ev.data["gid"] == "fe80::5ea7:21ff:fe41:8a1a"
    # An IPv4-mapped RoCE v2 GID (::ffff:10.1.2.3) printed the same way.
    assert decode_gid("0", "302010AFFFF0000") == "::ffff:10.1.2.3"


def test_gdr_lines() -> None:
    ev = parse_line("h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)")
    assert ev is not None and ev.kind == "gdr"
    assert ev.data["enabled"] is False and ev.data["hca"] == "mlx5_0" and "no module" in ev.data["detail"]
    on = parse_line("h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'")
    assert on is not None and on.data["enabled"] is True


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "[user:852715] 15 more processes have sent help message help-mpi-btl-openib.txt / ib port not selected",
        "#  Rank  0 Pid 120890 on 10-90-43-152 device  0 [0x87] A100-SXM4-40GB",
        "NCCL INFO without header",
        "h:1:2 [0] NCCL BOGUS level",
        "x" * 20000 + " NCCL INFO Using network IB",
    ],
)
def test_non_nccl_lines_give_none(line: str) -> None:
    assert parse_line(line) is None


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_arbitrary_text_never_raises(text: str) -> None:
    ev = parse_line(text)
    assert ev is None or isinstance(ev.kind, str)


_PIECES = st.sampled_from(
    [
        "h:1:2 [0] ",
        "NCCL ",
        "INFO ",
        "WARN ",
        "Channel ",
        "Ring ",
        "00/0 : ",
        "0[0] -> 1[1] ",
        "[send] ",
        "[receive] ",
        "via ",
        "NET/",
        "IB/",
        "Socket/",
        "0",
        "(1)",
        "/GDRDMA",
        "P2P/",
        "SHM/direct",
        "Using network ",
        "NET/IB : Using ",
        "[0]mlx5_0:1/IB ",
        "; OOB ",
        "eth0:1.2.3.4<0>",
        "comm 0x1 rank ",
        " nRanks ",
        "Got completion from peer ",
        "with status=",
        "IBV_WC_X(",
        "12",
        ") vendor err ",
        "Call to ibv_modify_qp failed with error ",
        "-> ",
        " [",
        "]",
        "GID ",
        "(80FE/1A)",
        "NCCL version ",
        "2.19.3",
        "set by environment to ",
        "NCCL_IB_HCA ",
        "\x00",
        "\ufffd",
        ":",
        " ",
    ]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_PIECES, max_size=25).map("".join))
def test_fuzz_nccl_shaped_text_never_raises(text: str) -> None:
    ev = parse_line(text)
    if ev is not None:
        assert ev.kind in {
            "version",
            "network",
            "net_devices",
            "socket_devices",
            "no_device",
            "no_verbs",
            "gdr",
            "channel",
            "comm",
            "connected",
            "env",
            "bootstrap",
            "qp",
            "retcode",
            "info",
            *WARN_KINDS,
        }
