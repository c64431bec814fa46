"""The doctor's findings as ``fabricscope_finding{id,severity,subject}``, from a background run
every ``--doctor-interval`` (the doctor runs commands and reads everything: never in a scrape)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from fabricscope.findings import Finding, Severity
from fabricscope.host import Root
from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Families, ScrapeContext, note_task


@dataclass(frozen=True)
class DoctorResult:
    findings: tuple[Finding, ...]
    finished_unix_s: float
    duration_s: float


def run_doctor_once(root: Root) -> DoctorResult:
    """One doctor run on a private view of the root (its problems stay with this run)."""
    from fabricscope.checks.doctor import run_doctor  # imported here: the checks load lazily

    started = time.monotonic()
    report = run_doctor(dataclasses.replace(root, problems=[]))
    return DoctorResult(tuple(report.findings), time.time(), time.monotonic() - started)


class DoctorCollector:
    name = "doctor"

    def __init__(self, task: Periodic[DoctorResult]) -> None:
        self.task = task

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        outcome = self.task.outcome
        note_task(
            ctx,
            "doctor",
            self.task,
            failed="last run failed",
            stale="findings are {age:.0f} s old (runs stuck or failing)",
        )
        result = outcome.value
        if result is None:
            return  # first run still in progress
        out.gauge(
            "doctor_last_run_timestamp_seconds",
            "When the findings shown were produced (Unix time).",
            {},
            result.finished_unix_s,
        )
        out.gauge(
            "doctor_run_duration_seconds",
            "How long the doctor run that produced them took.",
            {},
            result.duration_s,
        )
        counts = dict.fromkeys((s.value for s in Severity), 0)
        seen: set[tuple[str, str, str]] = set()
        for finding in result.findings:
            key = (finding.id, finding.severity.value, finding.subject)
            counts[finding.severity.value] += 1
            if key in seen:
                continue  # one series per (id, severity, subject)
            seen.add(key)
            out.gauge(
                "finding",
                "A doctor finding on this node (value 1 while it holds); severity is pass, info, warn or fail.",
                {"id": finding.id, "severity": finding.severity.value, "subject": finding.subject},
                1,
            )
        for severity, count in counts.items():
            out.gauge("findings", "Number of doctor findings by severity.", {"severity": severity}, count)
