"""Every bench kind in one table: its parameters, its fields, its renderer and its headline.

A kind used to be spread over about eight places (the schema's field list, the history's
headline numbers, report/'s renderers and its self-titled list, the parameter models...), and the
field list had already drifted: every result's JSON carried ``"topology": null`` and
``"incast": null`` (issue 21). Now each of those reads this table:

* the result schema (``schema.KIND_FIELDS``, what is left out of the JSON when unset),
* the history (:data:`Kind.headline`, the numbers people quote),
* report/ (:data:`Kind.renderer` names the function of ``report.bench`` that draws its lines,
  :data:`Kind.data` says which fields must be set for it to have anything to draw,
  :data:`Kind.self_titled` whether those lines carry their own title).

``tests/bench/test_kinds.py`` holds the table to the schema, the parameter models and report/.
Adding a kind: one :class:`Kind` here, its renderer in report/bench.py (see CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str
    params: str  # "module:Model" of its parameter model (the pydantic model its command builds)
    headline: tuple[str, ...]  # the metrics people quote, in order (first present wins)
    renderer: str  # the function of fabricscope.report.bench that draws its lines
    fields: tuple[str, ...] = ()  # its own top-level BenchResult fields (absent from JSON when unset)
    data: tuple[str, ...] = ()  # with fields: at least one of these must be set for lines to be drawn
    self_titled: bool = False  # its lines start with their own title (no "bench KIND -> PEER" head)
    served: bool = False  # run against `bench serve` (a control-protocol test kind)

    def params_model(self) -> type:
        """The parameter model (imported on demand: the table stays free of the benchmarks' imports)."""
        module, _, name = self.params.partition(":")
        return getattr(importlib.import_module(module), name)


_COLLECTIVE_FIELDS = ("entries", "ranks", "stragglers", "skipped_sizes_bytes", "notes")
_MATRIX_FIELDS = (
    "hosts", "matrix_gbps", "retransmit_pct", "suspects", "cleared", "retests", "thresholds_gbps",
    "thresholds_retransmit_pct", "failures", "rdma", "topology", "notes",
)  # fmt: skip

KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "tcp",
            "fabricscope.bench.sockets.tcp:TcpParams",
            ("throughput_gbps", "retransmits_count"),
            "tcp_lines",
            served=True,
        ),
        Kind(
            "udp",
            "fabricscope.bench.sockets.udp:UdpParams",
            ("throughput_gbps", "loss_pct", "jitter_us"),
            "udp_lines",
            served=True,
        ),
        Kind(
            "latency",
            "fabricscope.bench.sockets.latency:LatencyParams",
            ("rtt_p50_us", "rtt_p99_us"),
            "latency_lines",
            served=True,
        ),
        Kind(
            "connect",
            "fabricscope.bench.sockets.connect:ConnectParams",
            ("connect_per_s", "pooled_requests_per_s"),
            "connect_lines",
            served=True,
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
}

# Every kind-specific top-level field of a result, in the order first named.
KIND_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(f for k in KINDS.values() for f in k.fields))


def kind_of(name: str) -> Kind | None:
    """The record of a kind (None for a kind this version does not know, e.g. a newer store's)."""
    return KINDS.get(name)


__all__ = ["KINDS", "KIND_FIELDS", "Kind", "kind_of"]
