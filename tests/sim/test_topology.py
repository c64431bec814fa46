"""Topology builders and routers: sizes, paths, ECMP hashing, spraying, YAML files."""

from __future__ import annotations

import numpy as np
import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.collectives import ring_pattern
from fabricscope.sim.custom import load_topology
from fabricscope.sim.engine import Simulator
from fabricscope.sim.solver import max_min
from fabricscope.sim.topology import KIND_ACCESS, KIND_FABRIC, TopologyOptions, build
from fabricscope.sim.transport import make_transport


def fabric_links(topo, routes, flow):
    sel = routes.flow == flow
    return sorted(topo.link_name(int(lk)) for lk in routes.link[sel])


def test_single_node_has_no_network() -> None:
    t = build(TopologyOptions(kind="single-node", nodes=1))
    assert t.fabric is None and t.n_gpus == 8
    with pytest.raises(FabricscopeError):
        build(TopologyOptions(kind="single-node", nodes=2))
    with pytest.raises(FabricscopeError, match="no network"):
        t.route(np.array([0]), np.array([1]), np.array([0]), np.array([1]), np.array([0]), False, 0)


def test_fat_tree_sizes_follow_the_radix() -> None:
    # 2-tier radix 64: 32 hosts per leaf, 32 spines; 3-tier when more than 64 leaves
    t = build(TopologyOptions(kind="fat-tree", nodes=128, gpus_per_node=8))
    d = t.describe()
    assert (d["radix"], d["tiers"], d["hosts_per_leaf"], d["leaves"], d["spines"]) == (64, 2, 32, 32, 32)
    t = build(TopologyOptions(kind="fat-tree", nodes=512, gpus_per_node=8))
    d = t.describe()
    assert (d["tiers"], d["pods"], d["spines_per_pod"], d["cores"]) == (3, 4, 32, 1024)
    with pytest.raises(FabricscopeError, match="radix"):
        build(TopologyOptions(kind="fat-tree", nodes=10_000, gpus_per_node=8, radix=16))


def test_oversubscription_sets_uplink_capacity() -> None:
    t = build(
        TopologyOptions(
            kind="leaf-spine",
            nodes=16,
            gpus_per_node=1,
            gpu="none",
            nic_rate_bps=100e9,
            hosts_per_leaf=8,
            oversubscription=4.0,
        )
    )
    d = t.describe()
    assert d["spines"] == 2 and d["oversubscription"] == pytest.approx(4.0)
    # 8 hosts of leaf 0 each send to a host of leaf 1: 8 x 100G over 200G of uplinks
    sim = Simulator(t, make_transport("ib", efficiency=1.0), routing="adaptive")
    from fabricscope.sim.collectives import p2p_plan

    r = sim.run_plan(p2p_plan(t, np.arange(8), np.arange(8, 16), 2**20, "incast"))
    assert r.phases[0]["min_rate_GBps"] == pytest.approx(100 / 8 / 4, rel=1e-9)
    assert r.bottlenecks[0]["kind"] == "fabric"


def test_rail_optimized_keeps_ring_traffic_on_its_rail() -> None:
    t = build(TopologyOptions(kind="rail-optimized", nodes=96, gpus_per_node=8, hosts_per_leaf=32))
    pat, C = ring_pattern(t, np.arange(t.n_gpus)[None, :], "ring")
    assert C == 8
    net = pat.src_nic >= 0
    assert np.all(pat.src_nic[net] % 8 == pat.entropy[net])  # channel c leaves by NIC c
    assert np.all(pat.dst_nic[net] % 8 == pat.entropy[net])
    routes = t.route(pat.src_gpu, pat.dst_gpu, pat.src_nic, pat.dst_nic, pat.entropy, False, 0)
    fab = routes.link[t.link_kind[routes.link] == KIND_FABRIC] - t.o_fabric
    names = {t.fabric.link_name(int(i)) for i in fab}
    # only the hops between scalable units leave a leaf, and they stay on their rail's leaves
    assert names and all("rail" in n for n in names)
    for n in names:
        rails = {part.split("rail")[1].split(")")[0] for part in n.split("->") if "rail" in part}
        assert len(rails) == 1


def test_ecmp_collisions_show_and_spraying_removes_them() -> None:
    """A non-rail fat-tree: 8 ring channels leave each leaf boundary on hashed spines; some seeds
    collide two flows on one uplink (half rate), adaptive routing never does."""
    t = build(TopologyOptions(kind="fat-tree", nodes=64, gpus_per_node=8, nic_rate_bps=400e9))
    tr = make_transport("roce", ecn=False)
    rates = [
        Simulator(t, tr, routing="ecmp", seed=s)
        .collective("all_reduce", "ring", 2**30)
        .phases[0]["min_rate_GBps"]
        for s in range(4)
    ]
    sprayed = (
        Simulator(t, tr, routing="adaptive")
        .collective("all_reduce", "ring", 2**30)
        .phases[0]["min_rate_GBps"]
    )
    full = 400e9 / 8 * tr.efficiency / 1e9
    assert sprayed == pytest.approx(min(full, 450 * 0.82 / 8), rel=1e-9)
    assert min(rates) <= full / 2 * (1 + 1e-9)  # a collision halves the slowest flow
    # same seed, same answer
    again = (
        Simulator(t, tr, routing="ecmp", seed=0)
        .collective("all_reduce", "ring", 2**30)
        .phases[0]["min_rate_GBps"]
    )
    assert again == rates[0]


def test_dragonfly_minimal_routes() -> None:
    t = build(
        TopologyOptions(
            kind="dragonfly",
            nodes=64,
            gpus_per_node=1,
            gpu="none",
            hosts_per_router=2,
            routers_per_group=4,
            global_links_per_router=2,
        )
    )
    fab = t.fabric
    assert fab.G == 8 and fab.m == 1
    src = np.array([0, 0, 0])
    dst = np.array([1, 3, 63])  # same router, same group, other group
    r = fab.route(src, dst, np.zeros(3, np.int64), False, 0)
    hops = [np.sum(r.flow == i) for i in range(3)]
    assert hops[0] == 2  # nic up, nic down
    assert hops[1] == 3  # + one local link
    assert 3 <= hops[2] <= 5  # + global link and up to two local links
    names = [fab.link_name(int(x)) for x in r.link[r.flow == 2]]
    assert sum("global" in n for n in names) == 1
    assert any(n.startswith("global g0->g7") for n in names)


YAML_LS = """
name: two-leaves
nodes: 8
gpus_per_node: 1
gpu: none
nic_rate: 100G
switches: [leaf1, leaf2, spine1, spine2]
links:
  - {a: leaf1, b: spine1, rate: 100G}
  - {a: leaf1, b: spine2, rate: 100G}
  - [leaf2, spine1, 100G]
  - [leaf2, spine2, 100G]
attach:
  leaf1: [0-3]
  leaf2: [4-7]
"""


def test_yaml_graph_routes_like_the_structured_clos(tmp_path) -> None:
    """The generic shortest-path router on a YAML graph and the structured Clos router agree
    exactly under adaptive routing (both spray evenly over equal-cost paths)."""
    f = tmp_path / "ls.yaml"
    f.write_text(YAML_LS)
    g = load_topology(f)
    c = build(
        TopologyOptions(
            kind="leaf-spine",
            nodes=8,
            gpus_per_node=1,
            gpu="none",
            nic_rate_bps=100e9,
            hosts_per_leaf=4,
            spines=2,
            uplink_rate_bps=100e9,
        )
    )
    rng = np.random.default_rng(3)
    src = rng.integers(0, 8, 40)
    dst = (src + rng.integers(1, 8, 40)) % 8
    for topo in (g, c):
        # one GPU and one NIC per node: GPU i leaves by NIC i
        r = topo.route(src, dst, src, dst, np.zeros(40, np.int64), True, 0)
        rates = max_min(40, r.flow, r.link, r.coef, topo.cap_Bps).rate
        if topo is g:
            ref = rates
    np.testing.assert_allclose(rates, ref, rtol=1e-12)


def test_yaml_family_and_node_rate(tmp_path) -> None:
    f = tmp_path / "rail.yaml"
    f.write_text(
        "kind: rail-optimized\nnodes: 4\ngpus_per_node: 8\nnic_rate: 200G\noversubscription: '2:1'\n"
        "node_nic_rate: {2: 100G}\nname: mine\n"
    )
    t = load_topology(f)
    assert t.kind == "rail-optimized" and t.params["name"] == "mine"
    acc = t.cap_Bps[t.link_kind == KIND_ACCESS]
    assert sorted(set(acc.tolist())) == [100e9 / 8, 200e9 / 8]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("nodes: [", "not valid YAML"),
        ("- 1\n- 2\n", "mapping"),
        ("kind: torus\nnodes: 4\n", "unknown kind"),
        ("kind: star\nnodes: 4\nbogus: 1\n", "unknown key"),
        ("nodes: 2\nswitches: [a]\nattach: {a: [0]}\n", "not attached"),
        ("nodes: 2\nswitches: [a, b]\nattach: {a: [0], b: [1]}\n", "no path"),
        ("nodes: 2\nswitches: [a]\nattach: {c: [0-1]}\n", "unknown switch"),
        ("nodes: 2\nswitches: [a]\nattach: {a: [0-5]}\n", "outside nodes"),
        ("nodes: 2\nswitches: [a]\nlinks: [[a, a]]\nattach: {a: [0-1]}\n", "identical"),
        ("nodes: 2\nswitches: [a]\nattach: {a: [0, 0-1]}\n", "attached twice"),
        ("nodes: 2\nnic_rate: fast\nswitches: [a]\nattach: {a: [0-1]}\n", "cannot read rate"),
        ("kind: star\nnodes: -3\n", "integer >= 1"),
    ],
)
def test_bad_yaml_files_give_one_clear_error(tmp_path, text, match) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(text)
    with pytest.raises(FabricscopeError, match=match):
        t = load_topology(f)
        Simulator(t, make_transport("ib")).collective("all_reduce", "ring", 2**20)


def test_missing_yaml_file(tmp_path) -> None:
    with pytest.raises(FabricscopeError, match="cannot read"):
        load_topology(tmp_path / "nope.yaml")


def test_link_names_are_readable() -> None:
    t = build(TopologyOptions(kind="fat-tree", nodes=512, gpus_per_node=8))
    names = {t.link_name(i) for i in range(0, t.n_links, max(1, t.n_links // 500))}
    assert any(n.startswith("node0/gpu0->nvswitch") for n in names)
    assert any("spine(pod" in n for n in names) and any("core(" in n for n in names)
    assert all("nic" not in n or "node" in n or "spines" in n for n in names)


def test_a_topology_files_keys_are_the_sim_options() -> None:
    """docs/sim.md: a family file takes "any key of the CLI options, with underscores"; the keys
    it accepts (sim/custom.py) and the CLI's fabric options come from the same field names."""
    from fabricscope.sim.params import NETWORK_FIELDS, NODE_FIELDS, Scenario

    assert set(NODE_FIELDS) | set(NETWORK_FIELDS) <= set(Scenario.model_fields)
