"""The max-min solver: known answers, an independent reference, and hypothesis properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricscope.sim.solver import max_min


def reference_max_min(n_flows, paths, caps, flow_cap=None):
    """Textbook water-filling written plainly (loops, fractions of a unit step), for comparison."""
    rate = [0.0] * n_flows
    frozen = [False] * n_flows
    fcap = flow_cap or [float("inf")] * n_flows
    while not all(frozen):
        # the largest equal increment every unfrozen flow can take
        best = float("inf")
        for link, cap in enumerate(caps):
            users = [(f, c) for f in range(n_flows) for (lk, c) in paths[f] if lk == link]
            load = sum(c * rate[f] for f, c in users)
            w = sum(c for f, c in users if not frozen[f])
            if w > 0:
                best = min(best, (cap - load) / w)
        for f in range(n_flows):
            if not frozen[f]:
                best = min(best, fcap[f] - rate[f])
        if best == float("inf"):
            for f in range(n_flows):
                if not frozen[f]:
                    rate[f] = float("inf")
                    frozen[f] = True
            break
        for f in range(n_flows):
            if not frozen[f]:
                rate[f] += best
        for link, cap in enumerate(caps):
            users = [(f, c) for f in range(n_flows) for (lk, c) in paths[f] if lk == link]
            load = sum(c * rate[f] for f, c in users)
            if load >= cap - 1e-9 * max(cap, 1):
                for f, _ in users:
                    frozen[f] = True
        for f in range(n_flows):
            if rate[f] >= fcap[f] - 1e-9 * max(fcap[f], 1):
                frozen[f] = True
    return rate


def _arrays(paths):
    flow = [f for f, p in enumerate(paths) for _ in p]
    link = [lk for p in paths for lk, _ in p]
    coef = [c for p in paths for _, c in p]
    return np.array(flow, np.int64), np.array(link, np.int64), np.array(coef, float)


def test_textbook_example() -> None:
    # A on l0; B on l0 and l1; C on l1. l0 = 1, l1 = 2: A = B = 0.5, C = 1.5.
    s = max_min(3, np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), np.ones(4), np.array([1.0, 2.0]))
    assert s.rate.tolist() == pytest.approx([0.5, 0.5, 1.5])
    assert s.bottleneck.tolist() == [0, 0, 1]
    assert s.saturated.tolist() == [True, True]


def test_flow_caps_multiplicity_and_free_flows() -> None:
    # flow 0 capped at 0.25 frees l0 for flow 1; flow 2 has no links and no cap: unconstrained
    s = max_min(
        3,
        np.array([0, 1]),
        np.array([0, 0]),
        np.ones(2),
        np.array([1.0]),
        flow_cap=np.array([0.25, np.inf, np.inf]),
    )
    assert s.rate[:2].tolist() == pytest.approx([0.25, 0.75])
    assert s.bottleneck[0] == -1 and np.isinf(s.rate[2])
    # two identical flows folded into one row with multiplicity 2 share the link
    s = max_min(1, np.array([0]), np.array([0]), np.ones(1), np.array([3.0]), multiplicity=np.array([2.0]))
    assert s.rate[0] == pytest.approx(1.5)
    # a sprayed flow (half its rate on each of two links) and a flow on the second link:
    # l1 carries 0.5 r + r = 1, so both get 2/3 and l0 stays a third full
    s = max_min(2, np.array([0, 0, 1]), np.array([0, 1, 1]), np.array([0.5, 0.5, 1.0]), np.array([1.0, 1.0]))
    assert s.rate.tolist() == pytest.approx([2 / 3, 2 / 3])
    assert s.saturated.tolist() == [False, True]


def test_zero_capacity_link_gives_zero_rate() -> None:
    s = max_min(2, np.array([0, 1]), np.array([0, 1]), np.ones(2), np.array([0.0, 1.0]))
    assert s.rate.tolist() == [0.0, 1.0]


def test_bad_incidence_rejected() -> None:
    with pytest.raises(ValueError):
        max_min(1, np.array([0]), np.array([5]), np.ones(1), np.array([1.0]))


@st.composite
def instances(draw):
    n_links = draw(st.integers(1, 7))
    n_flows = draw(st.integers(1, 9))
    caps = [draw(st.sampled_from([0.5, 1.0, 2.0, 3.0, 10.0, 40.0])) for _ in range(n_links)]
    paths = []
    for _ in range(n_flows):
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=min(4, n_links), unique=True))
        coefs = [draw(st.sampled_from([1.0, 1.0, 0.5, 0.25, 1.5])) for _ in links]
        paths.append(list(zip(links, coefs)))
    fcap = [draw(st.sampled_from([float("inf")] * 3 + [0.3, 2.0])) for _ in range(n_flows)]
    return n_flows, paths, caps, fcap


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(instances())
def test_matches_reference(inst) -> None:
    n, paths, caps, fcap = inst
    flow, link, coef = _arrays(paths)
    s = max_min(n, flow, link, coef, np.array(caps), flow_cap=np.array(fcap))
    ref = reference_max_min(n, paths, caps, fcap)
    assert s.rate.tolist() == pytest.approx(ref, rel=1e-7, abs=1e-9)


@SETTINGS
@given(instances())
def test_no_link_above_capacity(inst) -> None:
    n, paths, caps, fcap = inst
    flow, link, coef = _arrays(paths)
    caps = np.array(caps)
    s = max_min(n, flow, link, coef, caps, flow_cap=np.array(fcap))
    load = np.bincount(link, weights=coef * s.rate[flow], minlength=len(caps))
    assert np.all(load <= caps * (1 + 1e-9) + 1e-12)


@SETTINGS
@given(instances())
def test_every_flow_has_a_bottleneck_it_saturates(inst) -> None:
    """Max-min optimality: each flow is at its own cap, or crosses a saturated link on which no
    other flow gets a higher rate."""
    n, paths, caps, fcap = inst
    flow, link, coef = _arrays(paths)
    caps = np.array(caps)
    s = max_min(n, flow, link, coef, caps, flow_cap=np.array(fcap))
    load = np.bincount(link, weights=coef * s.rate[flow], minlength=len(caps))
    for f in range(n):
        if s.rate[f] >= fcap[f] * (1 - 1e-9):
            continue
        ok = False
        for lk, _ in paths[f]:
            saturated = load[lk] >= caps[lk] * (1 - 1e-9)
            others = [s.rate[g] for g in range(n) if any(x == lk for x, _ in paths[g])]
            if saturated and s.rate[f] >= max(others) * (1 - 1e-9):
                ok = True
                assert s.saturated[lk]
        assert ok, f"flow {f} has no bottleneck link"


@SETTINGS
@given(instances(), st.data())
def test_adding_capacity_never_lowers_the_slowest_flow(inst, data) -> None:
    """Max-min rates of individual flows are not monotone in capacity (a flow can lose when a
    competitor is freed elsewhere), but the slowest flow, which sets the time of a collective
    step, never gets slower when any link gets more capacity."""
    n, paths, caps, fcap = inst
    flow, link, coef = _arrays(paths)
    caps = np.array(caps)
    before = max_min(n, flow, link, coef, caps, flow_cap=np.array(fcap)).rate.min()
    more = caps.copy()
    j = data.draw(st.integers(0, len(caps) - 1))
    more[j] *= data.draw(st.sampled_from([1.01, 1.5, 2.0, 10.0]))
    after = max_min(n, flow, link, coef, more, flow_cap=np.array(fcap)).rate.min()
    assert after >= before * (1 - 1e-9)


def test_max_min_is_not_monotone_per_flow() -> None:
    """The documented reason the property above is about the slowest flow: C loses 1.5 -> 1."""
    args = (3, np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), np.ones(4))
    c_before = max_min(*args, np.array([1.0, 2.0])).rate[2]
    c_after = max_min(*args, np.array([3.0, 2.0])).rate[2]
    assert c_after < c_before
