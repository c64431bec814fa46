"""A published figure (one record of tests/data/sim_validation/*.yaml) asked of the model.

The records describe a system the way its source did (GPU, nodes, transport, NICs, NCCL
settings); ``scenario`` turns that into the simulator's parameters, ``evaluate`` runs the model
and gives the ratio and whether it is within the issue's band: +-15% bandwidth, +-30%
small-message latency, +-20% training and inference throughput. A record the model cannot
express yet comes back with the reason, never a made-up number. This module reads no files:
``benchmarks/sim_validation.py`` and the tests hand it the records.
"""

from __future__ import annotations

import re
from typing import Any

from fabricscope.errors import FabricscopeError

# GPU -> the system preset whose node it is (8 GPUs on NVSwitch, one NIC per GPU).
SYSTEM_OF_GPU = {
    "a100": "dgx-a100",
    "h100": "dgx-h100",
    "h200": "hgx-h200",
    "b200": "dgx-b200",
    "gb200": "gb200-nvl72",
    "h800": "dgx-h800",
    "h20": "hgx-h20",
    "v100": "dgx-1v",
}
# Cloud transports: the instance the figure names is the preset (its NICs as NCCL sees them).
CLOUD_SYSTEM = {
    ("efa", "a100"): "aws-p4d",
    ("efa", "h100"): "aws-p5",
    ("efa", "h200"): "aws-p5en",
    ("efa", "b200"): "aws-p6",
    ("tcpx", "h100"): "gcp-a3-high",
    ("tcpxo", "h100"): "gcp-a3-mega",
}
SMALL_BYTES = 64 * 1024  # at or below: a latency figure (band 30%)
BANDS = {"latency": 0.30, "bandwidth": 0.15, "throughput": 0.20}
ENV = re.compile(r"(NCCL_[A-Z0-9_]+)=(\S+)")


def settings_env(rec: dict[str, Any]) -> dict[str, str]:
    """NCCL_* variables the source says were set (as keys, or inside an ``env``/``test`` string)."""
    out: dict[str, str] = {}
    for k, v in (rec.get("settings") or {}).items():
        if str(k).startswith("NCCL_"):
            out[str(k)] = str(v)
        elif isinstance(v, str):
            out.update(dict(ENV.findall(v)))
    return out


def scenario(rec: dict[str, Any]) -> dict[str, Any]:
    """The simulator's parameters for a collective record; FabricscopeError when it cannot say."""
    s, w = rec["system"], rec["workload"]
    if w.get("kind") != "collective":
        raise FabricscopeError(f"workload {w.get('kind')} is not evaluated here yet")
    gpu = str(s.get("gpu") or "").lower()
    if gpu not in SYSTEM_OF_GPU:
        raise FabricscopeError(f"GPU {s.get('gpu')!r} not named")
    ranks = s.get("ranks") or ((s.get("nodes") or 0) * (s.get("gpus_per_node") or 0))
    gpn = s.get("gpus_per_node") or 8
    if not ranks:
        raise FabricscopeError("rank count not stated")
    p: dict[str, Any] = {
        "system": SYSTEM_OF_GPU[gpu],
        "op": w["collective"],
        "size": str(w["size_bytes"] or "1G"),
    }
    transport = s.get("transport")
    cloud = CLOUD_SYSTEM.get((transport, gpu))
    if cloud:
        p["system"] = cloud
    if gpu == "gb200":  # trays of an NVL72 rack fold into its NVLink domain (scenario.fold_trays)
        p.update(nodes=ranks // gpn, gpus_per_node=gpn)
    else:
        p["nodes"] = max(1, ranks // gpn)
        p["gpus_per_node"] = gpn if ranks >= gpn else ranks
    if p["nodes"] == 1 or transport == "nvlink":
        p["topology"] = "single-node"
        p["nodes"] = 1
    else:
        p["transport"] = transport
        if s.get("nic_count") and not cloud:
            p["nics_per_node"] = int(s["nic_count"])
        if s.get("nic_rate_gbps") and not cloud:
            p["nic_rate"] = f"{s['nic_rate_gbps']}G"
    env = settings_env(rec)
    if "NCCL_ALGO" in env:
        p["algo"] = (
            env["NCCL_ALGO"].lower().replace("collnetchain", "collnet").replace("collnetdirect", "collnet")
        )
    if "NCCL_PROTO" in env:
        p["proto"] = env["NCCL_PROTO"].lower()
    if p.get("transport") == "tcp":
        for var, key in (
            ("NCCL_NSOCKS_PERTHREAD", "nsocks_perthread"),
            ("NCCL_SOCKET_NTHREADS", "socket_nthreads"),
        ):
            if var in env:
                p[key] = int(env[var])
    if env.get("NCCL_MIN_NCHANNELS") and env.get("NCCL_MIN_NCHANNELS") == env.get("NCCL_MAX_NCHANNELS"):
        p["channels"] = int(env["NCCL_MIN_NCHANNELS"])
    if env.get("NCCL_COLLNET_ENABLE") == "1":
        p["sharp"] = True
    return p


# Training records: the model as published -> (named model, sequence length). The sequence lengths
# are each recipe's (Llama 3.1: 8192; Nemotron-4: 4096; GPT-3 175B: 2048 as the config says).
TRAIN_MODELS = {
    "llama 3.1 8b": ("llama3-8b", 8192),
    "llama 3.1 70b": ("llama3-70b", 8192),
    "llama 3.1 405b": ("llama3-405b", 8192),
    "nemotron4 15b": ("nemotron4-15b", 4096),
    "nemotron4 340b": ("nemotron4-340b", 4096),
    "nemo megatron gpt-3 175b": ("gpt3-175b", 2048),
    "maxtext llama3 70b": ("llama3-70b", 8192),
    "mpt-70b": ("mpt-70b", 2048),
}
CONFIG = re.compile(r"\b(TP|PP|CP|VP|MBS|GA|EP|SEQ)=(\d+)")


def train_scenario(rec: dict[str, Any]) -> dict[str, Any]:
    """The simulator's parameters for a training record (sim train)."""
    s, w = rec["system"], rec["workload"]
    key = next((k for k in TRAIN_MODELS if str(w.get("model", "")).lower().startswith(k)), None)
    if key is None:
        raise FabricscopeError(f"model {w.get('model')!r} has no shape here")
    name, seq = TRAIN_MODELS[key]
    cfg = {k.lower(): int(v) for k, v in CONFIG.findall(str(w.get("config_as_published", "")))}
    gpu = str(s.get("gpu") or "h100").lower()
    p: dict[str, Any] = {
        "model": name,
        "system": SYSTEM_OF_GPU.get(gpu, "dgx-h100"),
        "gpus": int(w["gpus"]),
        "seq_len": int(w.get("seq_len") or cfg.get("seq") or seq),
        "precision": str(w.get("precision") or "bf16").lower(),
    }
    if s.get("transport") in ("roce", "tcp", "efa"):
        p["transport"] = s["transport"]
    fsdp = "FSDP" in str(w.get("config_as_published", "")) or w.get("sharding") == "FULL_SHARD"
    if fsdp:
        p.update(
            tp=1,
            pp=1,
            dp_collective="fsdp",
            micro_batch=int(w.get("micro_batch") or cfg.get("mbs", 1)),
            recompute="full" if w.get("activation_checkpointing") else "none",
        )
    else:
        p.update(
            tp=cfg.get("tp", 1),
            pp=cfg.get("pp", 1),
            cp=cfg.get("cp", 1),
            virtual_stages=cfg.get("vp", 1),
            micro_batch=cfg.get("mbs", 1),
            dp_collective="zero",
            recompute="none",
        )
    p["tokens_per_step"] = int(w.get("global_batch_tokens") or int(w["global_batch"]) * p["seq_len"])
    return p


def band_of(rec: dict[str, Any]) -> str:
    kind = rec["workload"].get("kind")
    if kind in ("moe_dispatch", "moe_combine"):
        return "latency" if rec["metric"] == "latency" else "bandwidth"
    if kind != "collective":
        return "throughput"
    size = rec["workload"].get("size_bytes") or 0
    return "latency" if rec["metric"] == "time" and size <= SMALL_BYTES else "bandwidth"


def _published(rec: dict[str, Any]) -> float:
    v = float(rec["value"])
    unit = rec.get("unit")
    if unit == "Gb/s":
        return v / 8  # GB/s
    return v


def evaluate(rec: dict[str, Any], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model's answer for one record: ratio model / published, band, and whether it holds;
    or ``skipped`` with the reason the model cannot answer it. ``overrides``: parameters to try
    (a fit of the calibration split)."""
    from fabricscope.sim.scenario import run_collective

    out: dict[str, Any] = {
        "id": rec["id"],
        "table": rec["table"],
        "metric": rec["metric"],
        "published": _published(rec),
        "band": band_of(rec),
    }
    if rec["workload"].get("kind") == "training":
        return _evaluate_train(rec, out, overrides)
    if rec["workload"].get("kind") in ("moe_dispatch", "moe_combine"):
        return _evaluate_moe(rec, out, overrides)
    if rec["workload"].get("kind") == "inference":
        return _evaluate_infer(rec, out, overrides)
    try:
        p = {**scenario(rec), **(overrides or {})}
        if rec["workload"].get("size_bytes") is None:
            if ">=" not in str(rec["workload"].get("size_label")):
                raise FabricscopeError("size not stated")
            p["size"] = "1G"  # a plateau figure ('>= 32MiB'): the model's plateau
        doc = run_collective(p)
    except FabricscopeError as exc:
        out["skipped"] = str(exc)
        return out
    r = doc["results"][0]
    model = {"time": r["time_s"] * 1e6, "busbw": r["busbw_GBps"], "algbw": r["algbw_GBps"]}.get(rec["metric"])
    if model is None:
        out["skipped"] = f"metric {rec['metric']} not evaluated"
        return out
    out.update(model=model, algo=f"{r['algo']}/{r['proto']}", params=p)
    ratio = (
        model / out["published"]
    )  # as docs/sim.md's table: for a time, < 1 is a model faster than published
    out["ratio"] = ratio
    tol = BANDS[out["band"]]
    out["holds"] = 1 - tol <= ratio <= 1 + tol
    return out


def _evaluate_train(
    rec: dict[str, Any], out: dict[str, Any], overrides: dict[str, Any] | None
) -> dict[str, Any]:
    from fabricscope.sim.workloads import run_train

    try:
        p = {**train_scenario(rec), **(overrides or {})}
        doc = run_train(p)
    except FabricscopeError as exc:
        out["skipped"] = str(exc)
        return out
    gpus = doc["workload"]["gpus"]
    model = {
        "step_time": doc["step_time_s"],
        "mfu": doc["mfu"] * 100,
        "tokens_per_s": doc["tokens_per_s"],
        "tokens_per_s_per_gpu": doc["tokens_per_s"] / gpus,
    }.get(rec["metric"])
    if model is None:
        out["skipped"] = f"metric {rec['metric']} not evaluated"
        return out
    out.update(
        model=model,
        algo=f"tp{doc['workload']['tp']}pp{doc['workload']['pp']}dp{doc['workload']['dp']}",
        params=p,
        ratio=model / out["published"],
    )
    out["holds"] = abs(out["ratio"] - 1) <= BANDS["throughput"]
    return out


def moe_scenario(rec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fabric parameters, dispatch arguments) of an MoE record. Where the source does not give the
    model, DeepSeek-V3's shape is assumed (hidden 7168, top-8), as the published benchmarks use."""
    s, w = rec["system"], rec["workload"]
    gpu = str(s.get("gpu") or "h100").lower()
    transport = {"rdma": "ib", "nvlink": "ib"}.get(str(s.get("transport")), str(s.get("transport")))
    system = CLOUD_SYSTEM.get((transport, gpu)) or SYSTEM_OF_GPU.get(gpu, "dgx-h100")
    ep = int(w.get("ep") or s.get("ranks") or 8)
    p = {"system": system, "transport": transport, "nodes": max(2, ep // 8)}
    lib = str(w.get("library", "")).lower()
    combine = w.get("kind") == "moe_combine"
    dtype = str(w.get("combine_dtype" if combine else "dispatch_dtype") or ("bf16" if combine else "fp8"))
    args = {
        "tokens": int(w.get("tokens_per_batch") or w.get("tokens") or 128),
        "topk": int(w.get("topk") or 8),
        "hidden": int(w.get("hidden") or 7168),
        "elem_bytes": 1 + 4 / 128 if dtype == "fp8" else 2.0,
        "ep": ep,
        "mode": "deepep" if "deepep" in lib else "nccl",
        "groups": w.get("topk_groups"),
        "ll": any(x in lib for x in ("low-latency", "low latency", "lowlatency", "pplx"))
        or "lowlatency" in str(rec.get("table") or "")
        or w.get("phase") == "decode",
    }
    return p, args


def _evaluate_moe(
    rec: dict[str, Any], out: dict[str, Any], overrides: dict[str, Any] | None
) -> dict[str, Any]:
    from fabricscope.sim import moe
    from fabricscope.sim.scenario import build_simulator, normalise

    try:
        p, args = moe_scenario(rec)
        sim = build_simulator(normalise({**p, **(overrides or {})}))
        r = moe.alltoall(sim, **args)
    except FabricscopeError as exc:
        out["skipped"] = str(exc)
        return out
    leg = str((rec.get("columns") or {}).get("bottleneck", "")).lower().replace("nvlink", "nvlink") or None
    if "logical" in str(rec.get("note", "")):
        out["skipped"] = "'logical bandwidth' counts traffic the model does not (DeepEP V2's own definition)"
        return out
    model = (
        r.time_s * 1e6
        if rec["metric"] == "latency"
        else r.bandwidth_GBps(leg if leg in ("rdma", "nvlink") else None)
    )
    out.update(
        model=model,
        algo=f"{args['mode']}{'-ll' if args['ll'] else ''}",
        params={**p, **args},
        ratio=model / out["published"],
    )
    out["holds"] = abs(out["ratio"] - 1) <= BANDS[out["band"]]
    return out


INFER_SYSTEMS = {
    ("azure", "a100"): "azure-nd-a100-v4",
    ("azure", "h100"): "azure-nd-h100-v5",
    ("azure", "h200"): "azure-nd-h200-v5",
}


def _evaluate_infer(
    rec: dict[str, Any], out: dict[str, Any], overrides: dict[str, Any] | None
) -> dict[str, Any]:
    """A served model's throughput: a batch's prefill, then its output tokens at the model's TPOT."""
    from fabricscope.sim.infer import run_infer

    s, w = rec["system"], rec["workload"]
    gpu = str(s.get("gpu") or "").lower()
    system = INFER_SYSTEMS.get(("azure" if "azure" in str(s.get("name", "")).lower() else "", gpu))
    model = "llama3-70b" if "70b" in str(w.get("model", "")).lower() else None
    if not system or not model or s.get("scale_up_detail"):
        out["skipped"] = "serving system or model not expressible (NVLink bridges, or no named shape)"
        return out
    p = {
        "model": model,
        "system": system,
        "tp": int(w.get("tp") or 8),
        "pp": int(w.get("pp") or 1),
        "batch": int(w["batch"]),
        "prompt_tokens": int(w["input_len"]),
        "output_tokens": int(w["output_len"]),
        "transport": "ib",
        **(overrides or {}),
    }
    try:
        doc = run_infer(p)
    except FabricscopeError as exc:
        out["skipped"] = str(exc)
        return out
    total = doc["prefill_batch_s"] + p["output_tokens"] * doc["time_per_output_token_s"]
    model_v = p["batch"] * p["output_tokens"] / total
    out.update(model=model_v, algo=f"tp{p['tp']}pp{p['pp']}", params=p, ratio=model_v / out["published"])
    out["holds"] = abs(out["ratio"] - 1) <= BANDS["throughput"]
    return out
