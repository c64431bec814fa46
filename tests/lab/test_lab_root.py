"""The lab against the real kernel: namespaces, veth, bridges, tbf, nftables (root; CI runs it)."""

from __future__ import annotations

import json
import os
import subprocess

from fabricscope.lab.fabric import Labs
from fabricscope.lab.spec import LabSpec
from tests.lab.conftest import fs


def _namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(prefix)]


def test_up_is_idempotent_and_down_removes_everything(make_lab) -> None:
    doc = make_lab("tidem", "--hosts", "3", "--link-rate", "100mbit", "--loss", "1%", "--loss-on", "h2")
    assert doc["changed"] is True and doc["schema"] == "fabricscope.lab/v1"
    h2 = doc["hosts"][1]
    assert (h2["name"], h2["rank"], h2["address"]) == ("h2", 1, "198.18.0.2")
    link = h2["links"][0]
    assert link["rate_gbps"] == 0.1 and link["loss_pct"] == 1.0
    assert link["live_host_side"] == {"qdisc": "tbf", "rate_gbps": 0.1}
    assert link["live_switch_side"] == {"qdisc": "tbf", "rate_gbps": 0.1}
    again = json.loads(
        fs(
            "lab",
            "up",
            "--name",
            "tidem",
            "--hosts",
            "3",
            "--link-rate",
            "100mbit",
            "--loss",
            "1%",
            "--loss-on",
            "h2",
            "--json",
        ).stdout
    )
    assert again["changed"] is False
    rules = subprocess.run(
        ["ip", "netns", "exec", "fsl-tidem-fab", "nft", "list", "table", "bridge", "fabricscope"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert 'iifname "h2"' in rules and 'oifname "h2"' in rules and '"h1"' not in rules
    proc = fs("lab", "down", "tidem")
    assert proc.returncode == 0 and "removed 4 namespaces" in proc.stdout
    assert _namespaces("fsl-tidem-") == [] and not os.path.exists("/etc/netns/fsl-tidem-h1")


def test_other_options_need_replace(make_lab) -> None:
    make_lab("trep", "--hosts", "2")
    proc = fs("lab", "up", "--name", "trep", "--hosts", "3")
    assert proc.returncode == 2 and "--replace" in proc.stderr


def test_down_after_a_crash_halfway_through_up(lab_dir) -> None:
    # simulate a crash: namespaces exist, state says "creating", nothing else was done
    spec = LabSpec(name="tcrash", hosts=4)
    labs = Labs(directory=lab_dir)
    lab_dir.mkdir(parents=True, exist_ok=True)
    from fabricscope.lab.fabric import LabState

    labs._save(LabState(spec))
    for ns in ("fsl-tcrash-fab", "fsl-tcrash-h1", "fsl-tcrash-h2"):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(
        [
            "ip",
            "-n",
            "fsl-tcrash-h1",
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "h1",
            "netns",
            "fsl-tcrash-fab",
        ],
        check=True,
    )
    status = json.loads(fs("lab", "status", "tcrash", "--json").stdout)
    assert status["status"] == "broken"
    proc = fs("lab", "down", "tcrash")
    assert proc.returncode == 0 and "removed 3 namespaces" in proc.stdout
    assert _namespaces("fsl-tcrash-") == []
    # and a leftover without any state file is found by its prefix
    subprocess.run(["ip", "netns", "add", "fsl-tghost-h1"], check=True)
    assert "tghost" in Labs(directory=lab_dir).names()
    assert fs("lab", "down", "tghost").returncode == 0 and _namespaces("fsl-tghost-") == []


def test_set_exec_and_run(make_lab) -> None:
    make_lab("trun", "--hosts", "3", "--link-rate", "1gbit")
    proc = fs("lab", "set", "trun", "h3", "--link-rate", "250mbit", "--loss", "2%")
    assert proc.returncode == 0 and "250mbit" in proc.stdout
    doc = json.loads(fs("lab", "status", "trun", "--json").stdout)
    h3 = doc["hosts"][2]["links"][0]
    assert h3["live_host_side"]["rate_gbps"] == 0.25 and h3["loss_pct"] == 2.0
    assert doc["hosts"][0]["links"][0]["live_host_side"]["rate_gbps"] == 1.0

    proc = fs("lab", "exec", "trun", "h2", "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0")
    assert proc.returncode == 0 and "198.18.0.2/24" in proc.stdout
    assert fs("lab", "exec", "trun", "h2", "--", "false").returncode == 1
    assert fs("lab", "exec", "trun", "h9", "--", "true").returncode == 2

    code = (
        "import os,sys,socket; print(os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['LOCAL_RANK'], "
        "os.environ['MASTER_ADDR'], os.environ['MASTER_PORT']); sys.exit(int(os.environ['RANK']))"
    )
    import sys

    proc = fs("lab", "run", "trun", "--master-port", "29877", "--", sys.executable, "-c", code)
    assert proc.returncode == 2  # the worst of 0, 1, 2
    lines = sorted(proc.stdout.splitlines())
    assert lines == [
        "[h1] 0 3 0 198.18.0.1 29877",
        "[h2] 1 3 0 198.18.0.1 29877",
        "[h3] 2 3 0 198.18.0.1 29877",
    ]


def test_hosts_reach_each_other_only_inside_the_lab(make_lab) -> None:
    make_lab("tnet", "--hosts", "2")
    import sys

    code = "import socket; s=socket.create_connection(('198.18.0.1', 22), timeout=2)"
    proc = fs("lab", "exec", "tnet", "h2", "--", sys.executable, "-c", code)
    assert "refused" in proc.stderr.lower()  # h1 answered (no listener): the path exists
    assert not any(
        "198.18." in ln
        for ln in subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout.splitlines()
    )


def test_not_root_is_one_clear_line(lab_dir) -> None:
    import sys

    code = (
        "import os, sys; os.geteuid = lambda: 1000; from fabricscope.cli.main import main; "
        "sys.argv = ['fabricscope', 'lab', 'up', '--name', 'tnoroot']; main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (
        proc.returncode == 2
        and proc.stderr.strip().endswith("run it with sudo")
        and proc.stderr.count("\n") == 1
    )
    assert _namespaces("fsl-tnoroot-") == []


def test_bad_options_are_one_line(lab_dir) -> None:
    for args in (
        ("--link-rate", "1gbps"),
        ("--topology", "leaf-spine", "--hosts", "4"),
        ("--name", "Bad_Name"),
        ("--loss", "2"),
    ):
        proc = fs("lab", "up", *args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, args
