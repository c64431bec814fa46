"""One training step as Megatron-LM runs it: tensor, pipeline (interleaved 1F1B), data, context
and expert parallelism, each collective timed by the NCCL model (sim/select, algorithm auto).

Placement (Megatron's order): rank = tp + TP * (cp + CP * (dp + DP * pp)), so TP groups are
consecutive GPUs of a node and pipeline stages are the outermost dimension.

* compute: per layer and micro-batch from sim/train_compute (GEMMs at their shapes, memory-bound
  ops at HBM bandwidth), activation recomputation ``full``, ``selective`` or ``none``;
* pipeline: interleaved 1F1B with ``v`` virtual stages per GPU; the bubble is (PP - 1) / v
  micro-batch slots (Narayanan et al., SC21, §2.2.2); the slowest stage (the last one, which
  also runs the logit layer) sets the pace;
* tensor parallel: 2 all-reduces forward and 2 backward per layer (and 2 more when full
  recomputation repeats the forward); with sequence parallelism each all-reduce becomes a
  reduce-scatter + all-gather (Korthikanti et al. 2022, §4.2.2); on the critical path;
* pipeline sends: b s h / t bytes per micro-batch per virtual-stage boundary (scatter/gather
  optimisation, SC21 §4.1), 2 (v m + PP - 2) of them on the critical path;
* data parallel: all-reduce, or reduce-scatter + all-gather (distributed optimizer, ZeRO), of
  the local gradients, overlapped with the backward pass of the last micro-batch (the all-gather
  with the first forward); solved together with the pipeline sends and the tensor-parallel
  collectives that run at the same time, so flows that share a link (PXN hops, NICs) share it;
* expert parallel (MoE): an alltoall dispatch and combine per MoE layer, forward and backward;
* context parallel: K and V gathered around the CP group each layer (ring attention), hidden
  behind the attention core where it is shorter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabricscope.errors import FabricscopeError
from fabricscope.sim import collectives, gpus, select, train_compute
from fabricscope.sim.assumptions import collect
from fabricscope.sim.engine import SCHEMA, Simulator
from fabricscope.sim.models import named
from fabricscope.sim.params import TrainPlan
from fabricscope.sim.patterns import Pattern
from fabricscope.sim.scenario import build_simulator, build_topology, normalise
from fabricscope.sim.train_compute import RECOMPUTE, Gpu, Layer
from fabricscope.sim.workloads import _num, shape_of

TRAIN_DEFAULTS: dict[str, Any] = {k: f.default for k, f in TrainPlan.model_fields.items()}
_OFF = ("false", "0", "no", "off")


@dataclass
class _Step:
    """What the communication phases of one step read (the simulator, the request, the model, the
    layout, the rank grid and the per-stage compute), and ``comm``, the table they each add to."""

    sim: Simulator
    raw: dict[str, Any]
    md: dict[str, Any]
    lay: dict[str, int]
    ranks: np.ndarray
    st: dict[str, float]
    comm: dict[str, Any]


def _int(raw: dict[str, Any], key: str, lo: int = 1) -> int:
    return int(_num(raw, key, lo, True))


def _layout(raw: dict[str, Any]) -> dict[str, int]:
    """TP, PP, DP, CP, EP and the GPU count, checked against each other."""
    tp, pp, cp, ep = (_int(raw, k) for k in ("tp", "pp", "cp", "ep"))
    gpus, dp = raw.get("gpus"), raw.get("dp")
    if gpus is None and dp is None:
        raise FabricscopeError("give --gpus or --dp")
    if gpus is None:
        gpus = tp * pp * cp * int(dp)
    gpus = _int({"gpus": gpus}, "gpus")
    if dp is None:
        if gpus % (tp * pp * cp):
            raise FabricscopeError(f"--gpus {gpus} is not a multiple of tp*pp*cp = {tp * pp * cp}")
        dp = gpus // (tp * pp * cp)
    dp = _int({"dp": dp}, "dp")
    if tp * pp * dp * cp != gpus:
        raise FabricscopeError(
            f"tp*pp*dp = {tp}*{pp}*{dp}{f'*cp {cp}' if cp > 1 else ''} = {tp * pp * dp * cp} "
            f"but --gpus is {gpus}"
        )
    if dp % ep:
        raise FabricscopeError(f"--ep {ep} must divide the data-parallel size {dp}")
    return {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "gpus": gpus}


def _fabric(raw: dict[str, Any], gpus: int) -> tuple[dict[str, Any], Any, Simulator]:
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
    return sp, topo, build_simulator(sp, topo)


def _model(raw: dict[str, Any], lay: dict[str, int]) -> dict[str, Any]:
    """Shape, parameter count and schedule knobs of the model."""
    pp = lay["pp"]
    L, h = shape_of(_num(raw, "params", 1e3), raw.get("layers"), raw.get("hidden"), pp)
    v = _int(raw, "virtual_stages")
    if L < pp:
        raise FabricscopeError(f"{L} layers cannot fill {pp} pipeline stages")
    if v > 1 and L % (pp * v):
        raise FabricscopeError(f"{L} layers do not split into {pp} stages x --virtual-stages {v}")
    heads = _int(raw, "heads") if raw.get("heads") else _default_heads(h, lay["tp"])
    kv = _int(raw, "kv_heads") if raw.get("kv_heads") else heads
    ffn = _int(raw, "ffn") if raw.get("ffn") else 4 * h
    V, seq = _int(raw, "vocab"), _int(raw, "seq_len")
    experts, topk = _int(raw, "experts", 0), _int(raw, "active_experts")
    if h % heads or heads % lay["tp"]:
        raise FabricscopeError(f"--heads {heads} must divide the hidden size {h} and be a multiple of --tp")
    if heads % kv:
        raise FabricscopeError(f"--kv-heads {kv} must divide --heads {heads}")
    if seq % lay["cp"]:
        raise FabricscopeError(f"--seq-len {seq} does not split into --cp {lay['cp']}")
    if experts and (experts % lay["ep"] or topk > experts):
        raise FabricscopeError("--experts must be a multiple of --ep and at least --active-experts")
    recompute = str(raw["recompute"]).lower()
    if recompute not in RECOMPUTE:
        raise FabricscopeError(f"--recompute is {', '.join(RECOMPUTE)}")
    precision = str(raw.get("precision") or "bf16").lower()
    if precision not in ("bf16", "fp8"):
        raise FabricscopeError("--precision is bf16 or fp8")
    gated = bool(raw.get("gated_mlp")) and str(raw.get("gated_mlp")).lower() not in _OFF
    mlp = (3 if gated else 2) * h * ffn * (experts or 1)
    attn = 2 * h * h + 2 * h * kv * (h // heads)
    params = (
        L * (attn + mlp + 13 * h) + (V + seq) * h
        if raw.get("layers") and raw.get("hidden")
        else _num(raw, "params", 1e3)
    )
    sp_raw = raw.get("sequence_parallel")
    spar = lay["tp"] > 1 if sp_raw is None else str(sp_raw).lower() not in _OFF
    return {
        "layers": L,
        "hidden": h,
        "heads": heads,
        "kv_heads": kv,
        "ffn": ffn,
        "vocab": V,
        "seq": seq,
        "v": v,
        "experts": experts,
        "topk": topk if experts else 1,
        "recompute": recompute,
        "params": float(params),
        "sequence_parallel": spar,
        "mb": _int(raw, "micro_batch"),
        "gated_mlp": gated,
        "fp8": precision == "fp8",
        "stage_layers": math.ceil(L / pp),
        "flash": str(raw.get("flash_attention", True)).lower() not in _OFF,
    }  # uneven stages: the fullest one sets the pace


def _default_heads(h: int, tp: int) -> int:
    """Heads of 128 (or the nearest common head size) that divide h and split evenly over TP."""
    for d in (128, 64, 96, 80, 160, 256, 32):
        if h % d == 0 and (h // d) % tp == 0:
            return h // d
    return tp


def _time(sim: Simulator, op: str, size: float, groups: np.ndarray) -> dict[str, Any]:
    return select.collective(sim, op, max(1, int(size)), groups).summary()


def _entry(r: dict[str, Any], calls: float, total: float, exposed: float) -> dict[str, Any]:
    return {
        **r,
        "calls": calls,
        "total_s": total,
        "exposed_s": exposed,
        "overlapped_s": max(0.0, total - exposed),
    }


def run_train(params: dict[str, Any]) -> dict[str, Any]:
    """The ``fabricscope.sim/v1`` document of ``sim train``."""
    raw = {**TRAIN_DEFAULTS, **{k.replace("-", "_"): v for k, v in params.items() if v is not None}}
    if raw.get("model"):  # a named model fills the shape the user did not give
        given = {k.replace("-", "_") for k, v in params.items() if v is not None}
        raw.update({k: v for k, v in named(str(raw["model"])).train_params().items() if k not in given})
    lay = _layout(raw)
    md = _model(raw, lay)
    sp, topo, sim = _fabric(raw, lay["gpus"])
    if md["fp8"] and not gpus.lookup(topo.node.gpu).fp8_tflops:
        raise FabricscopeError(
            f"--precision fp8 needs FP8 tensor cores (Hopper or later), not {topo.node.gpu}"
        )
    gpu = train_compute.gpu_spec(topo.node.gpu, raw.get("gpu_tflops") and _num(raw, "gpu_tflops", 1e-3))
    tp, pp, dp, cp = lay["tp"], lay["pp"], lay["dp"], lay["cp"]
    m = max(1, math.ceil(_num(raw, "tokens_per_step", 1) / (dp * md["mb"] * md["seq"])))
    md["micro_batches"] = m
    ranks = np.arange(lay["gpus"]).reshape(pp, dp, cp, tp)
    st = _stage(gpu, md, lay)
    comm: dict[str, Any] = {}
    plan = _Step(sim, raw, md, lay, ranks, st, comm)
    per_mb = _model_parallel_comm(plan)
    for c in comm.values():  # per micro-batch so far: a step runs m of them
        c.update(
            calls=c["calls"] * m,
            total_s=c["total_s"] * m,
            exposed_s=c["exposed_s"] * m,
            overlapped_s=c["overlapped_s"] * m,
        )
    t_slot = st["t_mb"] + per_mb
    bubble = (pp - 1) / md["v"] * t_slot
    exposed = m * per_mb
    exposed += _pipeline_comm(sim, md, lay, ranks, m, comm)
    exposed += _data_comm(plan)
    compute = m * st["t_mb"]
    step = compute + bubble + exposed
    tokens = m * dp * md["mb"] * md["seq"]
    return _document(raw, md, lay, gpu, sim, m, tokens, st, compute, bubble, exposed, step, comm)


def _stage(gpu: Gpu, md: dict[str, Any], lay: dict[str, int]) -> dict[str, float]:
    """Seconds and FLOPs of one micro-batch on the slowest pipeline stage (the last: it also runs
    the logit layer), and the model FLOPs of one micro-batch on one GPU."""
    tp, cp = lay["tp"], lay["cp"]
    seq_local = md["seq"] // cp
    ly = Layer(
        md["hidden"],
        md["heads"],
        md["ffn"],
        seq_local,
        md["seq"],
        md["mb"],
        tp,
        md["sequence_parallel"],
        md["topk"],
        md["kv_heads"],
        md["gated_mlp"],
        md["fp8"],
        md["flash"],
    )
    lt = train_compute.layer_times(gpu, ly)
    per_stage = md["stage_layers"]
    rc = md["recompute"]
    t_f, t_b = per_stage * lt.forward_s(), per_stage * lt.backward_s(rc)
    t_log, f_log = train_compute.logits_time(gpu, md["mb"] * seq_local, md["hidden"], md["vocab"], tp)
    layers_flops = md["layers"] * 3 * lt.flops_fwd / lay["pp"]
    hw_flops = md["layers"] * lt.hardware_flops(rc) / lay["pp"]
    return {
        "t_f": t_f,
        "t_b": t_b,
        "t_mb": t_f + t_b + t_log,
        "logits_s": t_log,
        "per_stage": per_stage,
        "attn_core_s": lt.attn_core_fwd_s,
        "model_flops": layers_flops + f_log / lay["pp"],
        "hardware_flops": hw_flops + f_log / lay["pp"],
        "memory_s": per_stage * lt.memory_fwd_s * 3,
    }


def _model_parallel_comm(plan: _Step) -> float:
    """Exposed seconds per micro-batch of TP, EP and CP collectives (on the critical path)."""
    sim, md, lay, ranks, st, comm = plan.sim, plan.md, plan.lay, plan.ranks, plan.st, plan.comm
    tp, cp, ep = lay["tp"], lay["cp"], lay["ep"]
    act = md["mb"] * md["seq"] / cp * md["hidden"] * train_compute.BYTES
    passes = 3 if md["recompute"] == "full" else 2  # forward, backward (, the recomputed forward)
    L = st["per_stage"]
    out = 0.0
    if tp > 1:
        groups = ranks.reshape(-1, tp)
        if md["sequence_parallel"]:
            rs, ag = _time(sim, "reduce_scatter", act, groups), _time(sim, "all_gather", act, groups)
            r = {
                **rs,
                "collective": "reduce_scatter + all_gather",
                "time_s": rs["time_s"] + ag["time_s"],
                "all_gather": ag,
            }
        else:
            r = {**_time(sim, "all_reduce", act, groups), "collective": "all_reduce"}
        calls = 2 * passes * L
        comm["tensor_parallel"] = _entry(r, calls, calls * r["time_s"], calls * r["time_s"])
        out += calls * r["time_s"]
    if md["experts"] and ep > 1:
        groups = ranks.transpose(0, 2, 3, 1).reshape(-1, ep)
        tokens = md["mb"] * md["seq"] / cp / (tp if md["sequence_parallel"] else 1)
        r = {
            **_time(sim, "alltoall", tokens * md["topk"] * md["hidden"] * train_compute.BYTES, groups),
            "collective": "alltoall (dispatch + combine)",
        }
        calls = 2 * passes * L
        comm["expert_parallel"] = _entry(r, calls, calls * r["time_s"], calls * r["time_s"])
        out += calls * r["time_s"]
    if cp > 1:
        groups = ranks.transpose(0, 1, 3, 2).reshape(-1, cp)
        kv = (
            2
            * md["mb"]
            * md["seq"]
            * md["kv_heads"]
            * (md["hidden"] // md["heads"])
            / tp
            * train_compute.BYTES
        )
        r = {**_time(sim, "all_gather", kv, groups), "collective": "all_gather of K and V (ring attention)"}
        calls = passes * L  # forward gathers; backward reduce-scatters the K/V gradients (same bytes)
        hidden = passes * L * st["attn_core_s"]
        total = calls * r["time_s"]
        comm["context_parallel"] = _entry(r, calls, total, max(0.0, total - hidden))
        out += comm["context_parallel"]["exposed_s"]
    return out


def _pipeline_comm(
    sim: Simulator, md: dict[str, Any], lay: dict[str, int], ranks: np.ndarray, m: int, comm: dict[str, Any]
) -> float:
    pp, v = lay["pp"], md["v"]
    if pp == 1:
        return 0.0
    src, dst = _pp_pairs(ranks, v)
    size = md["mb"] * md["seq"] / lay["cp"] * md["hidden"] * train_compute.BYTES / lay["tp"]
    res = sim.run_plan(collectives.p2p_plan(sim.topo, src, dst, size, "pp-send", "pipeline stage sends"))
    r = {
        "time_s": res.time_s,
        "busbw_GBps": res.busbw_GBps,
        "algbw_GBps": res.algbw_GBps,
        "size_bytes": int(size),
        "algo": "p2p",
        "proto": res.proto,
        "limited_by": res.limited_by,
        "bottlenecks": res.bottlenecks[:3],
    }
    crit = 2 * (v * m + pp - 2)
    calls = 2 * m * v * (pp - 1)
    # a GPU's own sends are 2 v m; the fill and drain add the others' on the critical path
    comm["pipeline_parallel"] = _entry(r, calls, crit * r["time_s"], crit * r["time_s"])
    return crit * r["time_s"]


def _pp_pairs(ranks: np.ndarray, v: int) -> tuple[np.ndarray, np.ndarray]:
    src, dst = ranks[:-1].ravel(), ranks[1:].ravel()
    if v > 1:  # interleaved: the last stage's chunk feeds the first stage's next chunk
        src, dst = np.concatenate([src, ranks[-1].ravel()]), np.concatenate([dst, ranks[0].ravel()])
    return src, dst


def _data_comm(plan: _Step) -> float:
    """Exposed seconds of the gradient collective, overlapped with the last backward pass, slowed
    by the pipeline and tensor-parallel traffic it shares links with."""
    sim, raw, md, lay, ranks = plan.sim, plan.raw, plan.md, plan.lay, plan.ranks
    st, comm = plan.st, plan.comm
    dp, cp, tp, pp = lay["dp"], lay["cp"], lay["tp"], lay["pp"]
    if dp * cp == 1:
        return 0.0
    groups = ranks.transpose(0, 3, 1, 2).reshape(pp * tp, dp * cp)
    experts = md["layers"] * 2 * md["hidden"] * md["ffn"] * md["experts"]  # 0 when dense
    grad = (md["params"] - experts + experts / lay["ep"]) / (tp * pp) * _num(raw, "grad_bytes", 1)
    kind = str(raw["dp_collective"]).lower()
    overlap = str(raw["overlap_dp"]).lower() not in _OFF
    slow = _shared_slowdown(sim, groups, ranks, md, lay)
    w_b = st["t_b"] if overlap else 0.0
    w_f = st["t_f"] if overlap else 0.0
    if kind in ("allreduce", "all_reduce"):
        r = _time(sim, "all_reduce", grad, groups)
        t = r["time_s"] * slow
        r = {**r, "collective": "all_reduce", "time_s": t}
        exposed = max(0.0, t - w_b)
    elif kind in ("fsdp", "zero3", "zero-3"):
        # ZeRO-3 / FSDP FULL_SHARD: every micro-batch gathers the parameters before its forward and
        # again before its backward, and reduce-scatters its gradients; prefetching hides them
        # behind the forward and backward compute, the excess is exposed
        weights = grad / _num(raw, "grad_bytes", 1) * 2  # bf16 parameters
        ag, rs = _time(sim, "all_gather", weights, groups), _time(sim, "reduce_scatter", grad, groups)
        t_ag, t_rs = ag["time_s"], rs["time_s"] * slow
        m = max(1, int(md.get("micro_batches", 1)))
        r = {
            **rs,
            "collective": "all_gather x 2 + reduce_scatter per micro-batch (FSDP)",
            "reduce_scatter": rs,
            "all_gather": ag,
            "time_s": m * (2 * t_ag + t_rs),
        }
        exposed = m * (max(0.0, t_ag - w_f) + max(0.0, t_ag + t_rs - w_b))
    elif kind in ("zero", "rs-ag", "distributed"):
        rs, ag = _time(sim, "reduce_scatter", grad, groups), _time(sim, "all_gather", grad, groups)
        t_rs, t_ag = rs["time_s"] * slow, ag["time_s"]
        r = {
            **rs,
            "collective": "reduce_scatter + all_gather",
            "reduce_scatter": rs,
            "all_gather": ag,
            "time_s": t_rs + t_ag,
        }
        exposed = max(0.0, t_rs - w_b) + max(0.0, t_ag - w_f)
    else:
        raise FabricscopeError("--dp-collective is allreduce, zero (distributed optimizer) or fsdp (ZeRO-3)")
    r.update(overlapped_with_backward=overlap, shared_link_slowdown=slow)
    comm["data_parallel"] = _entry(r, 1, r["time_s"], exposed)
    return exposed


def _shared_slowdown(
    sim: Simulator, groups: np.ndarray, ranks: np.ndarray, md: dict[str, Any], lay: dict[str, int]
) -> float:
    """How much slower the gradient ring's flows run when the pipeline sends and tensor-parallel
    rings of the same moment are solved with them on the same links (>= 1)."""
    topo = sim.topo
    dp_pat, _ = collectives.ring_pattern(topo, groups, "train-dp")
    others = []
    if lay["pp"] > 1:
        src, dst = _pp_pairs(ranks, md["v"])
        others.append(collectives.p2p_plan(topo, src, dst, 1.0, "train-pp").phases[0].pattern)
    if lay["tp"] > 1:
        others.append(collectives.ring_pattern(topo, ranks.reshape(-1, lay["tp"]), "train-tp")[0])
    if not others:
        return 1.0
    mark = 1 << 40  # chain ids of the other traffic, to tell the gradient flows apart after solving
    parts = [dp_pat] + [
        Pattern(p.key, p.src_gpu, p.dst_gpu, p.src_nic, p.dst_nic, p.entropy, p.chain + mark) for p in others
    ]
    both = sim.solve_pattern(Pattern.concat("train-shared", parts))
    alone = sim.solve_pattern(dp_pat)
    mine = (both.pattern.chain < mark) & (both.pattern.src_gpu != both.pattern.dst_gpu)
    solo = alone.pattern.src_gpu != alone.pattern.dst_gpu
    if not mine.any() or not solo.any():
        return 1.0
    return max(1.0, float(alone.solution.rate[solo].min()) / float(both.solution.rate[mine].min()))


def _document(
    raw: dict[str, Any],
    md: dict[str, Any],
    lay: dict[str, int],
    gpu: Gpu,
    sim: Simulator,
    m: int,
    tokens: int,
    st: dict[str, float],
    compute: float,
    bubble: float,
    exposed: float,
    step: float,
    comm: dict[str, Any],
) -> dict[str, Any]:
    n = lay["gpus"]
    # st's FLOPs are one micro-batch on one GPU (averaged over the stages); every GPU runs m of them
    model_tf = m * st["model_flops"] / step / 1e12 if step > 0 else 0.0
    hw_tf = m * st["hardware_flops"] / step / 1e12 if step > 0 else 0.0
    return {
        "schema": SCHEMA,
        "kind": "train",
        "workload": {
            "params": md["params"],
            "gpus": n,
            "tp": lay["tp"],
            "pp": lay["pp"],
            "dp": lay["dp"],
            "cp": lay["cp"],
            "ep": lay["ep"],
            "layers": md["layers"],
            "hidden": md["hidden"],
            "heads": md["heads"],
            "ffn": md["ffn"],
            "vocab": md["vocab"],
            "seq_len": md["seq"],
            "micro_batch": md["mb"],
            "micro_batches": m,
            "virtual_stages": md["v"],
            "recompute": md["recompute"],
            "sequence_parallel": md["sequence_parallel"],
            "experts": md["experts"],
            "active_experts": md["topk"] if md["experts"] else 0,
            "tokens_per_step": tokens,
            "gpu": gpu.name,
            "gpu_peak_tflops": gpu.peak_tflops,
            "gemm_efficiency": train_compute.FP8_GEMM_EFFICIENCY
            if md["fp8"]
            else train_compute.GEMM_EFFICIENCY,
            "dp_collective": str(raw["dp_collective"]),
            "kv_heads": md["kv_heads"],
            "gated_mlp": md["gated_mlp"],
            "precision": "fp8" if md["fp8"] else "bf16",
            "stage_layers": md["stage_layers"],
        },
        "step_time_s": step,
        "time_s": step,
        "compute_s": compute,
        "pipeline_bubble_s": bubble,
        "bubble_fraction": (lay["pp"] - 1) / (md["v"] * m),
        "exposed_comm_s": exposed,
        "comm_share": exposed / step if step > 0 else 0.0,
        "tokens_per_s": tokens / step if step > 0 else 0.0,
        "tflops_per_gpu": model_tf,
        "hardware_tflops_per_gpu": hw_tf,
        "mfu": model_tf / gpu.peak_tflops,
        "hfu": hw_tf / gpu.peak_tflops,
        "breakdown": _breakdown(st, m, compute, bubble, comm),
        "comm": comm,
        "bottlenecks": _worst_bottlenecks(comm),
        "model": sim.describe(),
        "assumptions": collect(sim, raw, [c for c in comm.values() if c.get("exposed_s", 0.0) > 0]),
    }


def _breakdown(
    st: dict[str, float], m: int, compute: float, bubble: float, comm: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "compute_s": compute,
        "memory_bound_ops_s": m * st["memory_s"],
        "logits_s": m * st["logits_s"],
        "bubble_s": bubble,
    }
    for name, c in comm.items():
        out[name] = {"total_s": c["total_s"], "exposed_s": c["exposed_s"], "overlapped_s": c["overlapped_s"]}
    return out


def _worst_bottlenecks(comm: dict[str, Any]) -> list[dict[str, Any]]:
    worst = max(comm.values(), key=lambda r: r.get("exposed_s", 0.0), default=None)
    return list(worst.get("bottlenecks", [])) if worst else []
