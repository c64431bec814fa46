"""A stored result's verdict as the command's exit status said it (issue 26 item 4: a matrix run
that exited 1 with a confirmed bad host showed a green "ok" in the report).

``status`` says whether the run completed; the verdict says what it found: **0** pass, **1** a
threshold failed, a suspect was found (matrix) or a buffer was wrong (collective), **2** no
verdict (the run could not complete, a pair could not be measured, or it tested nothing a
threshold is about). ``bench collective`` and ``bench matrix`` exit with :func:`exit_status`
of the result they print, and the HTML report shows the same, so the two cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricscope.bench.results.schema import BenchResult, Status


@dataclass(frozen=True)
class Verdict:
    code: int  # the exit status: 0 pass, 1 fail, 2 no verdict
    word: str  # pass | FAIL | no verdict
    why: str  # one short phrase ("" for a plain pass)


def verdict(result: BenchResult) -> Verdict:
    """What the command that made ``result`` exited with, and why."""
    if result.status == Status.FAILED:
        return Verdict(2, "no verdict", f"could not complete: {result.reason or 'failed'}")
    checks = result.thresholds.get("checks", [])
    untested = [c for c in checks if c.get("untested")]
    if untested:
        return Verdict(2, "no verdict", f"{untested[0]['untested']}: {untested[0]['option']} cannot pass")
    failures = list(result.failures or []) + list(result.rdma.failures if result.rdma is not None else [])
    if failures:
        return Verdict(2, "no verdict", f"{len(failures)} pair(s) could not be measured")
    failed = [c for c in checks if not c.get("passed")]
    if failed:
        return Verdict(
            1, "FAIL", "threshold failed: " + ", ".join(f"{c['option']} {c['limit']:g}" for c in failed)
        )
    if result.thresholds.get("passed") is False:  # collective runs stored before thresholds had checks
        return Verdict(1, "FAIL", "threshold failed")
    if result.suspects:
        return Verdict(1, "FAIL", "suspect: " + "; ".join(s.label for s in result.suspects))
    wrong = result.metrics.get("wrong_count")
    if result.kind == "collective" and wrong:
        return Verdict(1, "FAIL", f"{wrong} wrong result element(s)")
    if result.status == Status.SKIPPED:
        return Verdict(0, "skipped", result.reason or "")
    return Verdict(0, "pass", "")


def exit_status(result: BenchResult) -> int:
    return verdict(result).code


__all__ = ["Verdict", "exit_status", "verdict"]
