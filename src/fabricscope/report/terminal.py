"""Terminal rendering of findings, shared by doctor, nccl lint and the NCCL log reader."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from itertools import groupby

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from fabricscope.findings import Finding, Severity, sort_key, summarize

SEVERITY_STYLE = {
    Severity.PASS: ("PASS", "green"),
    Severity.INFO: ("INFO", "cyan"),
    Severity.WARN: ("WARN", "yellow"),
    Severity.FAIL: ("FAIL", "bold red"),
}

AREA_TITLES = {
    "host": "Host model",
    "rdma": "RDMA devices and ports",
    "roce": "RoCE configuration",
    "link": "Link health",
    "pcie": "PCIe and GPUDirect",
    "tcp": "TCP",
    "kernel": "Kernel log",
    "gpu": "GPUs, NVLink and NVSwitch",
    "nccl": "NCCL",
    "doctor": "Doctor",
}


# Output that is not a terminal (a file, a pipe, a CI log) has no width to fit: tables widen to their
# content instead of cutting cells ("ACTI…") at rich's default of 80 columns. $COLUMNS still wins.
PIPE_WIDTH = 4096


def console(stderr: bool = False) -> Console:
    out = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = PIPE_WIDTH
    return out


def render_findings(
    findings: Sequence[Finding],
    *,
    title: str,
    out: Console | None = None,
    show_pass: bool = True,
    area_titles: dict[str, str] | None = None,
) -> None:
    """Findings grouped by area, worst first in each area, each with evidence and fix."""
    out = out or console()
    titles = {**AREA_TITLES, **(area_titles or {})}
    out.print(Text(title, style="bold"))
    shown = [f for f in findings if show_pass or f.severity is not Severity.PASS]
    for area, group in groupby(sorted(shown, key=sort_key), key=lambda f: f.area):
        out.print()
        out.print(Text(titles.get(area, area), style="bold underline"))
        for finding in group:
            _render_one(out, finding)
    out.print()
    out.print(summary_line(findings))


def _render_one(out: Console, finding: Finding) -> None:
    label, style = SEVERITY_STYLE[finding.severity]
    line = Text()
    line.append(f" {label:<4} ", style=style)
    line.append(f"{finding.subject}: ", style="bold")
    line.append(finding.message)
    line.append(f"  [{finding.id}]", style="dim")
    out.print(line)
    if finding.severity is Severity.PASS:
        return
    if finding.evidence:
        evidence = ", ".join(f"{k}={_short(v)}" for k, v in finding.evidence.items())
        out.print(f"       [dim]evidence:[/dim] {escape(evidence)}")
    if finding.fix:
        out.print(f"       [dim]fix:[/dim] {escape(finding.fix)}")


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def summary_line(findings: Iterable[Finding]) -> Text:
    counts = summarize(findings)
    text = Text()
    for sev in (Severity.FAIL, Severity.WARN, Severity.INFO, Severity.PASS):
        label, style = SEVERITY_STYLE[sev]
        text.append(f"{counts[sev.value]} {label.lower()}", style=style if counts[sev.value] else "dim")
        if sev is not Severity.PASS:
            text.append(", ")
    return text
