"""``fabricscope sim train``: one Megatron-LM training step on a fabric (sim/training.py).

Its own module so that cli/sim.py stays a size one can read; it shares that module's options
and renderers.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fabricscope.cli.common import print_json
from fabricscope.cli.sim import (
    Alpha,
    Calib,
    Ecn,
    Eff,
    Gpn,
    Gpu,
    Hpl,
    Json,
    Loss,
    Mtu,
    NicRate,
    Npn,
    Nvl,
    NvlDomain,
    Over,
    Pcie,
    PerCore,
    Radix,
    Routing,
    Seed,
    Spines,
    System,
    Tiers,
    Topo,
    TopoFile,
    Transport,
    Uplink,
    _calibrate,
    _fmt_time,
    _need_numpy,
    _print_bottlenecks,
    _print_calibration,
    _sim_only,
    _train_params,
    sim_app,
)


@sim_app.command("train")
def train(
    params: Annotated[str, typer.Option("--params", help="Model parameters, e.g. 70e9 (ignored when --layers and --hidden are given: counted from the shape).")] = "70e9",
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs in the job (= tp * pp * dp * cp).")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size (GPUs of one node, typically).")] = 8,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel stages.")] = 1,
    dp: Annotated[int | None, typer.Option("--dp", help="Data-parallel replicas (default: gpus / (tp * pp * cp)).")] = None,
    cp: Annotated[int, typer.Option("--cp", help="Context-parallel size (the sequence split; K and V gathered per layer).")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="Expert-parallel size (MoE; divides --dp).")] = 1,
    experts: Annotated[int, typer.Option("--experts", help="MoE experts per layer (0: dense).")] = 0,
    active_experts: Annotated[int, typer.Option("--active-experts", help="MoE: experts each token runs (top-k).")] = 2,
    gpu_tflops: Annotated[float | None, typer.Option("--gpu-tflops", help="Peak dense 16-bit TFLOP/s of one GPU (default: the --gpu's datasheet figure); GEMMs run at a shape-dependent fraction of it.")] = None,
    tokens_per_step: Annotated[str, typer.Option("--tokens-per-step", help="Global batch in tokens per optimizer step.")] = "4194304",
    seq_len: Annotated[int, typer.Option("--seq-len", help="Sequence length.")] = 4096,
    micro_batch: Annotated[int, typer.Option("--micro-batch", help="Micro-batch size (sequences).")] = 1,
    layers: Annotated[int | None, typer.Option("--layers", min=1, max=10_000, help="Transformer layers (default: derived from --params).")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Hidden size (default: derived from --params).")] = None,
    heads: Annotated[int | None, typer.Option("--heads", help="Attention heads (default: hidden / 128).")] = None,
    ffn: Annotated[int | None, typer.Option("--ffn", help="MLP hidden size (default: 4 x hidden).")] = None,
    vocab: Annotated[int, typer.Option("--vocab", help="Vocabulary size (logit layer).")] = 51200,
    recompute: Annotated[str, typer.Option("--recompute", help="Activation recomputation: full, selective (attention core) or none.")] = "selective",
    virtual_stages: Annotated[int, typer.Option("--virtual-stages", help="Model chunks per pipeline GPU (interleaved 1F1B; the bubble shrinks by this factor).")] = 1,
    sequence_parallel: Annotated[bool | None, typer.Option("--sequence-parallel/--no-sequence-parallel", help="TP all-reduce as reduce-scatter + all-gather (default: on when --tp > 1).")] = None,
    dp_collective: Annotated[str, typer.Option("--dp-collective", help="allreduce, or zero (reduce-scatter + all-gather: distributed optimizer, ZeRO/FSDP).")] = "allreduce",
    grad_bytes: Annotated[int, typer.Option("--grad-bytes", help="Bytes per gradient element (2 bf16, 4 fp32).")] = 2,
    overlap_dp: Annotated[bool, typer.Option("--overlap-dp/--no-overlap-dp", help="Overlap the gradient collective with the last backward pass.")] = True,
    topology: Topo = "rail-optimized",
    system: System = None,
    nvlink_domain: NvlDomain = None,
    topology_file: TopoFile = None,
    gpus_per_node: Gpn = None,
    nics_per_node: Npn = None,
    nic_rate: NicRate = None,
    gpu: Gpu = None,
    nvlink_GBps: Nvl = None,
    pcie_GBps: Pcie = None,
    oversubscription: Over = "1:1",
    hosts_per_leaf: Hpl = None,
    spines: Spines = None,
    uplink_rate: Uplink = None,
    radix: Radix = None,
    tiers: Tiers = None,
    transport: Transport = "ib",
    loss: Loss = "0",
    mtu: Mtu = None,
    ecn: Ecn = True,
    per_core_gbps: PerCore = None,
    alpha_us: Alpha = None,
    efficiency: Eff = None,
    routing: Routing = None,
    seed: Seed = 0,
    calibrate_run: Calib = None,
    json_out: Json = False,
) -> None:
    """One Megatron-LM training step: compute, bubble, TP/PP/DP/EP/CP communication, TFLOP/s per GPU."""
    kw = dict(locals())
    _need_numpy()
    from fabricscope.sim.workloads import run_train

    p = _train_params({k: v for k, v in kw.items() if k not in ("json_out", "calibrate_run")})
    report = None
    if calibrate_run is not None:
        report = _calibrate(_sim_only(p), calibrate_run, ranks_topology=True)
        p.update(report["applied"])
    doc = run_train(p)
    if report:
        doc["calibration"] = report
    if json_out:
        print_json(doc)
        return
    _render(doc, report)


def _render(doc: dict[str, Any], report: dict[str, Any] | None) -> None:
    w = doc["workload"]
    par = f"tp {w['tp']} x pp {w['pp']} x dp {w['dp']}" + (f" x cp {w['cp']}" if w["cp"] > 1 else "")
    moe = f", {w['experts']} experts (top-{w['active_experts']}, ep {w['ep']})" if w["experts"] else ""
    typer.echo(
        f"{w['params'] / 1e9:g}B parameters ({w['layers']} layers, hidden {w['hidden']}, {w['heads']} heads{moe}) on "
        f"{w['gpus']} GPUs: {par}; {w['micro_batches']} micro-batch(es) of {w['micro_batch']} x {w['seq_len']} "
        f"tokens per replica; {w['virtual_stages']} virtual stage(s), recompute {w['recompute']}, "
        f"sequence parallel {'on' if w['sequence_parallel'] else 'off'}"
    )
    _print_calibration(report)
    typer.echo(f"step time         {_fmt_time(doc['step_time_s'])}")
    typer.echo(f"  compute         {_fmt_time(doc['compute_s'])} (+ pipeline bubble {_fmt_time(doc['pipeline_bubble_s'])}, "
               f"{doc['bubble_fraction'] * 100:.1f}% of the compute)")
    typer.echo(f"  exposed comm    {_fmt_time(doc['exposed_comm_s'])} ({doc['comm_share'] * 100:.1f}% of the step)")
    for name, c in doc["comm"].items():
        typer.echo(
            f"    {name:<18} {_fmt_time(c['total_s'])} total, {_fmt_time(c['exposed_s'])} exposed, "
            f"{_fmt_time(c['overlapped_s'])} overlapped; {c.get('algo', '')}/{c.get('proto', '')} "
            f"busbw {c['busbw_GBps']:.1f} GB/s, limited by {c['limited_by']}"
        )
    typer.echo(f"per GPU           {doc['tflops_per_gpu']:.1f} TFLOP/s model ({doc['mfu'] * 100:.1f}% MFU), "
               f"{doc['hardware_tflops_per_gpu']:.1f} with recomputation ({doc['hfu'] * 100:.1f}% HFU) "
               f"of {w['gpu_peak_tflops']:g} peak")
    typer.echo(f"tokens per second {doc['tokens_per_s']:,.0f}")
    _print_bottlenecks(doc["bottlenecks"])


