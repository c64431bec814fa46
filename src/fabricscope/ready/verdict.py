"""The readiness verdict: each step judged, its culprits named, one word for the whole allocation.

Pure functions of what the steps produced, so every rule is tested without a cluster:

* doctor: a node with a finding at ``fail`` (its own, drift across the job's nodes, or the
  ``--expect`` manifest) fails the step and is listed for the scheduler; a warning warns.
* lint: a job setting that fails against a node fails the step; the culprit is the setting
  (the job's to fix, not the node's), with the nodes it fails on.
* matrix and collective: measured against the simulator. Below :data:`FAIL_BELOW` of what the
  fabric as built should give (the *expectation*) fails, below :data:`WARN_BELOW` warns. The
  culprits are what the *prediction* already knew runs slow (a host's link, a cable), and the
  hosts and links the matrix blames; a measurement below :data:`FAR_BELOW` of the prediction
  means something the model does not know differs, and says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.findings import Finding, Severity
from fabricscope.ready.predict import Degradation
from fabricscope.units import format_rate

SCHEMA = "fabricscope.ready/v1"
PREDICTION_HOLDS = 0.10  # |measured - predicted| / predicted within this: the prediction held
FAR_BELOW = 0.75  # measured / predicted below this: something the model does not know differs
FAIL_BELOW = 0.75  # measured / expected below this: not ready
WARN_BELOW = 0.90  # measured / expected below this: ready with warnings

READY, WARNINGS, NOT_READY = "ready", "ready with warnings", "not ready"
STATUS_RANK = {"pass": 0, "skipped": 0, "warn": 1, "fail": 2, "error": 3}  # skipped: not asked for


@dataclass(frozen=True)
class Culprit:
    """What to blame for a step: a node, a link (cable or switch), or a job setting, and its fix."""

    kind: str  # node | link | setting | fabric (unknown: far below the prediction)
    name: str
    problem: str
    fix: str
    finding: str | None = None  # the finding id or lint code behind it
    nodes: tuple[str, ...] = ()  # setting: the nodes it fails on

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["nodes"] = list(self.nodes)
        return out


@dataclass
class Step:
    """One step as it finished: its status, one line, culprits, and (measured steps) the figures."""

    name: str  # doctor | lint | matrix | collective
    status: str  # pass | warn | fail | error | skipped
    summary: str
    culprits: list[Culprit] = field(default_factory=list)
    unit: str | None = None
    predicted: float | None = None
    measured: float | None = None
    expected: float | None = None
    duration_s: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def error_pct(self) -> float | None:
        """(measured - predicted) / predicted, in percent."""
        if self.predicted is None or self.measured is None or not self.predicted:
            return None
        return (self.measured - self.predicted) / self.predicted * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status, "summary": self.summary,
            "unit": self.unit, "predicted": self.predicted, "measured": self.measured, "expected": self.expected,
            "error_pct": self.error_pct, "duration_s": self.duration_s,
            "culprits": [c.to_dict() for c in self.culprits], "details": self.details,
        }  # fmt: skip


# ----- doctor -------------------------------------------------------------------------------------
def node_culprit(node: str, finding: Finding) -> Culprit:
    return Culprit(
        "node",
        node,
        f"{finding.id} {finding.subject}: {finding.message}",
        finding.fix or "see fabricscope doctor on the node",
        finding.id,
    )


def judge_doctor(nodes: Sequence[tuple[str, Sequence[Finding]]], threshold: Severity = Severity.FAIL) -> Step:
    """``nodes``: each node's name and every finding fleet doctor gave it (drift and --expect included)."""
    culprits, warned = [], []
    for name, findings in nodes:
        worst = max(findings, key=lambda f: f.severity.rank, default=None)
        if worst is None or worst.severity.rank < Severity.WARN.rank:
            continue
        if worst.severity.rank >= threshold.rank:
            culprits.append(node_culprit(name, worst))
        else:
            warned.append(node_culprit(name, worst))
    if culprits:
        return Step("doctor", "fail", f"{len(culprits)} of {len(nodes)} node(s) failing", culprits + warned)
    if warned:
        return Step("doctor", "warn", f"{len(nodes)} node(s), {len(warned)} with warnings", warned)
    return Step("doctor", "pass", f"{len(nodes)} node(s), nothing above info")


# ----- lint ---------------------------------------------------------------------------------------
def judge_lint(per_node: Sequence[tuple[str, Sequence[Finding] | str]], sources: Sequence[str]) -> Step:
    """``per_node``: each node's lint findings of the job's settings, or why it could not lint."""
    if not sources:
        return Step("lint", "skipped", "no job settings given (--script, --env-file)")
    by_code: dict[tuple[str, str, str], list[str]] = {}
    worst: dict[tuple[str, str, str], Finding] = {}
    errors: list[Culprit] = []
    for node, got in per_node:
        if isinstance(got, str):
            errors.append(
                Culprit(
                    "node",
                    node,
                    f"cannot lint the job's settings here: {got}",
                    "check that the node is readable",
                )
            )
            continue
        for f in got:
            if f.severity.rank >= Severity.WARN.rank:
                key = (f.id, f.subject, f.severity.value)
                by_code.setdefault(key, []).append(node)
                worst[key] = f
    culprits, failing = [], 0
    for key in sorted(by_code, key=lambda k: (-worst[k].severity.rank, k)):  # failures first
        f = worst[key]
        culprits.append(
            Culprit("setting", f.subject, f"{f.id}: {f.message}", f.fix or "", f.id, tuple(by_code[key]))
        )
        failing += f.severity is Severity.FAIL
    status = "fail" if failing or errors else "warn" if culprits else "pass"
    where = ", ".join(sources)
    line = (f"{failing} setting(s) fail on the nodes" if failing else f"{len(culprits)} warning(s)" if culprits else
            f"{where}: nothing above info on {len(per_node)} node(s)")  # fmt: skip
    return Step("lint", status, line, errors + culprits)


# ----- measured steps -----------------------------------------------------------------------------
def _status(ratio: float | None) -> str:
    if ratio is None:
        return "warn"
    return "fail" if ratio < FAIL_BELOW else "warn" if ratio < WARN_BELOW else "pass"


def degradation_culprit(d: Degradation) -> Culprit:
    if d.kind == "host":
        return Culprit("node", d.name, d.describe(),
                       f"find why {d.name}'s link is slow (ethtool, the switch port, the cable, the NIC's PCIe link) or drain it", "ready.slow_host")  # fmt: skip
    return Culprit(
        "link",
        d.name,
        d.describe(),
        f"check the cable(s) {d.name} (speed, errors) and the switch ports at both ends",
        "ready.slow_link",
    )


def suspect_culprit(suspect: Any) -> Culprit:
    """A matrix suspect (``MatrixSuspect``) as a culprit."""
    if suspect.kind == "host":
        return Culprit(
            "node",
            suspect.host,
            suspect.reason,
            f"test {suspect.host} alone (fabricscope doctor on it) or drain it",
            "matrix.suspect",
        )
    name = (
        "-".join(suspect.link)
        if suspect.link
        else f"{suspect.host}-{suspect.peer}"
        if suspect.peer
        else suspect.host
    )
    if suspect.alternatives:
        name = " or ".join(suspect.alternatives)
    return Culprit(
        "link",
        name,
        suspect.reason,
        "check this cable or switch: its counters, speed and errors",
        "matrix.suspect",
    )


def _merge(culprits: Iterable[Culprit]) -> list[Culprit]:
    out: dict[tuple[str, str], Culprit] = {}
    for c in culprits:
        key = (c.kind, c.name)
        if key in out:
            first = out[key]
            out[key] = Culprit(
                first.kind, first.name, f"{first.problem}; {c.problem}", first.fix, first.finding, first.nodes
            )
        else:
            out[key] = c
    return list(out.values())


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def judge_measured(name: str, unit: str, predicted: float | None, measured: float | None, expected: float | None,
                   degradations: Sequence[Degradation], suspects: Sequence[Any] = (), what: str = "") -> Step:  # fmt: skip
    """A measured step against the prediction (what the fabric as it is should give) and the
    expectation (what the fabric as built should give)."""
    vs_expected = _ratio(measured, expected)
    vs_predicted = _ratio(measured, predicted)
    status = _status(vs_expected)
    culprits: list[Culprit] = []
    if status != "pass":
        culprits += [degradation_culprit(d) for d in degradations]
    if vs_predicted is not None and vs_predicted < FAR_BELOW:
        status = "fail"
        culprits.append(Culprit("fabric", "unknown", (
            f"measured {measured:.4g} {unit}, {vs_predicted:.0%} of the {predicted:.4g} {unit} the model predicts for this fabric as it is: "
            "something the model does not know differs"),
            "see the matrix's suspects" if suspects else "give --topology so the matrix can place the slow flows on the fabric"))  # fmt: skip
    culprits += [suspect_culprit(s) for s in suspects]
    if measured is None:
        line = f"{what}: nothing measured"
    else:
        line = f"{what}measured {measured:.4g} {unit}"
        if predicted is not None:
            line += f", predicted {predicted:.4g} ({(measured - predicted) / predicted * 100:+.1f}%)"
        if expected is not None:
            line += f", {measured / expected:.0%} of the {expected:.4g} {unit} the fabric is built for"
    return Step(name, status, line, _merge(culprits), unit, predicted, measured, expected)


def median(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def pairs(matrix: Sequence[Sequence[float | None]]) -> list[tuple[int, int, float]]:
    return [(i, j, v) for i, row in enumerate(matrix) for j, v in enumerate(row) if i != j and v is not None]


def judge_matrix(hosts: Sequence[str], measured: Sequence[Sequence[float | None]], predicted: Sequence[Sequence[float | None]] | None,
                 expected: Sequence[Sequence[float | None]] | None, degradations: Sequence[Degradation], suspects: Sequence[Any]) -> Step:  # fmt: skip
    """The medians against the expectation and the prediction (as every measured step); besides,
    a pair below :data:`FAIL_BELOW` of what the fabric as built gives it fails the step."""
    got = pairs(measured)
    med = median(v for _, _, v in got)
    if not got:
        return Step("matrix", "error", "no pair was measured", unit="Gbit/s")
    pred_med = median(predicted[i][j] for i, j, _ in got) if predicted else None
    exp_med = median(expected[i][j] for i, j, _ in got) if expected else None
    errors = [(v - p) / p for p, v in ((predicted[i][j] if predicted else None, v) for i, j, v in got) if p]
    worst = min(got, key=lambda t: t[2] / (expected[t[0]][t[1]] or 1) if expected else t[2])
    i, j, v = worst
    slow = _ratio(v, expected[i][j] if expected else None)
    step = judge_measured("matrix", "Gbit/s", pred_med, med, exp_med, degradations, suspects, "median pair ")
    pair = (
        "fail" if slow is not None and slow < FAIL_BELOW else "pass"
    )  # one pair's noise is no warning: the median's is
    step.status = max(step.status, pair, key=STATUS_RANK.__getitem__)
    if step.status != "pass" and not step.culprits:
        step.culprits = [degradation_culprit(d) for d in degradations]
    if pair == "fail" and not step.culprits and slow is not None:  # nothing known or blamed: the pair itself
        step.culprits = [Culprit("link", f"{hosts[i]}->{hosts[j]}", f"{v:.4g} Gbit/s, {slow:.0%} of what the fabric as built gives this pair",
                                 f"bench tcp between {hosts[i]} and {hosts[j]}; give --topology to place it on a cable", "ready.slow_pair")]  # fmt: skip
    if slow is not None and expected:
        step.summary += (
            f"; slowest {hosts[i]}->{hosts[j]} {v:.4g} Gbit/s ({slow:.0%} of its {expected[i][j] or 0:.4g})"
        )
    med_error = median(errors)
    step.details = {"median_error_pct": med_error * 100 if med_error is not None else None,
                    "pairs_within_10pct": sum(abs(e) <= PREDICTION_HOLDS for e in errors), "pairs": len(got)}  # fmt: skip
    return step


def rate(bps: float) -> str:
    return f"{format_rate(bps)}b/s"


# ----- the whole ----------------------------------------------------------------------------------
@dataclass
class Verdict:
    word: str
    steps: list[Step]
    drain: list[dict[str, Any]]

    def exit_code(self, fail_on_warn: bool = False) -> int:
        if any(s.status == "error" for s in self.steps):
            return 2
        if self.word == NOT_READY or (fail_on_warn and self.word == WARNINGS):
            return 1
        return 0


def verdict(steps: Sequence[Step], node_of: Mapping[str, str] | None = None) -> Verdict:
    """One word from the steps, and the nodes to take out of the scheduler with why."""
    worst = max((STATUS_RANK[s.status] for s in steps), default=0)
    word = NOT_READY if worst >= STATUS_RANK["fail"] else WARNINGS if worst else READY
    return Verdict(word, list(steps), drain_list(steps, node_of or {}))


def drain_list(steps: Sequence[Step], node_of: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every node a failing step blames, once, with the first reason (the fleet drain path's).
    ``node_of``: the matrix's host name -> the scheduler's name for that node, where they differ."""
    from fabricscope.fleet.slurm import drain_argv, drain_reason

    out: dict[str, dict[str, Any]] = {}
    for step in steps:
        if step.status not in ("fail", "error"):
            continue
        for c in step.culprits:
            node = (node_of or {}).get(c.name, c.name)
            if c.kind != "node" or node in out or c.name == "unknown":
                continue
            reason = drain_reason(c.finding or f"ready.{step.name}", c.problem.split(";")[0])
            try:
                argv = drain_argv(node, reason)
            except FabricscopeError:  # a name Slurm would refuse: listed, no command
                argv = None
            out[node] = {"node": node, "step": step.name, "reason": reason, "command": argv}
    return list(out.values())
