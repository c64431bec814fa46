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

Multi-host kinds carry their structured data in optional, typed top-level fields (added
within v1; absent from the JSON of other kinds, so older documents stay valid):

* ``collective`` (``bench collective`` and ``bench import nccl-tests``): ``entries`` (one
  :class:`CollectiveEntry` per message size: ``size_bytes``, ``time_s``, ``algbw_GBps``,
  ``busbw_GBps``, ``wrong``, per-rank times and the straggler), ``ranks``, ``stragglers``,
  ``skipped_sizes_bytes``, ``notes``;
* ``matrix`` (``bench matrix``): ``hosts``, ``matrix_gbps`` (N x N, rows send to columns,
  ``null`` diagonal), ``retransmit_pct``, ``suspects`` / ``cleared`` (:class:`MatrixSuspect`,
  at least ``host`` and ``reason``), ``retests``, ``thresholds_gbps``,
  ``thresholds_retransmit_pct``, ``failures`` and ``rdma`` (the perftest matrix, or why it
  was skipped);
* ``incast`` (``bench incast``): one :class:`IncastPoint` per sender count (goodput, round
  completion p50/p99/max, retransmits, timeouts), with ``hosts`` naming the receiver first.

The printed ``--json`` document of these kinds is exactly the stored result.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import time
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


# ----- structured data of multi-host kinds ------------------------------------------------------
class InPlaceEntry(BaseModel):
    """nccl-tests' in-place columns of one size (imported runs)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    time_s: float | None = None
    algbw_GBps: float | None = None
    busbw_GBps: float | None = None
    wrong: int | None = None


class CollectiveEntry(BaseModel):
    """One message size of a collective run, as nccl-tests reports it (out-of-place columns).

    ``time_s`` is the mean over ranks of each rank's mean iteration time; ``wrong`` is None when
    the buffers were not checked. Per-rank fields exist for runs fabricscope measured itself.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    size_bytes: int = Field(ge=0)
    count: int | None = Field(default=None, ge=0)
    type: str | None = None  # nccl-tests' data type column (imported runs)
    redop: str | None = None
    root: int | None = None
    time_s: float = Field(ge=0)
    max_rank_time_s: float | None = Field(default=None, ge=0)  # the slowest rank's mean time
    algbw_GBps: float = Field(ge=0)
    busbw_GBps: float = Field(ge=0)
    wrong: int | None = Field(default=None, ge=0)
    per_rank_time_s: list[float] | None = None
    per_rank_lag_s: list[float] | None = None
    straggler_rank: int | None = Field(default=None, ge=0)
    straggler_reason: str | None = None
    in_place: InPlaceEntry | None = None


class RankInfo(BaseModel):
    """One rank of a multi-host run: where it ran. A bare integer reads as ``{"rank": n}``."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(ge=0)
    host: str | None = None
    pid: int | None = None
    device: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_rank(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return {"rank": value}
        return value


class Straggler(BaseModel):
    """A rank the others waited for, and at which sizes."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(ge=0)
    host: str | None = None
    sizes_bytes: list[int] = Field(default_factory=list)


class MatrixSuspect(BaseModel):
    """A host (or the link between ``host`` and ``peer``) the pairwise matrix blames.

    With ``--topology`` the link may be a switch cable (``link``: its two switches), or the
    suspect a switch (kind ``switch``, named in ``host``); ``alternatives`` lists every element
    that explains the same slow flows when the matrix cannot tell them apart.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    host: str
    reason: str
    kind: Literal["host", "link", "switch"] = "host"
    peer: str | None = None
    link: list[str] | None = None  # [switch, switch]: a cable (bundle) of the topology
    alternatives: list[str] | None = None  # labels of the elements it cannot be told from
    flows_slow: int | None = None  # slow flows it explains (topology localization)
    flows_through: int | None = None  # measured flows that had to cross it
    transport: Literal["tcp", "rdma"] = "tcp"
    score_gbps: float | None = None
    fleet_median_gbps: float | None = None
    retransmit_pct: float | None = None
    confirmed: bool | None = None  # None: not retested
    retest_gbps: float | None = None
    retest_retransmit_pct: float | None = None

    @property
    def label(self) -> str:
        if self.alternatives:
            return " | ".join(self.alternatives)
        return self.host if self.kind in ("host", "switch") else f"{self.host} <-> {self.peer}"


class MatrixRetest(BaseModel):
    """One retest flow of a suspect against a known-good peer."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    from_: str = Field(alias="from")
    to: str
    transport: Literal["tcp", "rdma"] = "tcp"
    gbps: float | None = None
    retransmit_pct: float | None = None
    error: str | None = None


class Cutoffs(BaseModel):
    """The fleet median the blame used and the cut below (``low``) or above (``high``) it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    fleet_median: float | None = None
    low: float | None = None
    high: float | None = None


class RdmaEndpoint(BaseModel):
    """The RDMA device, port and GID a host used for perftest (picked by the same rule everywhere)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    host: str
    device: str
    port: int
    gid_index: int | None = None
    gid_ip: str | None = None
    link_layer: str | None = None
    netdev: str | None = None
    rate_gbps: float | None = None


class MatrixRdma(BaseModel):
    """The RDMA (perftest) part of a matrix run: the matrix, or why it was skipped or failed."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    status: Status
    reason: str | None = None
    test: str | None = None  # perftest test, e.g. write_bw
    duration_s: float | None = None  # per flow
    endpoints: list[RdmaEndpoint] = Field(default_factory=list)
    matrix_gbps: list[list[float | None]] | None = None
    thresholds_gbps: Cutoffs | None = None
    failures: list[str] = Field(default_factory=list)


Matrix = list[list[float | None]]

# Kind-specific top-level fields: left out of the JSON when unset.
KIND_FIELDS: tuple[str, ...] = (
    "entries",
    "ranks",
    "stragglers",
    "skipped_sizes_bytes",
    "notes",
    "hosts",
    "matrix_gbps",
    "retransmit_pct",
    "suspects",
    "cleared",
    "retests",
    "thresholds_gbps",
    "thresholds_retransmit_pct",
    "failures",
    "rdma",
)


def _check_square(name: str, matrix: Matrix | None, n: int) -> None:
    if matrix is None:
        return
    if len(matrix) != n or any(len(row) != n for row in matrix):
        raise ValueError(f"{name} must be {n} x {n} (one row and column per host)")
    for row in matrix:
        for value in row:
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} holds a value that is not finite")


class IncastPoint(BaseModel):
    """``bench incast``: one sender count, over its timed rounds."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    senders: int = Field(ge=1)
    goodput_gbps: float = Field(ge=0)
    round_p50_ms: float = Field(ge=0)
    round_p99_ms: float = Field(ge=0)
    round_max_ms: float = Field(ge=0)
    rounds: int = Field(ge=1)
    retransmits: int = Field(ge=0)  # the senders' own sockets (TCP_INFO), exact for the point
    timeouts: int = Field(ge=0)  # TcpExt.TCPTimeouts of the senders' network namespaces


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

    # collective
    entries: list[CollectiveEntry] | None = None
    ranks: list[RankInfo] | None = None
    stragglers: list[Straggler] | None = None
    skipped_sizes_bytes: list[int] | None = None
    notes: list[str] | None = None
    # matrix
    hosts: list[str] | None = None
    matrix_gbps: Matrix | None = None
    retransmit_pct: Matrix | None = None
    suspects: list[MatrixSuspect] | None = None
    cleared: list[MatrixSuspect] | None = None
    retests: list[MatrixRetest] | None = None
    thresholds_gbps: Cutoffs | None = None
    thresholds_retransmit_pct: Cutoffs | None = None
    failures: list[str] | None = None
    rdma: MatrixRdma | None = None
    topology: dict[str, Any] | None = None  # bench matrix --topology: the fabric (sim YAML document)
    # incast
    incast: list[IncastPoint] | None = None

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

    @model_validator(mode="after")
    def _matrix_shapes(self) -> BenchResult:
        matrices = (self.matrix_gbps, self.retransmit_pct, self.rdma.matrix_gbps if self.rdma else None)
        if any(m is not None for m in matrices):
            if self.hosts is None:
                raise ValueError("a matrix needs hosts (its rows and columns)")
            _check_square("matrix_gbps", self.matrix_gbps, len(self.hosts))
            _check_square("retransmit_pct", self.retransmit_pct, len(self.hosts))
            _check_square("rdma.matrix_gbps", matrices[2], len(self.hosts))
        return self

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
        return self.model_dump(mode="json", by_alias=True, exclude=self._unset_kind_fields())

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude=self._unset_kind_fields())

    def _unset_kind_fields(self) -> set[str]:
        return {name for name in KIND_FIELDS if getattr(self, name) is None}

    @classmethod
    def from_json(cls, text: str | bytes) -> BenchResult:
        return cls.model_validate_json(text)

    @property
    def peer(self) -> str | None:
        value = self.params.get("peer")
        return str(value) if value is not None else None


def params_key(params: dict[str, Any]) -> str:
    """Canonical JSON of parameters: two runs with equal params have equal keys."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


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
    "KIND_FIELDS",
    "SCHEMA",
    "UNIT_SUFFIXES",
    "BenchResult",
    "CollectiveEntry",
    "CounterDeltas",
    "Cutoffs",
    "HostInfo",
    "InPlaceEntry",
    "Interval",
    "MatrixRdma",
    "MatrixRetest",
    "MatrixSuspect",
    "RankInfo",
    "RdmaEndpoint",
    "Status",
    "Straggler",
    "Stopwatch",
    "metric_unit_ok",
    "new_result",
]
