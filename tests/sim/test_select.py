"""NCCL's algorithm and protocol selection over the flow model (issue 10 items 1-3)."""

from __future__ import annotations

import json

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim import tuning
from fabricscope.sim.engine import NVLINK_EFFICIENCY
from fabricscope.sim.scenario import build_simulator, normalise, run_collective
from tests.sim.test_cli import run  # noqa: F401  (fixture)


def doc(**p):
    return run_collective(p)


def test_small_all_reduce_on_16_nodes_is_tree_ll_with_ncclS_latency() -> None:
    d = doc(system="dgx-h100", nodes=16, size="8")
    r = d["results"][0]
    assert (r["algo"], r["proto"]) == ("tree", "LL")
    # NCCL: base 6.8 + 2 * ((8 - 1) NVLink hops x 0.6 + log2(16) network hops x 5.0) us
    assert r["time_s"] == pytest.approx((6.8 + 2 * (7 * 0.6 + 4 * 5.0)) * 1e-6, rel=1e-3)


def test_in_node_h100_picks_nvls_at_the_nvls_rate() -> None:
    d = doc(system="dgx-h100", topology="single-node", nodes=1, size="8G")
    assert (d["algo"], d["proto"]) == ("nvls", "Simple")
    algbw = 450 * NVLINK_EFFICIENCY * tuning.NVLS_EFFICIENCY["hopper"] / (1 + 1 / 8)
    assert d["busbw_GBps"] == pytest.approx(algbw * 2 * 7 / 8, rel=0.01)
    ring = doc(system="dgx-h100", topology="single-node", nodes=1, size="8G", algo="ring")
    assert ring["busbw_GBps"] == pytest.approx(450 * NVLINK_EFFICIENCY, rel=0.01)


def test_a100_has_no_nvls_and_a_pcie_server_no_ll128() -> None:
    assert doc(system="dgx-a100", topology="single-node", nodes=1, size="1G")["algo"] == "ring"
    with pytest.raises(FabricscopeError, match="NVLS needs NVSwitch"):
        doc(system="dgx-a100", topology="single-node", nodes=1, algo="nvls")
    with pytest.raises(FabricscopeError, match="with LL, Simple only"):
        doc(system="pcie-server", topology="single-node", nodes=1, algo="ring", proto="ll128")


def test_forced_pair_and_protocol_caps() -> None:
    d = doc(system="dgx-h100", topology="single-node", nodes=1, size="8G", algo="ring", proto="ll")
    assert (d["algo"], d["proto"]) == ("ring", "LL")
    assert d["busbw_GBps"] <= tuning.LL_MAX_BW[2][0] + 1e-6  # Hopper, one node: 141 GB/s
    with pytest.raises(FabricscopeError, match="with Simple only"):
        doc(system="dgx-h100", nodes=2, algo="nvlstree", proto="ll")


def test_auto_is_the_least_time_of_the_alternatives() -> None:
    """NCCL picks by its own estimate (the alternatives' times); the kernel then pays the pipeline
    ramp that estimate leaves out (sim/pipeline.py), never less than the estimate."""
    d = doc(system="dgx-h100", nodes=4, size="8,64K,16M,1G", explain=True)
    for r in d["results"]:
        times = [a["time_s"] for a in r["alternatives"]]
        assert times == sorted(times) and r["solver"]["nccl_estimate_s"] == pytest.approx(times[0])
        assert r["time_s"] == pytest.approx(times[0] + r["solver"]["pipeline"]["extra_s"])
        assert r["time_s"] >= times[0]
        assert {e["algo"] for e in r["excluded"]} >= {"nvls", "collnet", "pat"}
        for key in ("size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "algo", "proto"):
            assert key in r


def test_tree_charges_nvlink_hops_nvlink_latency() -> None:
    """The issue's 16 nodes at 16 MiB: the tree is no longer slower than the ring."""
    r = {a: doc(system="dgx-h100", nodes=16, size="16M", algo=a)["time_s"] for a in ("ring", "tree")}
    assert r["tree"] < r["ring"]
    shape = tuning.CommShape("all_reduce", 128, 16, "hopper", "nvlink", True, 16, 8)
    lat = tuning.latency_s(shape, "tree", "Simple", 2**24)
    nvl, net = tuning.HW_LAT_US["nvlink"]["tree"][2], tuning.HW_LAT_US["net"]["tree"][2]
    assert lat == pytest.approx((8.4 + 2 * (7 * nvl + 4 * net)) * 1e-6)


def test_pat_only_with_one_gpu_per_node_and_sharp_enables_collnet() -> None:
    one = doc(
        system="dgx-h100", nodes=8, gpus_per_node=1, nics_per_node=1, op="all_gather", size="8", explain=True
    )
    assert any(a["algo"] == "pat" for a in one["results"][0]["alternatives"])
    with pytest.raises(FabricscopeError, match="one GPU per node"):
        doc(system="dgx-h100", nodes=8, op="all_gather", algo="pat")
    with pytest.raises(FabricscopeError, match="--sharp"):
        doc(system="dgx-h100", nodes=8, algo="collnet")
    sharp = doc(system="dgx-h100", nodes=8, size="8G", sharp=True, algo="collnet")
    ring = doc(system="dgx-h100", nodes=8, size="8G", algo="ring")
    # each NIC carries n/C once each way, half the ring's network bytes: no longer NIC-bound
    assert sharp["busbw_GBps"] > 1.1 * ring["busbw_GBps"] and sharp["limited_by"] == "nvlink bandwidth"


def test_faster_nic_helps_only_where_nic_bound() -> None:
    one = [
        doc(system="dgx-h100", topology="single-node", nodes=1, nic_rate=r)["time_s"]
        for r in ("400G", "800G")
    ]
    assert one[0] == one[1]
    # 200G: at 400G NVLSTree already meets NCCL's own cap (8 NVLS heads x 45.5 GB/s)
    slow = doc(system="dgx-h100", nodes=16, size="1G", nic_rate="200G")
    fast = doc(system="dgx-h100", nodes=16, size="1G", nic_rate="800G")
    assert slow["limited_by"] == "access bandwidth" and fast["time_s"] < 0.9 * slow["time_s"]
    assert fast["limited_by"] in ("pcie bandwidth", "nvlink bandwidth")  # 800G outruns a Gen5 x16 slot


def test_hierarchical_phases_overlap() -> None:
    sim = build_simulator(normalise({"system": "dgx-h100", "nodes": 4}))
    r = sim.collective("all_reduce", "hierarchical", 2**30)
    assert r.time_s < sum(p["time_s"] for p in r.phases)
    assert r.time_s == pytest.approx(
        sum(p["latency_s"] for p in r.phases) + max(p["bandwidth_s"] for p in r.phases)
    )


def test_cpu_hosts_keep_the_flow_model() -> None:
    d = doc(
        topology="star", nodes=4, gpus_per_node=1, gpu="none", transport="tcp", nic_rate="1gbit", size="4M"
    )
    assert (d["algo"], d["proto"]) == ("ring", "none")
    with pytest.raises(FabricscopeError, match="gloo"):
        doc(topology="star", nodes=4, gpus_per_node=1, gpu="none", proto="ll")


@pytest.mark.parametrize(
    "system", ["dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200", "gb200-nvl72", "pcie-server"]
)
def test_system_presets_build_and_cite(system) -> None:
    d = doc(system=system, nodes=2, size="1G")
    topo = d["model"]["topology"]
    assert topo["system"] == system and topo["source"].count("http") >= 1


def test_nvlink_domain_and_overrides() -> None:
    d = doc(system="gb200-nvl72", nvlink_domain=36, nodes=2, size="1G")
    assert d["model"]["topology"]["gpus_per_node"] == 36 and d["ranks"] == 72
    with pytest.raises(FabricscopeError, match="spans trays"):
        doc(system="dgx-h100", nvlink_domain=16)
    assert doc(system="dgx-h100", nodes=2, nic_rate="200G")["model"]["topology"]["nic_gbps"] == 200


def test_cli_names_the_pair_and_explains(run) -> None:  # noqa: F811
    r = run("collective", "--system", "dgx-h100", "--nodes", "16", "--size", "8,1G", "--explain")
    assert r.exit_code == 0, r.output
    assert "tree/LL" in r.stdout and "nvlstree/Simple" in r.stdout and "not run here" in r.stdout
    r = run("collective", "--system", "dgx-h100", "--nodes", "2", "--json", "--size", "1G")
    d = json.loads(r.stdout)
    assert d["algo"] and d["proto"] and d["results"][0]["proto"] == d["proto"]
    r = run(
        "collective", "--system", "dgx-a100", "--nodes", "1", "--topology", "single-node", "--algo", "nvls"
    )
    assert r.exit_code == 2 and "NVLS needs NVSwitch" in r.stderr
    r = run("collective", "--system", "nope")
    assert r.exit_code == 2 and "unknown system" in r.stderr


def test_one_gpu_per_node_trees_take_the_tree_pattern_derating() -> None:
    """tuning.cc: tree bandwidth x 0.85 when the tree graph's pattern is NCCL_TOPO_PATTERN_TREE,
    which a node of one GPU always has (search.cc)."""
    one = tuning.CommShape("all_reduce", 4, 4, "hopper", "nvlink", True, 2, 1)
    eight = tuning.CommShape("all_reduce", 32, 4, "hopper", "nvlink", True, 16, 8)
    size = 1 << 30  # past the tree correction's sizes
    assert tuning.protocol_busbw(one, "tree", "Simple", 10.0, size) == pytest.approx(10.0 * 0.92 * 0.85)
    assert tuning.protocol_busbw(eight, "tree", "Simple", 10.0, size) == pytest.approx(10.0 * 0.92)
