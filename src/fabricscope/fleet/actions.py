"""What the fleet verdict does to the scheduler: Slurm drain/resume, Kubernetes taint/label.

Dry run by default: every action is planned and shown; ``apply`` carries it out. Each applied
action is also appended, as one JSON line, to the action log (``$FABRICSCOPE_ACTION_LOG``, else
``fleet-actions.log`` in the user data directory), so there is a record of who drained what.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.findings import Finding, Severity
from fabricscope.fleet.doctor import FleetReport
from fabricscope.fleet.slurm import Runner, Slurm, SlurmNode, drain_reason, subprocess_runner


def action_log_path() -> Path:
    env = os.environ.get("FABRICSCOPE_ACTION_LOG")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("fabricscope")) / "fleet-actions.log"


def log_action(action: dict[str, Any]) -> None:
    path = action_log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(
                json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **action}) + "\n"
            )
    except OSError as exc:
        action["detail"] = (action.get("detail", "") + f"; not logged: {exc.strerror or exc}").lstrip("; ")


def _worst(findings: list[Finding], threshold: Severity) -> Finding | None:
    bad = [f for f in findings if f.severity.rank >= threshold.rank]
    # The worst; among equals a doctor finding (the cause) before a fleet.* one (its symptom across nodes).
    return max(bad, key=lambda f: (f.severity.rank, not f.id.startswith("fleet."))) if bad else None


def _action(kind: str, node: str, argv: list[str], detail: str = "") -> dict[str, Any]:
    return {
        "kind": kind,
        "node": node,
        "command": shlex.join(argv),
        "argv": argv,
        "applied": False,
        "ok": None,
        "detail": detail,
    }


def _slurm_name(name: str, known: dict[str, SlurmNode] | None) -> str:
    """The node's name in Slurm: as judged, else its short hostname (Slurm usually has short names)."""
    if known is None or name in known:
        return name
    short = name.split(".", 1)[0]
    return short if short in known else name


def _known(slurm: Slurm, apply: bool) -> tuple[dict[str, SlurmNode] | None, str]:
    """Slurm's nodes and their states; unknown (with why) in a dry run when scontrol cannot say."""
    try:
        return slurm.nodes(), ""
    except FabricscopeError as exc:
        if apply:
            raise
        return None, f"node states unknown: {exc}"


def _carry_out(actions: list[dict[str, Any]], slurm: Slurm) -> None:
    for action in actions:
        if action["kind"] == "slurm.drain":
            ok, detail = slurm.drain(action["node"], action["argv"][-1].removeprefix("Reason="))
        else:
            ok, detail = slurm.resume(action["node"])
        action.update(applied=True, ok=ok, detail=detail or action["detail"])
        log_action(action)


def slurm_actions(
    report: FleetReport, threshold: Severity, slurm: Slurm, *, drain: bool, resume: bool, apply: bool
) -> list[dict[str, Any]]:
    from fabricscope.fleet.slurm import resume_argv

    known, note = _known(slurm, apply)
    actions = []
    for node in report.nodes:
        name = _slurm_name(node.name, known)
        state = known.get(name) if known is not None else None
        if known is not None and state is None:
            continue  # not a Slurm node of this cluster
        worst = _worst(node.all_findings, threshold)
        if drain and worst is not None:
            actions += _drains([(name, drain_reason(worst.id, worst.subject))], known, note)
        elif resume and worst is None and state is not None and state.drained_by_fabricscope:
            actions.append(_action("slurm.resume", name, resume_argv(name), f"drained for: {state.reason}"))
    if apply:
        _carry_out(actions, slurm)
    return actions


def _drains(
    wanted: list[tuple[str, str]], known: dict[str, SlurmNode] | None, note: str
) -> list[dict[str, Any]]:
    """One drain per (node, reason) Slurm knows and has not already taken out of service: an
    operator's (or our earlier) reason is kept, as NHC does."""
    from fabricscope.fleet.slurm import drain_argv

    out = []
    for node, reason in wanted:
        name = _slurm_name(node, known)
        state = known.get(name) if known is not None else None
        if known is not None and (state is None or state.drained):
            continue  # not a Slurm node of this cluster, or already out of service
        out.append(_action("slurm.drain", name, drain_argv(name, reason), note))
    return out


def drain_nodes(
    wanted: list[tuple[str, str]], *, apply: bool, runner: Runner | None = None
) -> list[dict[str, Any]]:
    """Drain the named nodes with their reasons (``fabricscope ready``'s bad nodes): planned, and
    with ``apply`` carried out and logged, exactly as ``fleet doctor --slurm-drain`` does."""
    slurm = Slurm(runner or subprocess_runner())
    known, note = _known(slurm, apply)
    actions = _drains(wanted, known, note)
    if apply:
        _carry_out(actions, slurm)
    return actions


def plan_and_run(
    report: FleetReport,
    threshold: Severity,
    *,
    drain: bool,
    resume: bool,
    taint: str | None,
    label: str | None,
    apply: bool,
    runner: Runner | None = None,
    kube: Any = None,
    only: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Every action the options ask for, planned (and with ``apply`` carried out and logged).

    ``only``: the nodes that may be acted on (a launched run's nodes whose documents came signed by
    the job's own ranks); the others are judged and shown, never drained, resumed, tainted or labelled."""
    if only is not None:
        report = dataclasses.replace(report, nodes=[n for n in report.nodes if n.name in only])
    actions: list[dict[str, Any]] = []
    if drain or resume:
        actions += slurm_actions(
            report, threshold, Slurm(runner or subprocess_runner()), drain=drain, resume=resume, apply=apply
        )
    if taint or label:
        from fabricscope.fleet.k8s import failing_nodes, node_actions

        failing = failing_nodes(report, threshold)
        actions += node_actions(failing, taint=taint, label=label, apply=apply, api=kube, log=log_action)
    return actions
