"""PCIe AER: errors counted on the PCIe links between GPUs, NICs and their bridges."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.link import STILL_RISING, rising_text
from fabricscope.checks.pcie import nic_addresses
from fabricscope.checks.registry import CheckContext, check, not_evaluated
from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import Inventory

SEVERITIES = ("fatal", "nonfatal", "correctable")


def path_devices(inv: Inventory) -> dict[str, str]:
    """PCI address -> name of every RDMA NIC (else physical NIC) and GPU, and the bridges above them."""
    named: dict[str, str] = {}
    for name, addr in nic_addresses(inv) + [(f"GPU{g.index}", g.pci_address) for g in inv.gpus]:
        if addr is None:
            continue
        named[addr] = f"{name} ({addr})"
        dev = inv.pci.get(addr)
        for bdf in dev.upstream if dev else ():
            named.setdefault(bdf, f"bridge {bdf}")
    return named


@check("pcie.aer", "PCIe AER error counters")
def aer(ctx: CheckContext) -> Iterator[Finding]:
    """PCIe Advanced Error Reporting counts link errors (aer_dev_correctable, _nonfatal, _fatal in
    sysfs) on every GPU, NIC and bridge on their paths: correctable errors (receiver errors, bad
    TLPs/DLLPs, replays) cost bandwidth through retries and announce a failing link; uncorrectable
    ones reset devices and kill jobs. The link partner often counts what the device at fault sends,
    so the bridges are read too. Non-zero totals warn; counters rising during `--interval` fail."""
    inv = ctx.inventory
    named = path_devices(inv)
    if not named:
        return
    rates = ctx.rates
    visible = clean = 0
    for addr, label in sorted(named.items()):
        dev = inv.pci.get(addr)
        if dev is None or dev.aer is None or not dev.aer.totals():
            continue
        visible += 1
        totals = dev.aer.totals()
        nonzero = {k: totals[k] for k in SEVERITIES if totals.get(k)}
        rising = {}
        if rates is not None:
            deltas = rates.aer.get(addr, {})
            rising = {k: deltas[k] for k in SEVERITIES if deltas.get(k)}
        evidence = {"pci": addr, "totals": totals, "errors": dev.aer.details}
        fix = (
            f"`lspci -vvv -s {addr}` (CESta/UESta) and the kernel log (`journalctl -k | grep -i aer`); reseat the card or riser, "
            "check the slot's Gen setting in the BIOS; errors on a bridge point at the link below or above it"
        )
        if rising:
            evidence["increase"] = rising
            evidence["interval_s"] = rates.interval_s
            yield Finding(
                "pcie.aer",
                Severity.FAIL,
                label,
                "AER errors rising: " + rising_text(rates, rising),
                evidence,
                fix,
            )
        elif nonzero:
            kinds = ", ".join(
                f"{name} {count:,}"
                for sev in SEVERITIES
                for name, count in dev.aer.details.get(sev, {}).items()
            )
            yield Finding(
                "pcie.aer",
                Severity.WARN,
                label,
                "AER errors counted: "
                + ", ".join(f"{k} {v:,}" for k, v in nonzero.items())
                + (f" ({kinds})" if kinds else ""),
                evidence,
                fix + STILL_RISING,
            )
        else:
            clean += 1
    if not visible:
        yield not_evaluated(
            "pcie.aer",
            "pcie",
            "no AER statistics (aer_dev_*) under the GPUs, NICs or their bridges: AER is off, handled by firmware, "
            "or the kernel is older than 4.19",
            {"devices": sorted(named)},
        )
    elif clean == visible:
        yield Finding("pcie.aer", Severity.PASS, "pcie", f"no AER errors on {clean} GPU/NIC/bridge device(s)")
