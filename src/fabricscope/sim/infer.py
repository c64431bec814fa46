"""``sim infer``: LLM serving on a fabric, inside one node or across nodes.

One model instance is tp x ep GPUs (rank = tp rank + tp x ep rank, node-major):

* decode, per token: memory-bound (the instance's weights and KV cache read from HBM) or
  compute-bound (2 x active parameters x batch FLOPs), spread over the tp x ep GPUs;
* tensor parallel: 2 all-reduces per layer of (batch / ep) x h activations in every TP group,
  timed as NCCL runs them (``select.collective``: NCCL's algorithm and protocol), in one node or
  across nodes when tp exceeds a node;
* expert parallel (MoE, ``--experts``): per layer a dispatch and a combine alltoall in every EP
  group, each rank sending its (batch / ep) tokens' top-k activations (k x h each), over the
  network when the EP group spans nodes (the transport and the NIC matter here);
* disaggregated serving: the prefill instance's KV cache moves to the decode instance (the next
  nodes), each GPU its shard, over a per-request TCP connection (handshake + slow start), a
  pooled TCP connection, or RDMA with pooled queue pairs; time to first token = prefill + that;
* ``--tpot-target-ms``: every transport (ib, roce, tcp) at every NIC rate (100G to 800G) on the
  same fabric, and which of them meet the target.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fabricscope.errors import FabricscopeError
from fabricscope.sim import collectives, gpus, moe, select
from fabricscope.sim.engine import SCHEMA, Simulator
from fabricscope.sim.models import named
from fabricscope.sim.params import InferPlan
from fabricscope.sim.scenario import build_simulator, build_topology, normalise
from fabricscope.sim.transport import make_transport
from fabricscope.sim.workloads import _num, shape_of, tcp_transfer_s
from fabricscope.units import parse_probability, parse_size

INFER_DEFAULTS: dict[str, Any] = {k: f.default for k, f in InferPlan.model_fields.items()}
TARGET_TRANSPORTS = ("tcp", "roce", "ib")
TARGET_RATES = ("100G", "200G", "400G", "800G")


WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
# Sustained share of the datasheet peak in serving (prefill GEMMs, compute-bound decode): fitted on
# the inference rows of the calibration split (sim/published.py CALIBRATION).
INFER_COMPUTE_SHARE = 0.5


def _workload(raw: dict[str, Any]) -> dict[str, Any]:
    w: dict[str, Any] = {"params": _num(raw, "params", 1e3)}
    for key in ("tp", "pp", "batch", "prompt_tokens", "output_tokens", "ep", "active_experts"):
        w[key] = int(_num(raw, key, 1, True))
    w["experts"] = int(_num(raw, "experts", 0, True))
    w["gpu_tflops"] = _num(raw, "gpu_tflops", 1e-3) if raw.get("gpu_tflops") is not None else None
    w["hbm_GBps"] = _num(raw, "hbm_GBps", 1e-3) if raw.get("hbm_GBps") is not None else None
    prec = raw.get("weight_precision")
    if prec is not None and str(prec).lower() not in WEIGHT_BYTES:
        raise FabricscopeError(f"--weight-precision is one of {', '.join(WEIGHT_BYTES)}")
    w["weight_precision"] = str(prec).lower() if prec else None
    w["weight_bytes"] = WEIGHT_BYTES[w["weight_precision"]] if prec else _num(raw, "weight_bytes", 0.5)
    w["act_bytes"] = _num(raw, "act_bytes", 1)
    w["ep_mode"] = str(raw.get("ep_mode") or "nccl").lower()
    w["active_params"] = (
        _num(raw, "active_params", 1e3) if raw.get("active_params") is not None else w["params"]
    )
    if w["active_params"] > w["params"]:
        raise FabricscopeError("--active-params cannot exceed --params")
    if w["experts"] == 0 and w["ep"] > 1:
        raise FabricscopeError("--ep needs a mixture-of-experts model (--experts)")
    if w["experts"] and (w["ep"] > w["experts"] or w["active_experts"] > w["experts"]):
        raise FabricscopeError("--ep and --active-experts cannot exceed --experts")
    if w["pp"] > 1 and w["ep"] > 1:
        raise FabricscopeError("--pp with --ep is not modelled (pipeline stages of an expert-parallel group)")
    if w["batch"] % w["ep"]:
        raise FabricscopeError(
            f"--batch {w['batch']} must be a multiple of --ep {w['ep']} (each EP rank serves a share)"
        )
    w["layers"], w["hidden"] = shape_of(
        w["params"] if not w["experts"] else w["active_params"], raw.get("layers"), raw.get("hidden"), w["pp"]
    )
    kv = raw.get("kv_bytes_per_token")
    L, h = w["layers"], w["hidden"]
    heads = int(raw.get("heads") or max(1, h // 128))
    kv_heads = int(raw.get("kv_heads") or max(1, heads // 8))
    w["kv_bytes_per_token"] = (
        float(parse_size(kv, minimum=0))
        if kv is not None
        else 2 * L * kv_heads * (h / heads) * w["act_bytes"]
    )
    return w


def _gpu_rates(topo: Any, w: dict[str, Any]) -> tuple[float, float]:
    """(HBM GB/s, sustained TFLOP/s) per GPU: as given, else the GPU's own figures (sim/gpus.py)."""
    if topo.node.gpu == gpus.CPU_HOST:
        return w["hbm_GBps"] or 3350.0, w["gpu_tflops"] or 400.0
    g = gpus.lookup(topo.node.gpu)
    peak = g.fp8_tflops if w["weight_precision"] == "fp8" and g.fp8_tflops else g.bf16_tflops
    return w["hbm_GBps"] or g.hbm_GBps, w["gpu_tflops"] or peak * INFER_COMPUTE_SHARE


def _fabric(raw: dict[str, Any], w: dict[str, Any]) -> tuple[dict[str, Any], Any, Simulator, int]:
    """Fabric parameters, topology and simulator; the node count covers a prefill and a decode
    instance. Returns also the nodes of one instance."""
    sp = normalise({k: v for k, v in raw.items() if k not in INFER_DEFAULTS and k != "workload"})
    G = int(sp["gpus_per_node"])
    if not 1 <= G <= 1024:  # checked here too: the TP layout below divides by it before the fabric is built
        raise FabricscopeError("--gpus-per-node must be between 1 and 1024")
    n = w["tp"] * w["ep"] * w["pp"]
    if w["tp"] > G and w["tp"] % G:
        raise FabricscopeError(f"--tp {w['tp']} across nodes must be a multiple of --gpus-per-node {G}")
    if w["tp"] <= G and G % w["tp"]:
        raise FabricscopeError(f"--tp {w['tp']} must divide --gpus-per-node {G}")
    per = math.ceil(n / G)
    if n > G and n % G:
        raise FabricscopeError(f"an instance of tp x ep = {n} GPUs must fill whole nodes of {G}")
    if sp.get("topology_file") is None:
        sp["nodes"] = max(2 * per, int(sp["nodes"]))
        if sp["topology"] == "single-node":
            sp["topology"] = "star"
    topo = build_topology(sp)
    if topo.nodes < 2 * per:
        raise FabricscopeError(
            f"the fabric has {topo.nodes} node(s); a prefill and a decode instance need {2 * per}"
        )
    return sp, topo, build_simulator(sp, topo), per


def _comm(sim: Simulator, w: dict[str, Any]) -> dict[str, Any]:
    """Per-token TP all-reduces (NCCL's choice) and EP alltoalls of one decode step, and the TP
    all-reduces of the prefill."""
    tp, ep, L, h, ab = w["tp"], w["ep"], w["layers"], w["hidden"], w["act_bytes"]
    ranks = np.arange(tp * ep, dtype=np.int64).reshape(ep, tp)
    out: dict[str, Any] = {
        "tp_token_s": 0.0,
        "tp_prefill_s": 0.0,
        "tp_prefill_batch_s": 0.0,
        "ep_token_s": 0.0,
        "pp_token_s": 0.0,
    }
    local = w["batch"] // ep
    if tp > 1:
        r = select.collective(sim, "all_reduce", int(local * h * ab), ranks)
        rp = select.collective(
            sim, "all_reduce", int(w["prompt_tokens"] * h * ab), ranks
        )  # one request's prefill
        rb = select.collective(
            sim, "all_reduce", int(local * w["prompt_tokens"] * h * ab), ranks
        )  # the batch's
        out["tp_token_s"], out["tp_prefill_s"] = 2 * L * r.time_s, 2 * L * rp.time_s
        out["tp_prefill_batch_s"] = 2 * L * rb.time_s
        out["tensor_parallel"] = {
            "calls_per_token": 2 * L,
            "per_call": r.summary(),
            "per_token_s": out["tp_token_s"],
            "prefill_s": out["tp_prefill_s"],
        }
    if w["experts"] and ep > 1:
        G = sim.topo.node.gpus_per_node
        mr = moe.alltoall(
            sim, local, w["active_experts"], h, ab, ep, mode=w["ep_mode"], per_node=max(1, G // tp)
        )
        out["ep_token_s"] = 2 * L * mr.time_s
        call = {
            "time_s": mr.time_s,
            "size_bytes": int(local * w["active_experts"] * h * ab),
            "algo": f"moe-{mr.mode}",
            "proto": "Simple",
            "limited_by": ("network bandwidth" if mr.limited_by == "rdma" else "nvlink bandwidth")
            if mr.time_s > 2 * moe.MOE_ALPHA_S
            else "latency",
            "busbw_GBps": mr.bandwidth_GBps(),
            "nic_efficiency": mr.nic_efficiency,
            "bottlenecks": [],
        }
        out["expert_parallel"] = {
            "calls_per_token": 2 * L,
            "per_call": call,
            "per_token_s": out["ep_token_s"],
            "mode": mr.mode,
            "detail": mr.to_dict(),
        }
    if w["pp"] > 1:  # a token's activations cross every stage boundary once
        G = sim.topo.node.gpus_per_node
        src = np.arange(tp)
        dst = src + max(tp, G if tp >= G else tp)
        res = sim.run_plan(
            collectives.p2p_plan(sim.topo, src, dst, max(1.0, local * h * ab), "pp-send", "stage send")
        )
        out["pp_token_s"] = (w["pp"] - 1) * res.time_s
        out["pipeline_parallel"] = {
            "sends_per_token": w["pp"] - 1,
            "per_send_s": res.time_s,
            "limited_by": res.limited_by,
        }
    return out


def _kv_modes(sp: dict[str, Any], topo: Any, sim: Simulator, w: dict[str, Any], per: int) -> dict[str, Any]:
    """KV cache of one request from the prefill instance to the decode instance, each GPU its shard."""
    n = w["tp"] * w["ep"] * w["pp"]
    kv_bytes = w["prompt_tokens"] * w["kv_bytes_per_token"]
    src = np.arange(n)
    dst = per * topo.node.gpus_per_node + np.arange(n)
    modes: dict[str, Any] = {}
    t_user = sim.transport
    rdma_name = t_user.name if t_user.name in ("ib", "roce", "roce-lossy") else "roce"
    loss = parse_probability(sp["loss"])
    for mode, tname in (("tcp_per_request", "tcp"), ("tcp_pooled", "tcp"), ("rdma_pooled", rdma_name)):
        tr = t_user if t_user.name == tname else make_transport(tname, loss=loss)
        s2 = Simulator(topo, tr, routing=sp.get("routing"), seed=int(sp["seed"]))
        plan = collectives.p2p_plan(topo, src, dst, kv_bytes / n, f"kv-{tname}", "KV-cache transfer")
        res = s2.run_plan(plan)
        pat = s2.solve_pattern(plan.phases[0].pattern)
        rate = float(pat.solution.rate[pat.network].min())
        rtt = float(2 * (pat.path_lat_s + pat.alpha_s)[pat.network].max())
        if tname == "tcp":
            t = tcp_transfer_s(kv_bytes / n, rate, rtt, tr.payload_bytes, fresh=(mode == "tcp_per_request"))
            t += tr.alpha_s
        else:
            t = res.time_s
        modes[mode] = {"transport": tname, "time_s": t, "rate_GBps_per_gpu": rate / 1e9, "rtt_us": rtt * 1e6}
    return modes


def run_infer(params: dict[str, Any]) -> dict[str, Any]:
    given = {k.replace("-", "_"): v for k, v in params.items() if v is not None}
    raw = {**INFER_DEFAULTS, **given}
    if raw.get("model"):  # a named model fills the shape the user did not give
        raw.update({k: v for k, v in named(str(raw["model"])).infer_params().items() if k not in given})
    w = _workload(raw)
    sp, topo, sim, per = _fabric(raw, w)
    hbm, tflops = _gpu_rates(topo, w)
    w["hbm_GBps"], w["gpu_tflops"] = hbm, tflops
    n = w["tp"] * w["ep"]  # GPUs of one pipeline stage; a token crosses all pp stages in turn
    P, Pa, batch = w["params"], w["active_params"], w["batch"]
    ctx = w["prompt_tokens"] + w["output_tokens"] / 2  # mean context length during decode
    mem_s = (P * w["weight_bytes"] + batch * ctx * w["kv_bytes_per_token"]) / n / (hbm * 1e9)
    cmp_s = 2 * Pa * batch / n / (tflops * 1e12)
    decode_s = max(mem_s, cmp_s)
    prefill_s = 2 * Pa * w["prompt_tokens"] / n / (tflops * 1e12)  # one request's prompt (per-request TTFT)
    c = _comm(sim, w)
    comm = c["tp_token_s"] + c["ep_token_s"] + c["pp_token_s"]
    tpot = decode_s + comm
    modes = _kv_modes(sp, topo, sim, w, per)
    pp_prefill = c["pp_token_s"] * max(1.0, w["prompt_tokens"] / max(1, batch // w["ep"]))
    ttft = {k: prefill_s + c["tp_prefill_s"] + pp_prefill + v["time_s"] for k, v in modes.items()}
    tp_doc = c.get("tensor_parallel", {"calls_per_token": 2 * w["layers"]})
    doc = {
        "schema": SCHEMA,
        "kind": "infer",
        "workload": {
            k: w[k]
            for k in (
                "params",
                "tp",
                "pp",
                "ep",
                "batch",
                "prompt_tokens",
                "output_tokens",
                "layers",
                "hidden",
                "kv_bytes_per_token",
                "gpu_tflops",
                "hbm_GBps",
                "experts",
                "active_experts",
                "active_params",
                "weight_bytes",
                "weight_precision",
                "ep_mode",
            )
        },
        "time_s": tpot,
        "decode_step_s": decode_s,
        "decode_bound": "memory" if mem_s >= cmp_s else "compute",
        "tp_comm_per_token_s": c["tp_token_s"],
        "ep_comm_per_token_s": c["ep_token_s"],
        "pp_comm_per_token_s": c["pp_token_s"],
        "time_per_output_token_s": tpot,
        "comm_share": comm / tpot if tpot > 0 else 0.0,
        "tokens_per_s": batch / tpot,
        "prefill_s": prefill_s + c["tp_prefill_s"] + pp_prefill,
        # the whole batch's prompts in one pass (offline throughput: prefill, then the output tokens)
        "prefill_batch_s": prefill_s * batch + c["tp_prefill_batch_s"] + pp_prefill,
        "kv_cache_bytes": batch * w["prompt_tokens"] * w["kv_bytes_per_token"],
        "kv_cache_bytes_per_request": w["prompt_tokens"] * w["kv_bytes_per_token"],
        "kv_transfer": modes,
        "kv_transfer_best": min(modes, key=lambda k: modes[k]["time_s"]),
        "time_to_first_token_s": ttft,
        "tensor_parallel": tp_doc,
        "bottlenecks": (c.get("expert_parallel") or tp_doc).get("per_call", {}).get("bottlenecks", []),
        "model": sim.describe(),
    }
    if c.get("expert_parallel"):
        doc["expert_parallel"] = c["expert_parallel"]
    if c.get("pipeline_parallel"):
        doc["pipeline_parallel"] = c["pipeline_parallel"]
    from fabricscope.sim.assumptions import collect

    calls = [x["per_call"] for x in (c.get("tensor_parallel"), c.get("expert_parallel")) if x]
    doc["assumptions"] = collect(sim, raw, calls)
    if raw.get("tpot_target_ms") is not None:
        doc["tpot_target"] = tpot_target(params, _num(raw, "tpot_target_ms", 1e-6))
    return doc


def tpot_target(params: dict[str, Any], target_ms: float) -> dict[str, Any]:
    """Which transport and NIC rate meet a time-per-output-token target on this fabric: each
    (transport, rate) in turn, everything else as given; per transport the slowest rate that meets it."""
    base = {
        k: v
        for k, v in params.items()
        if k.replace("-", "_") not in ("tpot_target_ms", "transport", "nic_rate")
    }
    rows = []
    for tname in TARGET_TRANSPORTS:
        for rate in TARGET_RATES:
            d = run_infer({**base, "transport": tname, "nic_rate": rate})
            t = d["time_per_output_token_s"]
            rows.append(
                {
                    "transport": tname,
                    "nic_rate": rate,
                    "tpot_s": t,
                    "meets": t * 1e3 <= target_ms,
                    "ttft_s": min(d["time_to_first_token_s"].values()),
                }
            )
    slowest = {}
    for tname in TARGET_TRANSPORTS:
        ok = [r for r in rows if r["transport"] == tname and r["meets"]]
        slowest[tname] = ok[0]["nic_rate"] if ok else None
    return {"target_ms": target_ms, "options": rows, "slowest_rate_that_meets": slowest}
