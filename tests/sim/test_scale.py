"""100,000 GPUs (12,500 nodes x 8, rail-optimized): the model builds, routes and solves the
whole ring, with rates that follow from the hardware. Its wall time and memory are measured by
benchmarks/sim_scaling.py, not asserted here."""

from __future__ import annotations

import pytest

from fabricscope.sim.engine import NVLINK_EFFICIENCY
from fabricscope.sim.scenario import build_simulator, normalise


def test_hundred_thousand_gpu_ring() -> None:
    sim = build_simulator(
        normalise(
            {
                "topology": "rail-optimized",
                "nodes": 12_500,
                "gpus_per_node": 8,
                "nic_rate": "400G",
                "transport": "ib",
            }
        )
    )
    assert sim.topo.n_gpus == 100_000 and sim.topo.describe()["tiers"] == 3
    r = sim.collective("all_reduce", "ring", 2**30)
    ph = r.phases[0]
    assert ph["transfers"] == 8 * 100_000
    # every GPU's NVLink carries one flow per channel: 450 GB/s x 0.82 / 8 per flow, below a
    # NIC's 50 GB/s x 0.954
    assert ph["min_rate_GBps"] == pytest.approx(450 * NVLINK_EFFICIENCY / 8, rel=1e-9)
    p = 100_000
    chunk = 2**30 / (p * 8)
    assert ph["bandwidth_s"] == pytest.approx(2 * (p - 1) * chunk / (ph["min_rate_GBps"] * 1e9), rel=1e-9)
    assert r.limited_by.startswith("latency")
    assert r.stats["distinct_patterns"] == 1
