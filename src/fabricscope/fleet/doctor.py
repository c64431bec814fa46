"""`fleet doctor`: every node's doctor findings plus the drift between nodes, as one verdict."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fabricscope import __version__
from fabricscope.findings import Finding, Severity
from fabricscope.fleet.drift import DriftItem, drift_findings, find_drift
from fabricscope.fleet.inputs import NodeDoc

SCHEMA = "fabricscope.fleet/v1"


@dataclass
class FleetReport:
    nodes: list[NodeDoc]
    drift: list[DriftItem]
    manifest: str | None = None
    started: float = field(default_factory=time.time)

    def findings(self) -> Iterator[tuple[str, Finding]]:
        for node in self.nodes:
            for finding in node.all_findings:
                yield node.name, finding

    def worst(self, node: NodeDoc) -> Severity:
        return max((Severity(s) for s in node.checks.values()), key=lambda s: s.rank, default=Severity.PASS)

    def areas(self, node: NodeDoc) -> dict[str, str]:
        """The worst severity in each area (the part of a check id before the dot)."""
        out: dict[str, str] = {}
        for check_id, sev in node.checks.items():
            area = check_id.split(".", 1)[0]
            if area not in out or Severity(out[area]).rank < Severity(sev).rank:
                out[area] = sev
        return out

    def summary(self) -> dict[str, Any]:
        counts = dict.fromkeys((s.value for s in Severity), 0)
        for node in self.nodes:
            for sev, n in node.summary.items():
                counts[sev] = counts.get(sev, 0) + n
            for f in node.extra:
                counts[f.severity.value] += 1
        failing = sum(1 for n in self.nodes if self.worst(n) is Severity.FAIL)
        return {"nodes": len(self.nodes), "failing_nodes": failing, "drift_items": len(self.drift), **counts}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "fabricscope_version": __version__,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "manifest": self.manifest,
            "summary": self.summary(),
            "nodes": [
                {
                    "name": n.name,
                    "hostname": n.hostname,
                    "source": n.source,
                    "worst": self.worst(n).value,
                    "areas": self.areas(n),
                    "checks": dict(sorted(n.checks.items())),
                    "summary": n.summary,
                    "findings": [f.to_dict() for f in n.all_findings],
                }
                for n in self.nodes
            ],
            "drift": [d.to_dict() for d in self.drift],
        }


def judge_fleet(nodes: list[NodeDoc], manifest: str | None = None) -> FleetReport:
    """Add the drift findings to each node; ``nodes`` already carry their doctor (and expect) findings."""
    names = [n.name for n in nodes]
    items, compared = find_drift(names, [n.facts for n in nodes])
    by_name = {n.name: n for n in nodes}
    for node, checks in zip(nodes, compared):
        for check in checks:
            node.checks.setdefault(check, Severity.PASS.value)
    for item in items:
        for name, finding in drift_findings(item):
            node = by_name[name]
            node.extra.append(finding)
            if Severity(node.checks.get(finding.id, "pass")).rank < finding.severity.rank:
                node.checks[finding.id] = finding.severity.value
    return FleetReport(nodes=nodes, drift=items, manifest=manifest)
