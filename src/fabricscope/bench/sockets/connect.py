"""``bench connect``: connection setup rate and latency, per-request connections versus pooling.

The inference-serving question: a new TCP connection per request pays a handshake, a slow
first byte and a close each time; one pooled connection pays them once. Both are measured
against the same server, with the same request and response sizes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench.results.schema import BenchResult
from fabricscope.bench.sockets.client import Peer, Tick, cpu_pct, offset_tick, record_run, run_socket_test
from fabricscope.bench.sockets.procs import WorkerSet
from fabricscope.bench.sockets.specs import MAX_CONCURRENCY, MAX_DURATION_S
from fabricscope.bench.sockets.wire import RR_HEADER_BYTES

STATS = ("p50", "p90", "p99", "p999", "max", "mean")


class ConnectParams(BaseModel):
    """What ``bench connect`` was asked to do; ``duration_s`` is split between the modes."""

    model_config = ConfigDict(extra="forbid")

    peer: str
    modes: tuple[Literal["per_request", "pooled"], ...] = ("per_request", "pooled")
    concurrency: int = Field(default=1, ge=1, le=MAX_CONCURRENCY)
    request_bytes: int = Field(default=64, ge=RR_HEADER_BYTES, le=1024 * 1024)
    response_bytes: int = Field(default=64, ge=1, le=1024 * 1024)
    duration_s: float = Field(default=6.0, gt=0, le=MAX_DURATION_S)
    timeout_s: float = Field(default=10.0, gt=0, le=300)


def run_connect(params: ConnectParams, token: str | None = None, tick: Tick | None = None) -> BenchResult:
    peer = Peer.parse(params.peer)
    modes = list(dict.fromkeys(params.modes))
    per_mode_s = params.duration_s / len(modes)

    def body(result: BenchResult) -> None:
        by_mode: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        for n, mode in enumerate(modes):
            spec = {
                "kind": "connect",
                "concurrency": params.concurrency,
                "max_bytes": max(params.response_bytes, RR_HEADER_BYTES),
                "duration_s": per_mode_s,
            }
            cfg = {
                "timeout_s": params.timeout_s,
                "duration_s": per_mode_s,
                "mode": mode,
                "request_bytes": params.request_bytes,
                "response_bytes": params.response_bytes,
            }

            def spawn(
                workers: WorkerSet, ip: str, reply: dict[str, Any], cookie: bytes, cfg: dict[str, Any] = cfg
            ) -> None:
                for _ in range(params.concurrency):
                    workers.spawn("connect_client", (ip, int(reply["ports"]["rr"])), cookie, cfg, sync=True)

            outcome = run_socket_test(
                peer, token, spec, spawn, per_mode_s, params.timeout_s, offset_tick(tick, n * per_mode_s)
            )
            result.detail["server"] = outcome.server_summary()
            by_mode[mode] = (outcome.client, outcome.server)
        build_connect_metrics(result, by_mode)

    return record_run("connect", params, peer, body)


def _merge(reports: list[dict[str, Any]], prefix: str) -> dict[str, float | None]:
    """Percentiles over several clients: the worst client's (conservative, no raw samples needed)."""
    out: dict[str, float | None] = {}
    for stat in STATS:
        values = [
            float(r[f"{prefix}_{stat}_us"]) for r in reports if r.get(f"{prefix}_{stat}_us") is not None
        ]
        if stat == "mean":
            weights = [int(r.get("requests", 0)) for r in reports if r.get(f"{prefix}_{stat}_us") is not None]
            out[stat] = (
                round(sum(v * w for v, w in zip(values, weights)) / sum(weights), 3)
                if values and sum(weights)
                else None
            )
        else:
            out[stat] = round(max(values), 3) if values else None
    return out


def _rate(client: list[dict[str, Any]]) -> tuple[int, float, float | None]:
    """(requests, elapsed_s, requests per second) of one mode's client reports: all requests
    over the slowest client's time, as the clients ran at once."""
    requests = sum(int(r.get("requests", 0)) for r in client)
    elapsed = max((float(r.get("elapsed_s", 0)) for r in client), default=0.0)
    return requests, elapsed, round(requests / elapsed, 3) if elapsed > 0 else None


def build_connect_metrics(
    result: BenchResult, by_mode: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]
) -> None:
    """Pure: client/server reports per mode -> rates, latency percentiles and the pooling gain."""
    metrics: dict[str, float | int | None] = {}
    rows = []
    if "per_request" in by_mode:
        client, server = by_mode["per_request"]
        requests, elapsed, metrics["connect_per_s"] = _rate(client)
        metrics["connections_count"] = requests
        for part in ("connect", "first_byte", "close", "request"):
            merged = _merge(client, part)
            name = "per_request" if part == "request" else part
            for stat in ("p50", "p99", "p999", "max"):
                metrics[f"{name}_{stat}_us"] = merged[stat]
            rows.append({"mode": "per_request", "part": part, **merged})
        metrics["per_request_client_cpu_pct"] = cpu_pct(client, elapsed)
        metrics["per_request_server_cpu_pct"] = cpu_pct(server, elapsed)
    if "pooled" in by_mode:
        client, server = by_mode["pooled"]
        requests, elapsed, metrics["pooled_requests_per_s"] = _rate(client)
        metrics["pooled_requests_count"] = requests
        for part in ("first_byte", "request"):
            merged = _merge(client, part)
            for stat in ("p50", "p99", "p999", "max"):
                metrics[f"pooled_{part}_{stat}_us"] = merged[stat]
            rows.append({"mode": "pooled", "part": part, **merged})
        metrics["pooled_client_cpu_pct"] = cpu_pct(client, elapsed)
        metrics["pooled_server_cpu_pct"] = cpu_pct(server, elapsed)
    if metrics.get("connect_per_s") and metrics.get("pooled_requests_per_s"):
        metrics["pooling_speedup_ratio"] = round(
            float(metrics["pooled_requests_per_s"]) / float(metrics["connect_per_s"]), 3
        )  # type: ignore[arg-type]
    result.finish(metrics)
    result.detail["rows"] = rows
