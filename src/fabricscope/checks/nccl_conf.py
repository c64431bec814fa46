"""NCCL's system-wide settings: /etc/nccl.conf, linted against the node like `nccl lint` does."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check
from fabricscope.findings import Finding, Severity
from fabricscope.nccl.job import CONF_PATH, JobSources, collect, relabel
from fabricscope.nccl.lint import lint


@check("nccl.conf", "/etc/nccl.conf fits the node")
def nccl_conf(ctx: CheckContext) -> Iterator[Finding]:
    """Every NCCL job on the node inherits /etc/nccl.conf for whatever its environment does not
    set, so a stale line there (an interface name from another machine, a forced GID index, TCP
    sockets forced with NCCL_IB_DISABLE) silently breaks or slows every job. The file is linted
    with the same rules and codes as `fabricscope nccl lint`; nothing is reported when it is absent."""
    if ctx.inventory.nccl_conf is None:
        return
    settings = collect(JobSources(), inventory=ctx.inventory)
    findings = lint(settings, ctx.inventory)
    yield from relabel(
        findings, "nccl.conf", subject=lambda f: f"{f.evidence.get('source', CONF_PATH)} {f.subject}"
    )
    if not any(f.severity in (Severity.WARN, Severity.FAIL) for f in findings):
        found = list(settings.effective)
        yield Finding(
            "nccl.conf",
            Severity.PASS,
            CONF_PATH,
            f"{len(found)} setting(s) fit this node ({', '.join(found) or 'no settings'})",
            {"settings": len(found)},
        )
