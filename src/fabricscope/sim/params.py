"""The simulator's parameters as pydantic models: one spelling, type, default and help text per
parameter, shared by the CLI options (cli/sim_options.py), ``sim compare --vary`` and the
workloads.

``Scenario`` is the fabric, the transport and the collective; ``TrainPlan`` and ``InferPlan`` the
workloads on top. This module imports no numpy, so the CLI can build its options from it at
start-up.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fabricscope.errors import FabricscopeError
from fabricscope.sim.gpus import CPU_HOST, GPUS
from fabricscope.sim.systems import SYSTEMS

# NCCL ring all_reduce inside one H100 node reaches ~370 GB/s busbw of 450 GB/s NVLink
# (NVIDIA/nccl-tests #212): 0.82 of the NVLink rate (the engine's default; calibration table).
NVLINK_EFFICIENCY = 0.82


def _f(default: Any, help: str, flag: str | None = None, **kw: Any) -> Any:
    """A field with its CLI help (and its flag, where it is not --name-with-dashes)."""
    extra: Any = {"flag": flag} if flag else None
    return Field(default, description=help, json_schema_extra=extra, **kw)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _integral_text(cls, v: Any, info: Any) -> Any:
        """``8.0`` and ``1e3`` from --vary or YAML are integers where an integer is due."""
        ann = cls.model_fields[info.field_name].annotation
        if isinstance(v, str) and ann in (int, int | None):
            try:
                x = float(v.replace("_", ""))
            except ValueError:
                return v
            return int(x) if math.isfinite(x) and x == int(x) else v
        return v


class Scenario(_Params):
    """The fabric, the transport and the collective."""

    system: str | None = _f(
        None,
        f"A real system: {', '.join(n for n, p in SYSTEMS.items() if not p.transport)}; cloud: "
        f"{', '.join(n for n, p in SYSTEMS.items() if p.transport)} (GPUs, NVLink, PCIe, NICs, network; sources in docs/sim.md).",
    )
    nvlink_domain: int | None = _f(None, "GPUs in one multi-node NVLink domain (gb200-nvl72: 72; NVL36: 36).")
    intra_link: str = _f("nvlink", "How GPUs of a node talk: nvlink, or pci (no NVLink).")
    nvswitch: bool = _f(True, "GPUs on an NVSwitch (NVLS possible from Hopper on).")
    topology: str = _f(
        "rail-optimized", "single-node, star, leaf-spine, fat-tree, rail-optimized or dragonfly."
    )
    topology_file: str | None = _f(
        None, "YAML file describing your fabric (see docs/sim.md); overrides --topology and its sizes."
    )
    nodes: int = _f(2, "Number of nodes (servers).", ge=1)
    gpus_per_node: int = _f(8, "GPUs (ranks) per node (default 8, or the --system's).")
    nics_per_node: int | None = _f(None, "Network NICs per node (default: one per GPU).")
    nic_rate: str = _f(
        "400G", "NIC / host link rate in bit/s: 400G, 200G, 100mbit, 1gbit (default 400G, or the --system's)."
    )
    gpu: str = _f(
        "h100",
        f"GPU model (sim/gpus.py): {', '.join(GPUS)}, or {CPU_HOST} (CPU hosts); default h100, or the --system's.",
    )
    nvlink_GBps: float | None = _f(
        None, "NVLink bandwidth per GPU per direction, GB/s (overrides --gpu).", flag="--nvlink-GBps"
    )
    pcie_GBps: float | None = _f(
        None, "Effective PCIe bandwidth of each NIC slot per direction, GB/s.", flag="--pcie-GBps"
    )
    nvlink_efficiency: float = _f(
        NVLINK_EFFICIENCY,
        "Share of the NVLink rate a ring reaches (NCCL ring in one H100 node: 370 of 450 GB/s).",
        gt=0,
        le=1,
    )
    oversubscription: str = _f("1:1", "Leaf down:up bandwidth ratio, e.g. 1:1, 2:1, 4:1.")
    hosts_per_leaf: int | None = _f(None, "NIC ports per leaf (leaf-spine, fat-tree, rail-optimized).")
    spines: int | None = _f(None, "Spine switches (uplinks per leaf).")
    uplink_rate: str | None = _f(None, "Leaf-to-spine link rate (default: derived from --oversubscription).")
    radix: int | None = _f(
        None, "Switch radix for fat-tree / rail-optimized (default: smallest of 64, 128, 256, 512 that fits)."
    )
    tiers: int | None = _f(None, "Fat-tree tiers, 2 or 3 (default: fewest that fit).")
    hosts_per_router: int | None = _f(None, "Dragonfly: NICs per router.")
    routers_per_group: int | None = _f(None, "Dragonfly: routers per group.")
    global_links_per_router: int | None = _f(None, "Dragonfly: global links per router.")
    global_rate: str | None = _f(None, "Dragonfly: global link rate (default: the NIC rate).")
    link_latency_us: float = _f(0.25, "Latency of each network link, us.", ge=0)
    node_nic_rate: tuple[str, ...] | dict[int, str] = _f(
        (), "A slow host: NODE=RATE, e.g. 3=250mbit (repeatable)."
    )
    transport: str = _f(
        "ib",
        "ib, roce, roce-lossy, tcp, udp, or a cloud transport: efa (AWS), tcpx, tcpxo (GCP A3 High, A3 Mega); default ib, or the --system's.",
    )
    loss: str = _f("0", "Packet loss probability on network links: 0.001, 0.1%.")
    mtu: int | None = _f(None, "MTU in bytes (default 4096 for ib/roce, 1500 for tcp/udp).")
    ecn: bool = _f(
        True,
        "RoCE: ECN/DCQCN congestion control (off: PFC only, head-of-line blocking).",
        flag="--ecn/--no-ecn",
    )
    per_core_gbps: float | None = _f(
        None, "tcp/udp: throughput one core sustains per flow, Gb/s (default 40 / 15)."
    )
    nsocks_perthread: int | None = _f(
        None, "tcp: NCCL_NSOCKS_PERTHREAD, sockets per helper thread (NCCL's default 1)."
    )
    socket_nthreads: int | None = _f(
        None,
        "tcp: NCCL_SOCKET_NTHREADS, helper threads per connection (NCCL's default 0: the proxy thread, one socket).",
    )
    qps_per_connection: int | None = _f(
        None,
        "ib/roce: NCCL_IB_QPS_PER_CONNECTION, queue pairs per connection; each is its own flow to ECMP (more entropy, fewer collisions). NCCL's default 1.",
        ge=1,
        le=128,
    )
    host_mem_GBps: float | None = _f(
        None,
        "tcp: memory bandwidth of one node that NCCL's socket transport stages every byte through (4 touches per byte each way), GB/s.",
        flag="--host-mem-GBps",
        gt=0,
    )
    rto_ms: float | None = _f(
        None, "Retransmission timeout in ms (default: adaptive, from the RTT).", ge=0.001, le=600_000
    )
    alpha_us: float | None = _f(None, "Per-message latency of the transport, us (overrides the default).")
    efficiency: float | None = _f(
        None, "Goodput per unit of link rate on network links, 0..1 (overrides the default)."
    )
    framing: str = _f(
        "ethernet", "tcp/udp per-packet overhead: ethernet (wire) or tbf (a tc tbf-shaped veth)."
    )
    routing: str | None = _f(
        None, "ecmp (seeded flow hash) or adaptive (spraying); default: adaptive for ib, ecmp otherwise."
    )
    seed: int = _f(0, "ECMP hash seed: another seed, another set of hash collisions.", ge=0, le=2**32 - 1)
    op: str = _f("all_reduce", "all_reduce, all_gather, reduce_scatter, alltoall, broadcast, sendrecv.")
    algo: str | None = _f(
        None,
        "auto (NCCL's choice: least predicted time), ring, tree, nvls, nvlstree, collnet, pat; or hierarchical, halving-doubling, direct (as NCCL_ALGO).",
    )
    proto: str | None = _f(None, "auto, ll, ll128 or simple (as NCCL_PROTO).")
    sharp: bool = _f(
        False, "The IB switches reduce in the network (SHARP): CollNet and multi-node NVLS become possible."
    )
    explain: bool = _f(False, "Show every (algorithm, protocol) NCCL allows here, with its predicted time.")
    pxn: bool = _f(
        True,
        "alltoall and sendrecv leave by the NIC on the destination's rail through a peer GPU (NCCL's PXN); --no-pxn is NCCL_PXN_DISABLE=1.",
        flag="--pxn/--no-pxn",
    )
    size: str = _f("1G", "Message size (1G = 1 GiB, as nccl-tests) or a sweep 1M:1G / list 1M,64M.")
    channels: int | None = _f(None, "Ring channels (default: one per NIC, rail-aligned).")
    node_order: str | None = _f(
        None,
        "Rank order of nodes, e.g. h1,h5,h2,h6 (lab host names) or 0,4,1,5; a subset makes a smaller communicator.",
    )


# Scenario fields by what they describe, named once: the CLI's option groups and --help panels
# (cli/sim_options.py) and the keys a topology file may set (sim/custom.py: "any key of the CLI
# options, with underscores", docs/sim.md) are built from these.
NODE_FIELDS = ("nodes", "gpus_per_node", "nics_per_node", "nic_rate", "gpu", "nvlink_GBps", "pcie_GBps")
NETWORK_FIELDS = (
    "oversubscription",
    "hosts_per_leaf",
    "spines",
    "uplink_rate",
    "radix",
    "tiers",
    "node_nic_rate",
    "link_latency_us",
    "hosts_per_router",
    "routers_per_group",
    "global_links_per_router",
    "global_rate",
)


class TrainPlan(_Params):
    """One Megatron-LM training step (sim/training.py)."""

    params: float = _f(
        70e9,
        "Model parameters, e.g. 70e9 (ignored when --layers and --hidden are given: counted from the shape).",
        gt=0,
    )
    gpus: int | None = _f(None, "GPUs in the job (= tp * pp * dp * cp).")
    tp: int = _f(8, "Tensor-parallel size (GPUs of one node, typically).")
    pp: int = _f(1, "Pipeline-parallel stages.")
    dp: int | None = _f(None, "Data-parallel replicas (default: gpus / (tp * pp * cp)).")
    cp: int = _f(1, "Context-parallel size (the sequence split; K and V gathered per layer).")
    ep: int = _f(1, "Expert-parallel size (MoE; divides --dp).")
    experts: int = _f(0, "MoE experts per layer (0: dense).")
    active_experts: int = _f(2, "MoE: experts each token runs (top-k).")
    gpu_tflops: float | None = _f(
        None,
        "Peak dense 16-bit TFLOP/s of one GPU (default: the --gpu's datasheet figure); GEMMs run at a shape-dependent fraction of it.",
    )
    tokens_per_step: float = _f(4 * 2**20, "Global batch in tokens per optimizer step.", gt=0)
    seq_len: int = _f(4096, "Sequence length.")
    micro_batch: int = _f(1, "Micro-batch size (sequences).")
    layers: int | None = _f(None, "Transformer layers (default: derived from --params).", ge=1, le=10_000)
    hidden: int | None = _f(None, "Hidden size (default: derived from --params).")
    heads: int | None = _f(None, "Attention heads (default: hidden / 128).")
    kv_heads: int | None = _f(None, "Key/value heads (grouped-query attention; default: --heads).")
    ffn: int | None = _f(None, "MLP hidden size (default: 4 x hidden).")
    gated_mlp: bool | None = _f(
        None,
        "Gated MLP (SwiGLU: gate and up projections, three h x ffn matrices); default off, or the --model's.",
        flag="--gated-mlp/--no-gated-mlp",
    )
    flash_attention: bool = _f(
        True,
        "Fused attention (FlashAttention, Megatron-LM's default since 2023): the s x s scores never reach HBM; --no-flash-attention for the 2021-22 runs.",
        flag="--flash-attention/--no-flash-attention",
    )
    precision: str = _f(
        "bf16",
        "GEMM precision: bf16, or fp8 (the linear layers in FP8 as Transformer Engine runs them; Hopper and later).",
    )
    model: str | None = _f(
        None,
        "A named model whose published shape fills --params, --layers, --hidden, --heads, --kv-heads, --ffn, --vocab: llama3-8b, llama3-70b, llama3-405b, nemotron4-15b, nemotron4-340b, gpt3-175b, mixtral-8x7b, deepseek-v3.",
    )
    vocab: int = _f(51200, "Vocabulary size (logit layer).")
    recompute: str = _f("selective", "Activation recomputation: full, selective (attention core) or none.")
    virtual_stages: int = _f(
        1, "Model chunks per pipeline GPU (interleaved 1F1B; the bubble shrinks by this factor)."
    )
    sequence_parallel: bool | None = _f(
        None,
        "TP all-reduce as reduce-scatter + all-gather (default: on when --tp > 1).",
        flag="--sequence-parallel/--no-sequence-parallel",
    )
    dp_collective: str = _f(
        "allreduce",
        "allreduce; zero (ZeRO-1/2, Megatron's distributed optimizer: gradients reduce-scattered, parameters all-gathered once a step); or fsdp (ZeRO-3 / FSDP FULL_SHARD: parameters all-gathered before every forward and backward of every micro-batch, gradients reduce-scattered).",
    )
    grad_bytes: int = _f(2, "Bytes per gradient element (2 bf16, 4 fp32).")
    act_bytes: int = _f(2, "Bytes per activation element.")
    overlap_dp: bool = _f(
        True,
        "Overlap the gradient collective with the last backward pass.",
        flag="--overlap-dp/--no-overlap-dp",
    )


class InferPlan(_Params):
    """LLM serving (sim/infer.py)."""

    params: float = _f(70e9, "Model parameters, e.g. 70e9.", gt=0)
    model: str | None = _f(
        None,
        "A named model whose published shape fills --params, --layers, --hidden, --heads, --kv-heads and the experts (sim/models.py).",
    )
    tp: int = _f(8, "Tensor-parallel GPUs per model instance (across nodes when larger than one).")
    pp: int = _f(
        1,
        "Pipeline stages per instance (vLLM's choice across nodes): each stage holds 1/pp of the layers; a token crosses every stage.",
    )
    batch: int = _f(32, "Concurrent sequences being decoded.")
    prompt_tokens: int = _f(2048, "Prompt length (prefill) per request.")
    output_tokens: int = _f(256, "Generated tokens per request.")
    layers: int | None = _f(None, "Transformer layers (default: derived from --params).", ge=1, le=10_000)
    hidden: int | None = _f(None, "Hidden size (default: derived from --params).")
    heads: int | None = _f(None, "Attention heads (default: hidden / 128).", ge=1)
    kv_heads: int | None = _f(
        None,
        "Key/value heads (GQA); the KV cache is 2 x layers x kv_heads x head size per token (default: heads / 8).",
        ge=1,
    )
    kv_bytes_per_token: str | None = _f(None, "KV-cache bytes per token (default: from --kv-heads, bf16).")
    gpu_tflops: float | None = _f(
        None, "Sustained TFLOP/s per GPU (default: 0.5 of the GPU's datasheet peak, sim/gpus.py; fitted)."
    )
    hbm_GBps: float | None = _f(
        None,
        "HBM bandwidth per GPU, GB/s (default: the GPU's datasheet figure, sim/gpus.py).",
        flag="--hbm-GBps",
    )
    weight_precision: str | None = _f(
        None, "Weights: bf16 (2 bytes), fp8 (1; FP8 compute where the GPU has it) or int4 (0.5)."
    )
    weight_bytes: float = _f(2, "Bytes per weight (set by --weight-precision).")
    act_bytes: float = _f(2, "Bytes per activation element.")
    experts: int = _f(0, "Mixture of experts: experts per MoE layer (0: dense).")
    active_experts: int = _f(2, "MoE: experts each token goes to (top-k).")
    active_params: float | None = _f(None, "MoE: parameters active per token, e.g. 13e9 (default: all).")
    ep: int = _f(
        1,
        "Expert-parallel GPUs per instance (an instance is tp x ep GPUs; across nodes when larger than one).",
    )
    ep_mode: str = _f(
        "nccl",
        "MoE dispatch/combine: nccl (NCCL's all-to-all: every token copy its own transfer) or deepep (RDMA once per remote node, NVLink forwarding; DeepEP's normal kernels).",
    )
    tpot_target_ms: float | None = _f(
        None, "Which transport and NIC rate meet this time per output token (ms)?"
    )


DEFAULTS: dict[str, Any] = {k: f.default for k, f in Scenario.model_fields.items()}
WORKLOAD_KEYS = set(TrainPlan.model_fields) | set(InferPlan.model_fields) | {"workload"}
_MESSAGES = {
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_parsing": "must be a number",
    "bool_parsing": "must be on or off",
    "finite_number": "must be finite",
}


def one_line(exc: ValidationError) -> FabricscopeError:
    """A pydantic error as the project's one clear line: the first problem, named as on the CLI."""
    e = exc.errors()[0]
    name = "--" + str(e["loc"][0]).replace("_", "-") if e.get("loc") else "a parameter"
    what = _MESSAGES.get(e["type"], e["msg"].lower())
    if e["type"] == "extra_forbidden":
        return FabricscopeError(f"unknown parameter {name.removeprefix('--')!r}")
    return FabricscopeError(f"{name} {what}, got {e.get('input')!r}")


def validate(model: type[_Params], values: dict[str, Any]) -> _Params:
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise one_line(exc) from None
