"""`fabricscope ready` in the lab: the predictions hold within 10% on a star and on a 3-leaf
leaf-spine, healthy and with a planted slow host or uplink (`lab set`), and the plant turns the
verdict to not ready with the planted element as the culprit.

One lab per topology (module fixtures), planted and restored in turn. gloo's all_reduce over
tbf-shaped veths; the model is the lab's own plan at its current shaping (`--topology lab:NAME`).
Root, the lab's tools and torch are needed: skipped outside CI, required in it. Several minutes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import require_torch
from tests.lab.conftest import fs, lab_available

pytestmark = pytest.mark.slow
HOLDS = 0.10


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    lab_available()
    require_torch()
    base = tmp_path_factory.mktemp("readylab")
    return {"FABRICSCOPE_LAB_DIR": str(base / "labstate"), "FABRICSCOPE_DB": str(base / "history.db")}


def _lab(state: dict[str, str], name: str, *args: str) -> Iterator[str]:
    up = fs("lab", "up", "--name", name, *args, env=state)
    assert up.returncode == 0, up.stderr
    try:
        yield name
    finally:
        fs("lab", "down", name, env=state)


@pytest.fixture(scope="module")
def star(state: dict[str, str]) -> Iterator[str]:
    yield from _lab(state, "rdystar", "--hosts", "4", "--link-rate", "1gbit")


@pytest.fixture(scope="module")
def leaf_spine(state: dict[str, str]) -> Iterator[str]:
    yield from _lab(state, "rdyls", "--topology", "leaf-spine", "--hosts", "6", "--hosts-per-leaf", "2",
                    "--link-rate", "200mbit", "--uplink-rate", "400mbit")  # fmt: skip


def ready(state: dict[str, str], lab: str, size: str, budget: str = "100") -> dict:
    proc = fs("ready", "--launch", f"lab:{lab}", "--topology", f"lab:{lab}", "--sizes", size, "--backend", "gloo",
              "--budget", budget, "--calibrate", "none", "--json", env=state, timeout=600)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == proc.returncode and doc["error"] is None
    return doc


def _errors(doc: dict) -> dict[str, float]:
    """Each measured step's |measured - predicted| / predicted."""
    steps = {s["name"]: s for s in doc["steps"]}
    return {name: abs(steps[name]["error_pct"]) / 100 for name in ("matrix", "collective")}


def ready_holding(state: dict[str, str], lab: str, size: str, verdict: str) -> dict:
    """The first of up to three runs whose predictions hold and whose verdict is ``verdict``
    (tests/lab/conftest.py best_rate's reasoning: contention on a shared 2-core machine only ever
    slows a run, so a run that shows the fabric's capability exists); the last run else."""
    for _ in range(3):
        doc = ready(state, lab, size)
        if max(_errors(doc).values()) <= HOLDS and doc["verdict"] == verdict:
            break
    print(json.dumps({k: doc[k] for k in ("verdict", "steps")}, indent=1)[:4000])
    return doc


def _steps(doc: dict) -> dict[str, dict]:
    return {s["name"]: s for s in doc["steps"]}


def _culprits(step: dict) -> set[tuple[str, str]]:
    return {(c["kind"], c["name"]) for c in step["culprits"]}


def test_star_healthy_is_ready_and_predicted(state, star) -> None:
    doc = ready_holding(state, star, "16M", "ready")
    assert doc["verdict"] == "ready", doc["steps"]
    assert all(e <= HOLDS for e in _errors(doc).values()), _errors(doc)
    assert doc["prediction"]["degradations"] == []


def test_star_slow_host_is_not_ready_and_named(state, star) -> None:
    assert fs("lab", "set", star, "h3", "--link-rate", "250mbit", env=state).returncode == 0
    try:
        doc = ready_holding(state, star, "16M", "not ready")
    finally:
        fs("lab", "set", star, "h3", "--link-rate", "1gbit", env=state)
    assert all(e <= HOLDS for e in _errors(doc).values()), _errors(doc)
    assert doc["verdict"] == "not ready" and doc["exit_code"] == 1
    steps = _steps(doc)
    for name in ("matrix", "collective"):
        assert steps[name]["status"] == "fail" and ("node", "h3") in _culprits(steps[name]), steps[name]
        assert not {n for k, n in _culprits(steps[name]) if k == "node"} - {"h3"}
    assert [d["node"] for d in doc["drain"]] == ["h3"]


def test_leaf_spine_healthy_is_ready_and_predicted(state, leaf_spine) -> None:
    doc = ready_holding(state, leaf_spine, "4M", "ready")
    assert doc["verdict"] == "ready", doc["steps"]
    assert all(e <= HOLDS for e in _errors(doc).values()), _errors(doc)


def test_leaf_spine_slow_uplink_is_not_ready_and_named(state, leaf_spine) -> None:
    assert fs("lab", "set", leaf_spine, "leaf2", "--link-rate", "100mbit", env=state).returncode == 0
    try:
        doc = ready_holding(state, leaf_spine, "4M", "not ready")
    finally:
        fs("lab", "set", leaf_spine, "leaf2", "--link-rate", "400mbit", env=state)
    assert all(e <= HOLDS for e in _errors(doc).values()), _errors(doc)
    assert doc["verdict"] == "not ready"
    steps = _steps(doc)
    for name in ("matrix", "collective"):
        assert steps[name]["status"] == "fail" and ("link", "leaf2-spine") in _culprits(steps[name]), steps[
            name
        ]
    assert doc["drain"] == []  # a cable is not a node to drain
