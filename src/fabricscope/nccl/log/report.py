"""The report on an aggregated NCCL log: per-rank facts, findings and the ``fabricscope.nccl_log/v1`` document.

Kept apart from the parser so the exporter can use :mod:`fabricscope.nccl.log.parse` without any of this.
The verdicts live in :mod:`~fabricscope.nccl.log.verdicts` (what the job used) and
:mod:`~fabricscope.nccl.log.errors` (why it failed); settings seen in the log are linted by
:func:`fabricscope.nccl.lint.lint_log_env`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricscope.findings import Finding, sort_key, summarize
from fabricscope.nccl.explain import result_name
from fabricscope.nccl.lint import lint_log_env
from fabricscope.nccl.log import around
from fabricscope.nccl.log import errors as logerrors
from fabricscope.nccl.log import verdicts as logverdicts
from fabricscope.nccl.log.aggregate import LogAggregator
from fabricscope.nccl.log.summary import summary_verdict
from fabricscope.nccl.log.verdicts import network_of, process_of, rank_sort

SCHEMA = "fabricscope.nccl_log/v1"
# Every verdict function, in the order their findings are gathered (sorted afterwards).
VERDICTS = (
    logverdicts.version_findings,
    logverdicts.network_findings,
    logverdicts.transport_findings,
    logverdicts.device_findings,
    logverdicts.gdr_findings,
    logverdicts.gid_findings,
    logerrors.error_findings,
    logerrors.init_findings,
    logerrors.plugin_findings,
    logerrors.file_findings,
    around.message_findings,  # NVLS, CollNet/SHARP, EFA: by the catalogue entries they name
    around.plugin_mismatch,
    around.bootstrap_findings,
    around.socket_interface_findings,
    around.remote_exit_findings,
    around.torch_findings,
    lint_log_env,  # settings the log shows NCCL picked up, checked without a node
)


@dataclass
class LogReport:
    files: list[dict[str, Any]]
    ranks: list[dict[str, Any]]
    findings: list[Finding]
    summary: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] = field(default_factory=dict)  # root_cause, fatal, transport (log.summary)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "files": self.files,
            "summary": self.summary,
            "verdict": self.verdict,
            "ranks": self.ranks,
            "findings": [f.to_dict() for f in self.findings],
            "counts": summarize(self.findings),
        }

    @property
    def nccl_lines(self) -> int:
        return sum(f["nccl_lines"] for f in self.files)

    @property
    def recognised_lines(self) -> int:
        """NCCL's lines and lines quoting a catalogued message: a file with one of them is a log."""
        return sum(f["nccl_lines"] + f["placed_lines"] for f in self.files)


def rank_dicts(agg: LogAggregator) -> list[dict[str, Any]]:
    out = []
    for state in sorted(agg.ranks.values(), key=rank_sort):
        proc = process_of(agg, state)
        net_channels = sum(
            n for label, n in state.transports.items() if label.startswith("NET/") and "Socket" not in label
        )
        gdr_channels = sum(n for label, n in state.transports.items() if label.endswith("/GDRDMA"))
        if state.init_completed:
            init = "complete"
        elif state.init_started:
            init = "started"
        else:
            init = None
        out.append(
            {
                "host": state.host,
                "pid": state.pid,
                "cuda_dev": state.cuda_dev,
                "rank": state.rank,
                "nranks": state.nranks,
                "nnodes": state.nnodes,
                "nccl_version": proc.version if proc else None,
                "network": network_of(proc, state),
                "net_devices": [
                    {"index": i, "name": n, "port": p, "link_layer": ll}
                    for i, (n, p, ll) in sorted((proc.net_devices if proc else {}).items())
                ],
                "socket_interfaces": [
                    {"name": n, "address": a} for n, a in (proc.socket_interfaces if proc else [])
                ],
                "gdr_hca": {name: entry[0] for name, entry in (proc.gdr_hca if proc else {}).items()},
                "gpudirect_rdma": (gdr_channels > 0) if net_channels else None,
                "transports": dict(sorted(state.transports.items())),
                "net_devices_used": sorted(state.net_devs),
                "init": init,
                "warnings": dict(state.warns),
                "error": result_name(state.last_result) if state.last_result else None,
                "env": dict(proc.env) if proc else {},
            }
        )
    return out


def build_report(agg: LogAggregator) -> LogReport:
    """Turn what the aggregator saw into per-rank facts and findings."""
    agg.flush()
    findings: list[Finding] = []
    for verdicts in VERDICTS:
        findings += verdicts(agg)
    hosts = sorted(  # (pasted lines without a header belong to no known host)
        {s.host or "?" for s in agg.ranks.values() if s.host or s.pid is not None}
        | {p.host or "?" for p in agg.processes.values() if p.host or p.pid is not None}
    )
    summary = {
        "lines": sum(f.lines for f in agg.files),
        "nccl_lines": sum(f.nccl_lines for f in agg.files),
        "placed_lines": sum(f.placed_lines for f in agg.files),
        "unrecognised_lines": sum(f.unrecognised_lines for f in agg.files),
        "bytes": sum(f.bytes for f in agg.files),
        "hosts": len(hosts),
        "processes": len(agg.processes),
        "ranks": len(agg.ranks),
        "nccl_versions": sorted(agg.versions),
        "events": agg.event_counts(),
        "warnings": sum(g.count for g in agg.warn_groups.values()),
    }
    files = [
        {
            "name": f.name,
            "bytes": f.bytes,
            "lines": f.lines,
            "nccl_lines": f.nccl_lines,
            "placed_lines": f.placed_lines,
            "unrecognised_lines": f.unrecognised_lines,
            "binary_lines": f.binary_lines,
            "truncated": f.truncated,
        }
        for f in agg.files
    ]
    findings = sorted(findings, key=sort_key)
    return LogReport(
        files=files,
        ranks=rank_dicts(agg),
        findings=findings,
        summary=summary,
        verdict=summary_verdict(findings, agg),
    )
