"""End-to-end properties of the engine on random fabrics (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricscope.sim.engine import Simulator
from fabricscope.sim.topology import TopologyOptions, build
from fabricscope.sim.transport import make_transport

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def fabrics(draw):
    nodes = draw(st.integers(2, 12))
    kind = draw(st.sampled_from(["star", "leaf-spine", "fat-tree", "rail-optimized"]))
    gpn = draw(st.sampled_from([1, 2, 4]))
    rates = {
        n: draw(st.sampled_from([50e9, 100e9, 200e9]))
        for n in draw(st.sets(st.integers(0, nodes - 1), max_size=3))
    }
    return dict(
        kind=kind,
        nodes=nodes,
        gpus_per_node=gpn,
        nic_rate_bps=200e9,
        hosts_per_leaf=draw(st.integers(1, 6)),
        oversubscription=draw(st.sampled_from([1.0, 2.0, 4.0])),
        node_nic_rate_bps=rates,
    )


@SETTINGS
@given(
    fabrics(),
    st.sampled_from(["ring", "tree", "halving-doubling"]),
    st.sampled_from(["ecmp", "adaptive"]),
    st.data(),
)
def test_adding_capacity_never_slows_a_collective(fab, algo, routing, data) -> None:
    """Raise one node's NIC rate, or every uplink (or, if that changes nothing, every NIC): the
    collective never takes longer."""
    tr = make_transport("ib")
    before = Simulator(build(TopologyOptions(**fab)), tr, routing=routing).collective(
        "all_reduce", algo, 2**26
    )
    more = dict(fab)
    # Under ECMP more spines is another hash draw, not just more capacity (a flow can land on a
    # busier uplink): only adaptive routing is monotone in the uplink count.
    if data.draw(st.booleans()) or routing == "ecmp":
        n = data.draw(st.integers(0, fab["nodes"] - 1))
        more["node_nic_rate_bps"] = {**fab["node_nic_rate_bps"], n: 400e9}
    else:
        more["oversubscription"] = 1.0
    if more == fab:
        more["nic_rate_bps"] = 400e9
    after = Simulator(build(TopologyOptions(**more)), tr, routing=routing).collective(
        "all_reduce", algo, 2**26
    )
    assert after.time_s <= before.time_s * (1 + 1e-9)


@SETTINGS
@given(fabrics(), st.sampled_from(["ring", "tree", "halving-doubling"]))
def test_busbw_never_exceeds_what_one_rank_can_move(fab, algo) -> None:
    """No algorithm moves a rank's data faster than its GPU's own links allow (NVLink for
    intra-node ranks, its NIC share otherwise): busbw <= max(NVLink x efficiency, NICs/node x NIC)."""
    topo = build(TopologyOptions(**fab))
    tr = make_transport("ib")
    r = Simulator(topo, tr).collective("all_reduce", algo, 2**28)
    nic = max([fab["nic_rate_bps"], *fab["node_nic_rate_bps"].values()]) / 8 * tr.efficiency
    bound = max(450e9 * 0.82, topo.node.nics_per_node * nic) / 1e9
    if algo == "tree":
        bound *= 2  # trees move intra-node data over NVLink chains: busbw is not wire bandwidth
    assert r.busbw_GBps <= bound * (1 + 1e-9)
