"""What every rule of `nccl lint` shares: the context it reads and the one way it builds a finding.

The codes themselves are bound to their rules in one table, :data:`fabricscope.nccl.lint.RULES`
(ruff's rule registry is the model); :func:`fabricscope.nccl.lint.lint` refuses a finding whose
code is not bound to the rule that made it, or whose severity is above the code's worst.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import Inventory
from fabricscope.nccl.settings import Setting, SettingSet


@dataclass
class LintContext:
    settings: SettingSet
    inventory: Inventory | None = None
    nccl_version: tuple[int, ...] | None = None  # None: assume a current NCCL
    production: bool = True


def finding(
    code: str,
    severity: str,
    setting: Setting | None,
    subject: str,
    message: str,
    fix: str | None = None,
    **evidence: Any,
) -> Finding:
    """A lint finding: the setting's value and source as evidence, then the rule's own items."""
    level = Severity(severity)
    ev: dict[str, Any] = {}
    if setting is not None:
        ev["value"] = setting.value
        ev["source"] = setting.where
    ev.update({k: v for k, v in evidence.items() if v is not None})
    return Finding(code, level, subject, message, ev, fix)


def names(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
