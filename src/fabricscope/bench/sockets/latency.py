"""``bench latency``: TCP and UDP request/response round trips, 64 B to 1 MiB.

Closed loop, one message in flight: the client sends ``size`` bytes, the server answers with
``size`` bytes, the client times the round trip. Percentiles, not means: p99 and p99.9 are
what a collective or an inference request waits for.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fabricscope.bench.results.schema import BenchResult
from fabricscope.bench.sockets.client import Peer, Tick, offset_tick, record_run, run_socket_test
from fabricscope.bench.sockets.procs import WorkerSet
from fabricscope.bench.sockets.specs import MAX_DURATION_S
from fabricscope.bench.sockets.wire import MAX_UDP_PAYLOAD, RR_HEADER_BYTES
from fabricscope.units import size_label

DEFAULT_SIZES = (64, 1024, 16384, 65536, 1048576)
MAX_SIZE = 1024 * 1024
PERCENTILES = ("min", "p50", "p90", "p99", "p999", "max", "mean")


class LatencyParams(BaseModel):
    """What ``bench latency`` was asked to do. ``duration_s`` is shared by all sizes and protocols."""

    model_config = ConfigDict(extra="forbid")

    peer: str
    protos: tuple[Literal["tcp", "udp"], ...] = ("tcp", "udp")
    sizes: tuple[int, ...] = DEFAULT_SIZES
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)
    timeout_s: float = Field(default=10.0, gt=0, le=300)

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or len(value) > 32:
            raise ValueError("give 1 to 32 sizes")
        for size in value:
            if not 1 <= size <= MAX_SIZE:
                raise ValueError(f"size {size} outside 1..{MAX_SIZE} bytes")
        return tuple(sorted(set(value)))

    def plan(self) -> list[tuple[str, list[int], list[int]]]:
        """(proto, sizes to run, sizes skipped) per protocol: UDP stops at one datagram."""
        plan = []
        for proto in self.protos:
            if proto == "udp":
                run = [s for s in self.sizes if s <= MAX_UDP_PAYLOAD]
                plan.append((proto, run, [s for s in self.sizes if s > MAX_UDP_PAYLOAD]))
            else:
                plan.append((proto, list(self.sizes), []))
        return plan


def metric_name(proto: str, size: int, stat: str) -> str:
    """``tcp_64B_rtt_p99_us``: protocol, message size, statistic, unit."""
    return f"{proto}_{size_label(size)}_rtt_{stat}_us"


def run_latency(params: LatencyParams, token: str | None = None, tick: Tick | None = None) -> BenchResult:
    peer = Peer.parse(params.peer)
    plan = [(proto, run, skipped) for proto, run, skipped in params.plan()]
    slots = sum(len(run) for _, run, _ in plan) or 1
    per_size_s = params.duration_s / slots

    def body(result: BenchResult) -> None:
        rows: list[dict[str, Any]] = []
        offset = 0.0
        for proto, sizes, skipped in plan:
            if not sizes:
                continue
            spec = {
                "kind": "latency",
                "proto": proto,
                "max_bytes": max(max(sizes), RR_HEADER_BYTES),
                "duration_s": per_size_s * len(sizes),
            }
            cfg = {"timeout_s": params.timeout_s, "proto": proto, "sizes": sizes, "per_size_s": per_size_s}

            def spawn(
                workers: WorkerSet, ip: str, reply: dict[str, Any], cookie: bytes, cfg: dict[str, Any] = cfg
            ) -> None:
                workers.spawn("rr_client", (ip, int(reply["ports"]["rr"])), cookie, cfg, sync=True)

            outcome = run_socket_test(
                peer, token, spec, spawn, spec["duration_s"], params.timeout_s, offset_tick(tick, offset)
            )
            offset += spec["duration_s"]
            result.detail["server"] = outcome.server_summary()
            by_size = outcome.client[0].get("sizes", {})
            for size in sizes:
                stats = by_size.get(str(size), {})
                rows.append(
                    {
                        "proto": proto,
                        "size_bytes": size,
                        "samples": stats.get("samples"),
                        "lost": stats.get("lost"),
                        **{k: stats.get(f"rtt_{k}_us") for k in PERCENTILES},
                    }
                )
            for size in skipped:
                rows.append(
                    {
                        "proto": proto,
                        "size_bytes": size,
                        "skipped": f"UDP datagrams are at most {MAX_UDP_PAYLOAD} bytes",
                    }
                )
        build_latency_metrics(result, rows)

    return record_run("latency", params, peer, body)


def build_latency_metrics(result: BenchResult, rows: list[dict[str, Any]]) -> None:
    """Pure: per (proto, size) rows -> flat metrics, headline = first protocol's smallest size."""
    metrics: dict[str, float | int | None] = {}
    for row in rows:
        if row.get("skipped"):
            continue
        for stat in PERCENTILES:
            value = row.get(stat)
            metrics[metric_name(row["proto"], row["size_bytes"], stat)] = (
                round(value, 3) if value is not None else None
            )
        metrics[f"{row['proto']}_{size_label(row['size_bytes'])}_samples_count"] = row.get("samples")
        if row["proto"] == "udp":
            metrics[f"udp_{size_label(row['size_bytes'])}_lost_count"] = row.get("lost")
    headline = next((r for r in rows if not r.get("skipped")), None)
    if headline is not None:
        for stat in ("p50", "p99", "p999", "max"):
            metrics[f"rtt_{stat}_us"] = metrics.get(
                metric_name(headline["proto"], headline["size_bytes"], stat)
            )
    result.finish(metrics)
    result.detail["rows"] = rows
