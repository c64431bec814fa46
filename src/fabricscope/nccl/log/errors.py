"""Verdicts on why an NCCL job failed: WARN lines, the error codes they led to, hung init, bad files.

WARN lines are grouped by signature in :class:`~fabricscope.nccl.log.aggregate.WarnGroup`; the
``file:line -> N`` return codes that follow on the same thread are chained to them, so a finding
can say what its WARN led to. Meanings and fixes come from :mod:`fabricscope.nccl.explain`.
"""

from __future__ import annotations

from typing import Any

from fabricscope.findings import Finding, Severity
from fabricscope.nccl.explain import (
    WARN_EXPLAIN,
    explain_async,
    explain_completion,
    explain_verbs,
    explain_warn_text,
    result_name,
    wc_status_name,
)
from fabricscope.nccl.log.aggregate import LogAggregator, RankState, WarnGroup
from fabricscope.nccl.log.around import CAUSE_FIX, claimed, first_cause
from fabricscope.nccl.log.verdicts import MAX_LISTED, names, rank_label, rank_sort


def warn_finding(group: WarnGroup, agg: LogAggregator, led_to: list[str]) -> Finding:
    ranks = sorted(rank_label(k, agg.ranks) for k in group.ranks)
    where = (
        f"{len(group.ranks)} rank(s) on {len(group.hosts)} host(s)"
        if group.hosts
        else f"{len(group.ranks)} rank(s)"
    )
    evidence: dict[str, Any] = {"count": group.count, "example": group.example}
    if group.source:
        evidence["source"] = group.source
    if group.first_timestamp:
        evidence["first_seen"] = group.first_timestamp
    evidence["ranks"] = ranks[:MAX_LISTED]
    if led_to:
        evidence["led_to"] = led_to
    if group.kind == "completion_error":
        status = group.data.get("status")
        severity, meaning, fix = explain_completion(status)
        for key in ("vendor_err", "hca", "peer"):
            if group.data.get(key) is not None:
                evidence[key] = group.data[key]
        subject = f"completion status {status} ({wc_status_name(status)})"
        message = f"{group.count} work completion error(s) on {where}: {meaning}"
    elif group.kind == "verbs_error":
        meaning, fix = explain_verbs(group.data.get("call"), group.data.get("error"))
        severity = "fail"
        subject = f"{group.data.get('call')} failed: {group.data.get('error')}"
        message = f"{group.count} time(s) on {where}: {meaning}"
    else:
        severity, meaning, fix = _explain_other(group)
        subject = f"WARN {group.example[:80]}"
        message = f"{group.count} time(s) on {where}: {meaning}"
    if led_to:
        message += f"; this led to {', '.join(led_to)}"
    return Finding(f"nccl_log.{group.kind}", Severity(severity), subject, message, evidence, fix)


def _explain_other(group: WarnGroup) -> tuple[str, str, str | None]:
    """(severity, meaning, fix) of a WARN that is neither a completion nor a verbs error."""
    if group.kind == "async_event":
        return explain_async(group.data.get("event"))
    return explain_warn_text(group.example) or WARN_EXPLAIN.get(group.kind, WARN_EXPLAIN["warn"])


def plugin_findings(agg: LogAggregator) -> list[Finding]:
    """``net.cc:79 -> 3`` with no WARN before it: a network plugin declined to start, NCCL went on."""
    if not agg.plugin_skips:
        return []
    sites = sorted(agg.plugin_skips)
    return [
        Finding(
            "nccl_log.net_plugin_skipped",
            Severity.INFO,
            "NET plugin",
            f"a network module declined to start ({', '.join(f'{s} -> 3' for s in sites[:4])}, "
            f"{sum(agg.plugin_skips.values())} time(s)), as a disabled plugin does (NCCL_IBEXT_DISABLE=1, "
            "NCCL_NET_PLUGIN): NCCL marks it disabled and tries the next network. Not an error",
            {"sites": {s: agg.plugin_skips[s] for s in sites[:MAX_LISTED]}},
        )
    ]


# ncclInternalError in NCCL's own words: ncclGetErrorString (src/init.cc, v2.18.1-1 ... v2.30.7-1)
# returns "internal error - please report this issue to the NCCL developers": a check inside NCCL failed.
INTERNAL_ERROR = 3
INTERNAL_FIX = (
    "NCCL calls ncclInternalError 'internal error - please report this issue to the NCCL developers' "
    "(ncclGetErrorString, src/init.cc): an internal check failed, a defect rather than the network or a "
    "setting; try the newest NCCL release (its release notes list the fixes) and report it to NVIDIA/nccl "
    "with the NCCL_DEBUG=INFO output of a failing rank"
)


def _returned_fix(code: int | None, kind: str) -> str:
    """The fix of an error that reached the API: NCCL's own word for an internal error, else the cause's."""
    return INTERNAL_FIX if code == INTERNAL_ERROR and kind in ("warn", "unknown") else CAUSE_FIX[kind]


def error_findings(agg: LogAggregator) -> list[Finding]:
    findings = []
    led_to: dict[str, list[str]] = {}
    for chain in agg.chains.values():
        if chain.cause:
            led_to.setdefault(chain.cause, []).append(
                f"{result_name(chain.code)} ({chain.code}) at {chain.first_site}"
            )
    explained = claimed(agg)
    for group in agg.warn_groups.values():
        if id(group) not in explained:
            findings.append(warn_finding(group, agg, led_to.get(f"{group.kind}|{group.key}", [])))
    kind, _said = first_cause(agg)
    failed = [s for s in agg.ranks.values() if s.last_result]
    if failed:
        by_code: dict[int, list[RankState]] = {}
        for s in failed:
            by_code.setdefault(s.last_result, []).append(s)  # type: ignore[arg-type]
        for code, states in sorted(by_code.items()):
            labels = [s.label for s in sorted(states, key=rank_sort)]
            had_warn = any(s.warns for s in states)
            findings.append(
                Finding(
                    "nccl_log.error_return",
                    Severity.FAIL,
                    result_name(code),
                    f"NCCL returned {result_name(code)} ({code}) on {len(states)} rank(s): {names(labels)}"
                    + (
                        ""
                        if had_warn
                        else "; no WARN precedes it in this log (look at the other ranks' logs)"
                    ),
                    {"code": code, "ranks": labels[:MAX_LISTED]},
                    _returned_fix(code, kind),
                )
            )
    for chain in agg.chains.values():  # pasted chains without NCCL's header: no rank to book them on
        if chain.ranks and all(k[1] is None for k in chain.ranks) and not chain.recovered_by:
            findings.append(
                Finding(
                    "nccl_log.error_return",
                    Severity.FAIL,
                    result_name(chain.code),
                    f"NCCL returned {result_name(chain.code)} ({chain.code}) up a chain from {chain.first_site} "
                    "(pasted lines without NCCL's header)",
                    {"code": chain.code, "first_site": chain.first_site},
                    _returned_fix(chain.code, kind),
                )
            )
    for code, count in sorted((c, n) for c, n in agg.torch["api_errors"].items() if c is not None):
        findings.append(
            Finding(
                "nccl_log.api_error",
                Severity.FAIL,
                result_name(code),
                f"the NCCL API returned {result_name(code)} ({code}) to PyTorch {count} time(s) (DistBackendError "
                "'NCCL error in: ...'): the error reached the application",
                {"code": code, "count": count},
                _returned_fix(code, kind),
            )
        )
    findings += recovered_findings(agg)
    return findings


def recovered_findings(agg: LogAggregator) -> list[Finding]:
    """Errors that propagated (``file:line -> N``) and did not reach the API: NCCL went on, falling
    back to another path (in its own words) or completing init. Info, or warn when the fallback
    costs performance (CollNet/SHARP, a network plugin)."""
    by_what: dict[tuple[int, str], list[RankState]] = {}
    for state in agg.ranks.values():
        for code, instead in state.recovered.items():
            by_what.setdefault((code, instead), []).append(state)
    findings = []
    for (code, instead), states in sorted(by_what.items()):
        labels = [s.label for s in sorted(states, key=rank_sort)]
        costly = any(word in instead for word in ("CollNet", "point-to-point", "plugin", "Socket"))
        findings.append(
            Finding(
                "nccl_log.recovered_error",
                Severity.WARN if costly else Severity.INFO,
                result_name(code),
                f"{result_name(code)} ({code}) propagated on {len(states)} rank(s) ({names(labels)}) but did not reach "
                f"the API: NCCL went on -- {instead}",
                {"code": code, "instead": instead, "ranks": labels[:MAX_LISTED]},
                "nothing failed; if the path NCCL fell back from was meant to be used, see the finding about it"
                if costly
                else None,
            )
        )
    return findings


def init_findings(agg: LogAggregator) -> list[Finding]:
    started = [s for s in agg.ranks.values() if s.init_started > s.init_completed]
    if not started:
        return []
    labels = [s.label for s in sorted(started, key=rank_sort)]
    return [
        Finding(
            "nccl_log.init_incomplete",
            Severity.WARN,
            "initialisation",
            f"{len(started)} rank(s) started communicator init without an 'Init COMPLETE' line: they hung or failed "
            f"during init, or the log was cut: {names(labels)}",
            {"ranks": labels[:MAX_LISTED], "count": len(started)},
            "if the job hung: compare the last lines of these ranks with the others (bootstrap/connection WARNs, "
            "NCCL_SOCKET_IFNAME); rerun with NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET",
        )
    ]


def file_findings(agg: LogAggregator) -> list[Finding]:
    findings = []
    for stats in agg.files:
        if stats.unrecognised_lines and stats.recognised:
            findings.append(
                Finding(
                    "nccl_log.unrecognised_lines",
                    Severity.INFO,
                    stats.name,
                    f"{stats.unrecognised_lines} lines not recognised (neither NCCL's nor a message of NCCL, PyTorch or "
                    f"the network plugins in the catalogue); {stats.recognised} were",
                    {"unrecognised_lines": stats.unrecognised_lines, "recognised_lines": stats.recognised},
                )
            )
        if stats.lines and not stats.recognised:
            findings.append(
                Finding(
                    "nccl_log.no_nccl_lines",
                    Severity.WARN,
                    stats.name,
                    f"no NCCL log line in {stats.lines} lines"
                    + (" (binary data)" if stats.binary_lines else ""),
                    {"lines": stats.lines, "binary_lines": stats.binary_lines},
                    "run the job with NCCL_DEBUG=INFO (and NCCL_DEBUG_FILE=nccl.%h.%p.log) and pass those files",
                )
            )
            continue
        if stats.binary_lines:
            findings.append(
                Finding(
                    "nccl_log.garbled_lines",
                    Severity.WARN,
                    stats.name,
                    f"{stats.binary_lines} of {stats.lines} lines hold binary or non-UTF-8 data (interleaved writes or "
                    "a corrupt file); they were read as far as possible",
                    {"binary_lines": stats.binary_lines},
                    None,
                )
            )
        if stats.overlong_lines:
            findings.append(
                Finding(
                    "nccl_log.overlong_lines",
                    Severity.INFO,
                    stats.name,
                    f"{stats.overlong_lines} line(s) longer than NCCL ever writes were skipped",
                    {"overlong_lines": stats.overlong_lines},
                )
            )
        if stats.truncated:
            findings.append(
                Finding(
                    "nccl_log.truncated",
                    Severity.INFO,
                    stats.name,
                    "the file ends in the middle of a line (still being written, or cut)",
                    {"bytes": stats.bytes},
                )
            )
    return findings
