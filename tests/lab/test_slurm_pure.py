"""The lab's Slurm without root: the configuration it writes and the commands it runs (the traps of
running one slurmd per namespace on one machine are held here; tests/lab/test_slurm_lab.py runs it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.host import tempfiles
from fabricscope.lab import slurm
from fabricscope.lab.plan import build_plan
from fabricscope.lab.runner import RecordingRunner
from fabricscope.lab.spec import LabError, LabSpec

ALL_TOOLS = ("ip", "tc", "nft", *slurm.TOOLS)
NO_LEG = {("ip", "-o", "link", "show", "dev"): 'Device "fslsl" does not exist.'}  # the leg's name is free


def _started(tmp_path: Path, **spec) -> tuple[RecordingRunner, Path]:
    plan = build_plan(LabSpec(name="sl", hosts=3, slurm=True, **spec))
    runner = RecordingRunner(
        tools=ALL_TOOLS, responses={("env",): "h1 idle\nh2 idle\nh3 idle\n"}, failures=NO_LEG
    )
    folder = tmp_path / "slurm"
    folder.mkdir()
    hosts = {h.name: tmp_path / "netns" / h.namespace / "hosts" for h in plan.hosts}
    slurm.start(plan, runner, folder, hosts)
    return runner, folder


def test_conf_names_every_lab_host_at_its_lab_address(tmp_path: Path) -> None:
    plan = build_plan(LabSpec(name="sl", topology="rail", rails=2, hosts=3, slurm=True))
    text = slurm.conf_text(plan, tmp_path)
    lines = text.splitlines()
    assert "SlurmctldHost=ctl(198.18.0.254)" in lines
    for host in plan.hosts:
        assert f"NodeName={host.name} NodeAddr={host.address} CPUs=1 RealMemory=1000 State=UNKNOWN" in lines
    assert "PartitionName=lab Nodes=h1,h2,h3 Default=YES MaxTime=INFINITE State=UP" in lines
    assert f"AuthInfo=socket={tmp_path}/munge/munge.socket.2" in lines
    # every file Slurm writes stays in the lab's directory, and no cgroup plugin is asked for
    paths = [v for k, _, v in (ln.partition("=") for ln in lines) if k.endswith(("File", "Location", "Dir"))]
    assert paths and all(p.startswith(str(tmp_path)) for p in paths)
    assert "ProctrackType=proctrack/linuxproc" in lines and "TaskPlugin=task/none" in lines


def test_slurmd_enters_only_the_network_namespace_with_its_own_hostname_and_hosts_file(
    tmp_path: Path,
) -> None:
    runner, folder = _started(tmp_path)
    slurmds = [c for c in runner.calls if "slurmd" in c]
    assert len(slurmds) == 3
    for i, call in enumerate(slurmds, 1):
        # `ip netns exec` remounts /sys and slurmd's cgroup plugin dies: nsenter --net only
        assert call[:2] == ("nsenter", f"--net=/run/netns/fsl-sl-h{i}") and "netns" not in call[2:]
        assert call[2:7] == ("unshare", "--uts", "--mount", "--propagation", "slave")
        script_args = call[call.index("-c") + 3 :]  # after the script and its $0
        assert script_args[:2] == (str(tmp_path / "netns" / f"fsl-sl-h{i}" / "hosts"), f"h{i}")
        assert script_args[2:] == ("slurmd", "-f", str(folder / "slurm.conf"), "-N", f"h{i}")
    ctl = next(c for c in runner.calls if "slurmctld" in c)
    assert ctl[:2] == ("unshare", "--uts") and ctl[-3:] == ("slurmctld", "-f", str(folder / "slurm.conf"))
    assert (folder / "munge.key").stat().st_mode & 0o777 == 0o600 and len(
        (folder / "munge.key").read_bytes()
    ) == 1024
    assert (folder / "munge").stat().st_mode & 0o777 == 0o755


def test_the_leg_joins_the_switch_of_the_first_subnet(tmp_path: Path) -> None:
    runner, _ = _started(tmp_path, topology="leaf-spine", hosts_per_leaf=2)
    assert (
        "ip",
        "link",
        "add",
        "fslsl",
        "type",
        "veth",
        "peer",
        "name",
        "ctl",
        "netns",
        "fsl-sl-fab",
    ) in runner.calls
    assert (
        "ip",
        "-n",
        "fsl-sl-fab",
        "link",
        "set",
        "ctl",
        "mtu",
        "1500",
        "master",
        "leaf1",
        "up",
    ) in runner.calls
    assert ("ip", "addr", "add", "198.18.0.254/24", "dev", "fslsl") in runner.calls


def test_one_slurm_lab_at_a_time(tmp_path: Path) -> None:
    plan = build_plan(LabSpec(name="sl", hosts=2, slurm=True))
    other = "7: fslother@if9: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\n"
    runner = RecordingRunner(tools=ALL_TOOLS, responses={("ip", "-o", "link", "show"): other})
    with pytest.raises(LabError, match="lab other already runs Slurm"):
        slurm.start(plan, runner, tmp_path, {})


def test_nodes_that_never_come_up_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "START_DEADLINE_S", 0.3)
    plan = build_plan(LabSpec(name="sl", hosts=2, slurm=True))
    runner = RecordingRunner(tools=ALL_TOOLS, responses={("env",): "h1 idle\nh2 down*\n"}, failures=NO_LEG)
    with pytest.raises(LabError, match=r"Slurm nodes h2 not idle .*h2=down\*"):
        slurm.start(plan, runner, tmp_path, {h.name: tmp_path / "hosts" for h in plan.hosts})


def test_an_interface_with_the_legs_name_is_refused_not_deleted(tmp_path: Path) -> None:
    plan = build_plan(LabSpec(name="sl", hosts=2, slurm=True))
    runner = RecordingRunner(tools=ALL_TOOLS)  # `ip link show dev fslsl` succeeds: it exists
    with pytest.raises(LabError, match="an interface named fslsl already exists"):
        slurm.start(plan, runner, tmp_path, {})
    assert not [c for c in runner.calls if c[:3] == ("ip", "link", "del")]
    # this lab's own earlier leg is removed through its end in the fabric namespace only
    assert ("ip", "-n", "fsl-sl-fab", "link", "del", "ctl") in runner.calls


def test_missing_packages_are_named() -> None:
    with pytest.raises(LabError, match="slurm-wlm"):
        slurm.require(RecordingRunner(tools=("ip", "munged")))


def test_leg_name_fits_the_kernel_limit() -> None:
    assert len(slurm.leg_name("a" * 12)) <= 15


def test_the_daemons_directory_outlives_the_process_that_made_it() -> None:
    kept = tempfiles.make_private_dir("test-kept", outlive_process=True)
    scratch = tempfiles.make_private_dir("test-scratch")
    try:
        # atexit removes what _MADE holds when `lab up` ends (not called here: it would take other tests' directories)
        assert kept not in tempfiles._MADE and scratch in tempfiles._MADE
    finally:
        tempfiles.remove_private_dir(kept)
        tempfiles.remove_private_dir(scratch)
