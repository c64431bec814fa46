"""The host model's ibnetdiscover and lldpctl parsers, on real captures (tests/data/topology)."""

from __future__ import annotations

from collections import Counter

import pytest

from fabricscope.host.ibnetdiscover import link_rate_gbps, parse_ibnetdiscover
from fabricscope.host.lldp import mau_speed_bps, parse_lldpctl, parse_lldpctl_json, parse_lldpctl_keyvalue
from tests.topology.captures import CAPTURES, body


def test_every_capture_names_its_source() -> None:
    for p in sorted(CAPTURES.glob("*.txt")):
        first = p.read_text().splitlines()[0]
        assert first.startswith("# source: ") and len(first) > 30, p.name


def test_ibnetdiscover_ndr_fabric_nodes_and_links() -> None:
    fabric = parse_ibnetdiscover(body("ibnetdiscover_ndr_dgx_fabric.txt"))
    assert fabric.problems == ()
    assert len(fabric.of_kind("switch")) == 40 and len(fabric.of_kind("ca")) == 582
    # every cable is printed from both ends; each is kept once
    assert len(fabric.links) == 1114
    assert Counter((link.width, link.speed, link.rate_gbps) for link in fabric.links) == {
        (4, "NDR", 400.0): 1114
    }
    leaf = fabric.nodes["S-2c5eab0300b87b40"]
    assert (leaf.kind, leaf.ports, leaf.lid) == ("switch", 65, 73)
    assert leaf.description == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    ca = fabric.nodes["H-e09d7303007a5a68"]
    assert (ca.kind, ca.description) == ("ca", "a08-p1-dgx-04-c17 mlx5_5")
    to_ca = [link for link in fabric.links if "H-e09d7303007a5a68" in (link.a.guid, link.b.guid)]
    assert len(to_ca) == 1 and to_ca[0].other("H-e09d7303007a5a68").port == 17


def test_ibnetdiscover_man_page_example_keeps_the_slower_end() -> None:
    fabric = parse_ibnetdiscover(body("ibnetdiscover_sdr_man_example.txt"))
    assert len(fabric.of_kind("switch")) == 2 and len(fabric.of_kind("ca")) == 4
    assert len(fabric.links) == 7
    # the example's two ends of two cables disagree (4xSDR vs 1xSDR): the link is what the slower says
    assert sorted(link.rate_gbps for link in fabric.links) == [2.5, 2.5, 10, 10, 10, 10, 10]
    assert len(fabric.problems) == 2 and all("using 1xSDR" in p for p in fabric.problems)


def test_ibnetdiscover_truncated_and_garbage() -> None:
    head = "\n".join(body("ibnetdiscover_ndr_dgx_fabric.txt").splitlines()[:13])  # the first switch, 3 ports
    fabric = parse_ibnetdiscover(head)
    # the peers of a switch whose own blocks were cut off are still known, by their port lines
    assert fabric.nodes["H-e09d7303007a4bd8"].description == "a08-p1-dgx-04-c01 mlx5_5"
    assert len(fabric.links) == 3 and len(fabric.nodes) == 4
    junk = parse_ibnetdiscover(
        "ibwarn: [123] mad_rpc_open_port: can't open UMAD port ((null):0)\nsomething else\n"
    )
    assert junk.nodes == {} and junk.links == () and len(junk.problems) == 1


@pytest.mark.parametrize(
    ("width", "speed", "gbps"),
    [
        (4, "NDR", 400),
        (2, "NDR", 200),
        (4, "HDR", 200),
        (4, "EDR", 100),
        (4, "FDR", 56),
        (4, "QDR", 40),
        (1, "SDR", 2.5),
        (4, None, None),
    ],
)
def test_link_rates_are_ibstat_rates(width, speed, gbps) -> None:
    assert link_rate_gbps(width, speed) == gbps


def test_keyvalue_cumulus_two_switches() -> None:
    eno1, eno2 = parse_lldpctl_keyvalue(body("lldpctl_keyvalue_cumulus_two_switches.txt"))
    assert (eno1.interface, eno1.switch, eno1.port, eno1.port_id_type) == (
        "eno1",
        "toto-chassis.dc42",
        "swp46",
        "ifname",
    )
    assert eno1.capabilities == ("Bridge", "Router") and eno1.is_switch is True
    assert eno1.speed_bps == 10e9 and eno1.mgmt_ips == ("10.160.20.18", "fe80::e6f0:4ff:feb6:4732")
    # the capture's eno2d1 block has no name of its own: the switch is known by its chassis MAC
    assert (eno2.interface, eno2.chassis_name, eno2.switch) == ("eno2d1", None, "e4:f0:04:b6:4e:32")


def test_keyvalue_port_local_and_multiline() -> None:
    eth0, eth1 = parse_lldpctl_keyvalue(body("lldpctl_keyvalue_juniper_port_local.txt"))
    # Juniper sends its SNMP index as a local port ID; the name is in the description
    assert (eth0.port_id, eth0.port_id_type, eth0.port) == ("512", "local", "xe-0/0/1")
    assert (eth1.switch, eth1.speed_bps) == ("sw-filer-f05.dc42", None)
    (cisco,) = parse_lldpctl_keyvalue(body("lldpctl_keyvalue_cisco_multiline.txt"))
    assert (cisco.switch, cisco.port, cisco.speed_bps) == ("s35-b12.dc3", "Gi1/0/29", 1e9)
    assert cisco.capabilities == ("Bridge",)
    (bare,) = parse_lldpctl_keyvalue(body("lldpctl_keyvalue_minimal.txt"))
    assert (bare.switch, bare.port, bare.is_switch) == ("s120-f3-2.itx4", "RJ-9", None)


def test_json_lab_host_and_switch() -> None:
    (h1,) = parse_lldpctl_json(body("lldpctl_json_lab_host_h1.txt"))
    assert (h1.interface, h1.switch, h1.port, h1.port_id_type, h1.is_switch) == (
        "eth0",
        "leaf1",
        "h1",
        "mac",
        True,
    )
    leaf1 = parse_lldpctl_json(body("lldpctl_json_lab_switch_leaf1.txt"))
    assert [(n.interface, n.switch, n.port, n.is_switch) for n in leaf1] == [
        ("h1", "h1", "eth0", False),
        ("h2", "h2", "eth0", False),
        ("leaf1-up", "spine", "spine-l1", True),
    ]


def test_json_and_keyvalue_say_the_same() -> None:
    spine = parse_lldpctl(body("lldpctl_keyvalue_lab_switch_spine.txt"))
    assert [(n.interface, n.switch, n.port, n.capabilities) for n in spine] == [
        ("spine-l1", "leaf1", "leaf1-up", ("Bridge",)),
        ("spine-l2", "leaf2", "leaf2-up", ("Bridge",)),
    ]
    (h3,) = parse_lldpctl(body("lldpctl_keyvalue_lab_host_h3.txt"))
    (h1,) = parse_lldpctl(body("lldpctl_json_lab_host_h1.txt"))
    assert (h3.switch, h3.port, h3.chassis_id_type, h3.mau) == ("leaf2", "h3", h1.chassis_id_type, h1.mau)


@pytest.mark.parametrize("text", ['{"lldp": {}}', '{"lldp": [{}]}', ""])
def test_no_neighbour_is_an_empty_list(text) -> None:
    assert parse_lldpctl(text) == []


@pytest.mark.parametrize("text", ["not lldp at all", '{"other": 1}', "[1, 2", '{"lldp": 3}'])
def test_garbage_is_none(text) -> None:
    assert parse_lldpctl(text) is None


def test_json_forms_lldpd_writes() -> None:
    # one interface: a mapping, not a list; a chassis without a system name: the bare id mapping
    single = (
        '{"lldp": {"interface": {"eth0": {"via": "LLDP", "chassis": {"id": {"type": "mac", "value": "44:94:fc:9d:55:0a"}}, '
        '"port": {"id": {"type": "local", "value": "g17"}}}}}}'
    )
    (n,) = parse_lldpctl(single)
    assert (n.switch, n.port, n.chassis_name) == ("44:94:fc:9d:55:0a", "g17", None)
    json0 = (
        '{"lldp": [{"interface": [{"name": "eth0", "via": "LLDP", "chassis": [{"id": [{"type": "mac", "value": "aa"}], '
        '"name": [{"value": "leaf9"}]}], "port": [{"id": [{"type": "ifname", "value": "swp1"}]}]}]}]}'
    )
    (m,) = parse_lldpctl(json0)
    assert (m.interface, m.switch, m.port) == ("eth0", "leaf9", "swp1")


@pytest.mark.parametrize(
    ("mau", "bps"),
    [
        ("10GigBaseLR - R fiber over 1310 nm optics", 1e10),
        ("1000BaseTFD - Four-pair", 1e9),
        ("100GbaseCR10 - 100GBASE-R PCS/PMA", 1e11),
        ("unknown", None),
        (None, None),
    ],
)
def test_mau_speeds(mau, bps) -> None:
    assert mau_speed_bps(mau) == bps
