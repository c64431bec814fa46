"""Pass/fail thresholds on a run (``--min-gbps`` and friends -> exit status 1 or 2).

A threshold is a claim about what was measured, so a run that measured nothing cannot pass
one: a skipped run (no RDMA device, no perftest), or a run whose precondition did not hold
(a UDP sender that did not offer the load a loss threshold is about), is *untested*. The CLI
ends such a run with one line and exit 2 (no verdict), never 0; see :func:`untested_reason`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from fabricscope.bench.results.schema import BenchResult, Status

# Why a run did not test what a threshold is about (None: it did).
Precondition = Callable[[BenchResult], "str | None"]


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: Literal[">=", "<="]
    limit: float
    option: str  # the CLI option that set it, for the message
    needs: Precondition | None = None  # e.g. a loss threshold needs the offered load reached

    def check(self, value: float | int | None) -> bool:
        if value is None:
            return False  # an unmeasured metric cannot pass a threshold
        return value >= self.limit if self.op == ">=" else value <= self.limit

    def untested(self, result: BenchResult) -> str | None:
        """Why this run cannot be judged by this threshold, or None when it can."""
        if result.status == Status.SKIPPED:
            return f"nothing was tested ({result.reason or 'skipped'})"
        return self.needs(result) if self.needs is not None and result.status == Status.OK else None


def untested_reason(result: BenchResult, thresholds: Sequence[Threshold]) -> str | None:
    """One line saying which thresholds the run could not judge and why (exit 2), or None."""
    reasons: dict[str, list[str]] = {}
    for t in thresholds:
        why = t.untested(result)
        if why is not None:
            reasons.setdefault(why, []).append(t.option)
    if not reasons:
        return None
    return "; ".join(f"{why}: {' and '.join(options)} cannot pass" for why, options in reasons.items())


def apply_thresholds(result: BenchResult, thresholds: Sequence[Threshold]) -> list[str]:
    """Record each check in ``result.thresholds``; return a message per failed one.

    A failed run is not judged (it already exits 2). A skipped run, or a check whose
    precondition did not hold, is recorded as not passed with ``untested`` saying why; the
    caller turns that into exit 2 (:func:`untested_reason`), not a threshold failure.
    """
    if not thresholds or result.status == Status.FAILED:
        return []
    failures = []
    checks = []
    for t in thresholds:
        value = result.metrics.get(t.metric)
        untested = t.untested(result)
        passed = untested is None and t.check(value)
        check: dict[str, object] = {"metric": t.metric, "op": t.op, "limit": t.limit, "value": value, "passed": passed,
                                    "option": t.option}  # fmt: skip
        if untested is not None:
            check["untested"] = untested
        checks.append(check)
        if not passed and untested is None:
            shown = "not measured" if value is None else f"{value:.4g}"
            failures.append(f"{t.metric} = {shown}, threshold {t.option} {t.limit:g}")
    result.thresholds = {"checks": checks, "passed": all(c["passed"] for c in checks)}
    return failures
