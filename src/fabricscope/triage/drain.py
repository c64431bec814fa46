"""Drain the node a verdict names, through fleet's Slurm layer (the same argv, reason prefix and runner)."""

from __future__ import annotations

from typing import Any

from fabricscope.fleet.slurm import Runner, Slurm, drain_argv, drain_reason, subprocess_runner


def drain_named(
    doc: dict[str, Any], hosts: list[str], *, apply: bool, runner: Runner | None = None
) -> list[dict[str, Any]]:
    """One action per host asked for: drained (or the argv, without --apply) when the verdict names it
    as a culprit's host, refused otherwise (a drain never follows a guess about another node)."""
    named = {c["host"] for c in doc["verdict"]["culprits"] if c.get("host")}
    slurm = Slurm(runner or subprocess_runner())
    actions = []
    for host in hosts:
        if host not in named:
            actions.append(
                {
                    "host": host,
                    "done": False,
                    "detail": f"not drained: the verdict names {sorted(named) or 'no host'}",
                }
            )
            continue
        culprit = next(c for c in doc["verdict"]["culprits"] if c.get("host") == host)
        reason = drain_reason(
            f"job.{doc['verdict']['class']}",
            f"rank {culprit['rank']} collective {doc['verdict']['collective']}",
        )
        argv = drain_argv(host, reason)
        if not apply:
            actions.append({"host": host, "done": False, "argv": argv, "detail": "dry run (add --apply)"})
            continue
        ok, detail = slurm.drain(host, reason)
        actions.append({"host": host, "done": ok, "argv": argv, "detail": detail})
    return actions
