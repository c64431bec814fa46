"""The host model's own health: sources that could not be read are reported, not hidden."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check
from fabricscope.findings import Finding, Severity

MAX_LISTED = 20


@check("host.sources", "Unreadable or garbled sources")
def sources(ctx: CheckContext) -> Iterator[Finding]:
    """Every value the host model could not read or parse becomes "unknown"; this check lists
    them so a quiet report is never mistaken for a healthy one."""
    problems = ctx.inventory.problems
    if not problems:
        return
    listed = {p.source: p.reason for p in problems[:MAX_LISTED]}
    more = len(problems) - len(listed)
    yield Finding(
        "host.sources", Severity.INFO, "host",
        f"{len(problems)} source(s) unreadable or garbled; values from them are unknown",
        {"sources": listed, "more": more} if more > 0 else {"sources": listed},
        "run as root for full sysfs/procfs access; a snapshot may be truncated",
    )
