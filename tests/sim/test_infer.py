"""`sim infer` beyond one node (issue 10 item 6): TP and expert parallelism across nodes, NCCL's
choice for the TP all-reduce, and which transport and NIC rate meet a TPOT target."""

from __future__ import annotations

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.infer import run_infer

MOE = {
    "params": 47e9,
    "active_params": 13e9,
    "experts": 8,
    "active_experts": 2,
    "tp": 2,
    "ep": 8,
    "batch": 64,
    "system": "dgx-h100",
}


def test_moe_expert_parallel_across_nodes_feels_the_transport() -> None:
    tcp = run_infer({**MOE, "transport": "tcp"})
    ib = run_infer({**MOE, "transport": "ib"})
    assert tcp["expert_parallel"]["per_call"]["algo"] == "moe-nccl"  # NCCL's all-to-all (sim/moe.py)
    assert tcp["ep_comm_per_token_s"] > ib["ep_comm_per_token_s"] > 0
    assert tcp["time_per_output_token_s"] == pytest.approx(
        tcp["decode_step_s"] + tcp["tp_comm_per_token_s"] + tcp["ep_comm_per_token_s"]
    )
    # 16 GPUs per instance: two nodes for prefill, two for decode
    assert tcp["model"]["topology"]["nodes"] == 4


def test_dense_tp_in_a_node_does_not_care_about_the_nic() -> None:
    a = run_infer({"params": 70e9, "tp": 8, "batch": 16, "nic_rate": "100G"})
    b = run_infer({"params": 70e9, "tp": 8, "batch": 16, "nic_rate": "400G"})
    assert a["time_per_output_token_s"] == b["time_per_output_token_s"]
    assert a["tensor_parallel"]["per_call"]["algo"] in ("ring", "tree", "nvls")  # NCCL's choice, in the node
    assert min(b["time_to_first_token_s"].values()) < min(
        a["time_to_first_token_s"].values()
    )  # the KV move does


def test_tp_across_nodes_goes_over_the_network() -> None:
    one = run_infer({"params": 70e9, "tp": 8, "batch": 16, "system": "dgx-h100"})
    two = run_infer({"params": 70e9, "tp": 16, "batch": 16, "system": "dgx-h100"})
    assert two["tensor_parallel"]["per_call"]["time_s"] > one["tensor_parallel"]["per_call"]["time_s"]
    assert two["decode_step_s"] == pytest.approx(one["decode_step_s"] / 2)


def test_tpot_target_answers_which_transport_and_rate() -> None:
    d = run_infer({**MOE, "tpot_target_ms": 7})
    t = d["tpot_target"]
    assert len(t["options"]) == 12
    for r in t["options"]:
        assert r["meets"] == (r["tpot_s"] * 1e3 <= 7)
    assert t["slowest_rate_that_meets"]["tcp"] is None  # kernel TCP is too slow for this MoE at any rate
    assert t["slowest_rate_that_meets"]["ib"] is not None


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"ep": 2}, "needs a mixture-of-experts"),
        ({"experts": 8, "ep": 4, "batch": 6}, "multiple of --ep"),
        ({"experts": 8, "ep": 16}, "cannot exceed --experts"),
        ({"params": 70e9, "active_params": 80e9}, "cannot exceed --params"),
        ({"tp": 3}, "divide --gpus-per-node"),
    ],
)
def test_bad_input(params, match) -> None:
    with pytest.raises(FabricscopeError, match=match):
        run_infer(params)


def test_deepep_sends_a_token_once_per_node() -> None:
    """DeepEP-style dispatch crosses the network once per remote node and forwards over NVLink:
    fewer network bytes than NCCL's all-to-all for a top-8 MoE across 4 nodes."""
    moe = {
        "model": "deepseek-v3",
        "tp": 1,
        "ep": 32,
        "batch": 128 * 32,
        "system": "dgx-h800",
        "transport": "ib",
    }
    nccl, deepep = run_infer(moe), run_infer({**moe, "ep_mode": "deepep"})
    assert (
        deepep["expert_parallel"]["detail"]["rdma_bytes"]
        < 0.7 * nccl["expert_parallel"]["detail"]["rdma_bytes"]
    )
    assert deepep["ep_comm_per_token_s"] < nccl["ep_comm_per_token_s"]
    assert 0 < nccl["expert_parallel"]["detail"]["nic_efficiency"] < 1  # many small messages


def test_hbm_and_compute_come_from_the_system_and_weights_from_their_precision() -> None:
    h100 = run_infer({"model": "llama3-70b", "tp": 8, "batch": 16, "system": "dgx-h100"})
    h200 = run_infer({"model": "llama3-70b", "tp": 8, "batch": 16, "system": "hgx-h200"})
    assert h100["workload"]["hbm_GBps"] == 3350 and h200["workload"]["hbm_GBps"] == 4800
    assert h200["decode_step_s"] < h100["decode_step_s"]
    fp8 = run_infer(
        {"model": "llama3-70b", "tp": 8, "batch": 16, "system": "dgx-h100", "weight_precision": "fp8"}
    )
    assert fp8["workload"]["weight_bytes"] == 1 and fp8["decode_step_s"] < h100["decode_step_s"]


def test_ttft_is_one_requests_prefill_not_the_batchs() -> None:
    small = run_infer({"model": "llama3-70b", "tp": 8, "batch": 4, "system": "dgx-h100"})
    big = run_infer({"model": "llama3-70b", "tp": 8, "batch": 64, "system": "dgx-h100"})
    assert min(big["time_to_first_token_s"].values()) == pytest.approx(
        min(small["time_to_first_token_s"].values()), rel=1e-6
    )


def test_pipeline_parallel_across_nodes_crosses_the_network_once_per_stage() -> None:
    """TP8 x PP2 (TP inside each node, one stage per node) against TP16 across two nodes."""
    base = {"model": "llama3-70b", "batch": 16, "system": "dgx-h100", "transport": "roce"}
    tp16 = run_infer({**base, "tp": 16})
    pp2 = run_infer({**base, "tp": 8, "pp": 2})
    assert pp2["pipeline_parallel"]["sends_per_token"] == 1 and pp2["pp_comm_per_token_s"] > 0
    assert pp2["tp_comm_per_token_s"] < tp16["tp_comm_per_token_s"]  # TP all-reduces stay on NVLink
    assert pp2["model"]["topology"]["nodes"] == 4  # two for prefill, two for decode
