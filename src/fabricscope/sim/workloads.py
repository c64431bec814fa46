"""Workloads on top of collectives: a training step (3-D parallelism) and LLM inference.

Training (Megatron-style, rank = tp + TP * (dp + DP * pp)):

* compute: 6 N FLOPs per token plus 12 L h s for attention scores (Kaplan et al. 2020,
  Hoffmann et al. 2022) at the GPU's sustained TFLOP/s; 1F1B pipeline with m micro-batches
  runs (m + PP - 1) micro-batch slots, so the bubble is (PP - 1) slots;
* tensor parallel: 2 all-reduces forward + 2 backward per layer per micro-batch of
  b*s*h activations (Shoeybi et al. 2019), all TP groups at once, on the critical path;
* pipeline: one activation send forward and one gradient send backward per micro-batch per
  stage boundary; 2 (m + PP - 2) sends are on the critical path of 1F1B;
* data parallel: all-reduce (or reduce-scatter + all-gather for ZeRO/FSDP) of the local
  gradient, all DP groups at once; overlapped with the backward pass of the last micro-batch
  (the all-gather with the first forward) when overlap is on, so only the excess is exposed.

Inference: decode is memory-bound (weights and KV cache read per token, HBM bandwidth) or
compute-bound, whichever is slower; per token 2 TP all-reduces per layer of batch*h
activations; disaggregated serving moves each request's KV cache from a prefill node to a
decode node, over a per-request TCP connection (handshake + slow start), a pooled TCP
connection, or RDMA with pooled queue pairs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fabricscope.errors import FabricscopeError
from fabricscope.sim import collectives
from fabricscope.sim.engine import SCHEMA, Simulator
from fabricscope.sim.scenario import build_simulator, build_topology, normalise
from fabricscope.sim.transport import make_transport
from fabricscope.units import parse_probability, parse_size

TRAIN_DEFAULTS: dict[str, Any] = {
    "params": 70e9, "gpus": None, "tp": 8, "pp": 1, "dp": None, "gpu_tflops": 400.0,
    "tokens_per_step": 4 * 2**20, "seq_len": 4096, "micro_batch": 1, "layers": None, "hidden": None,
    "dp_collective": "allreduce", "grad_bytes": 2, "act_bytes": 2, "overlap_dp": True,
}
INFER_DEFAULTS: dict[str, Any] = {
    "params": 70e9, "tp": 8, "batch": 32, "prompt_tokens": 2048, "output_tokens": 256, "layers": None,
    "hidden": None, "gpu_tflops": 400.0, "hbm_GBps": 3350.0, "weight_bytes": 2, "act_bytes": 2,
    "kv_bytes_per_token": None, "requests": 1,
}


def _num(p: dict[str, Any], key: str, lo: float = 0.0, integer: bool = False) -> float:
    v = p.get(key)
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FabricscopeError(f"--{key.replace('_', '-')} must be a number, got {v!r}") from None
    if not math.isfinite(x) or x < lo:
        raise FabricscopeError(f"--{key.replace('_', '-')} must be >= {lo:g}")
    if integer:
        if x != int(x):
            raise FabricscopeError(f"--{key.replace('_', '-')} must be an integer")
        return int(x)
    return x


def shape_of(params: float, layers: int | None, hidden: int | None, multiple: int = 1) -> tuple[int, int]:
    """Layers and hidden size: given, or derived from N ~ 12 L h^2 with h ~ 128 L (the aspect
    ratio of GPT-3 175B: 96 layers, h 12288); derived layer counts are a multiple of
    ``multiple`` (the pipeline stages) and h a multiple of 64."""
    if layers and hidden:
        return int(layers), int(hidden)
    if hidden and not layers:
        L = max(1, round(params / (12 * hidden * hidden)))
        return max(multiple, round(L / multiple) * multiple), int(hidden)
    if not layers:
        L = max(1, round((params / (12 * 128 * 128)) ** (1 / 3)))
        layers = max(multiple, round(L / multiple) * multiple)
    return int(layers), max(64, int(round(math.sqrt(params / (12 * layers)) / 64) * 64))


def _time(sim: Simulator, plan: collectives.Plan) -> dict[str, Any]:
    r = sim.run_plan(plan)
    return {"time_s": r.time_s, "busbw_GBps": r.busbw_GBps, "algbw_GBps": r.algbw_GBps, "size_bytes": r.size_bytes,
            "limited_by": r.limited_by, "bottlenecks": r.bottlenecks[:3]}


def run_train(params: dict[str, Any]) -> dict[str, Any]:
    raw = {**TRAIN_DEFAULTS, **{k.replace("-", "_"): v for k, v in params.items() if v is not None}}
    P = _num(raw, "params", 1e3)
    tp, pp = int(_num(raw, "tp", 1, True)), int(_num(raw, "pp", 1, True))
    gpus = raw.get("gpus")
    dp = raw.get("dp")
    if gpus is None and dp is None:
        raise FabricscopeError("give --gpus or --dp")
    if gpus is None:
        gpus = tp * pp * int(dp)
    gpus = int(_num({"gpus": gpus}, "gpus", 1, True))
    if dp is None:
        if gpus % (tp * pp):
            raise FabricscopeError(f"--gpus {gpus} is not a multiple of tp*pp = {tp * pp}")
        dp = gpus // (tp * pp)
    dp = int(_num({"dp": dp}, "dp", 1, True))
    if tp * pp * dp != gpus:
        raise FabricscopeError(f"tp*pp*dp = {tp}*{pp}*{dp} = {tp * pp * dp} but --gpus is {gpus}")
    sim_params = {k: v for k, v in raw.items() if k not in TRAIN_DEFAULTS and k != "workload"}
    sp = normalise(sim_params)
    G = int(sp["gpus_per_node"])
    if sp.get("topology_file") is None:
        if gpus % G:
            raise FabricscopeError(f"--gpus {gpus} is not a multiple of --gpus-per-node {G}")
        sp["nodes"] = gpus // G
        if sp["nodes"] == 1 and sp["topology"] != "single-node":
            sp["topology"] = "single-node"
    topo = build_topology(sp)
    if topo.n_gpus < gpus:
        raise FabricscopeError(f"the topology has {topo.n_gpus} GPUs, the job needs {gpus}")
    sim = build_simulator(sp, topo)
    tflops = _num(raw, "gpu_tflops", 1e-3)
    tokens = _num(raw, "tokens_per_step", 1)
    seq = int(_num(raw, "seq_len", 1, True))
    mb = int(_num(raw, "micro_batch", 1, True))
    L, h = shape_of(P, raw.get("layers"), raw.get("hidden"), pp)
    if L % pp:
        raise FabricscopeError(f"{L} layers do not split into {pp} pipeline stages (give --layers)")
    gb, ab = _num(raw, "grad_bytes", 1), _num(raw, "act_bytes", 1)
    m = max(1, math.ceil(tokens / (dp * mb * seq)))
    tokens_eff = m * dp * mb * seq
    flops_token = 6 * P + 12 * L * h * seq
    compute_total = tokens_eff * flops_token / (gpus * tflops * 1e12)  # per GPU, perfectly balanced
    t_mb = compute_total / m
    compute_step = (m + pp - 1) * t_mb
    bubble = (pp - 1) * t_mb
    ranks = np.arange(gpus).reshape(pp, dp, tp)  # [pp_i, dp_i, tp_i]
    comm: dict[str, Any] = {}
    exposed = 0.0
    if tp > 1:
        groups = ranks.reshape(pp * dp, tp)
        act = mb * seq * h * ab
        r = _time(sim, collectives.plan(topo, "all_reduce", sim_params.get("algo"), int(act), groups))
        calls = m * (L // pp) * 4
        r.update(calls=calls, total_s=calls * r["time_s"], exposed_s=calls * r["time_s"])
        comm["tensor_parallel"] = r
        exposed += r["exposed_s"]
    if pp > 1:
        src = ranks[:-1].ravel()
        dst = ranks[1:].ravel()
        act = mb * seq * h * ab / tp  # each TP rank sends its shard (scatter/gather optimisation)
        r = _time(sim, collectives.p2p_plan(topo, src, dst, act, "pp-send", "pipeline stage sends"))
        crit = 2 * (m + pp - 2)  # sends on the 1F1B critical path (all stages send at once)
        r.update(calls=2 * m * (pp - 1), total_s=crit * r["time_s"], exposed_s=crit * r["time_s"])
        comm["pipeline_parallel"] = r
        exposed += r["exposed_s"]
    if dp > 1:
        groups = ranks.transpose(0, 2, 1).reshape(pp * tp, dp)
        grad = P / (tp * pp) * gb
        kind = str(raw["dp_collective"]).lower()
        overlap = str(raw["overlap_dp"]).lower() not in ("false", "0", "no", "off")
        if kind in ("allreduce", "all_reduce"):
            r = _time(sim, collectives.plan(topo, "all_reduce", sim_params.get("algo"), int(grad), groups))
            window = (2 / 3) * t_mb if overlap else 0.0
            r.update(collective="all_reduce", exposed_s=max(0.0, r["time_s"] - window), total_s=r["time_s"])
        elif kind in ("zero", "fsdp", "rs-ag"):
            rs = _time(sim, collectives.plan(topo, "reduce_scatter", None, int(grad), groups))
            ag = _time(sim, collectives.plan(topo, "all_gather", None, int(grad), groups))
            w_b = (2 / 3) * t_mb if overlap else 0.0
            w_f = (1 / 3) * t_mb if overlap else 0.0
            r = {"collective": "reduce_scatter + all_gather", "reduce_scatter": rs, "all_gather": ag,
                 "time_s": rs["time_s"] + ag["time_s"], "total_s": rs["time_s"] + ag["time_s"],
                 "exposed_s": max(0.0, rs["time_s"] - w_b) + max(0.0, ag["time_s"] - w_f),
                 "busbw_GBps": rs["busbw_GBps"], "bottlenecks": rs["bottlenecks"], "limited_by": rs["limited_by"]}
        else:
            raise FabricscopeError("--dp-collective is allreduce or zero")
        r["overlapped_with_backward"] = overlap
        comm["data_parallel"] = r
        exposed += r["exposed_s"]
    step = compute_step + exposed
    return {
        "schema": SCHEMA,
        "kind": "train",
        "workload": {
            "params": P, "gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "layers": L, "hidden": h, "seq_len": seq,
            "micro_batch": mb, "micro_batches": m, "tokens_per_step": tokens_eff, "gpu_tflops": tflops,
            "flops_per_token": flops_token, "dp_collective": str(raw["dp_collective"]),
        },
        "step_time_s": step,
        "time_s": step,
        "compute_s": compute_total,
        "pipeline_bubble_s": bubble,
        "exposed_comm_s": exposed,
        "comm_share": exposed / step if step > 0 else 0.0,
        "tokens_per_s": tokens_eff / step,
        "comm": comm,
        "bottlenecks": _worst_bottlenecks(comm),
        "model": sim.describe(),
    }


def _worst_bottlenecks(comm: dict[str, Any]) -> list[dict[str, Any]]:
    worst = max(comm.values(), key=lambda r: r.get("exposed_s", 0.0), default=None)
    return list(worst.get("bottlenecks", [])) if worst else []


def tcp_transfer_s(nbytes: float, rate_Bps: float, rtt_s: float, mss: int, fresh: bool, init_cwnd: int = 10) -> float:
    """Time to move ``nbytes`` over TCP: a fresh connection pays the handshake (1 RTT before the
    first byte) and slow start from ``init_cwnd`` segments (RFC 6928), doubling per RTT until
    the window covers the bandwidth-delay product; a pooled (warm) connection sends at rate."""
    if not fresh:
        return nbytes / rate_Bps
    t = rtt_s  # SYN / SYN-ACK; the request rides on the ACK
    bdp_segments = max(1.0, rate_Bps * rtt_s / mss)
    cwnd, sent = float(init_cwnd), 0.0
    while cwnd < bdp_segments and sent + cwnd * mss < nbytes:
        sent += cwnd * mss
        t += rtt_s
        cwnd *= 2
    return t + (nbytes - sent) / rate_Bps


def run_infer(params: dict[str, Any]) -> dict[str, Any]:
    raw = {**INFER_DEFAULTS, **{k.replace("-", "_"): v for k, v in params.items() if v is not None}}
    P = _num(raw, "params", 1e3)
    tp = int(_num(raw, "tp", 1, True))
    batch = int(_num(raw, "batch", 1, True))
    prompt = int(_num(raw, "prompt_tokens", 1, True))
    out_tok = int(_num(raw, "output_tokens", 1, True))
    tflops = _num(raw, "gpu_tflops", 1e-3)
    hbm = _num(raw, "hbm_GBps", 1e-3) * 1e9
    wb, ab = _num(raw, "weight_bytes", 0.5), _num(raw, "act_bytes", 1)
    L, h = shape_of(P, raw.get("layers"), raw.get("hidden"))
    kv_tok = raw.get("kv_bytes_per_token")
    kv_tok = float(parse_size(kv_tok, minimum=0)) if kv_tok is not None else 2 * L * (h / 8) * ab  # K and V, GQA 8:1
    sim_params = {k: v for k, v in raw.items() if k not in INFER_DEFAULTS and k != "workload"}
    sp = normalise(sim_params)
    G = int(sp["gpus_per_node"])
    if tp > G:
        raise FabricscopeError(f"--tp {tp} is larger than --gpus-per-node {G}; keep a model instance in one node")
    if sp.get("topology_file") is None:
        sp["nodes"] = max(2, int(sp["nodes"]))
        if sp["topology"] == "single-node":
            sp["topology"] = "star"
    topo = build_topology(sp)
    sim = build_simulator(sp, topo)
    ctx = prompt + out_tok / 2  # mean context length during decode
    mem_s = (P * wb + batch * ctx * kv_tok) / tp / hbm
    cmp_s = 2 * P * batch / tp / (tflops * 1e12)
    decode_s = max(mem_s, cmp_s)
    prefill_s = 2 * P * batch * prompt / tp / (tflops * 1e12)
    tp_doc: dict[str, Any] = {"calls_per_token": 2 * L}
    tp_token = tp_prefill = 0.0
    if tp > 1:
        group = np.arange(tp)[None, :]
        r = _time(sim, collectives.plan(topo, "all_reduce", None, int(batch * h * ab), group))
        tp_token = 2 * L * r["time_s"]
        rp = _time(sim, collectives.plan(topo, "all_reduce", None, int(batch * prompt * h * ab), group))
        tp_prefill = 2 * L * rp["time_s"]
        tp_doc.update(per_call=r, per_token_s=tp_token, prefill_s=tp_prefill)
    tpot = decode_s + tp_token
    # KV cache of one batch from the prefill node (node 0) to a decode node (node 1): each of the tp
    # GPUs sends its shard over the network.
    kv_bytes = batch * prompt * kv_tok
    src = np.arange(tp)
    dst = G + np.arange(tp)
    modes: dict[str, Any] = {}
    t_user = sim.transport
    rdma_name = t_user.name if t_user.name in ("ib", "roce", "roce-lossy") else "roce"
    loss = parse_probability(sp["loss"])
    for mode, tname in (("tcp_per_request", "tcp"), ("tcp_pooled", "tcp"), ("rdma_pooled", rdma_name)):
        tr = t_user if t_user.name == tname else make_transport(tname, loss=loss)
        s2 = Simulator(topo, tr, routing=sp.get("routing"), seed=int(sp["seed"]))
        plan = collectives.p2p_plan(topo, src, dst, kv_bytes / tp, f"kv-{tname}", "KV-cache transfer")
        res = s2.run_plan(plan)
        pat = s2.solve_pattern(plan.phases[0].pattern)
        rate = float(pat.solution.rate[pat.network].min())
        rtt = float(2 * (pat.path_lat_s + pat.alpha_s)[pat.network].max())
        if tname == "tcp":
            t = tcp_transfer_s(kv_bytes / tp, rate, rtt, tr.payload_bytes, fresh=(mode == "tcp_per_request"))
            t += tr.alpha_s
        else:
            t = res.time_s
        modes[mode] = {"transport": tname, "time_s": t, "rate_GBps_per_gpu": rate / 1e9, "rtt_us": rtt * 1e6}
    best = min(modes, key=lambda k: modes[k]["time_s"])
    ttft = {k: prefill_s + tp_prefill + v["time_s"] for k, v in modes.items()}
    return {
        "schema": SCHEMA,
        "kind": "infer",
        "workload": {"params": P, "tp": tp, "batch": batch, "prompt_tokens": prompt, "output_tokens": out_tok,
                     "layers": L, "hidden": h, "kv_bytes_per_token": kv_tok, "gpu_tflops": tflops,
                     "hbm_GBps": hbm / 1e9},
        "time_s": tpot,
        "decode_step_s": decode_s,
        "decode_bound": "memory" if mem_s >= cmp_s else "compute",
        "tp_comm_per_token_s": tp_token,
        "time_per_output_token_s": tpot,
        "comm_share": tp_token / tpot if tpot > 0 else 0.0,
        "tokens_per_s": batch / tpot,
        "prefill_s": prefill_s + tp_prefill,
        "kv_cache_bytes": kv_bytes,
        "kv_transfer": modes,
        "kv_transfer_best": best,
        "time_to_first_token_s": ttft,
        "tensor_parallel": tp_doc,
        "bottlenecks": tp_doc.get("per_call", {}).get("bottlenecks", []),
        "model": sim.describe(),
    }
