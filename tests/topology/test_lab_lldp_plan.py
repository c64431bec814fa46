"""Which lldpd instances a lab runs and how each is started (no root: a recording runner)."""

from __future__ import annotations

from fabricscope.lab import lldp
from fabricscope.lab.plan import build_plan
from fabricscope.lab.runner import RecordingRunner
from fabricscope.lab.spec import LabSpec


def test_one_lldpd_per_switch_on_its_bridge_ports_and_one_per_host() -> None:
    plan = build_plan(LabSpec(name="x", topology="leaf-spine", hosts=4, hosts_per_leaf=2, lldp=True))
    got = {(i.name, i.namespace, i.interfaces, i.chassis_interfaces, i.role) for i in lldp.instances(plan)}
    assert got == {
        ("leaf1", "fsl-x-fab", ("h1", "h2", "leaf1-up"), ("h1",), "switch"),
        ("leaf2", "fsl-x-fab", ("h3", "h4", "leaf2-up"), ("h3",), "switch"),
        ("spine", "fsl-x-fab", ("spine-l1", "spine-l2"), ("spine-l1",), "switch"),
        *{(f"h{i}", f"fsl-x-h{i}", ("eth0",), ("eth0",), "host") for i in range(1, 5)},
    }
    rail = build_plan(LabSpec(name="r", topology="rail", hosts=2, rails=2))
    assert [i.interfaces for i in lldp.instances(rail) if i.role == "host"] == [
        ("eth0", "eth1"),
        ("eth0", "eth1"),
    ]


def test_start_command_and_config(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(lldp, "RUN_DIR", tmp_path)
    plan = build_plan(LabSpec(name="x", topology="leaf-spine", hosts=2, hosts_per_leaf=1))
    runner = RecordingRunner(tools=("ip", "lldpd", "lldpctl"))
    (lldp.folder("x")).mkdir()
    leaf1 = next(i for i in lldp.instances(plan) if i.name == "leaf1")
    lldp._start(runner, "x", leaf1)
    assert runner.calls == [
        (
            "ip",
            "netns",
            "exec",
            "fsl-x-fab",
            "lldpd",
            "-u",
            f"{tmp_path}/x/leaf1.sock",
            "-p",
            f"{tmp_path}/x/leaf1.pid",
            "-I",
            "h1,leaf1-up",
            "-C",
            "h1",
            "-O",
            f"{tmp_path}/x/leaf1.conf",
        )
    ]
    assert (
        tmp_path / "x/leaf1.conf"
    ).read_text() == "configure system hostname leaf1\nconfigure lldp tx-interval 1\n"
    assert lldp.socket_template("x") == f"{tmp_path}/x/{{host}}.sock"


def test_lldp_without_lldpd_installed_is_one_clear_error() -> None:
    import pytest

    from fabricscope.lab.spec import LabError

    with pytest.raises(LabError, match="install the Debian package lldpd"):
        lldp.require(RecordingRunner(tools=("ip", "tc")))
