"""What every rank tells rank 0 about itself after the doctor step: the names the matrix and the
scheduler know its node by, the job's NCCL settings linted against this node (one rank per node),
and, for ``--topology discover``, its LLDP neighbours.

The items travel through the job's store with the gather fleet uses
(:func:`fabricscope.jobs.rendezvous.gather`: signed under the job's secret where there is one) as
JSON; rank 0 validates each, with caps on size and depth, before use.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabricscope.errors import FabricscopeError, one_line
from fabricscope.findings import Finding, Severity
from fabricscope.fleet.launched import node_label, own_root, participates
from fabricscope.jobs.launch import DistEnv
from fabricscope.jobs.rendezvous import gather, open_store, parse_json
from fabricscope.nccl.job import JobSources, lint_job

MAX_ITEM_BYTES = 4 << 20


@dataclass
class NodeInfo:
    """One rank's part: its rank, the matrix's name for its host, the scheduler's name for its
    node, whether it spoke for its node, and (when it did) the lint of the job's settings there."""

    rank: int
    host: str
    node: str
    speaks: bool
    lint: list[Finding] | str | None = None  # findings, or why the node could not be linted
    lldp: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def lint_here(
    sources: JobSources, root_location: str | None, nccl_version: str | None
) -> list[Finding] | str:
    """The job's settings against this node (``--root``: a snapshot standing for it)."""
    from fabricscope.host import Root, RootError
    from fabricscope.host.inventory import read_inventory

    try:
        root = Root.at(root_location) if root_location else Root.live()
        _, findings = lint_job(sources, root, read_inventory(root), nccl_version=nccl_version)
    except (RootError, FabricscopeError, OSError) as exc:
        return one_line(exc)
    return findings


def own_items(env: DistEnv, sources: JobSources | None, root_template: str | None, nccl_version: str | None,
              lldp: str | None, environ: Mapping[str, str]) -> dict[str, str]:  # fmt: skip
    """This rank's items: names always; the lint (and LLDP) from the rank that speaks for its node."""
    host = env.host_label or socket.gethostname()
    node = node_label(env, environ) or host
    speaks = participates(env)
    doc: dict[str, Any] = {"host": host, "node": node, "speaks": speaks}
    if speaks and sources is not None:
        got = lint_here(sources, own_root(root_template, node), nccl_version)
        doc["lint"] = got if isinstance(got, str) else [f.to_dict() for f in got]
    if speaks and lldp is not None:
        from fabricscope.bench.matrix.fabric import lldp_reading

        doc["lldp"] = lldp_reading(host, None if lldp == "live" else lldp)
    return {"ready": json.dumps(doc)}


def _finding(d: Any) -> Finding:
    if not isinstance(d, dict):
        raise ValueError("a finding that is not an object")
    evidence = d.get("evidence")
    fix = d.get("fix")
    return Finding(str(d["id"]), Severity(str(d["severity"])), str(d.get("subject", "")), str(d.get("message", "")),
                   evidence if isinstance(evidence, dict) else {}, str(fix) if fix is not None else None)  # fmt: skip


def decode(rank: int, raw: str) -> NodeInfo:
    """A peer's item, checked: one line naming the rank when it is not what a rank sends."""
    try:
        doc = parse_json(raw, MAX_ITEM_BYTES)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        lint = doc.get("lint")
        if isinstance(lint, list):
            lint = [_finding(d) for d in lint]
        elif lint is not None:
            lint = str(lint)[:500]
        lldp = doc.get("lldp")
        return NodeInfo(rank, str(doc["host"])[:256], str(doc["node"])[:256], bool(doc["speaks"]), lint,
                        lldp if isinstance(lldp, dict) else None)  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise FabricscopeError(f"rank {rank} sent an unreadable node item: {one_line(exc)}") from None


def exchange(env: DistEnv, timeout_s: float, sources: JobSources | None, root_template: str | None,
             nccl_version: str | None, lldp: str | None, environ: Mapping[str, str]) -> list[NodeInfo] | None:  # fmt: skip
    """Every rank calls this; rank 0 gets every rank's :class:`NodeInfo` in rank order."""
    host = env.host_label or socket.gethostname()
    meeting = open_store(
        env, timeout_s, needs="fabricscope ready", node=node_label(env, environ) or host, environ=environ
    )
    try:
        got = gather(meeting, own_items(env, sources, root_template, nccl_version, lldp, environ), timeout_s)
    finally:
        meeting.close()
    if got is None:
        return None
    bad = [g.error for g in got if g.error]
    if bad:
        raise FabricscopeError(bad[0])
    return [decode(g.rank, g.items.get("ready", "")) for g in got]
