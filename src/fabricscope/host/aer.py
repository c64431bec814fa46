"""PCIe Advanced Error Reporting counters: /sys/bus/pci/devices/<bdf>/aer_dev_{correctable,nonfatal,fatal}.

Kernel ABI (Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, since 4.19): each file
lists ``<error name> <count>`` lines (the names changed from "Receiver Error" to "RxErr" in later
kernels) and ends with ``TOTAL_ERR_COR``/``TOTAL_ERR_NONFATAL``/``TOTAL_ERR_FATAL``. The files
exist only on AER-capable devices; an error is often counted by the link partner, not the device
at fault, so the bridges on a device's path are read too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricscope.host.root import Root

AER_FILES = {"correctable": "aer_dev_correctable", "nonfatal": "aer_dev_nonfatal", "fatal": "aer_dev_fatal"}
_TOTALS = {"TOTAL_ERR_COR", "TOTAL_ERR_NONFATAL", "TOTAL_ERR_FATAL"}


@dataclass(frozen=True)
class AerStats:
    """Totals per severity (None: that file missing or unreadable) and the non-zero error types."""

    correctable: int | None = None
    nonfatal: int | None = None
    fatal: int | None = None
    details: dict[str, dict[str, int]] = field(
        default_factory=dict
    )  # severity -> {error name: count} (non-zero)

    def totals(self) -> dict[str, int]:
        """The known totals by severity ("correctable", "nonfatal", "fatal")."""
        values = {"correctable": self.correctable, "nonfatal": self.nonfatal, "fatal": self.fatal}
        return {k: v for k, v in values.items() if v is not None}


def parse_aer_stats(text: str) -> tuple[int | None, dict[str, int]]:
    """One aer_dev_* file -> (its TOTAL_ERR_* value, {error name: count}); garbage -> (None, {})."""
    total = None
    counts: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.strip().rpartition(" ")
        if not name or not (value.isascii() and value.isdigit()):
            continue
        if name in _TOTALS:
            total = int(value)
        else:
            counts[name.strip()] = int(value)
    return total, counts


def read_aer(root: Root, device_dir: str) -> AerStats | None:
    """AER counters of one PCI device directory; None when it has none (not AER capable)."""
    totals: dict[str, int | None] = {}
    details: dict[str, dict[str, int]] = {}
    for severity, name in AER_FILES.items():
        rel = f"{device_dir}/{name}"
        text = root.read(rel)
        if text is None:
            continue
        total, counts = parse_aer_stats(text)
        if total is None:
            root.note(rel, "no TOTAL_ERR_* line")
        totals[severity] = total
        nonzero = {k: v for k, v in counts.items() if v}
        if nonzero:
            details[severity] = nonzero
    if not totals:
        return None
    return AerStats(totals.get("correctable"), totals.get("nonfatal"), totals.get("fatal"), details)
