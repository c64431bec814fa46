"""From parsed captures to the simulator's YAML, and the simulator reading it back."""

from __future__ import annotations

import pytest

from fabricscope.host.ibnetdiscover import parse_ibnetdiscover
from fabricscope.host.lldp import parse_lldpctl
from fabricscope.topology.infiniband import from_ibnetdiscover
from fabricscope.topology.lldp import NodeLldp, from_lldp
from fabricscope.topology.model import (
    ASSUMED_CORE,
    Attachment,
    BuildOptions,
    Cable,
    Discovery,
    TopologyError,
    build_document,
    report,
    to_yaml,
)
from tests.topology.captures import body

pytest.importorskip("yaml")
np = pytest.importorskip("numpy")


def load(tmp_path, text: str):
    from fabricscope.sim.custom import load_topology

    f = tmp_path / "t.yaml"
    f.write_text(text)
    return load_topology(f)


def test_ndr_fabric_becomes_a_rail_optimized_two_tier_graph(tmp_path) -> None:
    disc = from_ibnetdiscover(parse_ibnetdiscover(body("ibnetdiscover_ndr_dgx_fabric.txt")))
    doc = build_document(disc)
    # 109 hosts have all 4 of their compute NICs named and cabled; the others are listed, not guessed
    assert (doc["nodes"], doc["nics_per_node"], doc["nic_rate"]) == (109, 4, "400G")
    assert any("82 host(s) with other than 4" in w for w in disc.warnings)
    assert any("69 adapter(s) still carry the vendor's NodeDescription" in w for w in disc.warnings)
    assert disc.ignored == {"SHARP aggregation node(s) (adapters inside switches)": 40}
    spines = [s for s in doc["switches"] if "SPINE" in s]
    assert len(spines) == 9 and len(doc["switches"]) == 37
    # rail optimized: each NIC of a node sits on its own leaf
    host = doc["hosts"].index("a07-p1-dgx-03-c05")
    leaves = [s for s, entries in doc["attach"].items() for e in entries if _covers(e, host)]
    assert len(leaves) == 4 and all("LEAF" in leaf for leaf in leaves)
    # parallel cables are counted: two 400G cables from most leaves to each spine
    first = doc["links"][0]
    assert (first["a"], first["b"], first["rate"], first["count"]) == (
        "A09-P1-IBLEAF-01-02",
        "A10-P1-IBSPINE-02",
        "400G",
        2,
    )
    topo = load(tmp_path, to_yaml(doc, disc))
    assert topo.nodes == 109 and topo.params["hosts"][host] == "a07-p1-dgx-03-c05"
    assert topo.fabric.describe() == {
        "switches": 37,
        "switch_links": sum(x.get("count", 1) for x in doc["links"]),
    }


def _covers(entry, node: int) -> bool:
    text = str(entry).split("/")[0]
    lo, _, hi = text.partition("-")
    return int(lo) <= node <= int(hi or lo)


def test_man_example_flags_the_1x_cable_and_keeps_it(tmp_path) -> None:
    disc = from_ibnetdiscover(parse_ibnetdiscover(body("ibnetdiscover_sdr_man_example.txt")))
    doc = build_document(disc)
    assert doc["links"] == [
        {"a": "ISR9024 Voltaire", "b": "SW-6IB4 Voltaire", "rate": "2.5G"},
        {"a": "ISR9024 Voltaire", "b": "SW-6IB4 Voltaire", "rate": "10G"},
    ]
    assert any(
        "switch cable ISR9024 Voltaire[10] - SW-6IB4 Voltaire[1] runs at 1xSDR" in w for w in disc.warnings
    )
    # the dual-ported HCA has 2 cabled ports where the others have 1
    assert any("0008f10403960558 (2)" in w for w in disc.warnings)
    assert load(tmp_path, to_yaml(doc, disc)).nodes == 3


def test_lab_lldp_captures_make_the_lab_leaf_spine() -> None:
    h1 = NodeLldp("h1", tuple(parse_lldpctl(body("lldpctl_json_lab_host_h1.txt"))), {"eth0": 1e8})
    h3 = NodeLldp("h3", tuple(parse_lldpctl(body("lldpctl_keyvalue_lab_host_h3.txt"))), {"eth0": 1e8})
    tables = {
        "leaf1": tuple(parse_lldpctl(body("lldpctl_json_lab_switch_leaf1.txt"))),
        "spine": tuple(parse_lldpctl(body("lldpctl_keyvalue_lab_switch_spine.txt"))),
    }
    disc = from_lldp([h1, h3], tables)
    assert [(a.host, a.nic, a.switch, a.switch_port, a.rate_bps) for a in disc.attachments] == [
        ("h1", "eth0", "leaf1", "h1", 1e8),
        ("h3", "eth0", "leaf2", "h3", 1e8),
    ]
    # leaf1's table and the spine's both list the leaf1-spine cable: it is kept once
    assert sorted((c.a, c.b, c.a_port, c.b_port) for c in disc.cables) == [
        ("leaf1", "spine", "leaf1-up", "spine-l1"),
        ("leaf2", "spine", "leaf2-up", "spine-l2"),
    ]
    # h2 is in leaf1's table but not in the job
    assert disc.ignored == {"switch port(s) facing hosts outside the job": 1}
    doc = build_document(disc)
    assert doc["attach"] == {"leaf1": [0], "leaf2": [1]} and doc["switches"] == ["leaf1", "leaf2", "spine"]


def test_hosts_only_lldp_gets_a_named_assumed_core() -> None:
    cumulus = NodeLldp("srv1", tuple(parse_lldpctl(body("lldpctl_keyvalue_cumulus_two_switches.txt"))))
    juniper = NodeLldp("srv2", tuple(parse_lldpctl(body("lldpctl_keyvalue_juniper_port_local.txt"))))
    disc = from_lldp([cumulus, juniper])
    doc = build_document(disc, BuildOptions(uplink_rate_bps=25e9))
    assert doc["nodes"] == 2 and doc["nics_per_node"] == 2
    assert ASSUMED_CORE in doc["switches"] and all(
        ASSUMED_CORE in (link["a"], link["b"]) and link["rate"] == "25G" for link in doc["links"]
    )
    assert len(doc["links"]) == 4  # one uplink per leaf
    assert any("no switch-to-switch cable was seen" in w for w in disc.warnings)


def _disc(attachments, cables=()) -> Discovery:
    return Discovery("test", "t", [Attachment(*a) for a in attachments], [Cable(*c) for c in cables])


def test_attach_lists_are_compact_and_slow_nodes_kept(tmp_path) -> None:
    att = [
        (f"n{i}", f"mlx5_{k}", f"rail{k}", str(i), 400e9 if i != 5 else 200e9)
        for i in range(8)
        for k in range(2)
    ]
    att += [("n9", "mlx5_0", "rail0", "9", 400e9), ("n9", "mlx5_1", "rail0", "10", 400e9)]
    disc = _disc(att, [("rail0", "spine", None, None, 400e9), ("rail1", "spine", None, None, 400e9)])
    doc = build_document(disc)
    assert doc["attach"] == {"rail0": [8, "0-7/0"], "rail1": ["0-7/1"]}
    assert doc["node_nic_rate"] == {5: "200G"} and doc["hosts"][8] == "n9"
    topo = load(tmp_path, to_yaml(doc, disc))
    assert topo.node.nics_per_node == 2 and topo.nodes == 9


def test_rail_only_fabric_is_not_joined() -> None:
    disc = _disc([(f"h{i}", f"eth{k}", f"rail{k}", None, 1e9) for i in range(1, 4) for k in range(2)])
    doc = build_document(disc)
    assert doc["links"] == [] and doc["switches"] == ["rail0", "rail1"]
    assert any("2 separate rails" in w for w in disc.warnings)


def test_unconnected_pieces_are_an_error() -> None:
    disc = _disc(
        [("a", "eth0", "s1", None, 1e9), ("b", "eth0", "s2", None, 1e9), ("c", "eth0", "s3", None, 1e9)],
        [("s1", "s2", None, None, 1e9)],
    )
    with pytest.raises(TopologyError, match="2 unconnected pieces"):
        build_document(disc)


def test_nothing_usable_is_an_error() -> None:
    with pytest.raises(TopologyError, match="no host is cabled"):
        build_document(_disc([]))
    with pytest.raises(TopologyError, match="no NIC rate"):
        build_document(_disc([("a", "eth0", "s1", None, None)]))
    with pytest.raises(TopologyError, match="no host has 3"):
        build_document(_disc([("a", "eth0", "s1", None, 1e9)]), BuildOptions(nics_per_node=3))


def test_report_carries_every_port() -> None:
    disc = from_lldp(
        [NodeLldp("h3", tuple(parse_lldpctl(body("lldpctl_keyvalue_lab_host_h3.txt"))), {"eth0": 1e8})]
    )
    doc = build_document(disc)
    rep = report(doc, disc)
    assert rep["schema"] == "fabricscope.topology/v1"
    assert rep["attachments"] == [
        {"host": "h3", "nic": "eth0", "switch": "leaf2", "switch_port": "h3", "rate_gbps": 0.1}
    ]


def test_a_lab_plan_simulates_like_the_built_in_leaf_spine(tmp_path) -> None:
    """The file written for a lab gives the simulator's own leaf-spine answer (docs/sim.md, the lab table)."""
    from fabricscope.lab.fabric import LabState
    from fabricscope.lab.spec import LabSpec
    from fabricscope.sim.scenario import run_collective
    from fabricscope.topology.lab import from_lab

    spec = LabSpec(
        name="ls",
        topology="leaf-spine",
        hosts=8,
        hosts_per_leaf=4,
        link_rate_bps=200_000_000,
        oversubscription=4.0,
    )
    disc = from_lab(LabState(spec))
    doc = build_document(disc)
    assert doc["attach"] == {"leaf1": ["0-3"], "leaf2": ["4-7"]} and doc["nic_rate"] == "200M"
    f = tmp_path / "ls.yaml"
    f.write_text(to_yaml(doc, disc))
    common = {
        "gpus_per_node": 1,
        "gpu": "none",
        "nic_rate": "200mbit",
        "transport": "tcp",
        "framing": "tbf",
        "size": "4M",
        "node_order": "h1,h5,h2,h6,h3,h7,h4,h8",
    }
    found = run_collective({**common, "topology_file": str(f)})
    built_in = run_collective(
        {**common, "topology": "leaf-spine", "nodes": 8, "hosts_per_leaf": 4, "oversubscription": "4:1"}
    )
    assert found["busbw_GBps"] == pytest.approx(built_in["busbw_GBps"], rel=1e-9)
    assert found["busbw_GBps"] == pytest.approx(
        0.00598, rel=0.01
    )  # the model column of docs/sim.md's lab table
