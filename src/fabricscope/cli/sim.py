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
Nodes = Annotated[int, typer.Option("--nodes", min=1, help="Number of nodes (servers).")]
Gpn = Annotated[int | None, typer.Option("--gpus-per-node", help="GPUs (ranks) per node (default 8, or the --system's).")]
Npn = Annotated[int | None, typer.Option("--nics-per-node", help="Network NICs per node (default: one per GPU).")]
NicRate = Annotated[str | None, typer.Option("--nic-rate", help="NIC / host link rate in bit/s: 400G, 200G, 100mbit, 1gbit (default 400G, or the --system's).")]
Gpu = Annotated[str | None, typer.Option("--gpu", help="GPU preset for NVLink/PCIe bandwidth: h100, h200, a100, b200, gb200, none (CPU hosts); default h100, or the --system's.")]
System = Annotated[str | None, typer.Option("--system", help="A real system: dgx-a100, dgx-h100, hgx-h200, dgx-b200, gb200-nvl72, pcie-server (GPUs, NVLink, PCIe, NICs; sources in docs/sim.md).")]
NvlDomain = Annotated[int | None, typer.Option("--nvlink-domain", help="GPUs in one multi-node NVLink domain (gb200-nvl72: 72; NVL36: 36).")]
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
Nsocks = Annotated[int | None, typer.Option("--nsocks-perthread", help="tcp: NCCL_NSOCKS_PERTHREAD, sockets per helper thread (NCCL's default 1).")]
Nthreads = Annotated[int | None, typer.Option("--socket-nthreads", help="tcp: NCCL_SOCKET_NTHREADS, helper threads per connection (NCCL's default 0: the proxy thread, one socket).")]
Rto = Annotated[float | None, typer.Option("--rto-ms", min=0.001, max=600_000, help="Retransmission timeout in ms (default: adaptive, from the RTT).")]
Alpha = Annotated[float | None, typer.Option("--alpha-us", help="Per-message latency of the transport, us (overrides the default).")]
Eff = Annotated[float | None, typer.Option("--efficiency", help="Goodput per unit of link rate on network links, 0..1 (overrides the default).")]
Framing = Annotated[str, typer.Option("--framing", help="tcp/udp per-packet overhead: ethernet (wire) or tbf (a tc tbf-shaped veth).")]
Routing = Annotated[str | None, typer.Option("--routing", help="ecmp (seeded flow hash) or adaptive (spraying); default: adaptive for ib, ecmp otherwise.")]
Seed = Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="ECMP hash seed: another seed, another set of hash collisions.")]
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

    with Store.open(create=False) as store:  # $FABRICSCOPE_DB or the default path; never created here
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
    algo: Annotated[str, typer.Option("--algo", help="auto (NCCL's choice: least predicted time), ring, tree, nvls, nvlstree, collnet, pat; or hierarchical, halving-doubling, direct (as NCCL_ALGO).")] = "auto",
    proto: Annotated[str, typer.Option("--proto", help="auto, ll, ll128 or simple (as NCCL_PROTO).")] = "auto",
    explain: Annotated[bool, typer.Option("--explain", help="Show every (algorithm, protocol) NCCL allows here, with its predicted time.")] = False,
    pxn: Annotated[bool, typer.Option("--pxn/--no-pxn", help="alltoall and sendrecv leave by the NIC on the destination's rail through a peer GPU (NCCL's PXN); --no-pxn is NCCL_PXN_DISABLE=1.")] = True,
    sharp: Annotated[bool, typer.Option("--sharp", help="The IB switches reduce in the network (SHARP): CollNet and multi-node NVLS become possible.")] = False,
    size: Annotated[str, typer.Option("--size", help="Message size (1G = 1 GiB, as nccl-tests) or a sweep 1M:1G / list 1M,64M.")] = "1G",
    channels: Annotated[int | None, typer.Option("--channels", help="Ring channels (default: one per NIC, rail-aligned).")] = None,
    node_order: Annotated[str | None, typer.Option("--node-order", help="Rank order of nodes, e.g. h1,h5,h2,h6 (lab host names) or 0,4,1,5; a subset makes a smaller communicator.")] = None,
    topology: Topo = "rail-optimized",
    system: System = None,
    nvlink_domain: NvlDomain = None,
    topology_file: TopoFile = None,
    nodes: Nodes = 2,
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
    node_nic_rate: NodeRate = None,
    transport: Transport = "ib",
    loss: Loss = "0",
    mtu: Mtu = None,
    ecn: Ecn = True,
    per_core_gbps: PerCore = None,
    nsocks_perthread: Nsocks = None,
    socket_nthreads: Nthreads = None,
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
    typer.echo(f"{doc['op']}, {doc['ranks']} ranks")
    typer.echo(f"{'size':>10}  {'algorithm':>16}  {'time':>11}  {'algbw GB/s':>11}  {'busbw GB/s':>11}  limited by")
    for r in doc["results"]:
        pair = f"{r['algo']}/{r['proto']}"
        typer.echo(
            f"{format_size(r['size_bytes']):>10}  {pair:>16}  {_fmt_time(r['time_s']):>11}  {_gb(r['algbw_GBps']):>11}  "
            f"{_gb(r['busbw_GBps']):>11}  {r['limited_by']}"
        )
        if explain:
            _print_alternatives(r)
    _print_bottlenecks(doc["bottlenecks"])


def _print_alternatives(r: dict[str, Any]) -> None:
    for a in r.get("alternatives") or []:
        mark = "*" if (a["algo"], a["proto"]) == (r["algo"], r["proto"]) else " "
        typer.echo(
            f"        {mark} {a['algo'] + '/' + a['proto']:>16}  {_fmt_time(a['time_s']):>11}  "
            f"(latency {_fmt_time(a['latency_s'])}, bandwidth {_fmt_time(a['bandwidth_s'])}, busbw {_gb(a['busbw_GBps'])})"
        )
    for e in r.get("excluded") or []:
        typer.echo(f"          {e['algo']:>16}  not run here: {e['reason']}")


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



def _sim_only(p: dict[str, Any]) -> dict[str, Any]:
    from fabricscope.sim.scenario import DEFAULTS

    out = {k: v for k, v in p.items() if k in DEFAULTS}
    return out


@sim_app.command("infer")
def infer(
    params: Annotated[str, typer.Option("--params", help="Model parameters, e.g. 70e9.")] = "70e9",
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs per model instance (across nodes when larger than one).")] = 8,
    batch: Annotated[int, typer.Option("--batch", help="Concurrent sequences being decoded.")] = 32,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", help="Prompt length (prefill) per request.")] = 2048,
    output_tokens: Annotated[int, typer.Option("--output-tokens", help="Generated tokens per request.")] = 256,
    layers: Annotated[int | None, typer.Option("--layers", min=1, max=10_000, help="Transformer layers (default: derived from --params).")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Hidden size (default: derived from --params).")] = None,
    kv_bytes_per_token: Annotated[str | None, typer.Option("--kv-bytes-per-token", help="KV-cache bytes per token (default: 2 * layers * hidden/8 * 2, GQA 8:1, bf16).")] = None,
    gpu_tflops: Annotated[float, typer.Option("--gpu-tflops", help="Sustained TFLOP/s per GPU.")] = 400.0,
    hbm_GBps: Annotated[float, typer.Option("--hbm-GBps", help="HBM bandwidth per GPU, GB/s (H100 SXM 3350).")] = 3350.0,
    experts: Annotated[int, typer.Option("--experts", help="Mixture of experts: experts per MoE layer (0: dense).")] = 0,
    active_experts: Annotated[int, typer.Option("--active-experts", help="MoE: experts each token goes to (top-k).")] = 2,
    active_params: Annotated[str | None, typer.Option("--active-params", help="MoE: parameters active per token, e.g. 13e9 (default: all).")] = None,
    ep: Annotated[int, typer.Option("--ep", help="Expert-parallel GPUs per instance (an instance is tp x ep GPUs; across nodes when larger than one).")] = 1,
    tpot_target_ms: Annotated[float | None, typer.Option("--tpot-target-ms", help="Which transport and NIC rate meet this time per output token (ms)?")] = None,
    topology: Topo = "rail-optimized",
    system: System = None,
    nvlink_domain: NvlDomain = None,
    topology_file: TopoFile = None,
    nodes: Nodes = 2,
    gpus_per_node: Gpn = None,
    nics_per_node: Npn = None,
    nic_rate: NicRate = None,
    gpu: Gpu = None,
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
    """LLM serving: TP all-reduces and MoE expert alltoalls per token, the KV-cache move from prefill to decode, TPOT and TTFT."""
    kw = dict(locals())
    _need_numpy()
    from fabricscope.sim.infer import run_infer

    p = _common(**{k: v for k, v in kw.items() if k != "json_out"})
    p["params"] = _float_arg(p["params"], "--params")
    if "active_params" in p:
        p["active_params"] = _float_arg(p["active_params"], "--active-params")
    doc = run_infer(p)
    if json_out:
        print_json(doc)
        return
    _print_infer(doc)


def _print_infer(doc: dict[str, Any]) -> None:
    w = doc["workload"]
    moe = f", {w['experts']} experts (top-{w['active_experts']}), ep {w['ep']}" if w["experts"] else ""
    typer.echo(
        f"{w['params'] / 1e9:g}B parameters{moe}, tp {w['tp']}, batch {w['batch']}, prompt {w['prompt_tokens']} tokens, "
        f"KV cache {format_size(doc['kv_cache_bytes'])} per batch"
    )
    ep = f" + expert alltoalls {_fmt_time(doc['ep_comm_per_token_s'])}" if doc.get("expert_parallel") else ""
    typer.echo(
        f"time per output token {_fmt_time(doc['time_per_output_token_s'])}: decode {_fmt_time(doc['decode_step_s'])} "
        f"({doc['decode_bound']}-bound) + TP all-reduces {_fmt_time(doc['tp_comm_per_token_s'])}{ep} "
        f"({doc['comm_share'] * 100:.1f}%); {doc['tokens_per_s']:,.0f} tokens/s per instance"
    )
    for key, name in (("tensor_parallel", "TP all-reduce"), ("expert_parallel", "EP alltoall")):
        call = (doc.get(key) or {}).get("per_call")
        if call:
            typer.echo(f"  {name}: {format_size(call['size_bytes'])} per call, {call['algo']}/{call['proto']}, "
                       f"{_fmt_time(call['time_s'])}, limited by {call['limited_by']}")
    typer.echo("KV-cache transfer prefill -> decode instance, and time to first token:")
    for mode, m in doc["kv_transfer"].items():
        typer.echo(
            f"  {mode:<16} {m['transport']:<5} {_fmt_time(m['time_s']):>11}  ({m['rate_GBps_per_gpu']:.2f} GB/s per GPU)  "
            f"TTFT {_fmt_time(doc['time_to_first_token_s'][mode])}"
        )
    target = doc.get("tpot_target")
    if target:
        typer.echo(f"TPOT target {target['target_ms']:g} ms:")
        for r in target["options"]:
            typer.echo(f"  {r['transport']:<5} {r['nic_rate']:>5}  TPOT {_fmt_time(r['tpot_s']):>11}  "
                       f"{'meets' if r['meets'] else 'misses'}")
        for t, rate in target["slowest_rate_that_meets"].items():
            typer.echo(f"  {t}: {'from ' + rate if rate else 'no rate up to 800G'} meets it")


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
    gpu_tflops: Annotated[float | None, typer.Option("--gpu-tflops", help="train: peak dense TFLOP/s per GPU (default: the GPU's datasheet figure).")] = None,
    tokens_per_step: Annotated[str, typer.Option("--tokens-per-step", help="train: global batch tokens.")] = "4194304",
    topology: Topo = "rail-optimized",
    system: System = None,
    nvlink_domain: NvlDomain = None,
    topology_file: TopoFile = None,
    nodes: Nodes = 2,
    gpus_per_node: Gpn = None,
    nics_per_node: Npn = None,
    nic_rate: NicRate = None,
    gpu: Gpu = None,
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
    base = _compare_base(kw, workload)
    n = math.prod(len(v) for v in grid.values())
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


def _compare_base(kw: dict[str, Any], workload: str) -> dict[str, Any]:
    """The parameters every cell shares, without those of the other workload."""
    base = _common(**{k: v for k, v in kw.items() if k not in ("json_out", "vary", "plot", "no_plot", "workload")})
    if workload not in ("collective", "train"):
        die("--workload is collective or train")
    drop: tuple[str, ...] = ("params", "gpus", "tp", "pp", "dp", "gpu_tflops", "tokens_per_step")
    if workload == "train":
        base = _train_params(base)
        drop = ("nodes", "op", "size")
    for k in drop:
        base.pop(k, None)
    return base


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

