"""Pass/fail thresholds on a completed run (``--min-gbps`` and friends -> exit status 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fabricscope.bench.results.schema import BenchResult, Status


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: Literal[">=", "<="]
    limit: float
    option: str  # the CLI option that set it, for the message

    def check(self, value: float | int | None) -> bool:
        if value is None:
            return False  # an unmeasured metric cannot pass a threshold
        return value >= self.limit if self.op == ">=" else value <= self.limit


def apply_thresholds(result: BenchResult, thresholds: list[Threshold]) -> list[str]:
    """Record each check in ``result.thresholds``; return a message per failed one.

    Only completed runs are judged (a failed run already exits 2; a skipped run is not a failure).
    """
    if not thresholds or result.status != Status.OK:
        return []
    failures = []
    checks = []
    for t in thresholds:
        value = result.metrics.get(t.metric)
        passed = t.check(value)
        checks.append(
            {
                "metric": t.metric,
                "op": t.op,
                "limit": t.limit,
                "value": value,
                "passed": passed,
                "option": t.option,
            }
        )
        if not passed:
            shown = "not measured" if value is None else f"{value:.4g}"
            failures.append(f"{t.metric} = {shown}, threshold {t.option} {t.limit:g}")
    result.thresholds = {"checks": checks, "passed": not failures}
    return failures
