"""Calibration: fit the model's alpha (per-step latency) and efficiency from measured runs.

The measurement is a set of (size_bytes, time_s) samples of one collective (a stored
``bench collective`` run, or nccl-tests output imported with ``bench import``). For every
algorithm the model uses, time is affine in the message size once the size is large enough
to fill the pipeline: T(n) = a + b n. A weighted least-squares line through the samples
(weights 1/T^2, so that small and large messages count by their *relative* error) gives
a and b; the model is then adjusted so that its own line has the same slope and intercept:

* slope: bandwidth. The network efficiency is scaled by b_model / b_measured (or, when the
  model's slowest flows are held by the transport's per-flow cap, that cap is scaled);
* intercept: latency. The transport's alpha moves by (a_measured - a_model) / k, where k is
  the number of network-latency terms the model charges per collective (found by
  perturbing alpha).

Two rounds of this fixed-point step are enough in practice; the residual per size after
calibration is reported so a poor fit is visible rather than hidden.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fabricscope.errors import FabricscopeError

_SIZE_KEY = re.compile(r"^size_(\d+)_time_s\Z")


@dataclass(frozen=True)
class LineFit:
    alpha_s: float  # intercept
    beta_s_per_byte: float  # slope
    r2: float
    samples: int

    @property
    def bandwidth_GBps(self) -> float:
        return 1.0 / self.beta_s_per_byte / 1e9 if self.beta_s_per_byte > 0 else math.inf


def fit_alpha_beta(sizes: list[int] | np.ndarray, times: list[float] | np.ndarray) -> LineFit:
    """Weighted least squares T = alpha + beta * n with weights 1/T^2 (relative error).

    Needs at least two distinct sizes with positive finite times. alpha is clamped at 0
    (a negative intercept means the smallest sizes are noise-dominated; the slope is refit
    through the origin in that case).
    """
    n = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    ok = np.isfinite(n) & np.isfinite(t) & (t > 0) & (n >= 0)
    n, t = n[ok], t[ok]
    if len(n) < 2 or len(np.unique(n)) < 2:
        raise FabricscopeError("calibration needs at least two different message sizes with valid times")
    w = 1.0 / t**2
    A = np.stack([np.ones_like(n), n], axis=1)
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(A * sw[:, None], t * sw, rcond=None)
    a, b = float(coef[0]), float(coef[1])
    if a < 0:
        a = 0.0
        b = float(np.sum(w * n * t) / np.sum(w * n * n))
    if b <= 0:
        raise FabricscopeError(
            "calibration: time does not grow with size in these samples; cannot fit a bandwidth"
        )
    pred = a + b * n
    ss_res = float(np.sum(w * (t - pred) ** 2))
    mean = float(np.sum(w * t) / np.sum(w))
    ss_tot = float(np.sum(w * (t - mean) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return LineFit(a, b, r2, int(len(n)))


@dataclass(frozen=True)
class Samples:
    run_id: int | None
    op: str
    ranks: int | None
    sizes: list[int]
    times: list[float]
    source: str


def samples_from_result(result: Any) -> Samples:
    """(size, time) samples of a stored ``fabricscope.bench/v1`` collective result."""
    kind = getattr(result, "kind", None)
    if kind != "collective":
        raise FabricscopeError(
            f"run {getattr(result, 'run_id', '?')} is a {kind!r} run; calibration needs a collective run "
            "(fabricscope bench collective, or nccl-tests output via fabricscope bench import)"
        )
    status = getattr(result, "status", None)
    if str(getattr(status, "value", status)) != "ok":
        raise FabricscopeError(
            f"run {result.run_id} did not complete (status {status}); pick a completed run"
        )
    pairs = []
    for key, value in (result.metrics or {}).items():
        m = _SIZE_KEY.match(key)
        if m and value is not None:
            pairs.append((int(m.group(1)), float(value)))
    if not pairs:
        raise FabricscopeError(f"run {result.run_id} has no per-size times (size_<N>_time_s metrics)")
    pairs.sort()
    params = result.params or {}
    ranks = params.get("world_size") or (result.metrics or {}).get("ranks_count")
    return Samples(
        result.run_id,
        str(params.get("op", "all_reduce")),
        int(ranks) if ranks else None,
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        "store",
    )


def calibrate(
    sim: Any, samples: Samples, algo: str | None = None, rounds: int = 3
) -> tuple[Any, dict[str, Any]]:
    """A copy of ``sim`` whose transport alpha and efficiency (or per-flow cap) reproduce the
    samples' fitted line. Returns (calibrated simulator, report)."""
    from fabricscope.sim import select
    from fabricscope.sim.engine import Simulator

    if samples.ranks is not None and samples.ranks != sim.topo.n_gpus:
        raise FabricscopeError(
            f"run {samples.run_id} has {samples.ranks} ranks but the model has {sim.topo.n_gpus} GPUs; "
            f"describe the same fabric (--nodes/--gpus-per-node or --topology-file)"
        )
    meas = fit_alpha_beta(samples.sizes, samples.times)
    tr = replace(sim.transport, notes=list(sim.transport.notes))

    def model(t: Any) -> tuple[Simulator, list[float], Any]:
        s = Simulator(
            sim.topo,
            t,
            routing=sim.routing,
            seed=sim.seed,
            nvlink_efficiency=sim.nvlink_efficiency,
            intra_alpha_s=sim.intra_alpha_s,
            slice_bytes=sim.slice_bytes,
        )
        res = [select.collective(s, samples.op, n, algo=algo) for n in samples.sizes]
        return s, [r.time_s for r in res], res

    start = model(tr)[1]
    for _ in range(rounds):
        s, times, res = model(tr)
        mod = fit_alpha_beta(samples.sizes, times)
        capped = any(b.get("kind") == "transport" for b in res[-1].bottlenecks)
        ratio = mod.beta_s_per_byte / meas.beta_s_per_byte  # >1: the fabric is faster than modelled
        if capped and math.isfinite(tr.per_flow_cap_Bps):
            tr = replace(tr, per_flow_cap_Bps=tr.per_flow_cap_Bps * ratio)
        else:
            eff = tr.endpoint_efficiency * ratio
            if tr.wire_efficiency * eff > 1.0:
                eff = 1.0 / tr.wire_efficiency
            tr = replace(tr, endpoint_efficiency=eff)
        # latency: sensitivity of the modelled intercept to alpha
        d_alpha = max(tr.alpha_s * 0.5, 1e-6)
        _, t_hi, _ = model(replace(tr, alpha_s=tr.alpha_s + d_alpha))
        _, t_lo, _ = model(tr)
        a_hi = fit_alpha_beta(samples.sizes, t_hi).alpha_s
        a_lo = fit_alpha_beta(samples.sizes, t_lo).alpha_s
        k = (a_hi - a_lo) / d_alpha
        if k > 0:
            tr = replace(tr, alpha_s=max(0.0, tr.alpha_s + (meas.alpha_s - a_lo) / k))
    s, times, _ = model(tr)
    rel = [(tm - tx) / tx for tm, tx in zip(times, samples.times, strict=False)]
    report = {
        "run_id": samples.run_id,
        "op": samples.op,
        "ranks": samples.ranks,
        "measured_fit": {
            "alpha_s": meas.alpha_s,
            "beta_s_per_byte": meas.beta_s_per_byte,
            "bandwidth_GBps": meas.bandwidth_GBps,
            "r2": meas.r2,
            "samples": meas.samples,
        },
        "transport_before": {
            "alpha_s": sim.transport.alpha_s,
            "efficiency": sim.transport.efficiency,
            "per_flow_cap_gbps": _gbps(sim.transport.per_flow_cap_Bps),
        },
        "transport_after": {
            "alpha_s": tr.alpha_s,
            "efficiency": tr.efficiency,
            "per_flow_cap_gbps": _gbps(tr.per_flow_cap_Bps),
        },
        "per_size": [
            {"size_bytes": n, "measured_s": tx, "model_before_s": t0, "model_after_s": tm, "error_after": e}
            for n, tx, t0, tm, e in zip(samples.sizes, samples.times, start, times, rel, strict=False)
        ],
        "max_abs_error_after": max(abs(e) for e in rel),
    }
    return s, report


def _gbps(Bps: float) -> float | None:
    return None if math.isinf(Bps) else Bps * 8 / 1e9


def calibrate_scenario(params: dict[str, Any], samples: Samples, ranks_topology: bool) -> dict[str, Any]:
    """Calibrate the transport of a scenario on a stored run's samples; ``ranks_topology``: shrink the
    fabric to the run's rank count first (``sim train``: the job is larger than the run). Returns the
    report, with the fitted transport parameters under ``applied``."""
    from fabricscope.sim.scenario import build_simulator, normalise

    p = normalise(params)
    if ranks_topology and samples.ranks and p.get("topology_file") is None:
        G = int(p["gpus_per_node"])
        if samples.ranks % G:
            p["gpus_per_node"] = 1
            p["nics_per_node"] = None
        p["nodes"] = samples.ranks // int(p["gpus_per_node"])
        if p["nodes"] == 1:
            p["topology"] = "single-node"
    cal, report = calibrate(build_simulator(p), samples, p.get("algo"))
    fitted = {"alpha_us": cal.transport.alpha_s * 1e6, "efficiency": cal.transport.efficiency}
    if cal.transport.name in ("tcp", "udp"):
        fitted["per_core_gbps"] = cal.transport.per_flow_cap_Bps * 8 / 1e9
    report["applied"] = fitted
    return report
