"""bench matrix --topology on a real lab leaf-spine: a shaped uplink is named, not its hosts; with
a slow host planted at the same time, both are named, this time on the fabric the ranks discover
from real LLDP (lldpd on every switch and host) (root, lldpd; CI runs it; about 1.5 minutes).

Three leaves (8 hosts, 3 per leaf: leaf1 h1-h3, leaf2 h4-h6, leaf3 h7-h8) under one spine: with
two leaves every cross-leaf flow crosses both uplinks, and the matrix cannot tell them apart
(tests/collective/test_matrix_topology.py holds that it says so). Links at 200 Mbit/s, so 4
concurrent flows are not CPU-bound on a 2-core machine; the uplink at 50 Mbit/s, h3 at 30.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import require_torch, skip_unless_ci
from tests.lab import conftest as lab_fixtures
from tests.lab.conftest import fs

pytestmark = pytest.mark.slow

lab_dir = lab_fixtures.lab_dir
make_lab = lab_fixtures.make_lab


@pytest.fixture(autouse=True)
def _needs_lldpd_and_torch() -> None:
    """The ranks meet through torch's TCPStore; the second run discovers the fabric from lldpd."""
    require_torch()
    if not (shutil.which("lldpd") and shutil.which("lldpctl")):
        skip_unless_ci("needs lldpd and lldpctl (Debian package lldpd)")


def _matrix(name: str, topology: str) -> dict:
    proc = fs(
        "bench",
        "matrix",
        "--launch",
        f"lab:{name}",
        "--topology",
        topology,
        "--duration",
        "0.5",
        "--warmup",
        "0.1",
        "--no-rdma",
        "--json",
        "--no-store",
        "--timeout",
        "60",
        timeout=400,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1: a confirmed suspect
    return json.loads(proc.stdout)


def test_matrix_names_the_shaped_uplink_then_the_uplink_and_a_slow_host(make_lab) -> None:
    make_lab(
        "tomo",
        "--topology",
        "leaf-spine",
        "--hosts",
        "8",
        "--hosts-per-leaf",
        "3",
        "--link-rate",
        "200mbit",
        "--lldp",
    )
    assert fs("lab", "set", "tomo", "leaf2", "--link-rate", "50mbit").returncode == 0
    doc = _matrix("tomo", "lab:tomo")
    assert [(s["kind"], s["host"], s["peer"]) for s in doc["suspects"]] == [("link", "leaf2", "spine")], doc[
        "suspects"
    ]
    link = doc["suspects"][0]
    assert link["link"] == ["leaf2", "spine"] and link["confirmed"] is True
    assert link["reason"] == "leaf2 -> spine uplink: 30 of 30 flows through it slow, no good flow through it"
    assert doc["topology"]["switches"] == ["leaf1", "leaf2", "leaf3", "spine"]

    assert fs("lab", "set", "tomo", "h3", "--link-rate", "30mbit").returncode == 0
    doc = _matrix("tomo", "discover")  # each rank's lldpctl, the lab's switch tables
    assert doc["params"]["topology"] == "discover" and doc["topology"]["switches"] == [
        "leaf1",
        "leaf2",
        "leaf3",
        "spine",
    ]
    named = [(s["kind"], s["host"], s["peer"]) for s in doc["suspects"]]
    assert named == [("host", "h3", None), ("link", "leaf2", "spine")], doc["suspects"]
    assert all(s["confirmed"] is True for s in doc["suspects"])
    assert (
        doc["suspects"][0]["reason"]
        == "14 of 14 of its flows slow, none good (the host itself or its NIC cable to leaf1)"
    )
