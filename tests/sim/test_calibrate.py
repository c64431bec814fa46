"""Calibration: the alpha-beta line fit, and fitting the model to stored bench results."""

from __future__ import annotations

import numpy as np
import pytest

from fabricscope.bench.results.schema import new_result
from fabricscope.errors import FabricscopeError
from fabricscope.sim.calibrate import Samples, calibrate, fit_alpha_beta, samples_from_result
from fabricscope.sim.scenario import build_simulator, normalise
from fabricscope.store import Store

SIZES = [2**k for k in range(12, 28, 2)]


def test_line_fit_is_exact_on_a_line_and_robust_to_relative_noise() -> None:
    f = fit_alpha_beta(SIZES, [25e-6 + s / 2e9 for s in SIZES])
    assert (
        f.alpha_s == pytest.approx(25e-6)
        and f.bandwidth_GBps == pytest.approx(2.0)
        and f.r2 == pytest.approx(1)
    )
    rng = np.random.default_rng(0)
    noisy = [(25e-6 + s / 2e9) * (1 + rng.normal(0, 0.02)) for s in SIZES]
    f = fit_alpha_beta(SIZES, noisy)
    assert f.alpha_s == pytest.approx(25e-6, rel=0.1) and f.bandwidth_GBps == pytest.approx(2.0, rel=0.05)


def test_line_fit_refuses_unusable_samples() -> None:
    with pytest.raises(FabricscopeError, match="two different"):
        fit_alpha_beta([1024], [1e-3])
    with pytest.raises(FabricscopeError, match="two different"):
        fit_alpha_beta([1024, 1024], [1e-3, 2e-3])
    with pytest.raises(FabricscopeError, match="does not grow"):
        fit_alpha_beta([1024, 2048, 4096], [3e-3, 2e-3, 1e-3])
    # negative intercept: clamp alpha at zero, refit the slope through the origin
    f = fit_alpha_beta([1e6, 2e6, 4e6], [0.9e-3, 2.0e-3, 4.1e-3])
    assert f.alpha_s == 0 and f.beta_s_per_byte > 0


def _lab_sim(**over):
    p = {
        "topology": "star",
        "nodes": 4,
        "gpus_per_node": 1,
        "gpu": "none",
        "nic_rate": "10G",
        "transport": "tcp",
    }
    p.update(over)
    return build_simulator(normalise(p))


def test_calibration_recovers_known_alpha_and_efficiency() -> None:
    """Measurements made by the model itself with alpha 40 us and efficiency 0.7 are fitted back
    from the default transport (alpha 15 us, efficiency 0.94)."""
    truth = _lab_sim(alpha_us=40, efficiency=0.7)
    measured = [truth.collective("all_reduce", "ring", s).time_s for s in SIZES]
    cal, report = calibrate(_lab_sim(), Samples(7, "all_reduce", 4, SIZES, measured, "test"))
    assert cal.transport.efficiency == pytest.approx(0.7, rel=0.01)
    assert cal.transport.alpha_s == pytest.approx(40e-6, rel=0.05)
    assert report["max_abs_error_after"] < 0.01
    assert report["transport_before"]["efficiency"] > 0.9


def test_calibration_scales_the_per_core_cap_when_that_is_the_limit() -> None:
    truth = _lab_sim(nic_rate="100G", per_core_gbps=12)
    measured = [truth.collective("all_reduce", "ring", s).time_s for s in SIZES]
    cal, _ = calibrate(_lab_sim(nic_rate="100G"), Samples(1, "all_reduce", 4, SIZES, measured, "test"))
    assert cal.transport.per_flow_cap_Bps * 8 / 1e9 == pytest.approx(12, rel=0.02)


def test_calibration_refuses_a_different_rank_count() -> None:
    with pytest.raises(FabricscopeError, match="ranks"):
        calibrate(_lab_sim(), Samples(1, "all_reduce", 16, SIZES, [1e-3 * i for i in range(1, 9)], "t"))


def _stored(tmp_path, kind="collective", metrics=None, status_ok=True):
    res = new_result(kind, {"op": "all_reduce", "world_size": 4, "sizes": SIZES})
    if status_ok:
        res.finish(
            metrics if metrics is not None else {f"size_{s}_time_s": 6 * (20e-6 + s / 4 / 1e9) for s in SIZES}
        )
    else:
        res.fail("peer died")
    with Store.open(tmp_path / "h.sqlite3") as st:
        return st.save(res)


def test_samples_from_the_bench_history(tmp_path) -> None:
    def load(run_id: int) -> Samples:  # what the CLI does: it opens the store, sim gets the result
        with Store.open(tmp_path / "h.sqlite3") as store:
            return samples_from_result(store.get(run_id).result)

    rid = _stored(tmp_path)
    s = load(rid)
    assert (s.op, s.ranks, s.sizes) == ("all_reduce", 4, SIZES)
    with pytest.raises(FabricscopeError, match="no run"):
        load(999)
    bad = _stored(tmp_path, kind="tcp", metrics={"throughput_gbps": 9.0})
    with pytest.raises(FabricscopeError, match="collective run"):
        load(bad)
    failed = _stored(tmp_path, status_ok=False)
    with pytest.raises(FabricscopeError, match="did not complete"):
        load(failed)
    empty = new_result("collective", {"op": "all_reduce"}).finish({"busbw_avg_GBps": 1.0})
    empty.run_id = 5
    with pytest.raises(FabricscopeError, match="per-size"):
        samples_from_result(empty)
