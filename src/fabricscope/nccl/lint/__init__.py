"""`nccl lint`: the NCCL settings a job uses, checked against the node it runs on.

Every finding carries a stable code (``NCCL0xx``), bound to the one rule that reports it in
:data:`RULES` (the only table of codes; docs/nccl.md's is written from it by
scripts/gen_lint_code_table.py), a severity, the variable as subject, the value and where it was set
as evidence, and a fix. Rules that need the node are skipped when no inventory is given. The rules
live by topic in ``rules/values.py`` (no node needed), ``rules/node.py`` and ``rules/roce.py``; collecting a
job's settings from its sources is :mod:`fabricscope.nccl.job`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fabricscope.findings import Finding, Severity, sort_key
from fabricscope.host.inventory import Inventory
from fabricscope.nccl.lint.codes import LintContext
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
    check_script_reading,
    check_shadowed,
    check_timeout,
)
from fabricscope.nccl.settings import SettingSet
from fabricscope.nccl.variables import parse_version

SCHEMA = "fabricscope.nccl_lint/v1"
__all__ = ["CODES", "RULES", "SCHEMA", "LintContext", "Rule", "code_table", "lint"]


@dataclass(frozen=True)
class Rule:
    """A rule and the codes it reports: ``codes[code] = (worst severity, summary)``. The severity is
    the worst the code reports (a rule may report less, e.g. NCCL001 is a warn with a near name and
    an info without); the summary is the line docs/nccl.md's code table shows."""

    check: Callable[[LintContext], Iterable[Finding]]
    codes: dict[str, tuple[str, str]]


RULES: tuple[Rule, ...] = (
    Rule(
        check_names_and_values,
        {
            "NCCL001": ("warn", "unknown variable (with the nearest real name when one is close)"),
            "NCCL002": ("warn", "deprecated, renamed or removed variable"),
            "NCCL003": (
                "fail",
                "value of the wrong type or out of range (fail where NCCL rejects it at init)",
            ),
            "NCCL004": ("info", "value uses shell expansion and was not checked"),
        },
    ),
    Rule(
        check_shadowed,
        {
            "NCCL005": (
                "info",
                "a setting hidden by another source (environment over NCCL_CONF_FILE over /etc/nccl.conf)",
            ),
            "NCCL006": ("warn", "a line of an env or conf file that is not NAME=VALUE"),
        },
    ),
    Rule(
        check_conf_file,
        {
            "NCCL007": ("warn", "NCCL_CONF_FILE names a file that does not exist on the node"),
        },
    ),
    Rule(
        check_script_reading,
        {
            "NCCL008": (
                "info",
                "a setting the shell never applies (inside a string the script never expands, or echoed)",
            ),
            "NCCL009": ("info", "a sourced file whose settings were not read"),
        },
    ),
    Rule(
        check_list_blanks,
        {
            "NCCL016": (
                "fail",
                "a blank in an NCCL_IB_HCA / NCCL_SOCKET_IFNAME list: NCCL keeps it, so that entry matches nothing",
            ),
        },
    ),
    Rule(
        check_debug_settings,
        {
            "NCCL062": ("warn", "P2P or SHM transport disabled (a debugging setting left in)"),
            "NCCL063": (
                "warn",
                "NCCL_ALGO or NCCL_PROTO restricted to a list (warn) or excluding one (info): a debugging setting left in",
            ),
            "NCCL064": ("warn", "NCCL_DEBUG=INFO or TRACE"),
            "NCCL065": ("info", "another setting from the guide's Debugging section"),
        },
    ),
    Rule(
        check_timeout,
        {
            "NCCL070": ("warn", "NCCL_IB_TIMEOUT in seconds, with its retry count"),
        },
    ),
    Rule(
        check_forced_sockets,
        {
            "NCCL060": ("fail", "NCCL_IB_DISABLE=1 on a node with working RDMA: forces TCP sockets"),
            "NCCL061": ("fail", "NCCL_NET=Socket on a node with working RDMA: forces TCP sockets"),
        },
    ),
    Rule(
        check_ib_hca,
        {
            "NCCL010": ("fail", "NCCL_IB_HCA matches no RDMA device on the node"),
            "NCCL011": ("fail", "NCCL_IB_HCA selects a port that is not ACTIVE"),
            "NCCL012": (
                "warn",
                "prefix trap: an NCCL_IB_HCA token also matches longer device names (mlx5_1 -> mlx5_10..)",
            ),
            "NCCL013": ("warn", "the selected RDMA ports mix InfiniBand and RoCE"),
            "NCCL014": ("fail", "NCCL_IB_HCA names a port the device does not have"),
            "NCCL015": ("warn", "NCCL_IB_HCA unset on a node whose active ports mix link layers"),
        },
    ),
    Rule(
        check_socket_ifname,
        {
            "NCCL020": ("fail", "NCCL_SOCKET_IFNAME matches no interface"),
            "NCCL021": ("fail", "NCCL_SOCKET_IFNAME selects an interface that is down or has no address"),
            "NCCL022": ("warn", "prefix trap: an NCCL_SOCKET_IFNAME token also matches other interfaces"),
            "NCCL023": ("warn", "NCCL_SOCKET_IFNAME selects loopback or a container/virtual interface"),
        },
    ),
    Rule(
        check_gid_index,
        {
            "NCCL030": ("info", "NCCL_IB_GID_INDEX on a node without RoCE ports (ignored)"),
            "NCCL031": ("fail", "NCCL_IB_GID_INDEX points at an empty GID slot"),
            "NCCL032": ("fail", "NCCL_IB_GID_INDEX points at a RoCE v1 entry"),
            "NCCL033": ("fail", "NCCL_IB_GID_INDEX points at a link-local (fe80::) entry"),
            "NCCL034": ("fail", "the right GID index differs between NICs"),
            "NCCL035": (
                "info",
                "NCCL_IB_GID_INDEX set where NCCL's automatic choice (2.21+) is the better default",
            ),
        },
    ),
    Rule(
        check_gid_before_2_21,
        {
            "NCCL037": (
                "warn",
                "NCCL older than 2.21 on RoCE with NCCL_IB_GID_INDEX unset: it uses index 0, not the RoCE v2 IPv4 entry",
            ),
        },
    ),
    Rule(
        check_gid_selection,
        {
            "NCCL036": (
                "fail",
                "NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM or NCCL_IB_ADDR_RANGE leave a selected RoCE port without a GID NCCL may use",
            ),
        },
    ),
    Rule(
        check_traffic_class,
        {
            "NCCL040": ("info", "NCCL_IB_TC on a node without RoCE ports (ignored)"),
            "NCCL041": ("fail", "NCCL_IB_TC's DSCP maps to a priority without PFC"),
            "NCCL042": ("warn", "trust mode pcp: the DSCP in NCCL_IB_TC does not choose the priority"),
            "NCCL043": ("fail", "ECN bits of NCCL_IB_TC disagree with the ECN setup"),
            "NCCL044": ("info", "NCCL_IB_TC decoded (DSCP, ECN, priority)"),
            "NCCL045": ("warn", "NCCL_IB_TC unset on RoCE with PFC: RDMA traffic goes to priority 0"),
        },
    ),
    Rule(
        check_gdr_level,
        {
            "NCCL050": ("info", "NCCL_NET_GDR_LEVEL numeric value explained"),
            "NCCL051": (
                "warn",
                "NCCL_NET_GDR_LEVEL that the PCIe topology makes useless or harmful (below P2C on Grace/C2C nodes)",
            ),
            "NCCL052": ("info", "GPUDirect RDMA needs nvidia-peermem or DMA-BUF"),
        },
    ),
    Rule(
        check_qps,
        {
            "NCCL071": (
                "info",
                "NCCL_IB_QPS_PER_CONNECTION against the fabric (ECMP entropy vs adaptive routing)",
            ),
        },
    ),
    Rule(
        check_rdma_on_tcp_node,
        {
            "NCCL072": ("info", "RDMA settings on a node without RDMA devices (ignored)"),
        },
    ),
    Rule(
        check_efa,
        {
            "NCCL080": (
                "fail",
                "AWS EFA: FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA, NCCL_NET_PLUGIN and NCCL_NET against an EFA node (aws-ofi-nccl)",
            ),
        },
    ),
)
# code -> (worst severity, summary), in code order: a view of RULES.
CODES: dict[str, tuple[str, str]] = dict(
    sorted((code, entry) for r in RULES for code, entry in r.codes.items())
)


def lint(
    settings: SettingSet,
    inventory: Inventory | None = None,
    nccl_version: str | None = None,
    production: bool = True,
) -> list[Finding]:
    ctx = LintContext(
        settings=settings,
        inventory=inventory,
        nccl_version=parse_version(nccl_version),
        production=production,
    )
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(_bound(rule, f) for f in rule.check(ctx))
    return sorted(findings, key=_order)


def _bound(rule: Rule, f: Finding) -> Finding:
    """The finding, if its code is one ``rule`` is bound to and at most the code's worst severity."""
    if f.id not in rule.codes:
        raise ValueError(f"{rule.check.__name__} reported {f.id}, which is not bound to it in RULES")
    worst = Severity(rule.codes[f.id][0])
    if f.severity.rank > worst.rank:
        raise ValueError(f"{f.id} is registered as at most {worst.value}, not {f.severity.value}")
    return f


def code_table() -> str:
    """docs/nccl.md's code table, generated from :data:`RULES`."""
    rows = ["| code | worst severity | rule | finding |", "|---|---|---|---|"]
    rule_of = {code: r.check.__name__ for r in RULES for code in r.codes}
    rows += [
        f"| {code} | {severity} | `{rule_of[code]}` | {summary} |"
        for code, (severity, summary) in CODES.items()
    ]
    return "\n".join(rows)


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
        kept = [
            f for f in lint(st, None, nccl_version=version) if f.id not in ("NCCL001", "NCCL004", "NCCL005")
        ]
        findings += relabel(kept, "nccl_log.env")
    return sorted(findings, key=sort_key)
