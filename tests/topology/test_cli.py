"""`fabricscope topology discover|show` end to end, as subprocesses, on the captures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.topology.captures import body, path

pytest.importorskip("yaml")
pytest.importorskip("numpy")


def fs(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args], capture_output=True, text=True, input=stdin, timeout=300
    )


def test_discover_ibnetdiscover_file_then_the_simulator_runs_it(tmp_path: Path) -> None:
    out = tmp_path / "fabric.yaml"
    proc = fs(
        "topology",
        "discover",
        f"ibnetdiscover:{path('ibnetdiscover_ndr_dgx_fabric.txt')}",
        "-o",
        str(out),
        "--gpu",
        "h100",
    )
    assert proc.returncode == 0, proc.stderr
    assert "109 node(s) x 4 NIC(s), 37 switch(es)" in proc.stderr and "note: 82 host(s)" in proc.stderr
    assert out.read_text().startswith("# discovered by fabricscope topology discover from ibnetdiscover")
    sim = fs("sim", "collective", "--topology-file", str(out), "--size", "1G", "--transport", "ib", "--json")
    assert sim.returncode == 0, sim.stderr
    doc = json.loads(sim.stdout)
    assert doc["ranks"] == 436 and doc["model"]["topology"]["hosts"][0] == "a06-p1-dgx-02-c01"
    assert doc["busbw_GBps"] > 0


def test_discover_from_stdin_and_json(tmp_path: Path) -> None:
    proc = fs(
        "topology", "discover", "ibnetdiscover:-", "--json", stdin=body("ibnetdiscover_sdr_man_example.txt")
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.topology/v1" and doc["topology"]["nodes"] == 3
    ports = {(c["a"], c["a_port"], c["b"], c["b_port"], c["rate_gbps"]) for c in doc["cables"]}
    assert ("SW-6IB4 Voltaire", "1", "ISR9024 Voltaire", "10", 2.5) in ports or (
        "ISR9024 Voltaire",
        "10",
        "SW-6IB4 Voltaire",
        "1",
        2.5,
    ) in ports


def test_discover_lldp_files_with_host_names(tmp_path: Path) -> None:
    files = ",".join(
        [
            f"srv1={path('lldpctl_keyvalue_cumulus_two_switches.txt')}",
            f"srv2={path('lldpctl_keyvalue_juniper_port_local.txt')}",
        ]
    )
    out = tmp_path / "eth.yaml"
    proc = fs("topology", "discover", f"lldp:{files}", "-o", str(out), "--uplink-rate", "40G")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "hosts: [srv1, srv2]" in text and "assumed-core" in text and "rate: 40G" in text
    assert (
        fs("sim", "collective", "--topology-file", str(out), "--size", "64M", "--transport", "tcp").returncode
        == 0
    )


def test_show_prints_the_tree_and_draws(tmp_path: Path) -> None:
    out = tmp_path / "fabric.yaml"
    assert (
        fs(
            "topology",
            "discover",
            f"ibnetdiscover:{path('ibnetdiscover_ndr_dgx_fabric.txt')}",
            "-o",
            str(out),
        ).returncode
        == 0
    )
    svg = tmp_path / "fabric.svg"
    proc = fs(
        "topology",
        "show",
        str(out),
        "--svg",
        str(svg),
        "--no-hosts",
        "--highlight",
        "A09-P1-IBLEAF-01-03,A10-P1-IBSPINE-02",
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "infiniband: 109 host(s) x 4 NIC(s) at 400Gbit/s, 37 switch(es) in 2 tier(s)"
    assert "tier 2 (spines): 9 switch(es)" in lines and "tier 1 (leaves): 28 switch(es)" in lines
    assert any(
        line.split()
        == [
            "A09-P1-IBLEAF-01-03",
            "18",
            "NIC(s)",
            "of",
            "18",
            "host(s),",
            "down",
            "7.2T,",
            "up",
            "6.4T",
            "on",
            "16",
            "cable(s),",
            "1.12:1",
        ]
        for line in lines
    )
    drawing = svg.read_text()
    # 37 switches: laid out by Graphviz when it is installed (class "edge cable suspect"), else drawn by hand
    assert drawing.startswith('<svg class="topology"')
    assert drawing.count('class="cable suspect"') + drawing.count('class="edge cable suspect"') == 1
    # the capture's leaves do not all have their 18 uplinks: show names the ones short of cables
    assert (
        "note: A09-P1-IBLEAF-01-02 has 14 uplink cable(s) where 17 of the 28 tier-1 switches have 18" in lines
    )
    view = json.loads(fs("topology", "show", str(out), "--json").stdout)
    assert view["schema"] == "fabricscope.topology-view/v1" and len(view["switches"]) == 37
    assert len(view["notes"]) == 11


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("discover", "ibnetdiscover:/no/such/file"), "cannot read /no/such/file"),
        (("discover", "frobnicate"), "unknown source 'frobnicate'"),
        (("discover", "lldp:/etc/hostname"), "not lldpctl output"),
        (("discover", "lab:nosuchlab"), "no lab named 'nosuchlab'"),
        (("discover", "ibnetdiscover:x", "--launch", "local:2"), "--launch gathers live LLDP readings"),
        (("show", "/no/such.yaml"), "cannot read topology file"),
        (("discover", "lldp:a", "--nic-rate", "fast"), "--nic-rate"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FABRICSCOPE_LAB_DIR", str(tmp_path / "labs"))
    proc = fs("topology", *args)
    assert proc.returncode == 2, proc.stderr
    assert (
        message in proc.stderr
        and len(proc.stderr.strip().splitlines()) == 1
        and "Traceback" not in proc.stderr
    )


def test_garbage_ibnetdiscover_and_bad_highlight(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("this is not ibnetdiscover output\n")
    proc = fs("topology", "discover", f"ibnetdiscover:{junk}")
    assert proc.returncode == 2 and "no ibnetdiscover node found" in proc.stderr
    out = tmp_path / "t.yaml"
    assert (
        fs(
            "topology",
            "discover",
            f"ibnetdiscover:{path('ibnetdiscover_sdr_man_example.txt')}",
            "-o",
            str(out),
        ).returncode
        == 0
    )
    bad = fs("topology", "show", str(out), "--highlight", "nosuch,ISR9024 Voltaire")
    assert bad.returncode == 2 and "no such switch or host" in bad.stderr
    family = tmp_path / "family.yaml"
    family.write_text("kind: fat-tree\nnodes: 16\n")
    assert "not cabling" in fs("topology", "show", str(family)).stderr
