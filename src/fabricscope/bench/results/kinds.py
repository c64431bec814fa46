"""Every bench kind in one table: its parameters, its fields, its renderer and its headline.

A kind used to be spread over about eight places (the schema's field list, the history's
headline numbers, report/'s renderers and its self-titled list, the parameter models...), and the
field list had already drifted: every result's JSON carried ``"topology": null`` and
``"incast": null`` (issue 21). Now each of those reads this table:

* the result schema (``schema.KIND_FIELDS``, what is left out of the JSON when unset),
* the history (:data:`Kind.headline`, the numbers people quote),
* report/ (:data:`Kind.renderer` names the function of ``report.bench`` that draws its lines,
  :data:`Kind.data` says which fields must be set for it to have anything to draw,
  :data:`Kind.self_titled` whether those lines carry their own title),
* ``bench serve`` and its control protocol (:data:`Kind.spec` names the request model of a kind
  run against the server: its parameters, its caps and its data plane; the protocol accepts
  exactly the kinds that have one).

``tests/bench/test_kinds.py`` holds the table to the schema, the parameter models and report/.
Adding a kind: one :class:`Kind` here, its renderer in report/bench.py, and for a served kind its
request model in bench/sockets/specs.py (see CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from fabricscope.registry import by_name


@dataclass(frozen=True)
class Kind:
    name: str
    params: str  # "module:Model" of its parameter model (the pydantic model its command builds)
    headline: tuple[str, ...]  # the metrics people quote, in order (first present wins)
    renderer: str  # the function of fabricscope.report.bench that draws its lines
    fields: tuple[str, ...] = ()  # its own top-level BenchResult fields (absent from JSON when unset)
    data: tuple[str, ...] = ()  # with fields: at least one of these must be set for lines to be drawn
    self_titled: bool = False  # its lines start with their own title (no "bench KIND -> PEER" head)
    spec: str = ""  # "module:Model" of its `bench serve` request (served kinds only; bench/sockets/specs.py)

    def params_model(self) -> type:
        """The parameter model (imported on demand: the table stays free of the benchmarks' imports)."""
        return _load(self.params)

    def spec_model(self) -> type | None:
        """The request model `bench serve` validates, caps and runs this kind by; None when not served."""
        return _load(self.spec) if self.spec else None


def _load(where: str) -> type:
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


_COLLECTIVE_FIELDS = ("entries", "ranks", "stragglers", "skipped_sizes_bytes", "notes")
_MATRIX_FIELDS = (
    "hosts", "matrix_gbps", "retransmit_pct", "suspects", "cleared", "retests", "thresholds_gbps",
    "thresholds_retransmit_pct", "failures", "rdma", "topology", "notes",
)  # fmt: skip

KINDS: dict[str, Kind] = by_name(
    Kind(
        "tcp",
        "fabricscope.bench.sockets.tcp:TcpParams",
        ("throughput_gbps", "retransmits_count"),
        "tcp_lines",
        spec="fabricscope.bench.sockets.specs:TcpSpec",
    ),
    Kind(
        "udp",
        "fabricscope.bench.sockets.udp:UdpParams",
        ("throughput_gbps", "loss_pct", "jitter_us"),
        "udp_lines",
        spec="fabricscope.bench.sockets.specs:UdpSpec",
    ),
    Kind(
        "latency",
        "fabricscope.bench.sockets.latency:LatencyParams",
        ("rtt_p50_us", "rtt_p99_us"),
        "latency_lines",
        spec="fabricscope.bench.sockets.specs:LatencySpec",
    ),
    Kind(
        "connect",
        "fabricscope.bench.sockets.connect:ConnectParams",
        ("connect_per_s", "pooled_requests_per_s"),
        "connect_lines",
        spec="fabricscope.bench.sockets.specs:ConnectSpec",
    ),
    Kind(
        "rdma",
        "fabricscope.bench.rdma.run:RdmaParams",
        ("throughput_gbps", "lat_typical_us"),
        "rdma_lines",
    ),
    Kind(
        "collective",
        "fabricscope.bench.collective:CollectiveParams",
        ("busbw_max_GBps", "busbw_avg_GBps"),
        "collective_lines",
        fields=_COLLECTIVE_FIELDS,
        data=("entries",),
        self_titled=True,
    ),
    Kind(
        "matrix",
        "fabricscope.bench.matrix:MatrixParams",
        ("fleet_median_gbps", "suspects_count"),
        "matrix_lines",
        fields=_MATRIX_FIELDS,
        data=("matrix_gbps", "rdma"),
        self_titled=True,
    ),
    Kind(
        "incast",
        "fabricscope.bench.incast:IncastParams",
        ("goodput_gbps", "round_p99_ms"),
        "incast_lines",
        fields=("hosts", "incast"),
        data=("incast",),
        self_titled=True,
    ),
)  # fmt: skip

# Every kind-specific top-level field of a result, in the order first named.
KIND_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(f for k in KINDS.values() for f in k.fields))


def served_kinds() -> list[Kind]:
    """The kinds `bench serve` runs: those with a request model (the protocol accepts no other)."""
    return [k for k in KINDS.values() if k.spec]


def kind_of(name: str) -> Kind | None:
    """The record of a kind (None for a kind this version does not know, e.g. a newer store's)."""
    return KINDS.get(name)


__all__ = ["KINDS", "KIND_FIELDS", "Kind", "kind_of", "served_kinds"]
