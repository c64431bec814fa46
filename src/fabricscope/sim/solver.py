"""Max-min fair rates of concurrent flows by progressive filling, vectorised with numpy.

Every unfrozen flow's rate rises at the same pace; when a link runs out of capacity, every
flow crossing it freezes at the current level (that link is its bottleneck); flows with a
rate cap (TCP per-core limit, a loss bound) freeze when they reach it. This is the textbook
water-filling algorithm (Bertsekas & Gallager, *Data Networks*, 2nd ed., section 6.5.2),
extended with per-flow link coefficients: a flow sprayed over k paths puts 1/k of its rate on
each, and retransmissions under loss make a flow load its links more than its goodput.

Cost: one ``bincount`` over the still-active incidence entries per distinct rate level, so a
pattern whose flows see few distinct bottleneck levels (a ring on a symmetric fabric) solves in
a handful of passes whatever its size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REL_TOL = 1e-9


@dataclass
class Solution:
    rate: np.ndarray  # per flow, bytes/s of goodput (inf: nothing constrains the flow)
    bottleneck: np.ndarray  # per flow, link that froze it; -1 = its own cap or unconstrained
    load: np.ndarray  # per link, bytes/s carried (coefficients and multiplicity included)
    saturated: np.ndarray  # per link, True when the link is full
    iterations: int

    @property
    def min_rate(self) -> float:
        return float(self.rate.min()) if len(self.rate) else float("inf")


def _checked(
    n_flows: int,
    flow: np.ndarray,
    link: np.ndarray,
    coef: np.ndarray,
    capacity: np.ndarray,
    flow_cap: np.ndarray | None,
    multiplicity: np.ndarray | None,
) -> tuple[np.ndarray, ...]:
    """The solver's inputs as arrays of the right types, refused when they cannot describe a network."""
    flow = np.asarray(flow, np.int64)
    link = np.asarray(link, np.int64)
    coef = np.asarray(coef, np.float64)
    capacity = np.asarray(capacity, np.float64)
    if len(flow) and (
        link.min() < 0 or link.max() >= len(capacity) or flow.min() < 0 or flow.max() >= n_flows
    ):
        raise ValueError("incidence refers to a link or flow that does not exist")
    if np.any(capacity < 0) or np.any(coef < 0):
        raise ValueError("capacities and coefficients must be non-negative")
    mult = np.ones(n_flows) if multiplicity is None else np.asarray(multiplicity, np.float64)
    fcap = np.full(n_flows, np.inf) if flow_cap is None else np.asarray(flow_cap, np.float64).copy()
    return flow, link, coef, capacity, mult, fcap


def max_min(
    n_flows: int,
    flow: np.ndarray,
    link: np.ndarray,
    coef: np.ndarray,
    capacity: np.ndarray,
    flow_cap: np.ndarray | None = None,
    multiplicity: np.ndarray | None = None,
) -> Solution:
    """Max-min fair rates.

    ``flow[i], link[i], coef[i]``: flow ``flow[i]`` loads ``link[i]`` with ``coef[i]`` times its
    rate. ``capacity``: per link (inf allowed). ``flow_cap``: optional per-flow ceiling.
    ``multiplicity``: optional count of identical flows folded into one row (they share one rate
    by symmetry of max-min fairness, and each loads the links).
    """
    flow, link, coef, capacity, mult, fcap = _checked(
        n_flows, flow, link, coef, capacity, flow_cap, multiplicity
    )
    n_links = len(capacity)

    # Entries on infinite links or with zero coefficient never constrain anything.
    keep = np.isfinite(capacity[link]) & (coef > 0)
    e_flow, e_link, e_w = flow[keep], link[keep], coef[keep] * mult[flow[keep]]

    rate = np.full(n_flows, np.inf)
    bottleneck = np.full(n_flows, -1, np.int64)
    constrained = np.zeros(n_flows, bool)
    constrained[e_flow] = True
    active = constrained | np.isfinite(fcap)
    # A flow with a zero cap or crossing a zero-capacity link gets rate 0 at the first pass.
    rem = capacity.copy()
    level = 0.0
    iterations = 0
    act_e = np.arange(len(e_flow))
    tol = REL_TOL * np.where(np.isfinite(capacity), np.maximum(capacity, 1.0), 1.0)
    while active.any():
        iterations += 1
        w = np.bincount(e_link[act_e], weights=e_w[act_e], minlength=n_links)
        on = w > 0
        d = np.inf
        if on.any():
            d = float(np.min(rem[on] / w[on]))
        act_f = np.flatnonzero(active)
        cap_left = fcap[act_f] - level
        if len(cap_left):
            d = min(d, float(cap_left.min()))
        if not np.isfinite(d):  # remaining flows are unconstrained
            break
        d = max(d, 0.0)
        level += d
        rem[on] -= w[on] * d
        sat = on & (rem <= tol)
        rem[sat] = 0.0
        newly = np.zeros(n_flows, bool)
        hit = sat[e_link[act_e]]
        if hit.any():
            hf, first = np.unique(e_flow[act_e][hit], return_index=True)
            newly[hf] = True
            bottleneck[hf] = e_link[act_e][hit][first]
        fa = fcap[act_f]
        capped = act_f[np.isfinite(fa) & (fa - level <= REL_TOL * np.maximum(fa, 1.0))]
        newly[capped] = True
        newly &= active
        if not newly.any():  # numerical corner: freeze the tightest link's flows
            j = np.flatnonzero(on)[np.argmin(rem[on] / w[on])]
            rem[j] = 0.0
            sat[j] = True
            hf = np.unique(e_flow[act_e][e_link[act_e] == j])
            newly[hf] = True
            bottleneck[hf] = j
        rate[newly] = level
        active &= ~newly
        act_e = act_e[active[e_flow[act_e]]]

    finite = np.isfinite(rate[e_flow])
    load = np.bincount(
        e_link[finite], weights=(e_w * np.where(finite, rate[e_flow], 0.0))[finite], minlength=n_links
    )
    saturated = np.isfinite(capacity) & (load >= capacity - tol) & (capacity > 0)
    saturated |= capacity == 0
    return Solution(rate=rate, bottleneck=bottleneck, load=load, saturated=saturated, iterations=iterations)
