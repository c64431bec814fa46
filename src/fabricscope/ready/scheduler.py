"""What a readiness verdict does to the scheduler: the bad nodes drained in Slurm and/or tainted in
Kubernetes, through fleet's own path (:mod:`fabricscope.fleet.actions`: the same argv, reason
prefix, already-drained rule, deadline and action log as ``fleet doctor --slurm-drain``).

Dry run by default: every action is planned and shown; ``apply`` carries it out. As in fleet, an
action is taken only on a node whose doctor document came signed by the job's own ranks; without a
job secret ``apply`` is refused (a dry run still shows what it would do).
"""

from __future__ import annotations

from typing import Any

from fabricscope.jobs.secret import SET_TOKEN_HINT
from fabricscope.ready.params import ReadyError


def actions(
    drain: list[dict[str, Any]],
    trusted: set[str] | None,
    *,
    slurm_drain: bool,
    taint: str | None,
    apply: bool,
    runner: Any = None,
    kube: Any = None,
) -> list[dict[str, Any]]:
    """The actions for the verdict's drain list (each entry: node, reason, command or None)."""
    if apply and trusted is None:
        raise ReadyError(
            f"--apply needs evidence signed by the job's own ranks, and this job has no secret: {SET_TOKEN_HINT}"
        )
    nodes = [d for d in drain if d.get("command") and (trusted is None or d["node"] in trusted)]
    out: list[dict[str, Any]] = []
    if slurm_drain:
        from fabricscope.fleet.actions import drain_nodes

        out += drain_nodes([(d["node"], d["reason"]) for d in nodes], apply=apply, runner=runner)
    if taint:
        from fabricscope.fleet.actions import log_action
        from fabricscope.fleet.k8s import node_actions

        out += node_actions(
            [d["node"] for d in nodes], taint=taint, label=None, apply=apply, api=kube, log=log_action
        )
    return out
