"""`nccl lint`: the NCCL settings a job uses, checked against the node it runs on.

Every finding carries a stable code (``NCCL0xx``, one table in :mod:`fabricscope.nccl.lint.codes`
and docs/nccl.md), a severity, the variable as subject, the value and where it was set as
evidence, and a fix. Rules that need the node are skipped when no inventory is given. The rules
live by topic in ``lint_values`` (no node needed), ``lint_node`` and ``lint_roce``; collecting a
job's settings from its sources is :mod:`fabricscope.nccl.job`.
"""

from __future__ import annotations

from fabricscope.findings import Finding, sort_key
from fabricscope.host.inventory import Inventory
from fabricscope.nccl.lint.codes import CODES, LintContext
from fabricscope.nccl.lint.rules.efa import check_efa
from fabricscope.nccl.lint.rules.node import (
    check_forced_sockets,
    check_gdr_level,
    check_ib_hca,
    check_qps,
    check_rdma_on_tcp_node,
    check_socket_ifname,
)
from fabricscope.nccl.lint.rules.roce import (
    check_gid_before_2_21,
    check_gid_index,
    check_gid_selection,
    check_traffic_class,
)
from fabricscope.nccl.lint.rules.values import (
    check_conf_file,
    check_debug_settings,
    check_list_blanks,
    check_names_and_values,
    check_shadowed,
    check_timeout,
)
from fabricscope.nccl.settings import SettingSet
from fabricscope.nccl.variables import parse_version

SCHEMA = "fabricscope.nccl_lint/v1"
__all__ = ["CODES", "RULES", "SCHEMA", "LintContext", "lint"]

RULES = (
    check_names_and_values,
    check_shadowed,
    check_conf_file,
    check_list_blanks,
    check_debug_settings,
    check_timeout,
    check_forced_sockets,
    check_ib_hca,
    check_socket_ifname,
    check_gid_index,
    check_gid_before_2_21,
    check_gid_selection,
    check_traffic_class,
    check_gdr_level,
    check_qps,
    check_rdma_on_tcp_node,
    check_efa,
)


def lint(settings: SettingSet, inventory: Inventory | None = None, nccl_version: str | None = None, production: bool = True) -> list[Finding]:
    ctx = LintContext(settings=settings, inventory=inventory, nccl_version=parse_version(nccl_version), production=production)
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(ctx))
    return sorted(findings, key=_order)


def _order(f: Finding) -> tuple:
    source = f.evidence.get("source", "")
    return (str(source), -f.severity.rank, f.id, f.subject)


def lint_log_env(agg) -> list[Finding]:
    """Settings a log shows NCCL picked up ("X set by environment to Y"), checked without a node."""
    from fabricscope.nccl.job import relabel
    from fabricscope.nccl.lint.codes import names
    from fabricscope.nccl.settings import Setting, merge

    seen: dict[tuple[str, str], set[str]] = {}
    versions: dict[tuple[str, str], set[str]] = {}
    for proc in agg.processes.values():
        for name, value in proc.env.items():
            seen.setdefault((name, value), set()).add(proc.host or "?")
            if proc.version:
                versions.setdefault((name, value), set()).add(proc.version)
    findings: list[Finding] = []
    for (name, value), hosts in sorted(seen.items()):
        where = f"log ({names(sorted(hosts), 3)})"
        st = merge([[Setting(name, value, "environ", where)]])
        # The version the log shows drives the version-aware rules (NCCL003 on NCCL_ALGO, GID advice).
        found_versions = versions.get((name, value), set())
        version = next(iter(found_versions)) if len(found_versions) == 1 else None
        kept = [f for f in lint(st, None, nccl_version=version) if f.id not in ("NCCL001", "NCCL004", "NCCL005")]
        findings += relabel(kept, "nccl_log.env")
    return sorted(findings, key=sort_key)
