"""On a non-blocking fabric the model reproduces the alpha-beta textbook formulas exactly.

Ring all-reduce: T = 2(p-1) alpha + 2 (p-1)/p n beta (Thakur, Rabenseifner, Gropp 2005),
where alpha is the per-step latency (transport alpha + the links' latencies of one hop) and
beta = 1 / (link rate x transport efficiency). Steps are not sliced here (slice_bytes = inf),
as in the textbook; slicing only ever hides latency behind bandwidth.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabricscope.sim.engine import Simulator
from fabricscope.sim.topology import TopologyOptions, build
from fabricscope.sim.transport import make_transport


def star(p: int, rate: float = 100e9, latency_us: float = 0.25):
    return build(
        TopologyOptions(
            kind="star",
            nodes=p,
            gpus_per_node=1,
            gpu="none",
            nic_rate_bps=rate,
            link_latency_s=latency_us * 1e-6,
        )
    )


def alpha_beta(topo, tr):
    hop_latency = topo.node.pcie_latency_s * 2 + 2 * 0.25e-6  # pcie up, access up, access down, pcie down
    return tr.alpha_s + hop_latency, 1.0 / (topo.nic_rate_Bps * tr.efficiency)


@pytest.mark.parametrize("p", [2, 3, 4, 7, 16, 64])
@pytest.mark.parametrize("n", [8, 4096, 2**20, 3 * 2**28])
@pytest.mark.parametrize("transport", ["ib", "roce", "tcp"])
def test_ring_all_reduce_is_the_textbook_formula(p, n, transport) -> None:
    topo = star(p)
    tr = make_transport(transport)
    sim = Simulator(topo, tr, slice_bytes=math.inf)
    a, b = alpha_beta(topo, tr)
    if transport == "tcp":  # a single flow is also held to one core's rate
        b = 1.0 / min(topo.nic_rate_Bps * tr.efficiency, tr.per_flow_cap_Bps)
    r = sim.collective("all_reduce", "ring", n)
    expected = 2 * (p - 1) * a + 2 * (p - 1) / p * n * b
    assert r.time_s == pytest.approx(expected, rel=1e-12)
    assert r.busbw_GBps == pytest.approx(2 * (p - 1) / p * n / expected / 1e9, rel=1e-12)


@pytest.mark.parametrize("p", [2, 5, 32])
def test_ring_all_gather_and_reduce_scatter(p) -> None:
    topo, tr = star(p), make_transport("ib")
    sim = Simulator(topo, tr, slice_bytes=math.inf)
    a, b = alpha_beta(topo, tr)
    n = 2**26
    for op in ("all_gather", "reduce_scatter"):
        r = sim.collective(op, "ring", n)
        assert r.time_s == pytest.approx((p - 1) * a + (p - 1) / p * n * b, rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 16, 64])
def test_halving_doubling_is_rabenseifner(p) -> None:
    """2 log2(p) alpha + 2 (p-1)/p n beta for powers of two."""
    topo, tr = star(p), make_transport("ib")
    sim = Simulator(topo, tr)
    a, b = alpha_beta(topo, tr)
    n = 2**27
    r = sim.collective("all_reduce", "halving-doubling", n)
    assert r.time_s == pytest.approx(2 * math.log2(p) * a + 2 * (p - 1) / p * n * b, rel=1e-12)


@pytest.mark.parametrize("p", [2, 8, 24])
def test_alltoall_on_a_star_shares_each_nic(p) -> None:
    """All pairs at once: each NIC carries p-1 flows of n/p bytes: alpha + (p-1)/p n beta."""
    topo, tr = star(p), make_transport("ib")
    sim = Simulator(topo, tr)
    a, b = alpha_beta(topo, tr)
    n = 2**24
    r = sim.collective("alltoall", None, n)
    assert r.time_s == pytest.approx(a + (p - 1) / p * n * b, rel=1e-12)


def test_large_messages_reach_the_link_rate() -> None:
    """busbw of a big ring all-reduce tends to link rate x efficiency (nccl-tests' point of busbw)."""
    topo, tr = star(8, 400e9), make_transport("ib")
    r = Simulator(topo, tr).collective("all_reduce", "ring", 16 * 2**30)
    assert r.busbw_GBps == pytest.approx(400e9 / 8 * tr.efficiency / 1e9, rel=0.01)


@pytest.mark.parametrize("kind", ["leaf-spine", "fat-tree", "rail-optimized"])
def test_non_blocking_clos_matches_a_single_switch_in_bandwidth(kind) -> None:
    """With latency removed, a non-blocking Clos under adaptive routing gives exactly the
    bandwidth of one big switch, for every algorithm."""
    opts = dict(nodes=64, gpus_per_node=1, gpu="none", nic_rate_bps=200e9, link_latency_s=0.0)
    ref = build(TopologyOptions(kind="star", **opts))
    topo = build(TopologyOptions(kind=kind, hosts_per_leaf=8, **opts))
    tr = make_transport("ib", alpha_s=0.0)
    for algo in ("ring", "tree", "halving-doubling"):
        a = Simulator(ref, tr, routing="adaptive", intra_alpha_s=0).collective("all_reduce", algo, 2**28)
        b = Simulator(topo, tr, routing="adaptive", intra_alpha_s=0).collective("all_reduce", algo, 2**28)
        pcie = 2 * ref.node.pcie_latency_s  # topologies differ only in link latencies, set to 0
        assert pcie == ref.node.pcie_latency_s * 2
        assert b.phases[0]["min_rate_GBps"] == pytest.approx(a.phases[0]["min_rate_GBps"], rel=1e-12), algo


def test_bus_factor_of_each_op() -> None:
    topo = star(10)
    sim = Simulator(topo, make_transport("ib"))
    for op, factor in (
        ("all_reduce", 1.8),
        ("all_gather", 0.9),
        ("reduce_scatter", 0.9),
        ("alltoall", 0.9),
        ("broadcast", 1.0),
        ("sendrecv", 1.0),
    ):
        r = sim.collective(op, None, 2**24)
        assert r.busbw_GBps == pytest.approx(r.algbw_GBps * factor, rel=1e-12)
        assert r.algbw_GBps == pytest.approx(2**24 / r.time_s / 1e9, rel=1e-12)


def test_sliced_ring_hides_latency_but_never_beats_bandwidth() -> None:
    topo, tr = star(16), make_transport("ib")
    a, b = alpha_beta(topo, tr)
    n = 2**30
    sliced = Simulator(topo, tr).collective("all_reduce", "ring", n).time_s
    plain = Simulator(topo, tr, slice_bytes=math.inf).collective("all_reduce", "ring", n).time_s
    assert 2 * 15 / 16 * n * b <= sliced < plain
    assert np.isclose(plain, 2 * 15 * a + 2 * 15 / 16 * n * b)
