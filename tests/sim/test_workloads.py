"""Training-step and inference models on top of the collective engine."""

from __future__ import annotations

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.workloads import run_infer, run_train, shape_of, tcp_transfer_s


def test_shape_from_parameter_count() -> None:
    L, h = shape_of(175e9, None, None)
    assert abs(12 * L * h * h - 175e9) / 175e9 < 0.1 and h % 64 == 0
    assert shape_of(70e9, 80, 8192) == (80, 8192)
    L, _ = shape_of(70e9, None, None, multiple=4)
    assert L % 4 == 0


def test_compute_only_job_has_no_communication() -> None:
    d = run_train({"params": 1e9, "gpus": 1, "tp": 1, "pp": 1, "gpu_tflops": 100, "tokens_per_step": 2**20,
                   "gpus_per_node": 1, "layers": 16, "hidden": 2048, "seq_len": 2048})
    flops = 6e9 + 12 * 16 * 2048 * 2048
    assert d["compute_s"] == pytest.approx(2**20 * flops / 100e12, rel=1e-12)
    assert d["exposed_comm_s"] == 0 and d["comm"] == {}
    assert d["tokens_per_s"] == pytest.approx(2**20 / d["step_time_s"])


def test_3d_parallel_step() -> None:
    d = run_train({"params": 70e9, "gpus": 256, "tp": 8, "pp": 4, "gpu_tflops": 700, "tokens_per_step": 2**22,
                   "transport": "ib"})
    w = d["workload"]
    assert (w["dp"], w["micro_batches"]) == (8, 128)
    assert set(d["comm"]) == {"tensor_parallel", "pipeline_parallel", "data_parallel"}
    assert d["comm"]["tensor_parallel"]["limited_by"] == "nvlink bandwidth"  # TP stays in the node
    assert d["step_time_s"] == pytest.approx(
        d["compute_s"] + d["pipeline_bubble_s"] + d["exposed_comm_s"], rel=1e-12)
    assert 0 < d["comm_share"] < 1


def test_slower_network_means_more_exposed_communication() -> None:
    base = {"params": 13e9, "gpus": 64, "tp": 8, "pp": 1, "gpu_tflops": 400, "tokens_per_step": 2**20,
            "overlap_dp": False}
    fast = run_train({**base, "transport": "ib", "nic_rate": "400G"})
    slow = run_train({**base, "transport": "tcp", "nic_rate": "100G", "nics_per_node": 1})
    assert slow["exposed_comm_s"] > 4 * fast["exposed_comm_s"]
    assert slow["tokens_per_s"] < fast["tokens_per_s"]
    zero = run_train({**base, "transport": "ib", "dp_collective": "zero"})
    assert "reduce_scatter" in zero["comm"]["data_parallel"]


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"gpus": 100, "tp": 8}, "multiple"),
        ({"gpus": 64, "tp": 8, "pp": 2, "dp": 3}, "tp\\*pp\\*dp"),
        ({"gpus": 64, "tp": 8, "params": -1}, ">="),
        ({"gpus": 64, "tp": 8, "dp_collective": "magic"}, "allreduce or zero"),
        ({"gpus": 48, "tp": 8, "pp": 3, "layers": 32}, "pipeline stages"),
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
    d = run_infer({"params": 70e9, "tp": 8, "batch": 1, "prompt_tokens": 512, "transport": "tcp", "nic_rate": "100G"})
    kv = d["kv_transfer"]
    assert kv["tcp_per_request"]["time_s"] > kv["tcp_pooled"]["time_s"]
    assert kv["rdma_pooled"]["time_s"] < kv["tcp_pooled"]["time_s"]
    assert d["decode_bound"] == "memory"
    assert d["time_per_output_token_s"] == pytest.approx(d["decode_step_s"] + d["tp_comm_per_token_s"])
    with pytest.raises(FabricscopeError, match="gpus-per-node"):
        run_infer({"tp": 16})
