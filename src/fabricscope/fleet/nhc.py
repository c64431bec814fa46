"""LBNL NHC and Slurm's HealthCheckProgram: one line that says why a node is unhealthy.

NHC's convention (mej/nhc, README "Writing Checks" and scripts/lbnl_cmd.nhc): a check returns 0
when healthy; otherwise it calls ``die 1 "reason"``, and NHC marks the node offline with
``NHC: reason`` (helpers/node-mark-offline: ``scontrol update State=DRAIN Reason="NHC: ..."``).
`doctor --nhc` prints nothing and exits 0 when nothing reaches --fail-on, else prints the one
line and exits 1 (2 when it could not run); docs/fleet.md has the NHC check function that
passes that line to ``die``.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabricscope.findings import Finding, Severity, sort_key

MAX_REASON_CHARS = 200


def one_line(text: str) -> str:
    return " ".join(text.split())


def nhc_reason(findings: Sequence[Finding], threshold: Severity) -> str:
    """``fabricscope: <id> <subject>: <message> (+N more)`` for the worst finding at or above ``threshold``."""
    bad = sorted(
        (f for f in findings if f.severity.rank >= threshold.rank),
        key=lambda f: (-f.severity.rank, sort_key(f)),
    )
    if not bad:
        return ""
    first = bad[0]
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    text = one_line(f"fabricscope: {first.id} {first.subject}: {first.message}")
    room = MAX_REASON_CHARS - len(more)
    if len(text) > room:
        text = text[: room - 3] + "..."
    return text + more
