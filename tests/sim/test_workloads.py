"""Training-step and inference models on top of the collective engine."""

from __future__ import annotations

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.infer import run_infer
from fabricscope.sim.workloads import run_train, shape_of, tcp_transfer_s


def test_shape_from_parameter_count() -> None:
    L, h = shape_of(175e9, None, None)
    assert abs(12 * L * h * h - 175e9) / 175e9 < 0.1 and h % 64 == 0
    assert shape_of(70e9, 80, 8192) == (80, 8192)
    L, _ = shape_of(70e9, None, None, multiple=4)
    assert L % 4 == 0


def test_compute_only_job_counts_megatron_flops() -> None:
    """Model FLOPs per GPU are 72 B s l h^2 (1 + s/6h + V/(12 l h)) per step (Korthikanti et al. 2022
    eq. for MFU); full recomputation adds one forward of the layers (SC21 eq. 3: 96 instead of 72)."""
    p = {
        "gpus": 1,
        "tp": 1,
        "pp": 1,
        "tokens_per_step": 8 * 2048,
        "gpus_per_node": 1,
        "layers": 16,
        "hidden": 2048,
        "heads": 16,
        "seq_len": 2048,
        "micro_batch": 8,
        "gpu": "a100",
    }
    B, s, L, h, V = 8, 2048, 16, 2048, 51200
    for rc, passes in (("none", 72), ("full", 96)):
        d = run_train({**p, "recompute": rc})
        assert d["exposed_comm_s"] == 0 and d["comm"] == {}
        layers = passes * B * s * L * h * h * (1 + s / (6 * h))
        hw = (layers + 6 * B * s * h * V) / d["step_time_s"] / 1e12
        assert d["hardware_tflops_per_gpu"] == pytest.approx(hw, rel=1e-9)
        model = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h)) / d["step_time_s"] / 1e12
        assert d["tflops_per_gpu"] == pytest.approx(model, rel=1e-9)
    assert d["tokens_per_s"] == pytest.approx(B * s / d["step_time_s"])


def test_recomputation_costs_time_in_order() -> None:
    base = {
        "gpus": 8,
        "tp": 8,
        "tokens_per_step": 2**20,
        "layers": 32,
        "hidden": 8192,
        "seq_len": 4096,
        "system": "dgx-h100",
    }
    t = {rc: run_train({**base, "recompute": rc})["step_time_s"] for rc in ("none", "selective", "full")}
    assert t["none"] < t["selective"] < t["full"]
    assert t["full"] / t["none"] > 1.2  # a whole extra forward: ~1/3 more compute


def test_gemm_efficiency_depends_on_shape() -> None:
    from fabricscope.sim.train_compute import gemm_time, gpu_spec

    a100 = gpu_spec("a100")
    big = 2 * 8192**3 / gemm_time(a100, 8192, 8192, 8192)
    odd = 2 * 8192 * 200 * 8192 / gemm_time(a100, 8192, 200, 8192)  # 2 of 128 columns of tiles: half idle
    thin = 2 * 8192 * 8192 * 64 / gemm_time(a100, 8192, 8192, 64)  # K 64: below the HBM roofline's ridge
    assert odd < 0.9 * big and thin < 0.7 * big


def test_interleaving_shrinks_the_bubble() -> None:
    base = {
        "gpus": 64,
        "tp": 8,
        "pp": 8,
        "tokens_per_step": 32 * 4096,
        "layers": 96,
        "hidden": 12288,
        "system": "dgx-h100",
    }
    one = run_train(base)
    three = run_train({**base, "virtual_stages": 3})
    assert one["bubble_fraction"] == pytest.approx(7 / 32) and three["bubble_fraction"] == pytest.approx(
        7 / 96
    )
    assert three["pipeline_bubble_s"] < 0.4 * one["pipeline_bubble_s"]
    assert three["comm"]["pipeline_parallel"]["exposed_s"] > 2 * one["comm"]["pipeline_parallel"]["exposed_s"]


def test_sequence_parallel_turns_all_reduce_into_rs_ag() -> None:
    base = {"gpus": 8, "tp": 8, "tokens_per_step": 2**16, "layers": 8, "hidden": 8192, "system": "dgx-h100"}
    on, off = run_train(base), run_train({**base, "sequence_parallel": False})
    assert on["comm"]["tensor_parallel"]["collective"] == "reduce_scatter + all_gather"
    assert off["comm"]["tensor_parallel"]["collective"] == "all_reduce"
    assert on["breakdown"]["memory_bound_ops_s"] < off["breakdown"]["memory_bound_ops_s"]


def test_dp_reduce_scatter_overlaps_and_shares_links() -> None:
    base = {
        "gpus": 64,
        "tp": 8,
        "pp": 2,
        "tokens_per_step": 2**20,
        "layers": 32,
        "hidden": 4096,
        "system": "dgx-h100",
        "dp_collective": "zero",
        "transport": "tcp",
        "nic_rate": "100G",
    }
    on, off = run_train(base), run_train({**base, "overlap_dp": False})
    dp_on, dp_off = on["comm"]["data_parallel"], off["comm"]["data_parallel"]
    assert dp_on["overlapped_s"] > 0 and dp_off["overlapped_s"] == 0
    assert dp_on["exposed_s"] < dp_off["exposed_s"]
    assert dp_on["shared_link_slowdown"] >= 1.0


def test_moe_and_context_parallel_add_their_collectives() -> None:
    d = run_train(
        {
            "gpus": 128,
            "tp": 8,
            "pp": 2,
            "cp": 2,
            "ep": 4,
            "experts": 8,
            "active_experts": 2,
            "layers": 32,
            "hidden": 4096,
            "system": "dgx-h100",
            "tokens_per_step": 2**20,
        }
    )
    assert d["workload"]["dp"] == 4
    assert {"expert_parallel", "context_parallel"} <= set(d["comm"])
    assert d["comm"]["expert_parallel"]["exposed_s"] > 0
    assert d["step_time_s"] == pytest.approx(
        d["compute_s"] + d["pipeline_bubble_s"] + d["exposed_comm_s"], rel=1e-12
    )


def test_3d_parallel_step() -> None:
    d = run_train(
        {
            "params": 70e9,
            "gpus": 256,
            "tp": 8,
            "pp": 4,
            "gpu_tflops": 989,
            "tokens_per_step": 2**22,
            "transport": "ib",
        }
    )
    w = d["workload"]
    assert (w["dp"], w["micro_batches"]) == (8, 128)
    assert set(d["comm"]) == {"tensor_parallel", "pipeline_parallel", "data_parallel"}
    assert d["comm"]["tensor_parallel"]["limited_by"] == "nvlink bandwidth"  # TP stays in the node
    assert d["step_time_s"] == pytest.approx(
        d["compute_s"] + d["pipeline_bubble_s"] + d["exposed_comm_s"], rel=1e-12
    )
    assert 0 < d["comm_share"] < 1


def test_slower_network_means_more_exposed_communication() -> None:
    base = {
        "params": 13e9,
        "gpus": 64,
        "tp": 8,
        "pp": 1,
        "gpu_tflops": 400,
        "tokens_per_step": 2**20,
        "overlap_dp": False,
    }
    fast = run_train({**base, "transport": "ib", "nic_rate": "400G"})
    slow = run_train({**base, "transport": "tcp", "nic_rate": "100G", "nics_per_node": 1})
    assert slow["comm"]["data_parallel"]["exposed_s"] > 4 * fast["comm"]["data_parallel"]["exposed_s"]
    assert slow["comm"]["tensor_parallel"]["exposed_s"] == pytest.approx(
        fast["comm"]["tensor_parallel"]["exposed_s"]
    )
    assert slow["tokens_per_s"] < fast["tokens_per_s"]
    zero = run_train({**base, "transport": "ib", "dp_collective": "zero"})
    assert "reduce_scatter" in zero["comm"]["data_parallel"]


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"gpus": 100, "tp": 8}, "multiple"),
        ({"gpus": 64, "tp": 8, "pp": 2, "dp": 3}, "tp\\*pp\\*dp"),
        ({"gpus": 64, "tp": 8, "params": -1}, ">="),
        ({"gpus": 64, "tp": 8, "dp_collective": "magic"}, "allreduce, zero .* or fsdp"),
        ({"gpus": 64, "tp": 8, "recompute": "half"}, "full, selective, none"),
        ({"gpus": 64, "tp": 8, "pp": 2, "layers": 32, "virtual_stages": 3}, "virtual-stages"),
        ({"gpus": 64, "tp": 8, "ep": 3}, "must divide"),
        ({"gpus": 64, "tp": 8, "cp": 3}, "multiple of tp\\*pp\\*cp"),
        ({"gpus": 48, "tp": 8, "pp": 3, "layers": 2, "hidden": 1024}, "cannot fill 3 pipeline stages"),
        ({"gpus": 64, "tp": 8, "system": "dgx-a100", "precision": "fp8"}, "FP8 tensor cores"),
        (
            {"gpus": 64, "tp": 8, "layers": 4, "hidden": 1024, "heads": 16, "kv_heads": 3},
            "must divide --heads",
        ),
        ({"tp": 8}, "--gpus or --dp"),
    ],
)
def test_train_bad_input(params, match) -> None:
    with pytest.raises(FabricscopeError, match=match):
        run_train(params)


def test_tcp_transfer_slow_start() -> None:
    rate, rtt, mss = 12.5e9, 50e-6, 1448
    assert tcp_transfer_s(1e6, rate, rtt, mss, fresh=False) == pytest.approx(1e6 / rate)
    small = tcp_transfer_s(10_000, rate, rtt, mss, fresh=True)
    assert small == pytest.approx(rtt + 10_000 / rate)  # fits the initial window: handshake + one flight
    big = tcp_transfer_s(1e9, rate, rtt, mss, fresh=True)
    assert big > 1e9 / rate + rtt and big < 1e9 / rate + 20 * rtt


def test_infer_compares_connection_modes() -> None:
    d = run_infer(
        {"params": 70e9, "tp": 8, "batch": 1, "prompt_tokens": 512, "transport": "tcp", "nic_rate": "100G"}
    )
    kv = d["kv_transfer"]
    assert kv["tcp_per_request"]["time_s"] > kv["tcp_pooled"]["time_s"]
    assert kv["rdma_pooled"]["time_s"] < kv["tcp_pooled"]["time_s"]
    assert d["decode_bound"] == "memory"
    assert d["time_per_output_token_s"] == pytest.approx(d["decode_step_s"] + d["tp_comm_per_token_s"])
    with pytest.raises(FabricscopeError, match="multiple of --gpus-per-node"):
        run_infer({"tp": 12})


def _train(**kw):
    base = {
        "system": "dgx-h100",
        "gpus": 16,
        "tp": 8,
        "layers": 8,
        "hidden": 4096,
        "heads": 32,
        "seq_len": 4096,
        "tokens_per_step": 16 * 4096,
    }
    return run_train({**base, **kw})


def test_uneven_pipeline_stages_run_at_the_fullest_stage() -> None:
    """126 layers on 16 stages (Llama 3.1 405B's) run: the fullest stage (8 layers) sets the pace."""
    d = run_train(
        {
            "model": "llama3-405b",
            "system": "dgx-h100",
            "gpus": 128,
            "tp": 8,
            "pp": 16,
            "tokens_per_step": 64 * 8192,
            "seq_len": 8192,
        }
    )
    assert d["workload"]["stage_layers"] == 8 and d["workload"]["layers"] == 126
    even = run_train(
        {
            "model": "llama3-405b",
            "layers": 128,
            "system": "dgx-h100",
            "gpus": 128,
            "tp": 8,
            "pp": 16,
            "tokens_per_step": 64 * 8192,
            "seq_len": 8192,
        }
    )
    assert d["compute_s"] == pytest.approx(even["compute_s"], rel=0.02)  # both stages hold 8 layers


def test_gqa_gated_mlp_and_fp8_change_the_compute_as_their_flops_do() -> None:
    mha, gqa = _train(), _train(kv_heads=8)
    assert gqa["compute_s"] < mha["compute_s"]  # K and V for 8 heads, not 32
    plain, gated = _train(ffn=11008), _train(ffn=11008, gated_mlp=True)
    assert gated["compute_s"] > 1.05 * plain["compute_s"]  # a third h x ffn matrix (the attention core stays)
    assert gated["workload"]["params"] > plain["workload"]["params"]
    bf16, fp8 = _train(), _train(precision="fp8")
    assert fp8["compute_s"] < bf16["compute_s"] and fp8["workload"]["precision"] == "fp8"


def test_fsdp_gathers_parameters_every_micro_batch() -> None:
    """ZeRO-3 moves the parameters twice per micro-batch; ZeRO-1/2 once per step: on a slow
    network FSDP exposes more communication."""
    kw = {"tp": 1, "gpus": 32, "transport": "tcp", "nic_rate": "100G", "tokens_per_step": 64 * 4096}
    zero, fsdp = _train(dp_collective="zero", **kw), _train(dp_collective="fsdp", **kw)
    assert fsdp["comm"]["data_parallel"]["total_s"] > 2 * zero["comm"]["data_parallel"]["total_s"]
    assert fsdp["exposed_comm_s"] > zero["exposed_comm_s"]
