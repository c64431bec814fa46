"""Discovery on real LLDP frames: a lab leaf-spine with lldpd on every switch and host (root,
lldpd and torch; required under CI=true, which installs them)."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import require_torch, skip_unless_ci
from tests.lab.conftest import fs, lab_available

pytest.importorskip("yaml")
pytest.importorskip("numpy")


def _structure(doc: dict) -> tuple:
    links = sorted((x["a"], x["b"], x.get("count", 1)) for x in doc["links"])
    return doc["nodes"], doc["nics_per_node"], doc["hosts"], doc["switches"], doc["attach"], links


def test_lldp_discovery_in_a_lab_is_the_lab(tmp_path, monkeypatch) -> None:
    import yaml

    lab_available()
    if not (shutil.which("lldpd") and shutil.which("lldpctl")):
        skip_unless_ci("needs lldpd and lldpctl (Debian package lldpd)")
    require_torch()
    monkeypatch.setenv("FABRICSCOPE_LAB_DIR", str(tmp_path / "labs"))
    name = "ttopo"
    up = fs(
        "lab",
        "up",
        "--name",
        name,
        "--topology",
        "leaf-spine",
        "--hosts",
        "6",
        "--hosts-per-leaf",
        "3",
        "--link-rate",
        "100mbit",
        "--oversubscription",
        "3:1",
        "--lldp",
    )
    try:
        assert up.returncode == 0, up.stderr
        seen, planned = tmp_path / "lldp.yaml", tmp_path / "plan.yaml"
        proc = fs(
            "topology",
            "discover",
            "lldp",
            "--launch",
            f"lab:{name}",
            "-o",
            str(seen),
            "--timeout",
            "60",
            timeout=240,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert fs("topology", "discover", f"lab:{name}", "-o", str(planned)).returncode == 0
        lldp_doc, plan_doc = yaml.safe_load(seen.read_text()), yaml.safe_load(planned.read_text())
        # the cabling LLDP saw is the cabling the lab built: hosts per leaf, every uplink, nothing more
        assert _structure(lldp_doc) == _structure(plan_doc)
        assert lldp_doc["attach"] == {"leaf1": ["0-2"], "leaf2": ["3-5"]}
        assert sorted((x["a"], x["b"]) for x in lldp_doc["links"]) == [("leaf1", "spine"), ("leaf2", "spine")]
        # LLDP reports what the NICs negotiated (veth: 10G); the lab's shaping is in its plan
        assert lldp_doc["nic_rate"] == "10G" and plan_doc["nic_rate"] == "100M"
        sim = fs(
            "sim",
            "collective",
            "--topology-file",
            str(planned),
            "--size",
            "4M",
            "--transport",
            "tcp",
            "--framing",
            "tbf",
        )
        assert sim.returncode == 0, sim.stderr
        again = fs(
            "lab",
            "up",
            "--name",
            name,
            "--topology",
            "leaf-spine",
            "--hosts",
            "6",
            "--hosts-per-leaf",
            "3",
            "--link-rate",
            "100mbit",
            "--oversubscription",
            "3:1",
            "--lldp",
        )
        # idempotent: every lldpd still answers, nothing is started twice
        assert again.returncode == 0 and "already up, unchanged" in again.stdout, again.stdout + again.stderr
    finally:
        down = fs("lab", "down", name)
    assert down.returncode == 0, down.stderr
    from fabricscope.lab import lldp

    assert not lldp.folder(name).exists()
