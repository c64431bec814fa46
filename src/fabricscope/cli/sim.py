"""``fabricscope sim``: a flow-level model of collectives, training steps and inference on a fabric.

Thin shell: options become one parameter dict, ``fabricscope.sim`` does the work, this module
renders. numpy (the ``sim`` extra) is imported only when a command runs.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricscope.cli.common import JSON_HELP, die, print_json
from fabricscope.cli.main import app
from fabricscope.units import format_size

sim_app = typer.Typer(
    name="sim",
    help="Flow-level model of collectives on real topologies: time, algbw/busbw and the bottleneck links.",
    no_args_is_help=True,
)
app.add_typer(sim_app, name="sim")

# ---- options shared by every command (Annotated so each command lists them once) -----------------
Topo = Annotated[str, typer.Option("--topology", help="single-node, star, leaf-spine, fat-tree, rail-optimized or dragonfly.")]
TopoFile = Annotated[Path | None, typer.Option("--topology-file", help="YAML file describing your fabric (see docs/sim.md); overrides --topology and its sizes.")]
Nodes = Annotated[int, typer.Option("--nodes", help="Number of nodes (servers).")]
Gpn = Annotated[int, typer.Option("--gpus-per-node", help="GPUs (ranks) per node.")]
Npn = Annotated[int | None, typer.Option("--nics-per-node", help="Network NICs per node (default: one per GPU).")]
NicRate = Annotated[str, typer.Option("--nic-rate", help="NIC / host link rate in bit/s: 400G, 200G, 100mbit, 1gbit.")]
Gpu = Annotated[str, typer.Option("--gpu", help="GPU preset for NVLink/PCIe bandwidth: h100, h200, a100, b200, none (CPU hosts).")]
Nvl = Annotated[float | None, typer.Option("--nvlink-GBps", help="NVLink bandwidth per GPU per direction, GB/s (overrides --gpu).")]
Pcie = Annotated[float | None, typer.Option("--pcie-GBps", help="Effective PCIe bandwidth of each NIC slot per direction, GB/s.")]
Over = Annotated[str, typer.Option("--oversubscription", help="Leaf down:up bandwidth ratio, e.g. 1:1, 2:1, 4:1.")]
Hpl = Annotated[int | None, typer.Option("--hosts-per-leaf", help="NIC ports per leaf (leaf-spine, fat-tree, rail-optimized).")]
Spines = Annotated[int | None, typer.Option("--spines", help="Spine switches (uplinks per leaf).")]
Uplink = Annotated[str | None, typer.Option("--uplink-rate", help="Leaf-to-spine link rate (default: derived from --oversubscription).")]
Radix = Annotated[int | None, typer.Option("--radix", help="Switch radix for fat-tree / rail-optimized (default: smallest of 64, 128, 256, 512 that fits).")]
Tiers = Annotated[int | None, typer.Option("--tiers", help="Fat-tree tiers, 2 or 3 (default: fewest that fit).")]
NodeRate = Annotated[list[str] | None, typer.Option("--node-nic-rate", help="A slow host: NODE=RATE, e.g. 3=250mbit (repeatable).")]
Transport = Annotated[str, typer.Option("--transport", help="ib, roce, roce-lossy, tcp or udp.")]
Loss = Annotated[str, typer.Option("--loss", help="Packet loss probability on network links: 0.001, 0.1%.")]
Mtu = Annotated[int | None, typer.Option("--mtu", help="MTU in bytes (default 4096 for ib/roce, 1500 for tcp/udp).")]
Ecn = Annotated[bool, typer.Option("--ecn/--no-ecn", help="RoCE: ECN/DCQCN congestion control (off: PFC only, head-of-line blocking).")]
PerCore = Annotated[float | None, typer.Option("--per-core-gbps", help="tcp/udp: throughput one core sustains per flow, Gb/s (default 40 / 15).")]
Rto = Annotated[float | None, typer.Option("--rto-ms", help="Retransmission timeout in ms (default: adaptive, from the RTT).")]
Alpha = Annotated[float | None, typer.Option("--alpha-us", help="Per-message latency of the transport, us (overrides the default).")]
Eff = Annotated[float | None, typer.Option("--efficiency", help="Goodput per unit of link rate on network links, 0..1 (overrides the default).")]
Framing = Annotated[str, typer.Option("--framing", help="tcp/udp per-packet overhead: ethernet (wire) or tbf (a tc tbf-shaped veth).")]
Routing = Annotated[str | None, typer.Option("--routing", help="ecmp (seeded flow hash) or adaptive (spraying); default: adaptive for ib, ecmp otherwise.")]
Seed = Annotated[int, typer.Option("--seed", help="ECMP hash seed: another seed, another set of hash collisions.")]
Calib = Annotated[int | None, typer.Option("--calibrate", help="Fit alpha and efficiency to a stored collective run (its id in the bench history) first.")]
Json = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


def _need_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:
        die("fabricscope sim needs numpy: pip install 'fabricscope[sim]'")


def _common(**kw: Any) -> dict[str, Any]:
    p = {k: v for k, v in kw.items() if v is not None}
    if "topology_file" in p:
        p["topology_file"] = str(p["topology_file"])
    if "node_nic_rate" in p:
        p["node_nic_rate"] = tuple(p["node_nic_rate"])
    return p


def _calibrate(params: dict[str, Any], run_id: int, ranks_topology: bool) -> dict[str, Any]:
    """Calibrate on the fabric the user described; returns the fitted parameters and report."""
    from fabricscope.sim.calibrate import calibrate, samples_from_result
    from fabricscope.sim.scenario import build_simulator, normalise
    from fabricscope.store import Store

    with Store.open() as store:  # $FABRICSCOPE_DB or the default path
        samples = samples_from_result(store.get(int(run_id)).result)
    p = normalise(params)
    if ranks_topology and samples.ranks and p.get("topology_file") is None:
        G = int(p["gpus_per_node"])
        if samples.ranks % G:
            p["gpus_per_node"] = 1
            p["nics_per_node"] = None
        p["nodes"] = samples.ranks // int(p["gpus_per_node"])
        if p["nodes"] == 1:
            p["topology"] = "single-node"
    sim = build_simulator(p)
    cal, report = calibrate(sim, samples, p.get("algo"))
    fitted = {"alpha_us": cal.transport.alpha_s * 1e6, "efficiency": cal.transport.efficiency}
    if cal.transport.name in ("tcp", "udp"):
        fitted["per_core_gbps"] = cal.transport.per_flow_cap_Bps * 8 / 1e9
    report["applied"] = fitted
    return report


def _fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def _gb(x: float) -> str:
    """GB/s as nccl-tests prints them, with more digits for lab-sized (sub-GB/s) numbers."""
    return f"{x:.2f}" if x >= 10 else f"{x:.4g}"


def _print_bottlenecks(bott: list[dict[str, Any]]) -> None:
    if not bott:
        return
    typer.echo("bottleneck links:")
    for b in bott:
        if b.get("kind") == "transport":
            typer.echo(f"  {b['detail']} ({b['cap_GBps']:.2f} GB/s)")
        elif b.get("kind") is None:
            typer.echo(f"  {b['link']}")
        else:
            util = f"{b['utilization'] * 100:.0f}%" if b.get("utilization") is not None else "?"
            typer.echo(
                f"  {b['link']}  [{b['kind']}, {b['capacity_gbps']:g} Gb/s, usable {b['usable_GBps']:.2f} GB/s, "
                f"{util} used, {b['flows']} flow(s)]"
            )


def _print_calibration(rep: dict[str, Any] | None) -> None:
    if not rep:
        return
    m, after = rep["measured_fit"], rep["transport_after"]
    typer.echo(
        f"calibrated on run {rep['run_id']} ({rep['op']}, {rep['ranks']} ranks, {m['samples']} sizes, r2 {m['r2']:.3f}): "
        f"alpha {after['alpha_s'] * 1e6:.2f} us, efficiency {after['efficiency']:.3f}; "
        f"worst size error after fit {rep['max_abs_error_after'] * 100:.1f}%"
    )


@sim_app.command("collective")
def collective(
    op: Annotated[str, typer.Option("--op", help="all_reduce, all_gather, reduce_scatter, alltoall, broadcast, sendrecv.")] = "all_reduce",
    algo: Annotated[str | None, typer.Option("--algo", help="ring, tree, hierarchical, halving-doubling, direct (default: ring; direct for alltoall/sendrecv).")] = None,
    size: Annotated[str, typer.Option("--size", help="Message size (1G = 1 GiB, as nccl-tests) or a sweep 1M:1G / list 1M,64M.")] = "1G",
    channels: Annotated[int | None, typer.Option("--channels", help="Ring channels (default: one per NIC, rail-aligned).")] = None,
    node_order: Annotated[str | None, typer.Option("--node-order", help="Rank order of nodes, e.g. h1,h5,h2,h6 (lab host names) or 0,4,1,5; a subset makes a smaller communicator.")] = None,
    topology: Topo = "rail-optimized",
    topology_file: TopoFile = None,
    nodes: Nodes = 2,
    gpus_per_node: Gpn = 8,
    nics_per_node: Npn = None,
    nic_rate: NicRate = "400G",
    gpu: Gpu = "h100",
    nvlink_GBps: Nvl = None,
    pcie_GBps: Pcie = None,
    oversubscription: Over = "1:1",
    hosts_per_leaf: Hpl = None,
    spines: Spines = None,
    uplink_rate: Uplink = None,
    radix: Radix = None,
    tiers: Tiers = None,
    node_nic_rate: NodeRate = None,
    transport: Transport = "ib",
    loss: Loss = "0",
    mtu: Mtu = None,
    ecn: Ecn = True,
    per_core_gbps: PerCore = None,
    rto_ms: Rto = None,
    alpha_us: Alpha = None,
    efficiency: Eff = None,
    framing: Framing = "ethernet",
    routing: Routing = None,
    seed: Seed = 0,
    calibrate_run: Calib = None,
    json_out: Json = False,
) -> None:
    """Time, algbw and busbw (nccl-tests definitions) of one collective, and its bottleneck links."""
    kw = dict(locals())
    _need_numpy()
    from fabricscope.sim.scenario import build_simulator, normalise, run_collective, summary_line

    params = _common(**{k: v for k, v in kw.items() if k not in ("json_out", "calibrate_run")})
    report = None
    if calibrate_run is not None:
        report = _calibrate(params, calibrate_run, ranks_topology=False)
        params.update(report["applied"])
    sim = build_simulator(normalise(params))
    doc = run_collective(params, sim)
    if report:
        doc["calibration"] = report
    if json_out:
        print_json(doc)
        return
    typer.echo(summary_line(sim))
    _print_calibration(report)
    typer.echo(f"{doc['op']} {doc['algo']}, {doc['ranks']} ranks")
    typer.echo(f"{'size':>10}  {'time':>11}  {'algbw GB/s':>11}  {'busbw GB/s':>11}  limited by")
    for r in doc["results"]:
        typer.echo(
            f"{format_size(r['size_bytes']):>10}  {_fmt_time(r['time_s']):>11}  {_gb(r['algbw_GBps']):>11}  "
            f"{_gb(r['busbw_GBps']):>11}  {r['limited_by']}"
        )
    _print_bottlenecks(doc["bottlenecks"])


def _train_params(kw: dict[str, Any]) -> dict[str, Any]:
    p = _common(**kw)
    p["params"] = _float_arg(p.get("params"), "--params")
    if "tokens_per_step" in p:
        p["tokens_per_step"] = _float_arg(p["tokens_per_step"], "--tokens-per-step")
    return p


def _float_arg(v: Any, name: str) -> float:
    try:
        x = float(str(v).replace("_", ""))
    except ValueError:
        die(f"{name} must be a number (e.g. 70e9), got {v!r}")
    if not math.isfinite(x) or x <= 0:
        die(f"{name} must be positive")
    return x


@sim_app.command("train")
def train(
    params: Annotated[str, typer.Option("--params", help="Model parameters, e.g. 70e9.")] = "70e9",
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs in the job (= tp * pp * dp).")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size (GPUs of one node, typically).")] = 8,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel stages.")] = 1,
    dp: Annotated[int | None, typer.Option("--dp", help="Data-parallel replicas (default: gpus / (tp * pp)).")] = None,
    gpu_tflops: Annotated[float, typer.Option("--gpu-tflops", help="Sustained dense TFLOP/s per GPU on the model's matmuls (H100 SXM peak BF16 is 989).")] = 400.0,
    tokens_per_step: Annotated[str, typer.Option("--tokens-per-step", help="Global batch in tokens per optimizer step.")] = "4194304",
    seq_len: Annotated[int, typer.Option("--seq-len", help="Sequence length.")] = 4096,
    micro_batch: Annotated[int, typer.Option("--micro-batch", help="Micro-batch size (sequences).")] = 1,
    layers: Annotated[int | None, typer.Option("--layers", help="Transformer layers (default: derived from --params).")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Hidden size (default: derived from --params).")] = None,
    dp_collective: Annotated[str, typer.Option("--dp-collective", help="allreduce, or zero (reduce-scatter + all-gather, ZeRO/FSDP).")] = "allreduce",
    grad_bytes: Annotated[int, typer.Option("--grad-bytes", help="Bytes per gradient element (2 bf16, 4 fp32).")] = 2,
    overlap_dp: Annotated[bool, typer.Option("--overlap-dp/--no-overlap-dp", help="Overlap the gradient collective with the last backward pass.")] = True,
    topology: Topo = "rail-optimized",
    topology_file: TopoFile = None,
    gpus_per_node: Gpn = 8,
    nics_per_node: Npn = None,
    nic_rate: NicRate = "400G",
    gpu: Gpu = "h100",
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
    """One training step with 3-D parallelism: compute, exposed communication, tokens per second."""
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
    w = doc["workload"]
    typer.echo(
        f"{w['params'] / 1e9:g}B parameters ({w['layers']} layers, hidden {w['hidden']}) on {w['gpus']} GPUs: "
        f"tp {w['tp']} x pp {w['pp']} x dp {w['dp']}; {w['micro_batches']} micro-batch(es) of {w['micro_batch']} x "
        f"{w['seq_len']} tokens per replica"
    )
    _print_calibration(report)
    typer.echo(f"step time         {_fmt_time(doc['step_time_s'])}")
    typer.echo(f"  compute         {_fmt_time(doc['compute_s'])} (+ pipeline bubble {_fmt_time(doc['pipeline_bubble_s'])})")
    typer.echo(f"  exposed comm    {_fmt_time(doc['exposed_comm_s'])} ({doc['comm_share'] * 100:.1f}% of the step)")
    for name, c in doc["comm"].items():
        typer.echo(
            f"    {name:<18} {_fmt_time(c['total_s'])} total, {_fmt_time(c['exposed_s'])} exposed, "
            f"busbw {c['busbw_GBps']:.1f} GB/s, limited by {c['limited_by']}"
        )
    typer.echo(f"tokens per second {doc['tokens_per_s']:,.0f}")
    _print_bottlenecks(doc["bottlenecks"])


def _sim_only(p: dict[str, Any]) -> dict[str, Any]:
    from fabricscope.sim.scenario import DEFAULTS

    out = {k: v for k, v in p.items() if k in DEFAULTS}
    return out


@sim_app.command("infer")
def infer(
    params: Annotated[str, typer.Option("--params", help="Model parameters, e.g. 70e9.")] = "70e9",
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs per model instance (within one node).")] = 8,
    batch: Annotated[int, typer.Option("--batch", help="Concurrent sequences being decoded.")] = 32,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", help="Prompt length (prefill) per request.")] = 2048,
    output_tokens: Annotated[int, typer.Option("--output-tokens", help="Generated tokens per request.")] = 256,
    layers: Annotated[int | None, typer.Option("--layers", help="Transformer layers (default: derived from --params).")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Hidden size (default: derived from --params).")] = None,
    kv_bytes_per_token: Annotated[str | None, typer.Option("--kv-bytes-per-token", help="KV-cache bytes per token (default: 2 * layers * hidden/8 * 2, GQA 8:1, bf16).")] = None,
    gpu_tflops: Annotated[float, typer.Option("--gpu-tflops", help="Sustained TFLOP/s per GPU.")] = 400.0,
    hbm_GBps: Annotated[float, typer.Option("--hbm-GBps", help="HBM bandwidth per GPU, GB/s (H100 SXM 3350).")] = 3350.0,
    topology: Topo = "rail-optimized",
    topology_file: TopoFile = None,
    nodes: Nodes = 2,
    gpus_per_node: Gpn = 8,
    nics_per_node: Npn = None,
    nic_rate: NicRate = "400G",
    gpu: Gpu = "h100",
    nvlink_GBps: Nvl = None,
    transport: Transport = "tcp",
    loss: Loss = "0",
    mtu: Mtu = None,
    per_core_gbps: PerCore = None,
    alpha_us: Alpha = None,
    efficiency: Eff = None,
    routing: Routing = None,
    seed: Seed = 0,
    json_out: Json = False,
) -> None:
    """LLM serving: tensor-parallel all-reduces per token, and the KV-cache move from prefill to decode node."""
    kw = dict(locals())
    _need_numpy()
    from fabricscope.sim.workloads import run_infer

    p = _common(**{k: v for k, v in kw.items() if k != "json_out"})
    p["params"] = _float_arg(p["params"], "--params")
    doc = run_infer(p)
    if json_out:
        print_json(doc)
        return
    w = doc["workload"]
    typer.echo(
        f"{w['params'] / 1e9:g}B parameters, tp {w['tp']}, batch {w['batch']}, prompt {w['prompt_tokens']} tokens, "
        f"KV cache {format_size(doc['kv_cache_bytes'])} per batch"
    )
    typer.echo(
        f"time per output token {_fmt_time(doc['time_per_output_token_s'])}: decode {_fmt_time(doc['decode_step_s'])} "
        f"({doc['decode_bound']}-bound) + TP all-reduces {_fmt_time(doc['tp_comm_per_token_s'])} "
        f"({doc['comm_share'] * 100:.1f}%); {doc['tokens_per_s']:,.0f} tokens/s per instance"
    )
    typer.echo("KV-cache transfer prefill -> decode node, and time to first token:")
    for mode, m in doc["kv_transfer"].items():
        typer.echo(
            f"  {mode:<16} {m['transport']:<5} {_fmt_time(m['time_s']):>11}  ({m['rate_GBps_per_gpu']:.2f} GB/s per GPU)  "
            f"TTFT {_fmt_time(doc['time_to_first_token_s'][mode])}"
        )


def _parse_vary(items: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for it in items:
        if "=" not in it:
            die(f"--vary takes NAME=V1,V2,... (e.g. transport=ib,roce,tcp), got {it!r}")
        k, v = it.split("=", 1)
        vals = [x.strip() for x in v.split(",") if x.strip()]
        if not vals:
            die(f"--vary {k}: no values")
        out[k.strip().replace("-", "_")] = vals
    return out


@sim_app.command("compare")
def compare(
    vary: Annotated[list[str], typer.Option("--vary", help="A parameter and its values, e.g. transport=ib,roce,tcp or nic-rate=400G,800G (repeatable; the grid is every combination).")],
    workload: Annotated[str, typer.Option("--workload", help="collective or train.")] = "collective",
    plot: Annotated[Path | None, typer.Option("--plot", help="Write the plot here (.png, .svg or .pdf; default sim-compare.png).")] = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Print the table only.")] = False,
    op: Annotated[str, typer.Option("--op", help="Collective to compare.")] = "all_reduce",
    algo: Annotated[str | None, typer.Option("--algo", help="Collective algorithm.")] = None,
    size: Annotated[str, typer.Option("--size", help="Size or sweep (1M:4G); a sweep plots busbw against size.")] = "1G",
    params: Annotated[str, typer.Option("--params", help="train: model parameters.")] = "70e9",
    gpus: Annotated[int | None, typer.Option("--gpus", help="train: GPUs.")] = None,
    tp: Annotated[int, typer.Option("--tp", help="train: tensor-parallel size.")] = 8,
    pp: Annotated[int, typer.Option("--pp", help="train: pipeline stages.")] = 1,
    dp: Annotated[int | None, typer.Option("--dp", help="train: data-parallel replicas.")] = None,
    gpu_tflops: Annotated[float, typer.Option("--gpu-tflops", help="train: sustained TFLOP/s per GPU.")] = 400.0,
    tokens_per_step: Annotated[str, typer.Option("--tokens-per-step", help="train: global batch tokens.")] = "4194304",
    topology: Topo = "rail-optimized",
    topology_file: TopoFile = None,
    nodes: Nodes = 2,
    gpus_per_node: Gpn = 8,
    nics_per_node: Npn = None,
    nic_rate: NicRate = "400G",
    gpu: Gpu = "h100",
    oversubscription: Over = "1:1",
    hosts_per_leaf: Hpl = None,
    spines: Spines = None,
    uplink_rate: Uplink = None,
    radix: Radix = None,
    transport: Transport = "ib",
    loss: Loss = "0",
    mtu: Mtu = None,
    ecn: Ecn = True,
    per_core_gbps: PerCore = None,
    routing: Routing = None,
    seed: Seed = 0,
    json_out: Json = False,
) -> None:
    """Run a grid over any parameters, print a table, and plot it (matplotlib, the plot extra)."""
    kw = dict(locals())
    _need_numpy()
    from fabricscope.sim.compare import run_grid

    grid = _parse_vary(vary)
    base = _common(**{k: v for k, v in kw.items() if k not in ("json_out", "vary", "plot", "no_plot", "workload")})
    if workload not in ("collective", "train"):
        die("--workload is collective or train")
    if workload == "collective":
        for k in ("params", "gpus", "tp", "pp", "dp", "gpu_tflops", "tokens_per_step"):
            base.pop(k, None)
    else:
        base = _train_params(base)
        base.pop("nodes", None)
        for k in ("op", "size"):
            base.pop(k, None)
    n = 1
    for v in grid.values():
        n *= len(v)
    if n > 200:
        die(f"the grid has {n} combinations; at most 200")
    tick = _progress(n) if (sys.stderr.isatty() and not json_out and n > 3) else None
    doc = run_grid(workload, base, grid, tick=tick)
    if tick:
        tick(None)
    plot_msg = None
    if not no_plot:
        target = plot or Path("sim-compare.png")
        try:
            from fabricscope.sim.compare import write_plot

            write_plot(doc, target)
            doc["plot"] = str(target)
        except ImportError:
            plot_msg = "no plot written: matplotlib is not installed (pip install 'fabricscope[plot]')"
            if plot is not None:
                if not json_out:
                    _print_table(doc)
                die(plot_msg)
    if json_out:
        print_json(doc)
    else:
        _print_table(doc)
        if doc.get("plot"):
            typer.echo(f"plot written to {doc['plot']}")
    if plot_msg:
        typer.echo(f"fabricscope: warning: {plot_msg}", err=True)


def _progress(total: int):  # pragma: no cover - only on a terminal
    from rich.progress import Progress

    prog = Progress(transient=True, console=None)
    prog.start()
    task = prog.add_task("simulating", total=total)

    def tick(_: Any) -> None:
        if _ is None:
            prog.stop()
        else:
            prog.advance(task)

    return tick


def _print_table(doc: dict[str, Any]) -> None:
    keys = list(doc["vary"].keys())
    metrics = doc["columns"]
    widths = [max(len(k), *(len(str(r["point"][k])) for r in doc["rows"])) for k in keys]
    head = "  ".join(f"{k:<{w}}" for k, w in zip(keys, widths, strict=False))
    typer.echo(head + "  " + "  ".join(f"{m:>14}" for m in metrics) + "  limited by")
    for r in doc["rows"]:
        cells = "  ".join(f"{str(r['point'][k]):<{w}}" for k, w in zip(keys, widths, strict=False))
        if r.get("error"):
            typer.echo(f"{cells}  error: {r['error']}")
            continue
        vals = "  ".join(f"{_cell(r['metrics'][m]):>14}" for m in metrics)
        typer.echo(f"{cells}  {vals}  {r.get('limited_by', '')}")


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)

