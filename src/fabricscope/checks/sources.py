"""The host model's own health: sources that could not be read are reported, not hidden."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check
from fabricscope.findings import Finding, Severity

MAX_LISTED = 20


@check("host.sources", "Unreadable or garbled sources")
def sources(ctx: CheckContext) -> Iterator[Finding]:
    """Every value the host model could not read or parse becomes "unknown"; this check lists
    them so a quiet report is never mistaken for a healthy one. PCI config space read without
    CAP_SYS_ADMIN stops after its 64-byte header, which hides PCIe port types and ACS: that is
    reported too (a warning on a node with GPUs and RDMA NICs, where ACS matters)."""
    yield from _truncated_config(ctx)
    problems = ctx.inventory.problems
    if not problems:
        return
    listed = {p.source: p.reason for p in problems[:MAX_LISTED]}
    more = len(problems) - len(listed)
    yield Finding(
        "host.sources",
        Severity.INFO,
        "host",
        f"{len(problems)} source(s) unreadable or garbled; values from them are unknown",
        {"sources": listed, "more": more} if more > 0 else {"sources": listed},
        "run as root for full sysfs/procfs access; a snapshot may be truncated",
    )


def _truncated_config(ctx: CheckContext) -> Iterator[Finding]:
    inv = ctx.inventory
    truncated = sorted(addr for addr, dev in inv.pci.items() if dev.config_truncated)
    if not truncated:
        return
    sizes = sorted({inv.pci[a].config_bytes for a in truncated})
    gpudirect = bool(inv.gpus and inv.rdma_devices)
    # 64 bytes (128 for CardBus) is exactly what the kernel gives a reader without CAP_SYS_ADMIN.
    cause = (
        "the reader was not root"
        if set(sizes) <= {64, 128}
        else "the file is cut short (a damaged snapshot?)"
    )
    yield Finding(
        "host.sources",
        Severity.WARN if gpudirect else Severity.INFO,
        "PCI config space",
        f"config space of {len(truncated)} PCI device(s) truncated to {'/'.join(map(str, sizes))} bytes: {cause}, "
        "so PCIe port types and ACS are unknown"
        + (" (ACS between GPUs and NICs not evaluated)" if gpudirect else ""),
        {"devices": truncated[:MAX_LISTED], "more": max(len(truncated) - MAX_LISTED, 0), "bytes": sizes},
        "run `fabricscope doctor` as root (or take the snapshot as root: `sudo fabricscope snapshot -o node.tar.gz`)",
    )
