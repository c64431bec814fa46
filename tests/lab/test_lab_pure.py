"""Lab planning, parsing, command generation and process groups: no root needed."""

from __future__ import annotations

import io
import sys

import pytest

from fabricscope.lab.fabric import Labs, LabState, LinkSetting, _loss_rules
from fabricscope.lab.plan import build_plan, switch_gso_frames, tbf_args
from fabricscope.lab.procgroup import ProcSpec, run_group, worst_code
from fabricscope.lab.run import exec_on_host, host_specs
from fabricscope.lab.runner import Attached, RecordingRunner, Runner
from fabricscope.lab.spec import (
    LabError,
    LabSpec,
    format_rate,
    parse_loss,
    parse_oversubscription,
    parse_rate,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("1gbit", 10**9),
        ("250mbit", 250 * 10**6),
        ("100kbit", 10**5),
        ("1.5gbit", 1_500_000_000),
        ("10G", 10**10),
        ("64000", 64000),
    ],
)
def test_parse_rate(text: str, bps: int) -> None:
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text", ["1gbps", "10mbps", "fast", "", "1xbit", "1bit", "999tbit"])
def test_parse_rate_refuses(text: str) -> None:
    with pytest.raises(LabError):
        parse_rate(text)


def test_format_rate_round_trips() -> None:
    for text in ("1gbit", "250mbit", "100kbit", "1.5gbit"):
        assert parse_rate(format_rate(parse_rate(text))) == parse_rate(text)
    assert format_rate(None) == "unshaped"


def test_parse_loss_and_oversubscription() -> None:
    assert parse_loss("2%") == 2.0
    assert parse_loss("0.1%") == pytest.approx(0.1)
    for bad in ("2", "-1%", "101%", "x%"):
        with pytest.raises(LabError):
            parse_loss(bad)
    assert parse_oversubscription("4:1") == 4.0
    assert parse_oversubscription("3:2") == 1.5
    for bad in ("4", "0:1", "4:0", "a:b"):
        with pytest.raises(LabError):
            parse_oversubscription(bad)


def test_spec_validation() -> None:
    with pytest.raises(ValueError):
        LabSpec(name="Bad-Name", hosts=2)
    with pytest.raises(ValueError):
        LabSpec(name="a", topology="leaf-spine", hosts=8)  # needs hosts-per-leaf
    with pytest.raises(ValueError):
        LabSpec(name="a", topology="star", hosts=4, hosts_per_leaf=2)
    with pytest.raises(ValueError):
        LabSpec(name="a", hosts=4, loss_pct=1.0, loss_on=("h9",))
    with pytest.raises(ValueError):
        LabSpec(name="a", hosts=4, loss_on=("h2",))  # --loss-on without --loss
    spec = LabSpec(
        name="a", topology="leaf-spine", hosts=8, hosts_per_leaf=4, link_rate_bps=10**9, oversubscription=4.0
    )
    assert spec.leaves == 2
    assert spec.effective_uplink_bps == 10**9  # 4 x 1 Gbit/s / 4
    assert LabSpec(name="a", topology="leaf-spine", hosts=5, hosts_per_leaf=2).leaves == 3


def test_star_plan() -> None:
    plan = build_plan(LabSpec(name="x1", hosts=3, link_rate_bps=10**9))
    assert plan.switches == ("sw",)
    assert [h.name for h in plan.hosts] == ["h1", "h2", "h3"]
    assert [h.rank for h in plan.hosts] == [0, 1, 2]
    assert [h.address for h in plan.hosts] == ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
    assert all(ns.startswith("fsl-x1-") for ns in plan.namespaces)
    assert plan.fabric_namespace == "fsl-x1-fab"


def test_leaf_spine_plan_places_hosts_under_leaves() -> None:
    plan = build_plan(
        LabSpec(
            name="ls",
            topology="leaf-spine",
            hosts=8,
            hosts_per_leaf=4,
            link_rate_bps=10**9,
            oversubscription=4.0,
        )
    )
    assert plan.switches == ("leaf1", "leaf2", "spine")
    assert [h.leaf for h in plan.hosts] == ["leaf1"] * 4 + ["leaf2"] * 4
    assert [(u.leaf, u.spine, u.rate_bps) for u in plan.uplinks] == [
        ("leaf1", "spine", 10**9),
        ("leaf2", "spine", 10**9),
    ]
    assert all(len(u.leaf_port) <= 15 and len(u.spine_port) <= 15 for u in plan.uplinks)


def test_rail_plan_gives_each_host_one_nic_per_rail() -> None:
    plan = build_plan(LabSpec(name="r", topology="rail", hosts=2, rails=3))
    assert plan.switches == ("rail0", "rail1", "rail2")
    h2 = plan.host("h2")
    assert [(p.dev, p.switch, p.address) for p in h2.ports] == [
        ("eth0", "rail0", "198.18.0.2"),
        ("eth1", "rail1", "198.18.1.2"),
        ("eth2", "rail2", "198.18.2.2"),
    ]


def test_tbf_bucket_holds_gso_packets_and_queue_holds_50ms() -> None:
    args = tbf_args(10**9)
    burst, limit = int(args[args.index("burst") + 1]), int(args[args.index("limit") + 1])
    assert args[args.index("rate") + 1] == "1000000000bit"
    assert burst >= 65536 * 2
    assert limit >= 0.05 * 10**9 / 8


def test_a_switch_port_takes_gso_packets_of_up_to_9_frames_whole() -> None:
    # `tc -s qdisc show` on a lab's --queue port at 200 Mbit/s printed "burst 15125b" for the
    # 15140 bytes asked (tc keeps the bucket as whole microseconds): a 10-frame GSO packet is split.
    args = tbf_args(200_000_000, queue_bytes=65536)
    assert int(args[args.index("burst") + 1]) == 15140
    assert switch_gso_frames(200_000_000) == 9
    assert (
        switch_gso_frames(8 * 1514 * 10**6 // 100, mtu=1500) == 10
    )  # a rate at which 10 frames are whole microseconds


def test_loss_rules_drop_both_directions() -> None:
    rules = _loss_rules(["h3"], 2.0)
    assert rules == [
        'iifname "h3" numgen random mod 1000000 < 20000 drop',
        'oifname "h3" numgen random mod 1000000 < 20000 drop',
    ]
    assert _loss_rules(["h3"], 0.0) == []


def test_up_commands_recorded(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    runner = RecordingRunner()
    labs = Labs(runner, tmp_path / "state", tmp_path / "netns")
    spec = LabSpec(name="rec", hosts=2, link_rate_bps=10**8, loss_pct=1.0, loss_on=("h2",))
    result = labs.up(spec)
    assert result.changed
    calls = [" ".join(c) for c in runner.calls]
    assert "ip netns add fsl-rec-h1" in calls and "ip netns add fsl-rec-fab" in calls
    assert "ip -n fsl-rec-h1 link add eth0 type veth peer name h1 netns fsl-rec-fab" in calls
    assert any(
        c.startswith("tc -n fsl-rec-fab qdisc replace dev h2 root tbf rate 100000000bit") for c in calls
    )
    assert any(c.startswith("tc -n fsl-rec-h2 qdisc replace dev eth0 root tbf") for c in calls)
    script = [
        i for c, i in zip(runner.calls, runner.inputs) if c[-3:] == ("nft", "-f", "-") and "fab" in c[3]
    ][-1]
    assert 'iifname "h2" numgen random mod 1000000 < 10000 drop' in script and '"h1"' not in script
    assert "\n198.18.0.2\th2 h2-eth0\n" in (tmp_path / "netns" / "fsl-rec-h1" / "hosts").read_text()
    state = labs.load("rec")
    assert state.status == "up" and state.spec == spec


def test_capability_check_names_missing_nft(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    labs = Labs(RecordingRunner(tools=("ip", "tc")), tmp_path / "s", tmp_path / "n")
    with pytest.raises(LabError, match="nft.*nftables"):
        labs.up(LabSpec(name="nonft", hosts=2, loss_pct=1.0))
    assert not (tmp_path / "s" / "nonft.json").exists()


def test_capability_check_names_missing_kernel_feature(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    runner = RecordingRunner(failures={("tc", "-n"): "Error: Specified qdisc kind is unknown."})
    labs = Labs(runner, tmp_path / "s", tmp_path / "n")
    with pytest.raises(
        LabError, match=r"lacks tc tbf shaping \(sch_tbf\): Error: Specified qdisc kind is unknown"
    ):
        labs.up(LabSpec(name="notbf", hosts=2, link_rate_bps=10**9))
    # the probe is named inside the lab's prefix, so `lab down notbf` sweeps one a SIGKILL left
    assert ("ip", "netns", "del", f"fsl-notbf-probe{__import__('os').getpid()}") in runner.calls


def test_failed_build_is_undone(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    runner = RecordingRunner(failures={("ip", "-n", "fsl-half-h2", "addr"): "RTNETLINK answers: File exists"})
    labs = Labs(runner, tmp_path / "s", tmp_path / "n")
    with pytest.raises(LabError, match="File exists"):
        labs.up(LabSpec(name="half", hosts=3))
    # the undo listed namespaces by prefix; nothing is left in the state directory
    assert runner.calls.count(("ip", "-j", "netns", "list")) >= 2
    assert not (tmp_path / "s" / "half.json").exists()


def test_needs_root(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(LabError, match="needs root"):
        Labs(RecordingRunner(), tmp_path).up(LabSpec(name="a", hosts=2))


def test_state_round_trip_keeps_link_overrides() -> None:
    state = LabState(
        LabSpec(name="s", hosts=4, link_rate_bps=10**9),
        status="up",
        links={"h3": LinkSetting(25 * 10**7, 1.0)},
    )
    again = LabState.from_dict(state.to_dict())
    assert again.link("h3").rate_bps == 25 * 10**7 and again.link("h3").loss_pct == 1.0
    assert again.link("h1").rate_bps == 10**9


def test_host_specs_set_torchrun_variables() -> None:
    state = LabState(LabSpec(name="e", hosts=4), status="up")
    specs = host_specs(state, ["python", "x.py"], hosts=["h2", "h4"], master_port=29999)
    assert [s.label for s in specs] == ["h2", "h4"]
    assert specs[1].argv == ("ip", "netns", "exec", "fsl-e-h4", "python", "x.py")
    env = specs[1].env
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == (
        "1",
        "2",
        "0",
        "198.18.0.2",
        "29999",
    )
    with pytest.raises(LabError):
        host_specs(state, ["true"], hosts=["h2", "h2"])
    with pytest.raises(LabError):
        host_specs(state, ["true"], hosts=["h9"])


def test_exec_runs_in_the_hosts_namespace() -> None:
    state = LabState(LabSpec(name="e", hosts=4), status="up")
    runner = RecordingRunner()
    assert exec_on_host(state, "h3", ["ping", "-c1", "198.18.0.1"], 5.0, runner).rc == 0
    assert runner.calls == [("ip", "netns", "exec", "fsl-e-h3", "ping", "-c1", "198.18.0.1")]
    for host, command in (("h9", ["true"]), ("h1", [])):
        with pytest.raises(LabError):
            exec_on_host(state, host, command, 5.0, runner)


def test_run_attached_reports_exit_signal_and_deadline() -> None:
    runner = Runner()
    assert runner.run_attached([sys.executable, "-c", "raise SystemExit(3)"], 30.0) == Attached(
        3, timed_out=False
    )
    killed = runner.run_attached(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"], 30.0
    )
    assert (killed.rc, killed.timed_out) == (128 + 15, False)
    late = runner.run_attached([sys.executable, "-c", "import time; time.sleep(30)"], 0.3)
    assert late.timed_out
    with pytest.raises(LabError, match="cannot run"):
        runner.run_attached(["/nonexistent/fabricscope-test-tool"], 1.0)


def test_worst_code() -> None:
    assert worst_code([0, 0]) == 0
    assert worst_code([0, 1, 3]) == 3
    assert worst_code([0, -9]) == 137


def test_run_group_prefixes_output_and_returns_worst() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = "import os,sys; print('hello', os.environ['X']); sys.exit(int(os.environ['X']))"
    specs = [ProcSpec(f"p{i}", (sys.executable, "-c", code), {"X": str(i)}) for i in (0, 3)]
    result = run_group(specs, timeout_s=30, grace_s=5, stdout=out, stderr=err)
    assert result.codes == {"p0": 0, "p3": 3} and result.worst == 3
    assert sorted(out.getvalue().splitlines()) == ["[p0] hello 0", "[p3] hello 3"]


def test_run_group_deadline_ends_everything() -> None:
    specs = [ProcSpec("sleeper", (sys.executable, "-c", "import time; time.sleep(60)"))]
    result = run_group(specs, timeout_s=1.0, stdout=io.StringIO(), stderr=io.StringIO())
    assert result.timed_out and result.codes["sleeper"] == 124 and result.seconds < 10


def test_run_group_grace_after_first_failure() -> None:
    specs = [
        ProcSpec("fails", (sys.executable, "-c", "import sys; sys.exit(2)")),
        ProcSpec("hangs", (sys.executable, "-c", "import time; time.sleep(60)")),
    ]
    result = run_group(specs, timeout_s=60, grace_s=1.0, stdout=io.StringIO(), stderr=io.StringIO())
    assert result.first_failure == "fails" and not result.timed_out
    assert result.codes["fails"] == 2 and result.codes["hangs"] != 0 and result.seconds < 15


def test_queue_setting_shapes_the_switch_port_towards_the_host_only(tmp_path, monkeypatch) -> None:
    """`lab set --queue`: the switch egress towards h1 gets a 10-packet bucket and the queue as its
    limit (tbf then drops packet by packet, as a switch buffer does); h1's own egress keeps the default."""
    monkeypatch.setattr("os.geteuid", lambda: 0)
    runner = RecordingRunner()
    labs = Labs(runner, tmp_path / "state", tmp_path / "netns")
    labs.up(LabSpec(name="q", hosts=3, link_rate_bps=2 * 10**8))
    runner.calls.clear()
    state = labs.set_link("q", "h1", queue_bytes=65536)
    assert state.link("h1").queue_bytes == 65536 and labs.load("q").link("h1").queue_bytes == 65536
    calls = [" ".join(c) for c in runner.calls]
    assert "tc -n fsl-q-fab qdisc replace dev h1 root tbf rate 200000000bit burst 15140 limit 65536" in calls
    host_side = [c for c in calls if c.startswith("tc -n fsl-q-h1 qdisc replace dev eth0")]
    assert host_side and all(c.endswith(" ".join(tbf_args(2 * 10**8))) for c in host_side)
    assert labs.set_link("q", "h1", queue_bytes=None).link("h1").queue_bytes is None  # back to the default
    with pytest.raises(LabError, match="at least two packets"):
        labs.set_link("q", "h2", queue_bytes=1000)
    labs.set_link("q", "h3", rate_bps=None)
    with pytest.raises(LabError, match="needs a shaped link"):
        labs.set_link("q", "h3", queue_bytes=65536)
