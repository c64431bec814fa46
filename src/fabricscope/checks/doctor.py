"""Doctor: run every registered check over the node's inventory (and counter rates)."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fabricscope import __version__
from fabricscope.checks.facts import node_facts
from fabricscope.checks.registry import CheckContext, Rates, all_checks
from fabricscope.findings import Finding, Severity, sort_key, summarize
from fabricscope.host import Inventory, Root, read_counter_sample, read_inventory

SCHEMA = "fabricscope.doctor/v1"


@dataclass(frozen=True)
class DoctorReport:
    inventory: Inventory
    findings: list[Finding]
    interval_s: float | None = None
    started: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        inv = self.inventory
        return {
            "schema": SCHEMA,
            "host": {
                "hostname": inv.hostname,
                "root": inv.root_label,
                "rdma_devices": len(inv.rdma_devices),
                "gpus": len(inv.gpus),
            },
            "fabricscope_version": __version__,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "interval_s": self.interval_s,
            "findings": [f.to_dict() for f in self.findings],
            "summary": summarize(self.findings),
            # Added within v1: what `fleet doctor` compares across nodes (fabricscope.checks.facts).
            "facts": node_facts(inv),
        }


def run_checks(ctx: CheckContext, only: Callable[[str], bool] | None = None) -> list[Finding]:
    """Every registered check; a check that crashes becomes a finding instead of ending the run."""
    findings: list[Finding] = []
    for spec in all_checks():
        if only is not None and not only(spec.id):
            continue
        try:
            findings.extend(spec.func(ctx))
        except Exception as exc:  # a bug in one check must not hide the others
            findings.append(
                Finding(
                    "doctor.check_error",
                    Severity.WARN,
                    spec.id,
                    f"check crashed: {type(exc).__name__}: {exc}",
                    {"check": spec.id},
                    "please report this with `fabricscope snapshot --scrub` attached",
                )
            )
    return sorted(findings, key=sort_key)


def run_doctor(
    root: Root,
    interval_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    only: Callable[[str], bool] | None = None,
) -> DoctorReport:
    """Read the node (twice, ``interval_s`` apart, when rates are wanted) and run the checks."""
    started = time.time()
    inventory = read_inventory(root)
    rates = None
    if interval_s:
        netdevs = sorted(inventory.ethtool)
        aer = sorted(a for a, dev in inventory.pci.items() if dev.aer is not None)
        before = read_counter_sample(root, netdevs, aer)
        sleep(interval_s)
        after = read_counter_sample(root, netdevs, aer)
        rates = Rates.between(before, after)
        if not root.is_live:
            # Time did not pass in a snapshot: rates are over the nominal interval.
            rates = dataclasses.replace(rates, interval_s=interval_s)
    if inventory.hostname is None and root.is_live:
        inventory = _with_hostname(inventory, socket.gethostname())
    ctx = CheckContext(inventory=inventory, rates=rates)
    return DoctorReport(
        inventory=inventory, findings=run_checks(ctx, only), interval_s=interval_s, started=started
    )


def _with_hostname(inventory: Inventory, hostname: str) -> Inventory:
    return dataclasses.replace(inventory, hostname=hostname)
