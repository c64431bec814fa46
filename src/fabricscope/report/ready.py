"""`fabricscope ready` on a terminal and as JSON: each step as it finishes, the prediction before
the measured steps, and a summary a person reads in ten seconds (verdict, one row per step,
culprits with their fixes, the nodes to drain)."""

from __future__ import annotations

import time
from typing import Any, TextIO

from fabricscope import __version__
from fabricscope.ready.params import STEPS
from fabricscope.ready.run import Prediction, ReadyRun
from fabricscope.ready.verdict import SCHEMA, Step, median

MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "error": "ERROR", "skipped": "SKIP"}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def step_lines(step: Step) -> list[str]:
    """One step as it finishes: its mark, its line, its culprits with their fixes."""
    took = f"  ({step.duration_s:.1f} s)" if step.duration_s is not None else ""
    lines = [f"[{step.name}] {MARK[step.status]:<5} {step.summary}{took}"]
    for c in step.culprits:
        where = f" on {', '.join(c.nodes)}" if c.nodes else ""
        lines.append(f"    {c.kind} {c.name}{where}: {c.problem}")
        if c.fix:
            lines.append(f"      fix: {c.fix}")
    return lines


def prediction_lines(pred: Prediction, hosts: list[str]) -> list[str]:
    """What the model expects, printed before anything is measured."""
    lines = [f"[predict] {len(hosts)} node(s): {', '.join(hosts[:8])}{' ...' if len(hosts) > 8 else ''}"]
    if pred.matrix is not None:
        now = median(v for row in pred.matrix for v in row)
        built = median(v for row in pred.matrix_expected or [] for v in row)
        lines.append(f"    matrix: median pair {_num(now)} Gbit/s predicted (fabric as built: {_num(built)})")
    if pred.rdma is not None:
        now = median(v for row in pred.rdma for v in row)
        built = median(v for row in pred.rdma_expected or [] for v in row)
        lines.append(
            f"    rdma matrix ({pred.rdma_transport}): median pair {_num(now)} Gbit/s predicted (as built: {_num(built)})"
        )
        lines += [
            f"    rdma known slower than built: {d.name}: {d.describe()}" for d in pred.rdma_degradations
        ]
    if pred.busbw:
        lines.append(f"    collective: busbw {_num(pred.busbw[-1])} GB/s predicted at the largest size "
                     f"(as built: {_num(pred.busbw_expected[-1] if pred.busbw_expected else None)})")  # fmt: skip
    if pred.calibration:
        lines.append(f"    calibrated on stored run {pred.calibration.get('run_id')}")
    lines += [f"    known slower than built: {d.name}: {d.describe()}" for d in pred.degradations]
    lines += [f"    {note}" for note in pred.notes]
    return lines


def summary_lines(run: ReadyRun) -> list[str]:
    """The ten-second summary."""
    v = run.verdict
    lines = [
        "",
        f"fabricscope ready: {v.word.upper()}  ({run.world_size} rank(s), {len(run.hosts)} node(s), {run.duration_s:.0f} s of a {run.params.budget_s:g} s budget)",
    ]
    lines.append(
        f"  {'step':<11} {'status':<6} {'predicted':>10} {'measured':>10} {'unit':<7} {'error':>7}  culprit"
    )
    by_name = {s.name: s for s in v.steps}
    names = [*STEPS[:3], "rdma", *STEPS[3:]] if "rdma" in by_name else STEPS  # rdma: when it was measured
    for name in names:
        s = by_name.get(name)
        if s is None:
            lines.append(f"  {name:<11} {'-':<6} {'':>10} {'':>10} {'':<7} {'':>7}  not run")
            continue
        err = f"{s.error_pct:+.1f}%" if s.error_pct is not None else ""
        culprit = ", ".join(f"{c.kind} {c.name}" for c in s.culprits[:3]) or "-"
        lines.append(
            f"  {name:<11} {MARK[s.status]:<6} {_num(s.predicted):>10} {_num(s.measured):>10} {s.unit or '':<7} {err:>7}  {culprit}"
        )
    if run.error:
        lines.append(f"  the run ended early: {run.error}")
    if v.drain:
        lines.append("  nodes for the scheduler (drain):")
        for d in v.drain:
            command = " ".join(d["command"]) if d["command"] else "(not a Slurm node name)"
            lines.append(f"    {d['node']:<12} {command}")
    return lines


def to_document(run: ReadyRun) -> dict[str, Any]:
    """The ``fabricscope.ready/v1`` document."""
    v = run.verdict
    return {
        "schema": SCHEMA,
        "fabricscope_version": __version__,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "verdict": v.word,
        "exit_code": v.exit_code(run.params.fail_on_warn),
        "world_size": run.world_size,
        "launcher": run.launcher,
        "hosts": run.hosts,
        "duration_s": run.duration_s,
        "budget_s": run.params.budget_s,
        "plan": {"matrix_flow_s": run.plan.flow_s, "collective_iters": run.plan.iters},
        "params": run.params.model_dump(mode="json"),
        "prediction": run.prediction.to_dict(run.hosts),
        "steps": [s.to_dict() for s in v.steps],
        "drain": v.drain,
        "error": run.error,
    }


def write_lines(lines: list[str], out: TextIO) -> None:
    out.write("\n".join(lines) + "\n")
    out.flush()
