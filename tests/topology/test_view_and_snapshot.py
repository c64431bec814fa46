"""Reading a topology back (tiers, loads), drawing it, and carrying the commands in snapshots."""

from __future__ import annotations

import json
import tarfile

import pytest

from fabricscope.host import Root, read_inventory
from fabricscope.host.snapshot import take_snapshot
from fabricscope.report.topology import topology_html, topology_svg
from fabricscope.topology import sources
from fabricscope.topology.lldp import from_lldp
from fabricscope.topology.view import switch_loads, view_from_document
from tests.topology.captures import body

pytest.importorskip("yaml")

LAB_DOC = {
    "name": "lab-ls",
    "nodes": 4,
    "gpus_per_node": 1,
    "nics_per_node": 1,
    "gpu": "none",
    "nic_rate": "200M",
    "hosts": ["h1", "h2", "h3", "h4"],
    "switches": ["leaf1", "leaf2", "spine"],
    "links": [
        {"a": "leaf1", "b": "spine", "rate": "100M"},
        {"a": "leaf2", "b": "spine", "rate": "50M", "count": 2},
    ],
    "attach": {"leaf1": ["0-1"], "leaf2": [2, 3]},
    "node_nic_rate": {3: "100M"},
}


def test_tiers_and_oversubscription() -> None:
    view = view_from_document(LAB_DOC)
    assert view.tiers == {"leaf1": 1, "leaf2": 1, "spine": 2}
    loads = {s.switch: s for s in switch_loads(view)}
    assert (loads["leaf1"].down_bps, loads["leaf1"].up_bps, loads["leaf1"].ratio) == (400e6, 100e6, 4.0)
    assert (loads["leaf2"].down_bps, loads["leaf2"].up_cables, loads["leaf2"].ratio) == (300e6, 2, 3.0)
    assert (loads["spine"].down_bps, loads["spine"].up_bps, loads["spine"].ratio) == (200e6, 0.0, None)


def test_svg_marks_highlighted_links_and_escapes_names() -> None:
    doc = {**LAB_DOC, "hosts": ["h1", "<h2>", "h3", "h4"]}
    view = view_from_document(doc)
    svg = topology_svg(view, highlight=[("spine", "leaf2"), ("<h2>", "leaf1")])
    assert svg.count('class="cable suspect"') == 1 and svg.count('class="nic suspect"') == 1
    assert "<h2>" not in svg and "&lt;h2&gt;" in svg
    assert svg.count('class="sw"') == 3 and svg.count('class="host"') == 4
    html = topology_html(view, title="Suspects")
    assert html.startswith('<section class="topology"><h2>Suspects</h2><svg')
    assert 'class="cable suspect"' not in html


def _fake_host(tmp_path, commands: dict[tuple[str, ...], str]):
    root = tmp_path / "node"
    (root / "cmd").mkdir(parents=True)
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/hostname").write_text("h3\n")
    index = []
    for i, (argv, text) in enumerate(commands.items()):
        (root / "cmd" / f"{i}.out").write_text(text)
        index.append({"argv": list(argv), "stdout": f"{i}.out", "rc": 0})
    (root / "cmd/index.json").write_text(json.dumps(index))
    return root


def test_inventory_and_snapshots_carry_lldpctl(tmp_path) -> None:
    host = _fake_host(tmp_path, {("lldpctl", "-f", "json"): body("lldpctl_json_lab_host_h1.txt")})
    inv = read_inventory(Root.at(host))
    assert [(n.interface, n.switch) for n in inv.lldp] == [("eth0", "leaf1")]
    archive, recording = take_snapshot(Root.at(host), tmp_path / "snap.tar.gz")
    assert ("lldpctl", "-f", "json") in recording.commands
    nodes = sources.lldp_from_snapshots([str(archive)])
    assert [(n.host, [x.switch for x in n.neighbors]) for n in nodes] == [("h3", ["leaf1"])]
    assert from_lldp(nodes).attachments[0].switch == "leaf1"


def test_no_lldpd_is_no_problem_in_the_inventory(tmp_path) -> None:
    inv = read_inventory(Root.at(_fake_host(tmp_path, {})))
    assert inv.lldp is None and not [p for p in inv.problems if "lldpctl" in p.source]


def test_ibnetdiscover_capture_reads_back_the_same(tmp_path) -> None:
    host = _fake_host(tmp_path, {("ibnetdiscover",): body("ibnetdiscover_sdr_man_example.txt")})
    from fabricscope.host.root import Recording
    from fabricscope.host.snapshot import write_snapshot

    root = Root.at(host)
    root.recording = Recording()
    first = sources.ib_from_root(root)
    out = write_snapshot(root, root.recording, tmp_path / "ib.tar.gz")
    with tarfile.open(out) as tar:
        assert any(m.name.endswith("cmd/index.json") for m in tar.getmembers())
    again = sources.ib_from_root(Root.at(out))
    assert again.attachments == first.attachments and again.cables == first.cables


def test_a_ranks_reading_travels_whole(tmp_path) -> None:
    from fabricscope.jobs.launch import DistEnv
    from fabricscope.topology.gather import from_wire, gather, local_reading, to_wire

    host = _fake_host(
        tmp_path, {("lldpctl", "-u", "/run/x/h3.sock", "-f", "json"): body("lldpctl_json_lab_host_h1.txt")}
    )
    speed = host / "sys/class/net/eth0"
    speed.mkdir(parents=True)
    (speed / "speed").write_text("100000\n")
    reading = local_reading(Root.at(host), "h3", "/run/x/h3.sock")
    assert reading.nic_speeds_bps == {"eth0": 100e9} and reading.neighbors[0].switch == "leaf1"
    assert from_wire(json.loads(json.dumps(to_wire(reading)))) == reading
    alone = DistEnv(0, 1, 0, "127.0.0.1", 29500, "single")
    assert gather(alone, reading, 5.0) == [reading]


def test_a_node_without_lldpd_is_one_clear_error(tmp_path) -> None:
    from fabricscope.topology.gather import local_reading
    from fabricscope.topology.model import TopologyError

    with pytest.raises(TopologyError, match="h3: no LLDP reading"):
        local_reading(Root.at(_fake_host(tmp_path, {})), "h3")
