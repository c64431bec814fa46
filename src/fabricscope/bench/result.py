"""The ``fabricscope.bench/v1`` result: one shape for every benchmark kind.

Every benchmark (tcp, udp, latency, connect, rdma, and the collective/matrix benchmarks of
other modules) produces one :class:`BenchResult`. The store keeps it as JSON, the history compares
its ``metrics``, the report plots its ``intervals``. Fields are only ever *added* within v1.

Rules the model enforces, because consumers rely on them:

* ``metrics`` names carry their unit as a suffix (see :data:`UNIT_SUFFIXES`), e.g.
  ``throughput_gbps``, ``loss_pct``, ``rtt_p99_us``, ``connect_per_s``, ``retransmits_count``.
  Values are finite floats/ints or ``None`` (unknown; never 0 for "unknown").
* ``status`` is ``ok`` (completed; thresholds are judged separately), ``failed`` (could not
  complete; ``reason`` says why) or ``skipped`` (not applicable here, e.g. perftest absent;
  ``reason`` says why).
* ``started`` is timezone-aware UTC.

Build one with :func:`new_result` (fills ``host`` and ``started``) and finish it with
:meth:`BenchResult.finish` / :meth:`BenchResult.fail` / :meth:`BenchResult.skip`.
"""

from __future__ import annotations

import math
import os
import platform
import socket
import time
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fabricscope import __version__

SCHEMA = "fabricscope.bench/v1"

# A metric name must end with one of these (the unit, or a unit-free kind of number).
UNIT_SUFFIXES: tuple[str, ...] = (
    "_gbps",  # 10^9 bit/s
    "_GBps",  # 10^9 byte/s (nccl-tests style)
    "_mpps",  # 10^6 packets (messages)/s
    "_per_s",  # events per second (connect_per_s, requests_per_s)
    "_s",
    "_ms",
    "_us",
    "_ns",
    "_bytes",
    "_pct",  # percent, 0..100 (loss_pct, cpu_pct)
    "_count",  # a number of events (retransmits_count, out_of_order_count)
    "_ratio",  # dimensionless ratio
)

MAX_REASON_CHARS = 2000


class Status(str, Enum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class Interval(BaseModel):
    """One reporting interval of a run (throughput over time): seconds since the run's start."""

    model_config = ConfigDict(extra="forbid")

    start_s: float
    end_s: float
    metrics: dict[str, float | int | None] = Field(default_factory=dict)

    @field_validator("metrics")
    @classmethod
    def _units(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_metrics(value)


class HostInfo(BaseModel):
    """Where the client side ran. Extra keys are allowed (e.g. ``cpu_model``)."""

    model_config = ConfigDict(extra="allow")

    hostname: str | None = None
    fabricscope_version: str = __version__
    python: str = Field(default_factory=lambda: platform.python_version())
    kernel: str | None = Field(default_factory=lambda: platform.release() or None)
    cpus: int | None = Field(default_factory=os.cpu_count)


class CounterDeltas(BaseModel):
    """Counter increases over the run window, read through the host model before and after.

    ``highlights`` holds the few deltas that explain a bad number (retransmits, PFC pause
    frames, CNPs, out-of-sequence, error counters) under stable names ending in ``_count``;
    the other fields keep every non-zero delta by source for whoever digs deeper.
    """

    model_config = ConfigDict(extra="allow")

    window_s: float | None = None
    interface: str | None = None  # the local netdev towards the peer whose ethtool counters were read
    highlights: dict[str, int] = Field(default_factory=dict)
    netstat: dict[str, int] = Field(default_factory=dict)  # "TcpExt.TCPLostRetransmit" -> delta
    ports: dict[str, dict[str, int]] = Field(default_factory=dict)  # "mlx5_0/1" -> {counter: delta}
    ethtool: dict[str, dict[str, int]] = Field(default_factory=dict)  # netdev -> {stat: delta}
    sockets: dict[str, int] = Field(default_factory=dict)  # this run's own sockets (TCP_INFO)
    unavailable: list[str] = Field(default_factory=list)  # sources that could not be read, and why


class BenchResult(BaseModel):
    """One benchmark run. Serialise with :meth:`to_json_dict` (``schema`` key included)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    schema_: Literal["fabricscope.bench/v1"] = Field(default=SCHEMA, alias="schema")
    kind: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_.-]*$")
    status: Status = Status.OK
    reason: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    host: HostInfo = Field(default_factory=HostInfo)
    started: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    duration_s: float = 0.0
    metrics: dict[str, float | int | None] = Field(default_factory=dict)
    intervals: list[Interval] = Field(default_factory=list)
    counters: CounterDeltas = Field(default_factory=CounterDeltas)
    thresholds: dict[str, Any] = Field(default_factory=dict)  # e.g. {"min_gbps": 9.0, "passed": false}
    detail: dict[str, Any] = Field(default_factory=dict)  # per-stream / per-size tables, tool versions
    run_id: int | None = None  # set by the store when saved (None when --no-store)

    @field_validator("metrics")
    @classmethod
    def _units(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_metrics(value)

    @field_validator("started")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    @field_validator("reason")
    @classmethod
    def _short_reason(cls, value: str | None) -> str | None:
        if value is not None and len(value) > MAX_REASON_CHARS:
            return value[: MAX_REASON_CHARS - 3] + "..."
        return value

    # ----- lifecycle helpers ---------------------------------------------------------------
    def finish(self, metrics: dict[str, float | int | None], duration_s: float | None = None) -> BenchResult:
        """Mark completed with these metrics (merged into any present)."""
        self.metrics = _check_metrics({**self.metrics, **metrics})
        self.status = Status.OK
        if duration_s is not None:
            self.duration_s = duration_s
        return self

    def fail(self, reason: str, duration_s: float | None = None) -> BenchResult:
        """Mark as a run that could not complete; keeps whatever metrics were gathered."""
        self.status = Status.FAILED
        self.reason = _short_reason_text(reason)
        if duration_s is not None:
            self.duration_s = duration_s
        return self

    def skip(self, reason: str) -> BenchResult:
        """Mark as not applicable on this host (tool absent, no RDMA device...)."""
        self.status = Status.SKIPPED
        self.reason = _short_reason_text(reason)
        return self

    def to_json_dict(self) -> dict[str, Any]:
        """The documented JSON shape: ``schema`` first, datetimes as ISO 8601 strings."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> BenchResult:
        return cls.model_validate_json(text)

    @property
    def peer(self) -> str | None:
        value = self.params.get("peer")
        return str(value) if value is not None else None


def new_result(kind: str, params: dict[str, Any] | BaseModel) -> BenchResult:
    """A result in progress: host filled in, ``started`` now. ``params`` may be a pydantic model."""
    if isinstance(params, BaseModel):
        params = params.model_dump(mode="json")
    return BenchResult(kind=kind, params=params, host=HostInfo(hostname=_hostname()))


class Stopwatch:
    """Monotonic elapsed time for ``duration_s`` (wall clock may jump during a run)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def elapsed_s(self) -> float:
        return time.monotonic() - self.t0


def _hostname() -> str | None:
    try:
        return socket.gethostname() or None
    except OSError:
        return None


def _short_reason_text(reason: str) -> str:
    reason = " ".join(str(reason).split()) or "unknown reason"
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."


def metric_unit_ok(name: str) -> bool:
    return any(name.endswith(suffix) for suffix in UNIT_SUFFIXES)


def _check_metrics(value: dict[str, Any]) -> dict[str, Any]:
    for name, number in value.items():
        if not metric_unit_ok(name):
            raise ValueError(f"metric {name!r} has no unit suffix (one of {', '.join(UNIT_SUFFIXES)})")
        if number is not None:
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ValueError(f"metric {name!r} must be a number or null")
            if isinstance(number, float) and not math.isfinite(number):
                raise ValueError(f"metric {name!r} is not finite")
    return value


__all__ = [
    "SCHEMA",
    "UNIT_SUFFIXES",
    "BenchResult",
    "CounterDeltas",
    "HostInfo",
    "Interval",
    "Status",
    "Stopwatch",
    "metric_unit_ok",
    "new_result",
]
