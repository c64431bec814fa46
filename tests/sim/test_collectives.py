"""Collective plans: tree shapes, traffic volumes per rank, groups, and input checks."""

from __future__ import annotations

import numpy as np
import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.collectives import _btree_parents, _tree_depth, dbtree_parents, plan
from fabricscope.sim.engine import Simulator
from fabricscope.sim.topology import TopologyOptions, build
from fabricscope.sim.transport import make_transport


def _children(parents):
    out = {}
    for r, p in enumerate(parents):
        if p >= 0:
            out.setdefault(int(p), []).append(r)
    return out


@pytest.mark.parametrize("n", list(range(1, 40)) + [100, 255, 256, 1000])
def test_binary_tree_is_a_binary_tree(n) -> None:
    parents = _btree_parents(n)
    assert (parents < 0).sum() == 1
    assert all(len(c) <= 2 for c in _children(parents).values())
    assert _tree_depth(parents) <= int(np.ceil(np.log2(n + 1))) + 1


@pytest.mark.parametrize("n", [4, 6, 8, 10, 16, 30, 64, 200])
def test_double_binary_tree_interiors_are_disjoint(n) -> None:
    """Each rank is interior (has children) in at most one of the two trees, so each rank sends
    and receives about the same volume overall (NCCL's reason for two trees)."""
    a, b = dbtree_parents(n)
    for parents in (a, b):
        assert (parents < 0).sum() == 1
        assert all(len(c) <= 2 for c in _children(parents).values())
    both = set(_children(a)) & set(_children(b))
    assert len(both) <= 1  # the roots' neighbourhood may overlap for small even n


def _bytes_sent_per_rank(topo, pl):
    sent = np.zeros(topo.n_gpus)
    for ph in pl.phases:
        steps = ph.steps if ph.timing != "pipeline" else 1
        np.add.at(sent, ph.pattern.src_gpu, ph.bytes * steps)
    return sent


@pytest.mark.parametrize("algo", ["ring", "halving-doubling", "hierarchical"])
def test_all_reduce_sends_2_p_minus_1_over_p_n_per_rank(algo) -> None:
    topo = build(TopologyOptions(kind="rail-optimized", nodes=4, gpus_per_node=8))
    n = 2**20 * 64
    pl = plan(topo, "all_reduce", algo, n)
    sent = _bytes_sent_per_rank(topo, pl)
    p = topo.n_gpus
    if algo == "hierarchical":  # intra RS + inter AR + intra AG
        g, nn = 8, 4
        expected = 2 * (g - 1) / g * n + 2 * (nn - 1) / nn * n / g
        assert sent == pytest.approx(np.full(p, expected))
    else:
        assert sent == pytest.approx(np.full(p, 2 * (p - 1) / p * n))


def test_halving_doubling_folds_non_powers_of_two() -> None:
    topo = build(TopologyOptions(kind="star", nodes=6, gpus_per_node=1, gpu="none"))
    pl = plan(topo, "all_reduce", "halving-doubling", 2**20)
    names = [ph.name for ph in pl.phases]
    assert names[0] == "fold extra ranks" and names[-1] == "unfold extra ranks"
    assert len(pl.phases) == 2 + 2 * 2
    with pytest.raises(FabricscopeError, match="power-of-two"):
        plan(topo, "all_gather", "halving-doubling", 2**20)


def test_tree_uses_every_nic_and_halves_the_data() -> None:
    topo = build(TopologyOptions(kind="rail-optimized", nodes=8, gpus_per_node=8))
    ph = plan(topo, "all_reduce", "tree", 2**30).phases[0]
    net = ph.pattern.src_nic >= 0
    assert set((ph.pattern.src_nic[net] % 8).tolist()) == set(range(8))
    assert ph.bytes == 2**30 / 16  # two trees on each of 8 NICs


def test_concurrent_groups_use_their_own_rails() -> None:
    """Data-parallel groups of one GPU per node (GPU i on rail i) run at once without sharing NICs."""
    topo = build(TopologyOptions(kind="rail-optimized", nodes=4, gpus_per_node=8))
    groups = np.arange(32).reshape(4, 8).T  # group i = GPU i of every node
    pl = plan(topo, "all_reduce", "ring", 2**26, groups)
    pat = pl.phases[0].pattern
    assert len(pat) == 32
    assert np.all(pat.src_nic % 8 == pat.src_gpu % 8)
    r = Simulator(topo, make_transport("ib")).run_plan(pl)
    assert r.phases[0]["min_rate_GBps"] == pytest.approx(50 * make_transport("ib").efficiency, rel=1e-9)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("all_reduce", "bogus", 1024), "unknown algorithm"),
        (("scan", None, 1024), "unknown op"),
        (("all_reduce", "ring", 0), "positive"),
        (("alltoall", "ring", 1024), "direct"),
        (("broadcast", "tree", 1024), "all_reduce only"),
        (("all_gather", "hierarchical", 1024), "all_reduce only"),
        (("sendrecv", "ring", 1024), "direct"),
    ],
)
def test_bad_plans(args, match) -> None:
    topo = build(TopologyOptions(kind="star", nodes=4, gpus_per_node=2))
    with pytest.raises(FabricscopeError, match=match):
        plan(topo, *args)


def test_group_checks_and_alltoall_limit() -> None:
    topo = build(TopologyOptions(kind="star", nodes=4, gpus_per_node=2))
    with pytest.raises(FabricscopeError, match="at least 2"):
        plan(topo, "all_reduce", "ring", 1024, np.array([[0]]))
    with pytest.raises(FabricscopeError, match="outside"):
        plan(topo, "all_reduce", "ring", 1024, np.array([[0, 99]]))
    with pytest.raises(FabricscopeError, match="same number"):
        plan(topo, "all_reduce", "tree", 1024, np.array([[0, 1, 2]]))
    ring = plan(topo, "all_reduce", "ring", 1024, np.array([[0, 1, 2]]))  # 2 + 1 ranks: the uneven ring
    hops = ring.phases[0].pattern
    assert sorted(zip(hops.src_gpu.tolist(), hops.dst_gpu.tolist())) == [(0, 1), (1, 2), (2, 0)]
    with pytest.raises(
        FabricscopeError, match="same number"
    ):  # node 0, 1, then 0 again: not one run per node
        plan(topo, "all_reduce", "ring", 1024, np.array([[0, 2, 1]]))
    big = build(TopologyOptions(kind="fat-tree", nodes=256, gpus_per_node=8))
    assert "aggregated" in plan(big, "alltoall", None, 2**20).phases[0].name  # no p^2 flows
    uneven = (np.arange(256)[:, None] * 8 + np.array([0, 1])).ravel()
    uneven[1::4] += 1  # nodes contribute different local GPUs
    with pytest.raises(FabricscopeError, match="same local GPUs"):
        plan(big, "alltoall", None, 2**20, uneven[None, :])
    with pytest.raises(FabricscopeError, match="several nodes"):
        plan(build(TopologyOptions(kind="single-node", nodes=1)), "all_reduce", "hierarchical", 1024)


def test_broadcast_is_a_pipelined_chain() -> None:
    topo = build(TopologyOptions(kind="star", nodes=8, gpus_per_node=1, gpu="none", nic_rate_bps=100e9))
    sim = Simulator(topo, make_transport("ib"))
    r = sim.collective("broadcast", "ring", 2**30)
    # pipelined: close to n / link rate, far below (p-1) n / link rate
    assert r.algbw_GBps == pytest.approx(100 / 8 * make_transport("ib").efficiency, rel=0.02)
