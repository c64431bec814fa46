"""The compute of one Megatron-LM transformer layer on one GPU: FLOPs per GEMM and how long each
takes at its shape.

FLOPs (Narayanan et al., SC21, arXiv 2104.04473 §5.1 and appendix; Korthikanti et al. 2022,
arXiv 2205.05198 §5): per layer and micro-batch of ``b`` sequences of ``s`` tokens, the forward
pass runs the QKV, attention-output and two MLP GEMMs (24 b s h^2 FLOPs at ffn = 4h) and the two
attention batched GEMMs (QK^T and attention x V, 4 b s^2 h); the logit layer adds 2 b s h V. The
backward pass costs twice the forward. Activation recomputation adds a forward: all of it
(``full``), the core attention only (``selective``: QK^T, softmax, dropout, x V), or nothing.

GEMM time (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001: §2 math and
memory bounds, §2.3 cuBLAS tile sizes, §3.1 tile and §3.2 wave quantisation): a GEMM runs in
output tiles of 256x128 (the largest cuBLAS tile), one wave of tiles per SM count, so a GEMM whose
tile count is not a multiple of the SMs idles the rest of its last wave, and a partial tile costs
a whole one; a GEMM whose arithmetic intensity is below the GPU's FLOP/byte ridge is bound by HBM
instead (roofline). On top of both, one sustained fraction of
peak, ``GEMM_EFFICIENCY``, fitted to one published figure (sim/published.py's calibration table).

Memory-bound work between the GEMMs (layer norms, bias + GeLU, bias + dropout + residual add,
the fused scale-mask-softmax and its dropout) moves bytes at HBM bandwidth: about 11 b s h
elements per layer forward (replicated on every tensor-parallel rank, unless sequence
parallelism splits them), 8 b s h / t for bias + GeLU and 4.5 b a s^2 / t for softmax and
attention dropout (Korthikanti et al. 2022, Table 2's activation count, read as traffic).
This is what makes small models (small h, many heads per h) less efficient per FLOP than large
ones, and the per-GPU TFLOP/s rise with model size as the SC21 table shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabricscope.sim import gpus

# Sustained fraction of peak of a large, well-shaped GEMM inside Megatron-LM's training loop.
# Fitted to ONE figure: SC21's 1T-parameter row, 163 TFLOP/s per GPU on 3072 A100 (arXiv
# 2104.04473 §1 and §5.1); see sim/published.py CALIBRATION. Every other training row validates it.
GEMM_EFFICIENCY = 0.7365
# The same for FP8 GEMMs (Transformer Engine: the linear layers in FP8, the attention core in
# BF16), as a share of the FP8 peak: fitted to the FP8 training rows of the calibration split
# (sim/published.py CALIBRATION names them).
FP8_GEMM_EFFICIENCY = 0.60
TILE_M, TILE_N = 256, 128
BYTES = 2  # 16-bit activations and weights
RECOMPUTE = ("full", "selective", "none")


@dataclass(frozen=True)
class Gpu:
    name: str
    peak_tflops: float
    hbm_GBps: float
    sms: int
    fp8_tflops: float | None = None


def gpu_spec(name: str, peak_tflops: float | None = None) -> Gpu:
    """The GPU's datasheet figures (sim/gpus.py; an unknown GPU is refused, never stood in for);
    ``peak_tflops`` overrides the peak (a custom part)."""
    g = gpus.lookup(name)
    return Gpu(g.name, float(peak_tflops or g.bf16_tflops), g.hbm_GBps, g.sms, g.fp8_tflops)


def gemm_time(gpu: Gpu, m: float, n: float, k: float, batch: float = 1.0, fp8: bool = False) -> float:
    """Seconds for ``batch`` GEMMs of (m x k) @ (k x n) on one GPU: wave quantisation of 256x128
    tiles over the SMs, or the HBM roofline, whichever is slower, at ``GEMM_EFFICIENCY`` (FP8: the
    FP8 peak at ``FP8_GEMM_EFFICIENCY``, one byte per element)."""
    if m <= 0 or n <= 0 or k <= 0 or batch <= 0:
        return 0.0
    if fp8 and gpu.fp8_tflops:
        tiles = math.ceil(m / TILE_M) * math.ceil(n / TILE_N) * batch
        wave_eff = tiles / (math.ceil(tiles / gpu.sms) * gpu.sms)
        t_math = 2.0 * m * n * k * batch / (gpu.fp8_tflops * 1e12 * FP8_GEMM_EFFICIENCY * wave_eff)
        return max(t_math, (m * k + k * n + 2 * m * n) * batch / (gpu.hbm_GBps * 1e9))
    tiles = math.ceil(m / TILE_M) * math.ceil(n / TILE_N) * batch
    waves = math.ceil(tiles / gpu.sms)
    wave_eff = tiles / (waves * gpu.sms)
    flops = 2.0 * m * n * k * batch
    t_math = flops / (gpu.peak_tflops * 1e12 * GEMM_EFFICIENCY * wave_eff)
    t_mem = BYTES * (m * k + k * n + m * n) * batch / (gpu.hbm_GBps * 1e9)
    return max(t_math, t_mem)


@dataclass(frozen=True)
class Layer:
    """One transformer layer as one GPU runs it."""

    hidden: int
    heads: int
    ffn: int
    seq: int  # tokens of one sequence this GPU holds (s / cp)
    seq_kv: int  # tokens attention looks at (s: context parallelism gathers K and V)
    micro_batch: int
    tp: int
    sequence_parallel: bool
    experts_per_token: int = 1  # MoE: each token runs this many expert MLPs (top-k); 1 = dense
    kv_heads: int | None = None  # grouped-query attention: K and V have this many heads (None: all)
    gated_mlp: bool = False  # SwiGLU/GeGLU: gate and up projections, three h x ffn matrices
    fp8: bool = False  # the linear layers' GEMMs in FP8 (Transformer Engine)
    flash_attention: bool = False  # fused attention (FlashAttention): the s x s scores never reach HBM


@dataclass
class LayerTimes:
    """Seconds of one layer for one micro-batch, and the FLOPs they carry."""

    gemm_fwd_s: float
    attn_core_fwd_s: float  # QK^T, softmax, dropout, x V: what selective recomputation repeats
    memory_fwd_s: float
    flops_fwd: float
    attn_core_flops: float

    def forward_s(self) -> float:
        return self.gemm_fwd_s + self.attn_core_fwd_s + self.memory_fwd_s

    def backward_s(self, recompute: str) -> float:
        extra = {"full": self.forward_s(), "selective": self.attn_core_fwd_s, "none": 0.0}[recompute]
        return 2.0 * self.forward_s() + extra

    def hardware_flops(self, recompute: str) -> float:
        extra = {"full": self.flops_fwd, "selective": self.attn_core_flops, "none": 0.0}[recompute]
        return 3.0 * self.flops_fwd + extra


def layer_times(gpu: Gpu, ly: Layer) -> LayerTimes:
    b, s, h, t = ly.micro_batch, ly.seq, ly.hidden, ly.tp
    tokens = b * s
    k = ly.experts_per_token
    d = h / ly.heads
    qkv = h + 2 * (ly.kv_heads or ly.heads) * d  # Q, and K, V for the KV heads (GQA)
    up = (2 if ly.gated_mlp else 1) * ly.ffn
    f8 = ly.fp8
    gemm = (
        gemm_time(gpu, tokens, qkv / t, h, fp8=f8)
        + gemm_time(gpu, tokens, h, h / t, fp8=f8)
        + k * (gemm_time(gpu, tokens, up / t, h, fp8=f8) + gemm_time(gpu, tokens, h, ly.ffn / t, fp8=f8))
    )
    heads = b * ly.heads / t
    attn = gemm_time(gpu, s, ly.seq_kv, d, heads) + gemm_time(gpu, s, d, ly.seq_kv, heads)
    replicated = 11.0 * tokens * h / (t if ly.sequence_parallel else 1)
    softmax = 0.0 if ly.flash_attention else 4.5 * heads * s * ly.seq_kv
    elems = replicated + (3.0 if ly.gated_mlp else 2.0) * k * tokens * ly.ffn / t + softmax
    softmax_s = BYTES * softmax / (gpu.hbm_GBps * 1e9)
    memory_s = BYTES * elems / (gpu.hbm_GBps * 1e9)
    flops_gemm = 2.0 * tokens * h * (qkv + h + k * (up + ly.ffn)) / t
    flops_attn = 4.0 * tokens * ly.seq_kv * h / t
    return LayerTimes(gemm, attn + softmax_s, memory_s - softmax_s, flops_gemm + flops_attn, flops_attn)


def logits_time(gpu: Gpu, tokens: float, hidden: int, vocab: int, tp: int) -> tuple[float, float]:
    """(seconds forward + backward, FLOPs) of the logit layer on the last stage (vocab split by TP)."""
    t = 3.0 * gemm_time(gpu, tokens, vocab / tp, hidden)
    return t, 6.0 * tokens * hidden * vocab / tp
