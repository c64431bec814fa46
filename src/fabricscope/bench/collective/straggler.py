"""Which rank keeps the others waiting in a synchronising collective (pure: tested without torch)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StragglerVerdict:
    rank: int | None
    lag_s: list[float]  # per rank: median over iterations of how late it arrived vs the earliest
    reason: str | None = None


def find_straggler(
    per_rank_times: Sequence[Sequence[float]], *, min_lag_s: float = 100e-6, rel: float = 0.10
) -> StragglerVerdict:
    """Which rank keeps the others waiting?

    In a synchronising collective every rank leaves at about the same time, so a rank's
    iteration time is (leave - arrive): the rank that arrives last has the *shortest* time,
    and the others' extra time is how long they waited for it. Per iteration, a rank's lag is
    the longest time of any rank minus its own; the straggler is the rank whose median lag
    exceeds ``rel`` of the median iteration time (and ``min_lag_s``), is at least twice
    anyone else's, and who arrives last in most iterations (a consistent pattern, not noise).
    """
    n = len(per_rank_times)
    if n < 2 or not per_rank_times[0]:
        return StragglerVerdict(None, [0.0] * n)
    iters = min(len(t) for t in per_rank_times)
    lags: list[list[float]] = [[] for _ in range(n)]
    all_times = []
    for i in range(iters):
        col = [per_rank_times[r][i] for r in range(n)]
        top = max(col)
        all_times.extend(col)
        for r in range(n):
            lags[r].append(top - col[r])
    med_lag = [statistics.median(x) for x in lags]
    worst = max(range(n), key=lambda r: med_lag[r])
    others = max((med_lag[r] for r in range(n) if r != worst), default=0.0)
    typical = statistics.median(all_times)
    threshold = max(min_lag_s, rel * typical)
    # consistency: the same rank must be the last to arrive in most iterations, not by chance
    last_count = sum(1 for i in range(iters) if max(range(n), key=lambda r: lags[r][i]) == worst)
    if med_lag[worst] > threshold and med_lag[worst] > 2 * others and last_count * 2 > iters:
        reason = (
            f"rank {worst} arrives {med_lag[worst] * 1e6:.0f} us late per iteration (median), "
            f"{med_lag[worst] / typical * 100:.0f}% of the iteration time; the others wait for it"
        )
        return StragglerVerdict(worst, med_lag, reason)
    return StragglerVerdict(None, med_lag)
