"""Workloads on top of collectives: what the training step (sim/training.py) and LLM inference
(sim/infer.py) share, and the training entry point.

Inference: decode is memory-bound (weights and KV cache read per token, HBM bandwidth) or
compute-bound, whichever is slower; per token 2 TP all-reduces per layer of batch*h
activations; disaggregated serving moves each request's KV cache from a prefill node to a
decode node, over a per-request TCP connection (handshake + slow start), a pooled TCP
connection, or RDMA with pooled queue pairs.
"""

from __future__ import annotations

import math
from typing import Any

from fabricscope.errors import FabricscopeError


def _num(p: dict[str, Any], key: str, lo: float = 0.0, integer: bool = False) -> float:
    v = p.get(key)
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FabricscopeError(f"--{key.replace('_', '-')} must be a number, got {v!r}") from None
    if not math.isfinite(x) or x < lo:
        raise FabricscopeError(f"--{key.replace('_', '-')} must be >= {lo:g}")
    if integer:
        if x != int(x):
            raise FabricscopeError(f"--{key.replace('_', '-')} must be an integer")
        return int(x)
    return x


def shape_of(params: float, layers: int | None, hidden: int | None, multiple: int = 1) -> tuple[int, int]:
    """Layers and hidden size: given, or derived from N ~ 12 L h^2 with h ~ 128 L (the aspect
    ratio of GPT-3 175B: 96 layers, h 12288); derived layer counts are a multiple of
    ``multiple`` (the pipeline stages) and h a multiple of 64."""
    if layers and hidden:
        return int(layers), int(hidden)
    if hidden and not layers:
        L = max(1, round(params / (12 * hidden * hidden)))
        return max(multiple, round(L / multiple) * multiple), int(hidden)
    if not layers:
        L = max(1, round((params / (12 * 128 * 128)) ** (1 / 3)))
        layers = max(multiple, round(L / multiple) * multiple)
    return int(layers), max(64, int(round(math.sqrt(params / (12 * layers)) / 64) * 64))


def tcp_transfer_s(
    nbytes: float, rate_Bps: float, rtt_s: float, mss: int, fresh: bool, init_cwnd: int = 10
) -> float:
    """Time to move ``nbytes`` over TCP: a fresh connection pays the handshake (1 RTT before the
    first byte) and slow start from ``init_cwnd`` segments (RFC 6928), doubling per RTT until
    the window covers the bandwidth-delay product; a pooled (warm) connection sends at rate."""
    if not fresh:
        return nbytes / rate_Bps
    t = rtt_s  # SYN / SYN-ACK; the request rides on the ACK
    bdp_segments = max(1.0, rate_Bps * rtt_s / mss)
    cwnd, sent = float(init_cwnd), 0.0
    while cwnd < bdp_segments and sent + cwnd * mss < nbytes:
        sent += cwnd * mss
        t += rtt_s
        cwnd *= 2
    return t + (nbytes - sent) / rate_Bps


def run_train(params: dict[str, Any]) -> dict[str, Any]:
    """One Megatron-LM training step (sim/training.py)."""
    from fabricscope.sim.training import run_train as run

    return run(params)
