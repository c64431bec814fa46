"""alltoall by per-link aggregation (issue 10 item 7) and PXN (item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricscope.sim import alltoall, collectives
from fabricscope.sim.patterns import Phase, Plan
from fabricscope.sim.scenario import build_simulator, normalise, run_collective

CASES = [
    {"system": "dgx-h100", "nodes": 8},
    {"system": "dgx-h100", "nodes": 8, "transport": "roce"},
    {
        "topology": "fat-tree",
        "nodes": 16,
        "nic_rate": "400G",
        "transport": "roce",
        "seed": 3,
    },  # ECMP collisions
    {"topology": "fat-tree", "nodes": 16, "gpus_per_node": 8, "nics_per_node": 4},  # two GPUs per NIC
    {"topology": "rail-optimized", "nodes": 4, "oversubscription": "4:1", "hosts_per_leaf": 4},
    # transport effects, one function for both paths (issue 21 item 4): a per-flow cap striped over
    # NCCL's sockets, and retransmissions under loss (go-back-N and TCP)
    {"system": "dgx-h100", "nodes": 4, "transport": "tcp", "nsocks_perthread": 2, "socket_nthreads": 2},
    {"system": "dgx-h100", "nodes": 4, "transport": "roce", "loss": "0.001"},
    {"system": "dgx-h100", "nodes": 4, "transport": "tcp", "loss": "0.0001", "nic_rate": "100G"},
]


@pytest.mark.parametrize("params", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("pxn", [True, False])
def test_aggregation_gives_the_exact_answer(params, pxn) -> None:
    sim = build_simulator(normalise(params))
    n = 2**28
    p = sim.topo.n_gpus
    exact = sim.run_plan(collectives.plan(sim.topo, "alltoall", "direct", n, pxn=pxn))
    striped = sim.transport.sockets > 1  # the per-transfer path solves one row per socket
    assert striped or exact.phases[0]["transfers"] == p * (p - 1)
    assert "aggregated" not in exact.phases[0]["name"]
    g = np.arange(p)[None, :]
    agg = alltoall.build(sim.topo, g, collectives._layout(sim.topo, g), pxn)
    res = sim.run_plan(Plan("alltoall", "direct", n, p, [Phase("agg", agg, "sync", 1, n / p)]))
    # Under loss a leg's transfers share one retransmission window, the longest transfer's (with
    # both PXN NVLink hops): at most a few tenths of a percent slower than transfer by transfer.
    lossy = sim.transport.loss > 0
    assert res.time_s == pytest.approx(exact.time_s, rel=5e-3 if lossy else 1e-9)
    assert not lossy or res.time_s >= exact.time_s * (1 - 1e-9)
    assert res.limited_by == exact.limited_by
    assert res.phases[0]["transfers"] == p * (p - 1)


def test_pxn_keeps_alltoall_on_its_rail() -> None:
    """4 nodes on one scalable unit, 4:1 oversubscribed: with PXN every transfer stays on its
    rail leaf; without it (NCCL_PXN_DISABLE=1) cross-rail traffic climbs to the spines."""
    base = {
        "topology": "rail-optimized",
        "nodes": 4,
        "oversubscription": "4:1",
        "hosts_per_leaf": 4,
        "op": "alltoall",
        "size": "1G",
    }
    on, off = run_collective(base), run_collective({**base, "pxn": False})
    assert on["limited_by"] == "access bandwidth" and off["limited_by"] == "fabric bandwidth"
    assert off["time_s"] > 2 * on["time_s"]


def test_8192_ranks() -> None:
    """1,024 nodes x 8 GPUs: 67 million transfers, 8.4 million network legs; the slowest transfer
    is held by its NIC (each NIC carries one share per remote GPU). Wall time: benchmarks/sim_scaling.py."""
    d = run_collective({"system": "dgx-h100", "nodes": 1024, "op": "alltoall", "size": "1G"})
    ph = d["results"][0]["phases"][0]
    assert ph["transfers"] == 8192 * 8191 and "aggregated" in ph["name"]
    assert d["limited_by"] == "access bandwidth"
    nic = 400e9 / 8 * 4096 / 4122 * 0.96 / 1e9
    # each NIC carries the 8 senders' shares to the 1,023 other nodes' GPUs on its rail
    assert ph["min_rate_GBps"] == pytest.approx(nic / (8 * 1023), rel=1e-6)
