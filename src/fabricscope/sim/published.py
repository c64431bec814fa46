"""Published figures the model is held to, kept apart from the figures its constants were fitted to.

``CALIBRATION``: every constant of the model that was fitted (or taken) from a published figure,
with that figure and its source. ``VALIDATION``: published figures that no constant was fitted
to; each has the command that reproduces it in the model, its band (15% for bandwidth, 30% for
small-message latency), and whether the model holds it. docs/sim.md prints both tables from
here (``markdown``); tests/sim/test_published.py runs every validation row, holds each within
its band (or, for a row marked off, outside it, so that the docs' "off, because" stays true) and
fails if a validation figure is among the calibration inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests/issues/"
NCCL = "https://github.com/NVIDIA/nccl/issues/"
SC21 = "https://arxiv.org/abs/2104.04473"
# Korthikanti et al. 2022 (arXiv 2205.05198): the MFU table as NVIDIA/Megatron-LM's README printed it
# (README.md at d086a2e3b020ff78db9d29915f7cfe886e085f13 and earlier), and the iteration times with full
# recomputation as calculon-ai/calculon quotes them (calculon/megatron/validation.py, kProfile) with the
# configurations of its validation/*_full.json and *_seqsel.json files.
MEGATRON_README = (
    "https://github.com/NVIDIA/Megatron-LM/blob/d086a2e3b020ff78db9d29915f7cfe886e085f13/README.md"
)
# Smith et al. 2022 (MT-NLG 530B, arXiv 2201.11990 §2.4), as llm-analysis quotes it
MTNLG = (
    "https://github.com/cli99/llm-analysis/blob/main/examples/megatron-turing-nlg/README.md "
    "(arXiv 2201.11990 §2.4)"
)
CALCULON = (
    "https://github.com/calculon-ai/calculon/blob/main/calculon/megatron/validation.py (arXiv 2205.05198)"
)


@dataclass(frozen=True)
class Calibration:
    constant: str
    value: str
    figure: float  # the published figure it was fitted to (0: taken as is, nothing fitted)
    unit: str
    what: str
    source: str
    tables: tuple[
        str, ...
    ] = ()  # tables of tests/data/sim_validation/calibration.yaml it was fitted on (never heldout.yaml)


@dataclass(frozen=True)
class Validation:
    case: str
    figure: float
    unit: str  # "GB/s" (busbw), "us" (time); training: "TFLOP/s", "% MFU" or "s" (step time)
    source: str
    params: dict[str, Any]
    holds: bool = True
    note: str = ""
    size: str = field(default="8G")

    @property
    def band(self) -> float:
        return 0.30 if self.unit == "us" else 0.15


CALIBRATION: tuple[Calibration, ...] = (
    Calibration(
        "NVLINK_EFFICIENCY",
        "0.82",
        370.0,
        "GB/s",
        "ring all_reduce busbw in one 8x H100 node (NCCL_ALGO=RING), of 450 GB/s NVLink",
        NCCL_TESTS + "212",
    ),
    Calibration(
        "RDMA endpoint efficiency",
        "0.96",
        48.0,
        "GB/s",
        "NCCL busbw per NDR 400G NIC (46-48 GB/s) of 50 GB/s, after the wire overhead",
        NCCL_TESTS + "290",
    ),
    Calibration(
        "DCQCN contended-link share",
        "0.87",
        15.0,
        "%",
        "bandwidth utilisation an IB-like controller gains over DCQCN (1/1.15)",
        "Barre, USENIX ATC 2025",
    ),
    Calibration(
        "NCCL tuning constants",
        "as published",
        0.0,
        "",
        "base and per-link-type latencies, protocol factors, per-channel caps, nvlsEfficiency, "
        "treeCorrectionFactor: taken from the source, nothing fitted",
        "NVIDIA NCCL v2.30.7-1 src/graph/tuning.cc",
    ),
    Calibration(
        "GEMM_EFFICIENCY (sim train)",
        "0.7365",
        163.0,
        "TFLOP/s",
        "per A100: Megatron-LM's 1T-parameter GPT on 3072 A100 (TP 8, PP 64, DP 6, full recomputation), "
        "SC21 §1 and §5.1 text; configuration from NVIDIA/Megatron-LM examples/sc21/run_table_1.sh",
        SC21,
    ),
    Calibration(
        "NVLSTree pipeline stages (sim/pipeline.py)",
        "2 + 2 per network tree",
        0.0,
        "",
        "store-and-forward stages of NVLSTree's ramp, chosen on the whole 1 MiB-8 GiB sweeps of two "
        "2-node systems (2 + 2 fits; 4 + 2, one per NVLink thread group, puts the 8 MiB rows at 1.2-1.3x); "
        "chunk sizes, channels and NVLS's 3 stages are NCCL's (v2.30.7-1), not fitted",
        "tests/data/sim_validation/calibration.yaml",
        ("dstack-nebius-h100-2node-allreduce", "dstack-lambda-b200-2node-allreduce"),
    ),
    Calibration(
        "FP8_GEMM_EFFICIENCY (sim train --precision fp8)",
        "0.60",
        0.0,
        "",
        "least squares on log(model/published step time) over the FP8 training rows of the calibration "
        "split (grid 0.50-0.70; 0.60 and 0.65 within 0.1% of each other)",
        "tests/data/sim_validation/calibration.yaml",
        (
            "dgxc-nemotron-nemotron4-15b-fp8",
            "dgxc-nemo-megatron-nemo-megatron-fp8",
            "dgxc-maxtext-maxtext-llama3-70b-fp8",
        ),
    ),
    Calibration(
        "MoE: NIC per-message overhead and launch latency (sim/moe.py)",
        "1024 bytes, 30 us",
        0.0,
        "",
        "least squares on log(model/published) over every MoE row of the calibration split (DeepEP normal "
        "kernels' bandwidth, pplx-garden's decode latencies; grid 0-16 KiB, 5-40 us): a 7 KiB per-token "
        "message runs at 0.875 of the transport's rate",
        "tests/data/sim_validation/calibration.yaml",
        (
            "deepep-v1-normal-initial",
            "deepep-v1-normal-pr130",
            "aws-p5en-deepep-intranode",
            "pplx-fabric-lib-alltoall-decode",
        ),
    ),
    Calibration(
        "INFER_COMPUTE_SHARE (sim infer)",
        "0.5 of the datasheet peak",
        0.0,
        "",
        "TensorRT-LLM Llama 3 70B TP8 offline throughput (batch 16-64, 128 in, 8 out): least squares on "
        "log(model/published), grid 0.3-0.8",
        "tests/data/sim_validation/calibration.yaml",
        ("azure-nd-a100-v4-llama3-70b-tp8", "azure-nd-h200-v5-llama3-70b-tp8"),
    ),
    Calibration(
        "TCP per-core cap",
        "40 Gb/s",
        0.0,
        "",
        "one core cannot copy 100 Gb/s (an assumption to measure with bench tcp)",
        "Cai et al., SIGCOMM 2021",
    ),
    Calibration(
        "TCP: NCCL socket transport per network hop (TCP_NCCL_HOP_S)",
        "250 us",
        0.0,
        "",
        "least squares on log(model/published) over every TCP row of the calibration split "
        "(grid 15-250 us); NCCL over sockets on cloud VMs takes 1-2 ms for 64 KiB-4 MiB all_reduces",
        "tests/data/sim_validation/calibration.yaml",
        ("skypilot-a3high-tcpx-vs-tcp-allreduce", "nccl209-gcp-32gbe-tcp"),
    ),
    Calibration(
        "TCP: host memory for the staging copies (TCP_HOST_MEM_GBPS)",
        "120 GB/s per node",
        0.0,
        "",
        "4 memory touches per byte each way (GPU to bounce buffer, kernel copy in and out, NIC DMA); "
        "fitted with the hop cost above (grid 80-240 GB/s)",
        "tests/data/sim_validation/calibration.yaml",
        ("skypilot-a3high-tcpx-vs-tcp-allreduce", "nccl209-gcp-32gbe-tcp"),
    ),
    Calibration(
        "EFA: per network hop (alpha)",
        "30 us",
        0.0,
        "",
        "2x p5.48xlarge, 8 B-16 GiB (grid 10-35 us); no calibration row is network-bound, so EFA keeps "
        "the RDMA endpoint efficiency 0.96 unfitted",
        "tests/data/sim_validation/calibration.yaml",
        ("aws-p5-2node-allreduce", "aws-p5-2node-allreduce-eks"),
    ),
    Calibration(
        "TCPX: per network hop and per-flow cap",
        "250 us, 60 Gb/s",
        0.0,
        "",
        "2x a3-highgpu-8g, GPUDirect-TCPX, 1 KB-2 GB (grid 10-600 us, 10-100 Gb/s)",
        "tests/data/sim_validation/calibration.yaml",
        ("skypilot-a3high-tcpx-vs-tcp-allreduce",),
    ),
    Calibration(
        "TCPXO: per network hop and efficiency",
        "60 us, 0.80",
        0.0,
        "",
        "2x a3-megagpu-8g, GPUDirect-TCPXO, all_reduce 8 B-8 GiB and all_gather 8 MiB-8 GiB "
        "(grid 5-80 us, 0.5-0.9)",
        "tests/data/sim_validation/calibration.yaml",
        ("a3mega-ztan-2node-allreduce", "dstack-a3mega-ll128-2node-allgather"),
    ),
)

_H100_NODE = {"topology": "single-node", "nodes": 1}


def _megatron(
    gpus: int,
    tp: int,
    pp: int,
    batch: int,
    mb: int,
    layers: int,
    hidden: int,
    heads: int,
    v: int,
    recompute: str,
    **extra: Any,
) -> dict[str, Any]:
    """A Megatron-LM GPT run on DGX A100 (Selene): sequence 2048, vocabulary 51,200."""
    return {
        "workload": "train",
        "system": "dgx-a100",
        "gpus": gpus,
        "tp": tp,
        "pp": pp,
        "micro_batch": mb,
        "tokens_per_step": batch * 2048,
        "seq_len": 2048,
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "virtual_stages": v,
        "recompute": recompute,
        "sequence_parallel": recompute == "selective",
        "flash_attention": False,
        **extra,
    }  # 2021-22: no fused attention yet


# Korthikanti et al. 2022 runs (DP 1): GPUs, TP, PP, global batch, micro-batch, layers, hidden, heads, v
_K22 = {
    "22B": (8, 8, 1, 4, 4, 48, 6144, 64, 1),
    "175B": (64, 8, 8, 64, 1, 96, 12288, 96, 3),
    "530B": (280, 8, 35, 280, 1, 105, 20480, 128, 3),
    "1T": (512, 8, 64, 512, 1, 128, 25600, 160, 1),
}
_K22_FULL_S = {"22B": 1.42, "175B": 18.13, "530B": 49.05, "1T": 94.42}
_K22_MFU = {"22B": 41.5, "175B": 51.4, "530B": 56.0, "1T": 56.3}
TRAINING: tuple[Validation, ...] = (
    *(
        Validation(
            f"Megatron-LM GPT-{k} on {c[0]} A100, selective recomputation + sequence parallelism: MFU",
            _K22_MFU[k],
            "% MFU",
            MEGATRON_README,
            _megatron(*c, recompute="selective"),
        )
        for k, c in _K22.items()
    ),
    *(
        Validation(
            f"Megatron-LM GPT-{k} on {c[0]} A100, full recomputation: iteration time",
            _K22_FULL_S[k],
            "s",
            CALCULON,
            _megatron(*c, recompute="full"),
        )
        for k, c in _K22.items()
    ),
)
VALIDATION: tuple[Validation, ...] = (
    Validation(
        "8x H100, one node, all_reduce (NVLS)",
        480.0,
        "GB/s",
        NCCL_TESTS + "212",
        {"system": "dgx-h100", **_H100_NODE},
    ),
    Validation(
        "8x H100, one node, all_reduce, 'expected range'",
        476.0,
        "GB/s",
        NCCL_TESTS + "290",
        {"system": "dgx-h100", **_H100_NODE},
    ),
    Validation(
        "8x H200, one node, all_reduce (NCCL 2.20.3)",
        475.0,
        "GB/s",
        NCCL_TESTS + "272",
        {"system": "hgx-h200", **_H100_NODE},
        size="4G",
    ),
    Validation(
        "8x H800 (NVLink 200 GB/s), one node, all_reduce",
        215.0,
        "GB/s",
        NCCL + "1374",
        {"system": "dgx-h100", "nvlink_GBps": 200, **_H100_NODE},
    ),
    Validation(
        "8x A100, one node, all_reduce",
        232.54,
        "GB/s",
        NCCL_TESTS + "175",
        {"system": "dgx-a100", **_H100_NODE},
        size="4G",
    ),
    Validation(
        "8x B200, one node, all_reduce ('830+')",
        830.0,
        "GB/s",
        NCCL + "1807",
        {"system": "dgx-b200", **_H100_NODE},
    ),
    Validation(
        "DGX A100, 8x 200G HDR IB, all_reduce (16 nodes)",
        192.0,
        "GB/s",
        NCCL + "1576",
        {"system": "dgx-a100", "nodes": 16},
    ),
    Validation(
        "3x 8 A100, 4x 200G HDR IB per node, all_reduce peak",
        96.0,
        "GB/s",
        NCCL_TESTS + "119",
        {"system": "dgx-a100", "nodes": 3, "nics_per_node": 4},
        size="128M",
    ),
    Validation(
        "4x 8 H100, 8x 400G RoCE, all_reduce",
        320.0,
        "GB/s",
        NCCL + "1221",
        {"system": "dgx-h100", "nodes": 4, "transport": "roce"},
    ),
    Validation(
        "32x 8 H100, 8 HCAs (RoCE), all_reduce 2 GiB",
        340.0,
        "GB/s",
        NCCL + "1218",
        {"system": "dgx-h100", "nodes": 32, "transport": "roce"},
        size="2G",
    ),
    Validation(
        "248x 8 H200 (1,984 GPUs), 8 HCAs, all_reduce 512 MiB (NVLSTree)",
        350.0,
        "GB/s",
        NCCL_TESTS + "283",
        {"system": "hgx-h200", "nodes": 248},
        size="512M",
    ),
    Validation(
        "GB200, 3 NVL8 partitions over IB, ring all_reduce 16 GiB",
        393.66,
        "GB/s",
        NCCL + "1801",
        {"system": "gb200-nvl72", "nvlink_domain": 8, "nodes": 3, "algo": "ring"},
        size="16G",
    ),
    Validation(
        "GB200, 3 NVL4 partitions over IB, ring all_reduce 16 GiB",
        196.72,
        "GB/s",
        NCCL + "1801",
        {"system": "gb200-nvl72", "nvlink_domain": 4, "nodes": 3, "algo": "ring"},
        size="16G",
    ),
    Validation(
        "2x 8 H100, alltoall: busbw = 2x the network bandwidth per GPU (N/(N-1), N=2) of 46-48 GB/s",
        94.0,
        "GB/s",
        NCCL_TESTS + "130",
        {"system": "dgx-h100", "nodes": 2, "op": "alltoall"},
        size="1G",
        note="depends on the calibrated per-NIC rate; checks the alltoall traffic (PXN, NVLink share)",
    ),
    Validation(
        "6x 8 H100, alltoall: 'the performance of a single NIC' (48-49 GB/s on CX-7)",
        48.5,
        "GB/s",
        NCCL_TESTS + "267",
        {"system": "dgx-h100", "nodes": 6, "op": "alltoall", "transport": "roce"},
        size="1G",
        note="depends on the calibrated per-NIC rate",
    ),
    Validation(
        "2x GH200 (one GPU and one NDR HCA per node), all_reduce of 2 KiB, the smallest size "
        "published: small-message latency across 2 nodes",
        14.99,
        "us",
        NCCL + "1291",
        {"gpu": "h100", "gpus_per_node": 1, "nics_per_node": 1, "nodes": 2},
        size="2K",
        note="the report is about a stall at large sizes; its small-message rows are latency-bound",
    ),
    Validation(
        "2x 8 H100, 8x 400G RoCE, all_reduce with NVLS (NVLSTree)",
        430.0,
        "GB/s",
        NCCL + "1221",
        {"system": "dgx-h100", "nodes": 2, "transport": "roce"},
        note="NCCL's NVLSTree cap, 8 NVLS heads x perChMaxNVLSTreeBw 57.7 GB/s (tuning.cc); with 16 "
        "channels in its place the model was NVLink-bound at ~520 (1.21, off)",
    ),
    *TRAINING,
    # off: kept, with why
    Validation(
        "GB200 NVL72, 72 GPUs in one NVLink domain, all_reduce 8 GiB (NVLS)",
        834.57,
        "GB/s",
        "https://github.com/coreweave/nccl-tests/pull/43",
        {"system": "gb200-nvl72", **_H100_NODE},
        holds=False,
        note="off: measured 72-rank NVLS moves ~430 GB/s per GPU link each way, 0.80 of what 8-GPU B200 "
        "NVLS reaches; NCCL's nvlsEfficiency is one figure per generation (0.74), with no term for "
        "the domain size, and nothing published to fit one to without fitting to this row",
    ),
    Validation(
        "2x 8 H20, 16 NDR NICs, 8 B all_reduce, NCCL_ALGO=NVLSTree",
        47.6,
        "us",
        NCCL + "1244",
        {"system": "dgx-h100", "nodes": 2, "nics_per_node": 8, "algo": "nvlstree"},
        size="8",
        holds=False,
        note="off: NCCL's NVLS/NVLSTree Simple latency constants (25 us NVLink + 20.9 us per network "
        "hop) are tuning estimates well above this measurement; the model reuses them as is",
    ),
    Validation(
        "Megatron-LM GPT 1.7B on 32 A100 (SC21 Table 1's smallest row: '44% of peak', of 312)",
        137.28,
        "TFLOP/s",
        SC21,
        _megatron(32, 1, 1, 512, 16, 24, 2304, 24, 1, "full", dp_collective="allreduce"),
        holds=False,
        note="off: the model gives ~160 TFLOP/s (ratio ~1.17); its GEMM derating is wave quantisation and "
        "the HBM roofline only, which barely touch h 2304 at TP 1, and no GEMM-efficiency-by-shape "
        "figure for A100 was found as citable text to fit a curve to",
    ),
    *(
        Validation(
            f"MT-NLG 530B (DeepSpeed + Megatron) on {n} DGX A100, batch 1920: iteration time",
            t,
            "s",
            MTNLG,
            _megatron(n * 8, 8, 35, 1920, 1, 105, 20480, 128, 1, "full", vocab=50272, dp_collective="zero"),
            holds=False,
            note="off: the model is ~0.78 of the published time (faster); DeepSpeed's pipeline engine ran "
            "this, not Megatron-LM's schedule the model is calibrated on; the published fall in "
            "TFLOP/s with more nodes (126 -> 113) the model shows too (159 -> 150)",
        )
        for n, t in ((280, 60.1), (350, 50.2), (420, 44.4))
    ),
)


TRAIN_METRIC = {"TFLOP/s": "hardware_tflops_per_gpu", "% MFU": "mfu", "s": "step_time_s"}


def model_figure(row: Validation) -> float:
    """The model's busbw (GB/s), time (us), or for a training row its TFLOP/s, MFU or step time."""
    if row.params.get("workload") == "train":
        from fabricscope.sim.training import run_train

        doc = run_train({k: v for k, v in row.params.items() if k != "workload"})
        return doc[TRAIN_METRIC[row.unit]] * (100.0 if row.unit == "% MFU" else 1.0)
    from fabricscope.sim.scenario import run_collective

    doc = run_collective({**row.params, "size": row.size})
    return doc["time_s"] * 1e6 if row.unit == "us" else doc["busbw_GBps"]


def markdown() -> tuple[str, str]:
    """(calibration table, validation table) as docs/sim.md prints them."""
    cal = ["| Constant | Value | Fitted to | Source |", "|---|---|---|---|"]
    for c in CALIBRATION:
        fig = f"{c.figure:g} {c.unit}: " if c.figure else ""
        tables = f" (tables: {', '.join(c.tables)})" if c.tables else ""
        cal.append(f"| {c.constant} | {c.value} | {fig}{c.what}{tables} | {c.source} |")
    val = [
        "| Case | Published | Model | Ratio | Band | Holds | Source | Command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in VALIDATION:
        m = model_figure(v)
        ratio = m / v.figure
        holds = "yes" if v.holds else v.note
        if v.holds and v.note:
            holds = f"yes ({v.note})"
        val.append(
            f"| {v.case} | {v.figure:g} {v.unit} | {m:.1f} {v.unit} | {ratio:.2f} | "
            f"±{v.band * 100:.0f}% | {holds} | {v.source} | `{command(v)}` |"
        )
    return "\n".join(cal), "\n".join(val)


def command(v: Validation) -> str:
    train = v.params.get("workload") == "train"
    args = ["fabricscope sim train" if train else "fabricscope sim collective"]
    for k, x in v.params.items():
        if k == "workload":
            continue
        if isinstance(x, bool):
            args.append(f"--{'' if x else 'no-'}{k.replace('_', '-')}")
        else:
            args.append(f"--{k.replace('_', '-')} {x}")
    if not train:
        args.append(f"--size {v.size}")
    return " ".join(args)
