"""The model of the lab's own topology predicts the busbw `bench collective` measures in it.

Lab (fabricscope lab): namespaces as hosts, Linux bridges as switches, tc tbf at the link rate
on both sides of every veth. Benchmark: `fabricscope bench collective` (torch.distributed,
gloo, whose all-reduce is a ring). Model: the same topology with one rank per host
(`--gpus-per-node 1 --gpu none`), `--transport tcp --framing tbf` (tbf counts Ethernet frames).
Root and the lab's tools are needed: skipped outside CI, required in it. ~1.5 minutes.
"""

from __future__ import annotations

import json

import pytest

from fabricscope.sim.scenario import run_collective
from tests.conftest import require_torch
from tests.lab import conftest as lab_fixtures
from tests.lab.conftest import best_rate, fs

pytestmark = pytest.mark.slow

lab_dir = lab_fixtures.lab_dir
make_lab = lab_fixtures.make_lab


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    """These tests run `bench collective` (torch.distributed) in the lab."""
    require_torch()


def measured_busbw(launch: str, size: str, model: float) -> float:
    """The best of up to three runs (tests/lab/conftest.py best_rate), stopping once within 10% of ``model``."""
    return max(best_rate(lambda: _busbw(launch, size), lambda rate: abs(rate - model) <= 0.10 * rate))


def _busbw(launch: str, size: str) -> float:
    proc = fs("bench", "collective", "--launch", launch, "--sizes", size, "--iters", "3", "--warmup", "1",
              "--backend", "gloo", "--no-check", "--json", "--no-store", "--timeout", "120", timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["entries"][0]["busbw_GBps"]


def model_busbw(size: str, **topology) -> float:
    params = {"gpus_per_node": 1, "gpu": "none", "transport": "tcp", "framing": "tbf", "op": "all_reduce",
              "algo": "ring", "size": size, **topology}
    return run_collective(params)["busbw_GBps"]


def test_star_4_hosts_1gbit(make_lab) -> None:
    make_lab("simst", "--hosts", "4", "--link-rate", "1gbit")
    model = model_busbw("64M", topology="star", nodes=4, nic_rate="1gbit")
    measured = measured_busbw("lab:simst", "64M", model)
    print(f"star 4 x 1gbit, 64 MiB: measured {measured:.5f} GB/s, model {model:.5f} GB/s")
    assert model == pytest.approx(measured, rel=0.10), f"model {model:.4f} GB/s, measured {measured:.4f} GB/s"


def test_oversubscribed_leaf_spine(make_lab) -> None:
    """8 hosts, 4 per leaf, 200 Mbit/s links, 4:1 (200 Mbit/s uplinks). In host order the ring
    crosses each uplink once; alternating leaves puts 4 ring flows on each uplink direction."""
    make_lab("simls", "--topology", "leaf-spine", "--hosts", "8", "--hosts-per-leaf", "4",
             "--link-rate", "200mbit", "--oversubscription", "4:1")
    fabric = {"topology": "leaf-spine", "nodes": 8, "hosts_per_leaf": 4, "oversubscription": "4:1",
              "nic_rate": "200mbit"}
    order = "h1,h5,h2,h6,h3,h7,h4,h8"
    for launch, node_order in (("lab:simls", None), (f"lab:simls:{order}", order)):
        model = model_busbw("4M", node_order=node_order, **fabric)
        measured = measured_busbw(launch, "4M", model)
        print(f"leaf-spine 4:1 {launch}, 4 MiB: measured {measured:.5f} GB/s, model {model:.5f} GB/s")
        assert model == pytest.approx(measured, rel=0.10), (
            f"{launch}: model {model:.5f} GB/s, measured {measured:.5f} GB/s")
