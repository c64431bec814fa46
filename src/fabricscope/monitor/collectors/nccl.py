"""Counters from NCCL logs being written: WARNs by kind, socket fallbacks, completion errors."""

from __future__ import annotations

from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Families, ScrapeContext, note_task
from fabricscope.monitor.names import WC_STATUS_NAMES
from fabricscope.monitor.nccl_tail import NcclCounts, NcclLogTailer

WARN_HELP = "NCCL WARN lines by kind (completion_error, verbs_error, timeout, connection, ...)."
FALLBACK_HELP = "Times an NCCL rank chose the Socket network ('Using network Socket'): TCP instead of RDMA."
COMPLETION_HELP = (
    "NCCL 'Got completion ... with error' WARNs by ibv_wc_status (12: retry exceeded, 4: protection)."
)


def _warn_kinds() -> tuple[str, ...]:
    from fabricscope.nccl.log.parse import WARN_KINDS

    return tuple(WARN_KINDS)


class NcclCollector:
    name = "nccl"

    def __init__(self, tailer: NcclLogTailer, task: Periodic[NcclCounts]) -> None:
        self.tailer = tailer
        self.task = task
        self.warn_kinds = _warn_kinds()

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        counts = self.tailer.snapshot()
        note_task(ctx, "nccl logs", self.task, problems=counts.problems)
        # Known label values start at 0 so that increase() sees the first event.
        for kind in sorted(set(self.warn_kinds) | set(counts.warnings)):
            out.counter("nccl_warnings_total", WARN_HELP, {"kind": kind}, counts.warnings.get(kind, 0))
        out.counter("nccl_socket_fallbacks_total", FALLBACK_HELP, {}, counts.socket_fallbacks)
        statuses: set[int | None] = set(WC_STATUS_NAMES) | set(counts.completion_errors)
        for status in sorted(statuses, key=lambda s: -1 if s is None else s):
            out.counter(
                "nccl_completion_errors_total",
                COMPLETION_HELP,
                {
                    "status": "unknown" if status is None else str(status),
                    "status_name": WC_STATUS_NAMES.get(status, "UNKNOWN")
                    if status is not None
                    else "UNKNOWN",
                },
                counts.completion_errors.get(status, 0),
            )
        out.counter("nccl_log_lines_total", "Lines read from the NCCL logs followed.", {}, counts.lines)
        out.counter(
            "nccl_log_rotations_total",
            "Followed NCCL logs that were rotated, replaced or truncated.",
            {},
            counts.rotations,
        )
        out.counter(
            "nccl_log_dropped_lines_total",
            "Lines dropped because they were longer than 64 KiB.",
            {},
            counts.dropped_lines,
        )
        out.counter(
            "nccl_log_read_bytes_total", "Bytes read from the NCCL logs followed.", {}, counts.read_bytes
        )
        out.counter(
            "nccl_log_skipped_bytes_total",
            "Bytes of NCCL logs skipped unread: a file more than 64 MiB behind jumps to its last 4 MiB.",
            {},
            counts.skipped_bytes,
        )
        out.gauge("nccl_log_files", "NCCL log files being followed now.", {}, counts.files)
