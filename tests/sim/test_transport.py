"""Transport models: efficiencies, loss equations, and the congestion effects on solved rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.collectives import p2p_plan
from fabricscope.sim.engine import Simulator
from fabricscope.sim.topology import TopologyOptions, build
from fabricscope.sim.transport import make_transport, mathis_Bps, padhye_Bps


def test_wire_efficiencies_follow_the_headers() -> None:
    assert make_transport("roce").wire_efficiency == pytest.approx(4096 / (4096 + 82))
    assert make_transport("ib").wire_efficiency == pytest.approx(4096 / (4096 + 26))
    assert make_transport("tcp").wire_efficiency == pytest.approx(1448 / 1538)
    assert make_transport("tcp", mtu_bytes=9000).wire_efficiency == pytest.approx(8948 / 9038)
    assert make_transport("tcp", framing="tbf").wire_efficiency == pytest.approx(1448 / 1514)
    assert make_transport("udp").wire_efficiency == pytest.approx(1472 / 1538)


def test_overrides_and_bad_values() -> None:
    t = make_transport("ib", alpha_s=1e-6, efficiency=0.9)
    assert t.alpha_s == 1e-6 and t.efficiency == pytest.approx(0.9)
    for kwargs in (
        {"loss": 1.0},
        {"efficiency": 1.5},
        {"alpha_s": -1.0},
        {"mtu_bytes": 100},
        {"framing": "x"},
    ):
        with pytest.raises(FabricscopeError):
            make_transport("roce", **kwargs)
    with pytest.raises(FabricscopeError, match="tcp and udp"):
        make_transport("ib", per_core_gbps=10)
    with pytest.raises(FabricscopeError, match="unknown transport"):
        make_transport("carrier-pigeon")


def test_mathis_and_padhye() -> None:
    mss, rtt, p = 1448, 100e-6, 1e-4
    assert mathis_Bps(mss, rtt, p) == pytest.approx(mss / rtt * math.sqrt(1.5 / p))
    # Padhye without timeouts reduces to Mathis; timeouts only lower it
    assert padhye_Bps(mss, rtt, p, 0.0) == pytest.approx(mathis_Bps(mss, rtt, p))
    assert padhye_Bps(mss, rtt, p, 0.2) < mathis_Bps(mss, rtt, p)


def test_go_back_n_inflation() -> None:
    t = make_transport("roce-lossy", loss=0.01)
    assert t.inflation(60) == pytest.approx(1 + 60 * 0.01 / 0.99)
    assert make_transport("tcp", loss=0.01).inflation(60) == pytest.approx(1 / 0.99)
    assert make_transport("roce").inflation(60) == 1.0


def _pair_sim(transport: str, rate=400e9, **kw):
    topo = build(TopologyOptions(kind="star", nodes=2, gpus_per_node=1, gpu="none", nic_rate_bps=rate))
    return topo, Simulator(topo, make_transport(transport, **kw))


def test_loss_slows_rdma_by_go_back_n_and_more_loss_is_worse() -> None:
    prev = math.inf
    for loss in (0.0, 1e-5, 1e-4, 1e-3, 1e-2):
        _, sim = _pair_sim("roce-lossy", loss=loss)
        bw = sim.collective("all_reduce", "ring", 2**28).busbw_GBps
        assert bw < prev
        prev = bw
    # 1% loss with a ~20-packet window: goodput falls well below half (go-back-N collapse)
    _, clean = _pair_sim("roce-lossy")
    assert prev < 0.5 * clean.collective("all_reduce", "ring", 2**28).busbw_GBps


def test_tcp_is_held_by_one_core_and_by_loss() -> None:
    _, sim = _pair_sim("tcp")
    r = sim.collective("sendrecv", None, 2**28)
    assert r.busbw_GBps == pytest.approx(40e9 / 8 / 1e9, rel=1e-3)  # 40 Gb/s per core on a 400G link
    assert r.limited_by == "per-flow cap of the transport"
    _, lossy = _pair_sim("tcp", loss=1e-3)
    assert lossy.collective("sendrecv", None, 2**28).busbw_GBps < r.busbw_GBps / 2


def _incast_topology():
    # leaf 0: hosts 0-3, leaf 1: hosts 4-7, one spine, uplinks as fast as one host link
    return build(
        TopologyOptions(
            kind="leaf-spine",
            nodes=8,
            gpus_per_node=1,
            gpu="none",
            nic_rate_bps=100e9,
            hosts_per_leaf=4,
            spines=1,
            uplink_rate_bps=100e9,
        )
    )


def test_pfc_head_of_line_blocking_slows_the_victim_only_without_ecn() -> None:
    """Host 0 (leaf 0) and hosts 4, 6, 7 (leaf 1) send to host 5: a 4:1 incast at host 5's port.
    Host 2 (leaf 0) sends to host 6, sharing leaf 0's uplink and the spine's downlink with host
    0's flow but not its destination. Max-min gives the victim the 3/4 of the uplink that host 0
    cannot use. With PFC only, the incast pauses those links and the victim is held to host 0's
    pace (1/4); with DCQCN the incast senders slow down at the source and the victim is spared
    (Zhu et al., SIGCOMM 2015, the victim-flow experiment)."""
    topo = _incast_topology()
    src = np.array([0, 4, 6, 7, 2])
    dst = np.array([5, 5, 5, 5, 6])
    rates = {}
    for ecn in (True, False):
        sim = Simulator(topo, make_transport("roce", ecn=ecn))
        pat = p2p_plan(topo, src, dst, 2**20, "incast").phases[0].pattern
        res = sim.solve_pattern(pat)
        rates[ecn] = res.solution.rate.copy()
        if not ecn:
            assert any("head-of-line" in a for a in res.adjustments)
    incast_rate = rates[False][:4].max()
    assert rates[False][4] == pytest.approx(incast_rate, rel=1e-9)  # victim paced by the paused flows
    assert rates[True][4] > 2.5 * rates[False][4]  # with ECN the victim keeps its share of the uplink


def test_dcqcn_costs_bandwidth_only_on_contended_links() -> None:
    topo = _incast_topology()
    roce = Simulator(topo, make_transport("roce"))
    one = roce.run_plan(p2p_plan(topo, np.array([0]), np.array([5]), 2**20, "one")).phases[0]["min_rate_GBps"]
    assert one == pytest.approx(100 / 8 * make_transport("roce").efficiency, rel=1e-9)
    two = roce.run_plan(p2p_plan(topo, np.array([0, 1]), np.array([5, 5]), 2**20, "two")).phases[0][
        "min_rate_GBps"
    ]
    assert two == pytest.approx(one / 2 * 0.87, rel=1e-9)


def test_timeouts_add_a_stall_per_step() -> None:
    topo, sim = _pair_sim("roce-lossy", loss=1e-3, rto_s=0.01)
    r = sim.collective("all_reduce", "ring", 2**20)
    assert r.phases[0]["stall_s"] > 0
    _, udp = _pair_sim("udp", loss=1e-3)
    assert udp.collective("all_reduce", "ring", 2**24).phases[0]["stall_s"] > 0


def test_dcqcn_spares_a_nic_s_own_egress() -> None:
    """Host 0 sends to hosts 1 and 2 (same leaf): its NIC's egress is full and shared by two flows,
    but the NIC queues and paces them itself; no switch queue builds, no ECN mark, no DCQCN loss."""
    topo = _incast_topology()
    roce = Simulator(topo, make_transport("roce"))
    res = roce.solve_pattern(
        p2p_plan(topo, np.array([0, 0]), np.array([1, 2]), 2**20, "fanout").phases[0].pattern
    )
    assert res.solution.rate[0] == pytest.approx(100e9 / 8 * make_transport("roce").efficiency / 2, rel=1e-9)
    assert not any("DCQCN" in a for a in res.adjustments)


def test_nccl_socket_striping() -> None:
    """NCCL's socket transport: threads x sockets-per-thread sockets, at most 16 threads and 64
    sockets (src/transport/net_socket.cc); defaults give one socket on the proxy thread."""
    from fabricscope.sim.transport import socket_striping

    assert socket_striping(None, None) == (1, 1)
    assert socket_striping(8, 2) == (16, 2)  # NCCL's AWS auto-detection
    assert socket_striping(40, 2) == (64, 2)  # NSOCKS_PERTHREAD cut to 64 / threads
    assert socket_striping(1, 99) == (16, 16)
    topo = build(TopologyOptions(kind="star", nodes=4, gpus_per_node=1, gpu="none", nic_rate_bps=100e9))
    one = Simulator(topo, make_transport("tcp")).collective("all_reduce", "ring", 2**30)
    many = Simulator(topo, make_transport("tcp", nsocks_perthread=8, socket_nthreads=2)).collective(
        "all_reduce", "ring", 2**30
    )
    assert one.limited_by == "per-flow cap of the transport"
    assert many.busbw_GBps == pytest.approx(2 * one.busbw_GBps, rel=1e-6)  # two cores instead of one
    with pytest.raises(FabricscopeError, match="apply to tcp"):
        make_transport("ib", socket_nthreads=2)


def test_compare_transports_on_one_routing() -> None:
    from fabricscope.sim.compare import run_grid

    doc = run_grid(
        "collective", {"system": "dgx-h100", "nodes": 4, "size": "1G"}, {"transport": ["ib", "roce"]}
    )
    assert doc["base"]["routing"] == "adaptive"
    ecmp = run_grid(
        "collective",
        {"system": "dgx-h100", "nodes": 4, "size": "1G", "routing": "ecmp"},
        {"transport": ["ib", "roce"]},
    )
    assert ecmp["base"]["routing"] == "ecmp"


def test_roce_equals_ib_where_no_queue_builds() -> None:
    """Issue 23: DCQCN costs bandwidth only where a queue builds. In a symmetric all-to-all every
    sender's NIC is full, so the receivers' ports are paced by the senders: RoCE and IB differ only
    by their wire overhead (published production MoE numbers: within 1%)."""
    from fabricscope.sim.scenario import run_collective

    ib, roce = (
        run_collective({"system": "dgx-h100", "nodes": 16, "op": "alltoall", "size": "64M", "transport": t})
        for t in ("ib", "roce")
    )
    assert roce["busbw_GBps"] == pytest.approx(ib["busbw_GBps"], rel=0.02)
    assert not any(
        a.startswith("DCQCN") for r in roce["results"] for ph in r["phases"] for a in ph["adjustments"]
    )


def test_queue_pairs_per_connection_are_ecmp_entropy() -> None:
    """NCCL_IB_QPS_PER_CONNECTION: each QP is its own flow to the ECMP hash; more QPs, fewer of the
    collisions that hold a ring on a non-rail fat-tree."""
    from fabricscope.sim.scenario import run_collective

    base = {
        "topology": "fat-tree",
        "nodes": 128,
        "transport": "roce",
        "size": "1G",
        "seed": 1,
        "algo": "ring",
    }
    one, four = run_collective(base), run_collective({**base, "qps_per_connection": 4})
    assert one["limited_by"] == "fabric bandwidth"
    assert four["busbw_GBps"] > 1.5 * one["busbw_GBps"]
    with pytest.raises(FabricscopeError, match="qps-per-connection applies to ib and roce"):
        run_collective({**base, "transport": "tcp", "qps_per_connection": 4})
