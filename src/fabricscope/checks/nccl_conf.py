"""NCCL's system-wide settings: /etc/nccl.conf, linted against the node like `nccl lint` does."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check
from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import NCCL_CONF
from fabricscope.nccl.lint import lint
from fabricscope.nccl.settings import merge, parse_env_file

CONF_PATH = "/" + NCCL_CONF


@check("nccl.conf", "/etc/nccl.conf fits the node")
def nccl_conf(ctx: CheckContext) -> Iterator[Finding]:
    """Every NCCL job on the node inherits /etc/nccl.conf for whatever its environment does not
    set, so a stale line there (an interface name from another machine, a forced GID index, TCP
    sockets forced with NCCL_IB_DISABLE) silently breaks or slows every job. The file is linted
    with the same rules and codes as `fabricscope nccl lint`; nothing is reported when it is absent."""
    text = ctx.inventory.nccl_conf
    if text is None:
        return
    settings, unparsed = parse_env_file(text, CONF_PATH, origin="/etc/nccl.conf")
    merged = merge([settings])
    merged.unparsed = unparsed
    findings = lint(merged, ctx.inventory)
    for f in findings:
        evidence = dict(f.evidence)
        evidence["code"] = f.id
        yield Finding("nccl.conf", f.severity, f"{evidence.get('source', CONF_PATH)} {f.subject}", f"{f.id}: {f.message}", evidence, f.fix)
    if not any(f.severity in (Severity.WARN, Severity.FAIL) for f in findings):
        names = ", ".join(s.name for s in settings) or "no settings"
        yield Finding("nccl.conf", Severity.PASS, CONF_PATH, f"{len(settings)} setting(s) fit this node ({names})", {"settings": len(settings)})
