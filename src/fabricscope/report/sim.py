"""What ``fabricscope sim`` prints: the tables of a collective, a training step, an inference
server and a compare grid, and the compare plot. Each renderer takes the command's
``fabricscope.sim/v1`` document and returns lines, so the CLI only echoes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.units import format_size


def fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def gb(x: float) -> str:
    """GB/s as nccl-tests prints them, with more digits for lab-sized (sub-GB/s) numbers."""
    return f"{x:.2f}" if x >= 10 else f"{x:.4g}"


def bottleneck_lines(bott: list[dict[str, Any]]) -> list[str]:
    if not bott:
        return []
    out = ["bottleneck links:"]
    for b in bott:
        if b.get("kind") == "transport":
            out.append(f"  {b['detail']} ({b['cap_GBps']:.2f} GB/s)")
        elif b.get("kind") is None:
            out.append(f"  {b['link']}")
        else:
            util = f"{b['utilization'] * 100:.0f}%" if b.get("utilization") is not None else "?"
            out.append(
                f"  {b['link']}  [{b['kind']}, {b['capacity_gbps']:g} Gb/s, usable {b['usable_GBps']:.2f} GB/s, "
                f"{util} used, {b['flows']} flow(s)]"
            )
    return out


def calibration_lines(rep: dict[str, Any] | None) -> list[str]:
    if not rep:
        return []
    m, after = rep["measured_fit"], rep["transport_after"]
    return [
        f"calibrated on run {rep['run_id']} ({rep['op']}, {rep['ranks']} ranks, {m['samples']} sizes, r2 {m['r2']:.3f}): "
        f"alpha {after['alpha_s'] * 1e6:.2f} us, efficiency {after['efficiency']:.3f}; "
        f"worst size error after fit {rep['max_abs_error_after'] * 100:.1f}%"
    ]


def assumption_lines(doc: dict[str, Any], explain: bool = False) -> list[str]:
    """The defaults that decided this answer, where they come from and how to override them
    (all of them with ``explain``)."""
    rows = [a for a in doc.get("assumptions") or [] if explain or a.get("changed")]
    if not rows:
        return []
    head = (
        "assumptions (* changed this answer):"
        if explain
        else "assumptions that changed this answer (--explain: all):"
    )
    out = [head]
    for a in rows:
        mark = "*" if explain and a.get("changed") else " "
        out.append(f" {mark} {a['name']} = {a['value']}: {a['source']}; override: {a['override']}")
    return out


def collective_lines(doc: dict[str, Any], summary: str, explain: bool) -> list[str]:
    out = [
        summary,
        *calibration_lines(doc.get("calibration")),
        f"{doc['op']}, {doc['ranks']} ranks",
        f"{'size':>10}  {'algorithm':>16}  {'time':>11}  {'algbw GB/s':>11}  {'busbw GB/s':>11}  limited by",
    ]
    for r in doc["results"]:
        pair = f"{r['algo']}/{r['proto']}"
        out.append(
            f"{format_size(r['size_bytes']):>10}  {pair:>16}  {fmt_time(r['time_s']):>11}  {gb(r['algbw_GBps']):>11}  "
            f"{gb(r['busbw_GBps']):>11}  {r['limited_by']}"
        )
        if explain:
            out.extend(alternative_lines(r))
    out.extend(bottleneck_lines(doc["bottlenecks"]))
    out.extend(assumption_lines(doc, explain))
    return out


def alternative_lines(r: dict[str, Any]) -> list[str]:
    out = []
    for a in r.get("alternatives") or []:
        mark = "*" if (a["algo"], a["proto"]) == (r["algo"], r["proto"]) else " "
        out.append(
            f"        {mark} {a['algo'] + '/' + a['proto']:>16}  {fmt_time(a['time_s']):>11}  "
            f"(latency {fmt_time(a['latency_s'])}, bandwidth {fmt_time(a['bandwidth_s'])}, busbw {gb(a['busbw_GBps'])})"
        )
    for e in r.get("excluded") or []:
        out.append(f"          {e['algo']:>16}  not run here: {e['reason']}")
    return out


def train_lines(doc: dict[str, Any], explain: bool = False) -> list[str]:
    w = doc["workload"]
    par = f"tp {w['tp']} x pp {w['pp']} x dp {w['dp']}" + (f" x cp {w['cp']}" if w["cp"] > 1 else "")
    moe = f", {w['experts']} experts (top-{w['active_experts']}, ep {w['ep']})" if w["experts"] else ""
    out = [
        f"{w['params'] / 1e9:g}B parameters ({w['layers']} layers, hidden {w['hidden']}, {w['heads']} heads{moe}) on "
        f"{w['gpus']} GPUs: {par}; {w['micro_batches']} micro-batch(es) of {w['micro_batch']} x {w['seq_len']} "
        f"tokens per replica; {w['virtual_stages']} virtual stage(s), recompute {w['recompute']}, "
        f"sequence parallel {'on' if w['sequence_parallel'] else 'off'}",
        *calibration_lines(doc.get("calibration")),
        f"step time         {fmt_time(doc['step_time_s'])}",
        f"  compute         {fmt_time(doc['compute_s'])} (+ pipeline bubble {fmt_time(doc['pipeline_bubble_s'])}, "
        f"{doc['bubble_fraction'] * 100:.1f}% of the compute)",
        f"  exposed comm    {fmt_time(doc['exposed_comm_s'])} ({doc['comm_share'] * 100:.1f}% of the step)",
    ]
    for name, c in doc["comm"].items():
        out.append(
            f"    {name:<18} {fmt_time(c['total_s'])} total, {fmt_time(c['exposed_s'])} exposed, "
            f"{fmt_time(c['overlapped_s'])} overlapped; {c.get('algo', '')}/{c.get('proto', '')} "
            f"busbw {c['busbw_GBps']:.1f} GB/s, limited by {c['limited_by']}"
        )
    out.append(
        f"per GPU           {doc['tflops_per_gpu']:.1f} TFLOP/s model ({doc['mfu'] * 100:.1f}% MFU), "
        f"{doc['hardware_tflops_per_gpu']:.1f} with recomputation ({doc['hfu'] * 100:.1f}% HFU) "
        f"of {w['gpu_peak_tflops']:g} peak"
    )
    out.append(f"tokens per second {doc['tokens_per_s']:,.0f}")
    out.extend(bottleneck_lines(doc["bottlenecks"]))
    out.extend(assumption_lines(doc, explain))
    return out


def infer_lines(doc: dict[str, Any], explain: bool = False) -> list[str]:
    w = doc["workload"]
    moe = f", {w['experts']} experts (top-{w['active_experts']}), ep {w['ep']}" if w["experts"] else ""
    ep = f" + expert alltoalls {fmt_time(doc['ep_comm_per_token_s'])}" if doc.get("expert_parallel") else ""
    out = [
        f"{w['params'] / 1e9:g}B parameters{moe}, tp {w['tp']}, batch {w['batch']}, prompt {w['prompt_tokens']} tokens, "
        f"KV cache {format_size(doc['kv_cache_bytes'])} per batch",
        f"time per output token {fmt_time(doc['time_per_output_token_s'])}: decode {fmt_time(doc['decode_step_s'])} "
        f"({doc['decode_bound']}-bound) + TP all-reduces {fmt_time(doc['tp_comm_per_token_s'])}{ep} "
        f"({doc['comm_share'] * 100:.1f}%); {doc['tokens_per_s']:,.0f} tokens/s per instance",
    ]
    for key, name in (("tensor_parallel", "TP all-reduce"), ("expert_parallel", "EP alltoall")):
        call = (doc.get(key) or {}).get("per_call")
        if call:
            out.append(
                f"  {name}: {format_size(call['size_bytes'])} per call, {call['algo']}/{call['proto']}, "
                f"{fmt_time(call['time_s'])}, limited by {call['limited_by']}"
            )
    out.append("KV-cache transfer prefill -> decode instance, and time to first token:")
    for mode, m in doc["kv_transfer"].items():
        out.append(
            f"  {mode:<16} {m['transport']:<5} {fmt_time(m['time_s']):>11}  ({m['rate_GBps_per_gpu']:.2f} GB/s per GPU)  "
            f"TTFT {fmt_time(doc['time_to_first_token_s'][mode])}"
        )
    target = doc.get("tpot_target")
    if target:
        out.append(f"TPOT target {target['target_ms']:g} ms:")
        for r in target["options"]:
            out.append(
                f"  {r['transport']:<5} {r['nic_rate']:>5}  TPOT {fmt_time(r['tpot_s']):>11}  "
                f"{'meets' if r['meets'] else 'misses'}"
            )
        for t, rate in target["slowest_rate_that_meets"].items():
            out.append(f"  {t}: {'from ' + rate if rate else 'no rate up to 800G'} meets it")
    out.extend(assumption_lines(doc, explain))
    return out


def compare_lines(doc: dict[str, Any]) -> list[str]:
    keys = list(doc["vary"].keys())
    metrics = doc["columns"]
    widths = [max(len(k), *(len(str(r["point"][k])) for r in doc["rows"])) for k in keys]
    head = "  ".join(f"{k:<{w}}" for k, w in zip(keys, widths, strict=False))
    out = [head + "  " + "  ".join(f"{m:>14}" for m in metrics) + "  limited by"]
    for r in doc["rows"]:
        cells = "  ".join(f"{str(r['point'][k]):<{w}}" for k, w in zip(keys, widths, strict=False))
        if r.get("error"):
            out.append(f"{cells}  error: {r['error']}")
            continue
        vals = "  ".join(f"{_cell(r['metrics'][m]):>14}" for m in metrics)
        out.append(f"{cells}  {vals}  {r.get('limited_by', '')}")
    return out


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def write_compare_plot(doc: dict[str, Any], path: Path) -> None:
    """busbw against size per combination (a size sweep), else a bar per combination.
    Raises ImportError when matplotlib is missing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if "metrics" in r]

    def label(r: dict[str, Any]) -> str:
        return ", ".join(f"{k}={v}" for k, v in r["point"].items())

    fig, ax = plt.subplots(figsize=(9, 5))
    if rows and "curve" in rows[0]:
        for r in rows:
            xs = [c["size_bytes"] for c in r["curve"]]
            ys = [c["busbw_GBps"] for c in r["curve"]]
            ax.plot(xs, ys, marker="o", label=label(r))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.legend(fontsize=8)
        ax.set_title(f"simulated {doc['base'].get('op', 'all_reduce')} busbw")
    else:
        metric = "busbw_GBps" if doc["workload"] == "collective" else "tokens_per_s"
        names = [label(r) for r in rows]
        vals = [r["metrics"][metric] for r in rows]
        ax.barh(range(len(vals)), vals)
        ax.set_yticks(range(len(vals)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(metric)
        ax.set_title(f"simulated {doc['workload']}: {metric}")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise FabricscopeError(f"cannot write plot {path}: {exc}") from None
    finally:
        plt.close(fig)


def network_lines(doc: dict[str, Any]) -> list[str]:
    """``sim network``: one row per candidate network, best first."""
    unit = "tokens/s" if doc["workload"] == "train" else "output tokens/s"
    out = [f"which network for this {doc['workload']} workload ({unit}, ratio to the best):"]
    for r in doc["rows"]:
        nics = f"{r['nics_per_node']}x{r['nic_gbps']:g}G"
        out.append(
            f"  {r['candidate']:<14} {r['transport']:<6} {nics:>9}  {r['tokens_per_s']:>14,.0f}  "
            f"{r['ratio']:>5.2f}  {r['reason']}"
        )
        for note in r["unvalidated"]:
            out.append(f"  {'':<14} note: {note}")
    return out
