"""Collective and matrix benchmarks proven on lab fabrics (root; CI runs them; ~3 minutes).

Rates are chosen for a 2-core machine: 1 Gbit/s for the 4-host star (as the issue asks; gloo
then moves ~4 Gbit/s through the bridge), 200 Mbit/s for the 8-host fabrics (8 ranks of gloo
or 4 concurrent TCP flows must not be CPU-bound, or the fabric would not be what is measured).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from tests.conftest import require_torch
from tests.lab import conftest as lab_fixtures
from tests.lab.conftest import best_rate, fs

pytestmark = pytest.mark.slow

# the lab fixtures of tests/lab (private state directory, labs torn down after each test)
lab_dir = lab_fixtures.lab_dir
make_lab = lab_fixtures.make_lab

MTU = 1500
# TCP payload per Ethernet frame at MTU 1500 (tbf counts whole frames): 1448 / 1514
GOODPUT = 1448 / 1514


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    """These tests run `bench collective` (torch.distributed) in the lab."""
    require_torch()


def _collective(launch: str, sizes: str, iters: int = 3, extra: tuple[str, ...] = ()) -> dict:
    proc = fs("bench", "collective", "--launch", launch, "--sizes", sizes, "--iters", str(iters), "--warmup", "1",
              "--json", "--no-store", "--timeout", "120", *extra, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_star_1gbit_all_reduce_64mib_reaches_90pct_of_link(make_lab) -> None:
    """The fabric can carry gloo's ring at >= 90% of the link (ceiling: GOODPUT, 95.6%).

    Up to three runs, the best judged (tests/lab/conftest.py best_rate says why).
    """
    make_lab("cstar", "--hosts", "4", "--link-rate", "1gbit")
    link_gbps = 1.0

    def busbw_gbps() -> float:
        doc = _collective("lab:cstar", "64M")
        entry = doc["entries"][0]
        assert entry["wrong"] == 0 and doc["params"]["world_size"] == 4
        return entry["busbw_GBps"] * 8

    measured = best_rate(busbw_gbps, lambda rate: rate >= 0.90 * link_gbps)
    assert max(measured) >= 0.90 * link_gbps, f"busbw {measured} Gbit/s on 1 Gbit/s links"
    assert max(measured) <= GOODPUT * link_gbps * 1.01, f"busbw {measured} above the TCP ceiling of the link"


def test_leaf_spine_oversubscription_drops_busbw_as_predicted(make_lab) -> None:
    """Theory (ring all-reduce, the algorithm gloo uses; every rank sends to rank + 1):

    8 hosts, 4 per leaf, links R = 200 Mbit/s, 4:1 oversubscribed -> uplink = 4 R / 4 = R.
    * Ranks in host order (h1..h8): only h4->h5 and h8->h1 cross the spine, one flow per uplink
      direction at R: no drop, busbw ~ R x goodput.
    * Ranks alternating leaves (h1,h5,h2,h6,...): all 8 ring flows cross the spine, 4 per uplink
      direction share R: each gets R/4, so busbw drops by the factor uplink / (4 x R) = 1/4.
    """
    make_lab("cls", "--topology", "leaf-spine", "--hosts", "8", "--hosts-per-leaf", "4",
             "--link-rate", "200mbit", "--oversubscription", "4:1")
    local = _collective("lab:cls", "4M")["entries"][0]["busbw_GBps"] * 8
    crossing = _collective("lab:cls:h1,h5,h2,h6,h3,h7,h4,h8", "4M")["entries"][0]["busbw_GBps"] * 8
    predicted = 0.2 / (4 * 0.2)  # uplink rate / (flows per uplink direction x link rate)
    assert local >= 0.85 * 0.2 * GOODPUT, f"ring in host order: {local:.4f} Gbit/s"
    assert crossing / local == pytest.approx(predicted, rel=0.2), f"{crossing:.4f} / {local:.4f} vs {predicted}"


def _matrix(name: str) -> dict:
    proc = fs("bench", "matrix", "--launch", f"lab:{name}", "--duration", "1", "--warmup", "0.2", "--json", "--no-store",
              "--timeout", "60", timeout=400)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "matrix" and doc["hosts"] == [f"h{i}" for i in range(1, 9)]
    assert len(doc["matrix_gbps"]) == 8 and all(len(r) == 8 for r in doc["matrix_gbps"])
    return doc


def test_matrix_names_the_slow_host_and_only_it(make_lab) -> None:
    make_lab("cmslow", "--hosts", "8", "--link-rate", "200mbit")
    assert fs("lab", "set", "cmslow", "h6", "--link-rate", "50mbit").returncode == 0
    doc = _matrix("cmslow")
    assert [(s["host"], s["kind"]) for s in doc["suspects"]] == [("h6", "host")], doc["suspects"]
    assert doc["suspects"][0]["confirmed"] is True and doc["suspects"][0]["reason"]
    assert doc["suspects"][0]["score_gbps"] == pytest.approx(0.05 * GOODPUT, rel=0.15)


def test_matrix_names_the_lossy_host(make_lab) -> None:
    make_lab("cmloss", "--hosts", "8", "--link-rate", "200mbit")
    assert fs("lab", "set", "cmloss", "h3", "--loss", "2%").returncode == 0
    doc = _matrix("cmloss")
    assert [(s["host"], s["kind"]) for s in doc["suspects"]] == [("h3", "host")], doc["suspects"]
    assert doc["suspects"][0]["retransmit_pct"] > 1.0


def test_killed_rank_ends_the_others_with_a_clear_error(make_lab) -> None:
    make_lab("ckill", "--hosts", "4", "--link-rate", "1gbit")
    victim: dict[str, int] = {}

    def kill_h3() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(["ip", "netns", "pids", "fsl-ckill-h3"], capture_output=True, text=True).stdout.split()
            if out:
                time.sleep(8)  # past start-up and rendezvous, in the middle of the iterations
                victim["pid"] = int(out[0])
                subprocess.run(["kill", "-9", out[0]], check=False)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_h3)
    killer.start()
    t0 = time.monotonic()
    proc = fs("bench", "collective", "--launch", "lab:ckill", "--sizes", "64M", "--iters", "100", "--warmup", "1",
              "--no-store", "--timeout", "60", timeout=300)
    elapsed = time.monotonic() - t0
    killer.join()
    assert victim, "the rank to kill never started"
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert elapsed < 60, f"took {elapsed:.0f} s"
    survivors = [ln for ln in proc.stderr.splitlines() if "fabricscope: error: rank" in ln]
    assert len(survivors) >= 2 and all("a peer rank died" in ln for ln in survivors), proc.stderr[-3000:]
    assert "ranks failed" in proc.stderr.splitlines()[-1]
