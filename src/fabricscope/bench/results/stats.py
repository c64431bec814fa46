"""Small statistics for latency samples and robust baselines (standard library only)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# MAD x 1.4826 estimates the standard deviation of normally distributed values (1 / Phi^-1(3/4)).
MAD_SCALE = 1.4826


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Percentile ``q`` (0..100) of already-sorted values, linear interpolation (numpy's default)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    pos = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    frac = pos - low
    return float(sorted_values[low]) * (1 - frac) + float(sorted_values[high]) * frac


def latency_summary(samples_ns: Sequence[int], prefix: str) -> dict[str, float]:
    """``{prefix}_p50_us``, p90, p99, p99.9 (``p999``), min, mean and max in microseconds."""
    if not samples_ns:
        return {}
    values = sorted(samples_ns)
    us = 1e-3
    return {
        f"{prefix}_min_us": values[0] * us,
        f"{prefix}_mean_us": sum(values) / len(values) * us,
        f"{prefix}_p50_us": percentile(values, 50) * us,
        f"{prefix}_p90_us": percentile(values, 90) * us,
        f"{prefix}_p99_us": percentile(values, 99) * us,
        f"{prefix}_p999_us": percentile(values, 99.9) * us,
        f"{prefix}_max_us": values[-1] * us,
    }


def median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation (unscaled): robust spread that one outlier run cannot inflate."""
    centre = median(values)
    return median([abs(v - centre) for v in values])


def robust_sigma(values: Sequence[float]) -> float:
    """``MAD_SCALE x MAD``: a standard deviation that a few outliers cannot inflate (0.0 for no values)."""
    return MAD_SCALE * mad(values) if values else 0.0
