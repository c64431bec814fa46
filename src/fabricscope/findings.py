"""The finding: one shape for doctor, nccl lint, the NCCL log reader and the exporter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    PASS = "pass"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.lower())
        except ValueError:
            raise ValueError(f"unknown severity {text!r} (use pass, info, warn or fail)") from None


_RANK = {Severity.PASS: 0, Severity.INFO: 1, Severity.WARN: 2, Severity.FAIL: 3}


@dataclass(frozen=True)
class Finding:
    """A verdict about one subject. ``id`` is dotted (``rdma.port_state``) or a code (``NCCL012``)."""

    id: str
    severity: Severity
    subject: str
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: str | None = None

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity.value,
            "subject": self.subject,
            "message": self.message,
            "evidence": dict(self.evidence),
            "fix": self.fix,
        }


def summarize(findings: Iterable[Finding]) -> dict[str, int]:
    counts = Counter(f.severity.value for f in findings)
    return {s.value: counts.get(s.value, 0) for s in Severity}


def worst(findings: Iterable[Finding]) -> Severity:
    return max((f.severity for f in findings), key=lambda s: s.rank, default=Severity.PASS)


def exit_code(findings: Iterable[Finding], fail_on: Severity) -> int:
    """0 when nothing reaches ``fail_on``, 1 when something does (the exit-code contract in docs/architecture.md)."""
    return 1 if any(f.severity.rank >= fail_on.rank for f in findings) else 0


def sort_key(finding: Finding) -> tuple:
    return (finding.area, -finding.severity.rank, finding.id, finding.subject)
