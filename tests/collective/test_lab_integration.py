"""Matrix benchmarks and a killed rank, proven on lab fabrics (root; CI runs them; ~2 minutes).

Rates are chosen for a 2-core machine: 200 Mbit/s for the 8-host fabrics (4 concurrent TCP
flows must not be CPU-bound, or the fabric would not be what is measured). The busbw of
collectives in lab fabrics, against the textbook and the model, is tests/sim/test_lab_compare.py.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from tests.conftest import require_torch
from tests.lab import conftest as lab_fixtures
from tests.lab.conftest import GOODPUT, fs, planted

pytestmark = pytest.mark.slow

# the lab fixtures of tests/lab (private state directory, labs torn down after each test or module)
lab_dir = lab_fixtures.lab_dir
make_lab = lab_fixtures.make_lab


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    """These tests run `bench collective` (torch.distributed) in the lab."""
    require_torch()


def _matrix(name: str) -> dict:
    proc = fs(
        "bench",
        "matrix",
        "--launch",
        f"lab:{name}",
        "--duration",
        "1",
        "--warmup",
        "0.2",
        "--json",
        "--no-store",
        "--timeout",
        "60",
        timeout=400,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "matrix" and doc["hosts"] == [f"h{i}" for i in range(1, 9)]
    assert len(doc["matrix_gbps"]) == 8 and all(len(r) == 8 for r in doc["matrix_gbps"])
    return doc


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One 8-host star for the two matrix tests; each puts back the fault it plants."""
    yield from lab_fixtures.module_lab(tmp_path_factory, "cm8", "--hosts", "8", "--link-rate", "200mbit")


def test_matrix_names_the_slow_host_and_only_it(eight) -> None:
    with planted(eight, "h6", ("--link-rate", "50mbit"), undo=("--link-rate", "200mbit")):
        doc = _matrix(eight)
    assert [(s["host"], s["kind"]) for s in doc["suspects"]] == [("h6", "host")], doc["suspects"]
    assert doc["suspects"][0]["confirmed"] is True and doc["suspects"][0]["reason"]
    assert doc["suspects"][0]["score_gbps"] == pytest.approx(0.05 * GOODPUT, rel=0.15)


def test_matrix_names_the_lossy_host(eight) -> None:
    with planted(eight, "h3", ("--loss", "2%"), undo=("--loss", "0%")):
        doc = _matrix(eight)
    assert [(s["host"], s["kind"]) for s in doc["suspects"]] == [("h3", "host")], doc["suspects"]
    assert doc["suspects"][0]["retransmit_pct"] > 1.0


def _peers(namespace: str) -> set[str]:
    """The addresses processes in ``namespace`` hold established TCP connections to."""
    out = subprocess.run(["ip", "netns", "exec", namespace, "ss", "-Htn", "state", "established"],
                         capture_output=True, text=True, timeout=10).stdout  # fmt: skip
    return {cols[3].rpartition(":")[0] for cols in map(str.split, out.splitlines()) if len(cols) > 3}


def test_killed_rank_ends_the_others_with_a_clear_error(make_lab) -> None:
    make_lab("ckill", "--hosts", "4", "--link-rate", "1gbit")
    victim: dict[str, int] = {}
    others = {"198.18.0.1", "198.18.0.2", "198.18.0.4"}  # h1, h2, h4

    def kill_h3() -> None:
        """Once h3's rank holds a connection to every other rank (gloo's full mesh: start-up and
        rendezvous are over; a fixed 8 s fell inside torch's import on a loaded machine), and
        2 s later, in the middle of the iterations."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["ip", "netns", "pids", "fsl-ckill-h3"], capture_output=True, text=True
            ).stdout.split()
            if out and others <= _peers("fsl-ckill-h3"):
                time.sleep(2)
                victim["pid"] = int(out[0])
                subprocess.run(["kill", "-9", out[0]], check=False)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_h3)
    killer.start()
    t0 = time.monotonic()
    proc = fs(
        "bench",
        "collective",
        "--launch",
        "lab:ckill",
        "--sizes",
        "64M",
        "--iters",
        "100",
        "--warmup",
        "1",
        "--no-store",
        "--timeout",
        "60",
        timeout=300,
    )
    elapsed = time.monotonic() - t0
    killer.join()
    assert victim, "the rank to kill never started"
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert elapsed < 60, f"took {elapsed:.0f} s"
    survivors = [ln for ln in proc.stderr.splitlines() if "fabricscope: error: rank" in ln]
    assert len(survivors) >= 2 and all("a peer rank died" in ln for ln in survivors), proc.stderr[-3000:]
    assert "ranks failed" in proc.stderr.splitlines()[-1]
