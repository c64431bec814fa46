"""`nccl env`: settings per fixture host, each with a reason, and fed back into `nccl lint`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from fabricscope.host import Root, read_inventory
from fabricscope.nccl.envgen import plan_env, render
from fabricscope.nccl.settings import parse_env_file, parse_script
from tests.conftest import FIXTURE_HOSTS, HOST_NAMES


def inventory(name: str):
    return read_inventory(Root.at(FIXTURE_HOSTS / name))


@pytest.mark.parametrize("host", HOST_NAMES)
@pytest.mark.parametrize("workload", ["training", "inference"])
def test_env_output_fed_back_into_lint_gives_no_warn_or_fail(cli, tmp_path, host: str, workload: str) -> None:
    res = cli("nccl", "env", "--root", str(FIXTURE_HOSTS / host), "--workload", workload)
    assert res.exit_code == 0, res.stderr
    script = tmp_path / "env.sh"
    script.write_text(res.stdout)
    lint_res = cli(
        "nccl",
        "lint",
        "--script",
        str(script),
        "--root",
        str(FIXTURE_HOSTS / host),
        "--json",
        "--fail-on",
        "warn",
    )
    doc = lint_res.json()
    bad = [
        f"{f['id']} {f['subject']}: {f['message']}"
        for f in doc["findings"]
        if f["severity"] in ("warn", "fail")
    ]
    assert not bad, f"{host}: {bad}"
    assert lint_res.exit_code == 0
    assert doc["settings"], "the env output must set something"


@pytest.mark.parametrize("host", HOST_NAMES)
def test_every_variable_has_a_one_line_reason(host: str) -> None:
    plan = plan_env(inventory(host))
    assert plan.variables
    for v in plan.variables:
        assert v.reason and "\n" not in v.reason, v


def test_infiniband_host() -> None:
    env = plan_env(inventory("ib-ndr-healthy")).as_environ()
    assert env["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}:1" for i in range(8))
    assert env["NCCL_SOCKET_IFNAME"] == "=eno1"  # up, has an address, not an RDMA netdev
    assert env["NCCL_DEBUG"] == "WARN"
    for name in ("NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_NET_GDR_LEVEL"):
        assert name not in env
    with_sl = plan_env(inventory("ib-ndr-healthy"), ar_sl=1, rail_optimized=True).as_environ()
    assert with_sl["NCCL_IB_SL"] == "1" and with_sl["NCCL_CROSS_NIC"] == "0"


def test_degraded_infiniband_host_leaves_out_the_down_port() -> None:
    plan = plan_env(inventory("ib-degraded"))
    assert "mlx5_5" not in plan.as_environ()["NCCL_IB_HCA"]
    assert any(dev == "mlx5_5:1" and "DOWN" in why for dev, why in plan.excluded)
    assert any("mlx5_3:1 200" in n for n in plan.notes)  # the slow port is kept but named


def test_roce_host_traffic_class_from_qos() -> None:
    plan = plan_env(inventory("roce-healthy"))
    env = plan.as_environ()
    assert env["NCCL_IB_TC"] == str(26 << 2 | 2)  # DSCP 26 -> priority 3 (PFC), ECT(0): ECN on
    assert env["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    assert "NCCL_IB_GID_INDEX" not in env
    old = plan_env(inventory("roce-healthy"), nccl_version="2.19.3").as_environ()
    assert old["NCCL_IB_GID_INDEX"] == "3"  # the RoCE v2 IPv4 entry on every NIC
    inference = plan_env(inventory("roce-healthy"), workload="inference").as_environ()
    assert "NCCL_IB_QPS_PER_CONNECTION" not in inference
    single = plan_env(inventory("roce-healthy"), switch_tiers=1).as_environ()
    assert "NCCL_IB_QPS_PER_CONNECTION" not in single


def test_broken_roce_host_leaves_out_what_would_misbehave() -> None:
    plan = plan_env(inventory("roce-broken"))
    excluded = dict(plan.excluded)
    assert set(excluded) == {"mlx5_1:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1", "mlx5_7:1"}
    assert "IPv4" in excluded["mlx5_1:1"] and "pcp" in excluded["mlx5_3:1"]
    assert "IPv4" in excluded["mlx5_7:1"]  # its RoCE v2 GIDs are IPv6 only: NCCL would take index 0
    assert "ECN" in excluded["mlx5_4:1"] and "PFC" in excluded["mlx5_5:1"]
    env = plan.as_environ()
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_2:1,mlx5_6:1"
    assert env["NCCL_IB_TC"] == "106"
    assert any("nvidia_peermem" in n for n in plan.notes)


def test_cloud_tcp_host() -> None:
    plan = plan_env(inventory("cloud-tcp"))
    env = plan.as_environ()
    assert plan.fabric == "TCP"
    assert env == {"NCCL_SOCKET_IFNAME": "=ens5", "NCCL_DEBUG": "WARN"}
    assert not any(name.startswith("NCCL_IB") for name in env)


def test_formats_are_ready_to_paste(tmp_path) -> None:
    plan = plan_env(inventory("roce-healthy"))
    shell = render(plan, "shell")
    # Real bash evaluates it to exactly the planned values.
    # a clean environment: NVIDIA's images set NCCL_VERSION (seen on an H200 node), which is not ours
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = subprocess.run(
        ["bash", "-c", shell + "\nenv"], capture_output=True, text=True, check=True, env=clean
    ).stdout
    got = {k: v for k, _, v in (line.partition("=") for line in out.splitlines()) if k.startswith("NCCL_")}
    assert got == plan.as_environ()
    # The env file/lint parsers read the same values back.
    assert {s.name: s.value for s in parse_script(shell, "x")} == plan.as_environ()
    assert {s.name: s.value for s in parse_env_file(shell, "x")[0]} == plan.as_environ()
    doc = json.loads(render(plan, "json"))
    assert doc["schema"] == "fabricscope.nccl_env/v1"
    assert {v["name"]: v["value"] for v in doc["variables"]} == plan.as_environ()
    assert all(v["reason"] for v in doc["variables"] + doc["not_set"])
    slurm = render(plan, "slurm")
    assert "#SBATCH --export=ALL" in slurm and "srun --export=ALL" in slurm
    k8s = render(plan, "k8s")
    import yaml  # pyyaml: the sim extra, installed in CI

    parsed = yaml.safe_load(k8s)
    assert {e["name"]: e["value"] for e in parsed["env"]} == plan.as_environ()
    assert all(isinstance(e["value"], str) for e in parsed["env"])


def test_cli_rejects_bad_options(cli) -> None:
    root = str(FIXTURE_HOSTS / "roce-healthy")
    assert cli("nccl", "env", "--root", root, "--format", "yaml").exit_code == 2
    assert cli("nccl", "env", "--root", root, "--workload", "gaming").exit_code == 2
    assert cli("nccl", "env", "--root", root, "--nccl-version", "latest").exit_code == 2
    assert cli("nccl", "env", "--root", "/nonexistent").exit_code == 2
    ok = cli("nccl", "env", "--root", root, "--format", "json")
    assert ok.exit_code == 0 and ok.json()["fabric"] == "RoCE"


def test_lint_merges_with_nccl_conf_on_the_root(host_copy, cli) -> None:
    root = host_copy("roce-healthy")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/nccl.conf").write_text("NCCL_SOCKET_IFNAME=eth0\nNCCL_IB_TC=106\n")
    res = cli("nccl", "lint", "--root", str(root), "--json")
    doc = res.json()
    assert res.exit_code == 1
    assert {s["name"]: s["source"] for s in doc["settings"]} == {
        "NCCL_SOCKET_IFNAME": "/etc/nccl.conf:1",
        "NCCL_IB_TC": "/etc/nccl.conf:2",
    }
    assert any(f["id"] == "NCCL020" for f in doc["findings"])


def test_lint_cli_inputs(cli, tmp_path, monkeypatch) -> None:
    root = str(FIXTURE_HOSTS / "ib-ndr-healthy")
    assert cli("nccl", "lint", "--root", root).exit_code == 2  # nothing to lint
    assert cli("nccl", "lint", "--env-file", str(tmp_path / "missing.env"), "--root", root).exit_code == 2
    binary = tmp_path / "bin.env"
    binary.write_bytes(b"\x00\x01\x02NCCL_X=1")
    res = cli("nccl", "lint", "--env-file", str(binary), "--root", root)
    assert res.exit_code == 2 and "binary" in res.stderr
    good = tmp_path / "good.env"
    good.write_text("NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\nNCCL_DEBUG=WARN\n")
    assert cli("nccl", "lint", "--env-file", str(good), "--root", root).exit_code == 0
    res = cli("nccl", "lint", "--from-environ", "--root", root, "--json", env={"NCCL_IB_DISABLE": "1"})
    assert res.exit_code == 1 and any(f["id"] == "NCCL060" for f in res.json()["findings"])
    garbled = tmp_path / "garbled.env"
    garbled.write_text("NCCL_DEBUG=WARN\n%%%% ???\n")
    res = cli("nccl", "lint", "--env-file", str(garbled), "--no-node", "--json")
    assert res.exit_code == 0 and any(f["id"] == "NCCL006" for f in res.json()["findings"])
    human = cli("nccl", "lint", "--env-file", str(garbled), "--no-node")
    assert f"{garbled}:2: NCCL006 [warn]" in human.stdout


def test_lint_follows_nccl_conf_file(host_copy, cli, tmp_path) -> None:
    root = host_copy("ib-ndr-healthy")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/user-nccl.conf").write_text("NCCL_IB_HCA=mlx5_9\n")
    script = tmp_path / "job.sh"
    script.write_text("export NCCL_CONF_FILE=/etc/user-nccl.conf\n")
    doc = cli("nccl", "lint", "--script", str(script), "--root", str(root), "--json").json()
    assert any(
        f["id"] == "NCCL010" and f["evidence"]["source"] == "/etc/user-nccl.conf:1" for f in doc["findings"]
    )
    script.write_text("export NCCL_CONF_FILE=/etc/nope.conf\n")
    doc = cli("nccl", "lint", "--script", str(script), "--root", str(root), "--json").json()
    assert any(f["id"] == "NCCL007" for f in doc["findings"])
