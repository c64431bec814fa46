"""One GPU table (issue 21, item 1): every preset's GPU complete, an unknown GPU refused everywhere."""

from __future__ import annotations

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim import gpus
from fabricscope.sim.systems import SYSTEMS


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_every_system_presets_gpu_has_every_field(name: str) -> None:
    g = gpus.lookup(SYSTEMS[name].gpu)
    assert gpus.missing_fields(g) == [], f"{name}: {g.name} lacks {gpus.missing_fields(g)}"


def test_every_gpu_in_the_table_is_complete() -> None:
    for g in gpus.GPUS.values():
        assert gpus.missing_fields(g) == [], g.name


def test_the_completeness_check_can_fail() -> None:
    from dataclasses import replace

    h100 = gpus.lookup("h100")
    assert gpus.missing_fields(replace(h100, hbm_GBps=0.0)) == ["hbm_GBps"]
    assert gpus.missing_fields(replace(h100, fp8_tflops=None)) == ["fp8_tflops"]  # Hopper has FP8
    assert gpus.missing_fields(replace(h100, arch="kepler")) == ["arch"]


@pytest.mark.parametrize("where", ["topology", "train", "infer"])
def test_an_unknown_gpu_is_refused_with_the_known_ones(where: str) -> None:
    from fabricscope.sim.infer import run_infer
    from fabricscope.sim.scenario import build_topology, normalise
    from fabricscope.sim.workloads import run_train

    with pytest.raises(FabricscopeError) as e:
        if where == "topology":
            build_topology(normalise({"gpu": "x900", "nodes": 2}))
        elif where == "train":
            run_train({"gpu": "x900", "gpus": 16, "tp": 8, "layers": 2, "hidden": 1024})
        else:
            run_infer({"gpu": "x900", "tp": 8})
    msg = str(e.value)
    assert "x900" in msg and all(name in msg for name in gpus.GPUS)


def test_h800_is_one_gpu_everywhere() -> None:
    """h800 was in two tables and refused by the third: now its NVLink, compute and generation agree."""
    from fabricscope.sim.scenario import run_collective
    from fabricscope.sim.workloads import run_train

    d = run_collective({"gpu": "h800", "topology": "single-node", "nodes": 1, "size": "8G"})
    assert d["model"]["topology"]["nvlink_GBps"] == 200.0
    assert d["algo"] == "nvls"  # Hopper: NCCL's tuning knows its generation
    t = run_train({"gpu": "h800", "gpus": 8, "tp": 8, "layers": 2, "hidden": 1024, "tokens_per_step": 8192})
    assert t["workload"]["gpu_peak_tflops"] == gpus.lookup("h800").bf16_tflops
