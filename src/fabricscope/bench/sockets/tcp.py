"""``bench tcp``: bulk TCP throughput with N streams, either direction or both.

One sender and one receiver *process* per stream on each end; throughput is what the receivers
counted over their own first-to-last-byte window, retransmits come from the senders' TCP_INFO.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench.results.schema import BenchResult, Interval
from fabricscope.bench.sockets.client import Peer, Tick, cpu_pct, gbps, record_run, run_socket_test
from fabricscope.bench.sockets.procs import WorkerSet
from fabricscope.bench.sockets.specs import MAX_DURATION_S, MAX_MSG_BYTES, MAX_STREAMS, MAX_WINDOW_BYTES


class TcpParams(BaseModel):
    """What ``bench tcp`` was asked to do (stored with the result; no secrets here)."""

    model_config = ConfigDict(extra="forbid")

    peer: str
    streams: int = Field(default=1, ge=1, le=MAX_STREAMS)
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)
    msg_bytes: int = Field(default=128 * 1024, ge=1, le=MAX_MSG_BYTES)
    direction: Literal["send", "recv", "bidir"] = "send"
    window_bytes: int | None = Field(default=None, ge=4096, le=MAX_WINDOW_BYTES)
    interval_s: float = Field(default=1.0, ge=0.05, le=60)
    timeout_s: float = Field(default=10.0, gt=0, le=300)

    def spec(self) -> dict[str, Any]:
        return {
            "kind": "tcp",
            "streams": self.streams,
            "duration_s": self.duration_s,
            "msg_bytes": self.msg_bytes,
            "direction": self.direction,
            "window_bytes": self.window_bytes,
            "interval_s": self.interval_s,
        }


def run_tcp(params: TcpParams, token: str | None = None, tick: Tick | None = None) -> BenchResult:
    peer = Peer.parse(params.peer)
    cfg = {
        "timeout_s": params.timeout_s,
        "duration_s": params.duration_s,
        "msg_bytes": params.msg_bytes,
        "interval_s": params.interval_s,
        "window_bytes": params.window_bytes,
    }

    def spawn(workers: WorkerSet, ip: str, reply: dict[str, Any], cookie: bytes) -> None:
        ports = reply["ports"]
        for key, worker in (("to_server", "tcp_source"), ("from_server", "tcp_sink")):
            if key in ports:
                for _ in range(params.streams):
                    workers.spawn(worker, (ip, int(ports[key])), cookie, cfg, sync=True)

    def body(result: BenchResult) -> None:
        outcome = run_socket_test(
            peer, token, params.spec(), spawn, params.duration_s, params.timeout_s, tick
        )
        result.detail["server"] = outcome.server_summary()
        build_tcp_metrics(result, outcome.client, outcome.server, params)

    return record_run("tcp", params, peer, body)


def _direction_summary(sinks: list[dict[str, Any]]) -> tuple[float | None, int, list[float | None]]:
    total = sum(int(r["bytes"]) for r in sinks)
    first = min(int(r["first_ns"]) for r in sinks)
    last = max(int(r["last_ns"]) for r in sinks)
    per_stream = [gbps(int(r["bytes"]), (int(r["last_ns"]) - int(r["first_ns"])) / 1e9) for r in sinks]
    return gbps(total, (last - first) / 1e9), total, per_stream


def merge_intervals(sinks: list[dict[str, Any]], interval_s: float) -> list[Interval]:
    """Sum the streams' rates per reporting interval (each stream's marks are relative to its first byte)."""
    series = []
    for report in sinks:
        marks = [(0, 0), *[(int(t), int(b)) for t, b in report.get("marks", [])]]
        rates = []
        for (t0, b0), (t1, b1) in zip(marks, marks[1:]):
            if t1 > t0:
                rates.append((t0 / 1e9, t1 / 1e9, (b1 - b0) * 8 / ((t1 - t0) / 1e9) / 1e9))
        series.append(rates)
    intervals = []
    for k in range(max((len(s) for s in series), default=0)):
        present = [s[k] for s in series if k < len(s)]
        start = min(p[0] for p in present)
        end = max(p[1] for p in present)
        if end - start < interval_s * 0.2 and k > 0:
            continue  # a sliver at the very end: too short to be a rate
        intervals.append(
            Interval(
                start_s=round(start, 6),
                end_s=round(end, 6),
                metrics={"throughput_gbps": round(sum(p[2] for p in present), 6)},
            )
        )
    return intervals


def build_tcp_metrics(
    result: BenchResult, client: list[dict[str, Any]], server: list[dict[str, Any]], params: TcpParams
) -> None:
    """Pure: both sides' worker reports -> metrics, intervals and per-stream detail."""
    everyone = [*client, *server]
    metrics: dict[str, float | int | None] = {}
    directions = []
    if params.direction in ("send", "bidir"):
        directions.append(
            (
                "send",
                [r for r in server if r.get("role") == "sink"],
                [r for r in client if r.get("role") == "source"],
            )
        )
    if params.direction in ("recv", "bidir"):
        directions.append(
            (
                "recv",
                [r for r in client if r.get("role") == "sink"],
                [r for r in server if r.get("role") == "source"],
            )
        )
    total_gbps = 0.0
    streams_detail = []
    retrans = 0
    for name, sinks, sources in directions:
        if not sinks:
            continue
        rate, nbytes, per_stream = _direction_summary(sinks)
        metrics[f"{name}_throughput_gbps"] = rate
        metrics[f"{name}_bytes"] = nbytes
        total_gbps += rate or 0.0
        direction_retrans = sum(int(r.get("tcp_info", {}).get("total_retrans", 0)) for r in sources)
        metrics[f"{name}_retransmits_count"] = direction_retrans
        retrans += direction_retrans
        rtts = [r["tcp_info"]["rtt_us"] for r in sources if "rtt_us" in r.get("tcp_info", {})]
        if rtts:
            metrics[f"{name}_srtt_us"] = max(rtts)
        for i, (sink, source) in enumerate(zip(sinks, sources)):
            info = source.get("tcp_info", {})
            streams_detail.append(
                {
                    "direction": name,
                    "stream": i,
                    "throughput_gbps": per_stream[i],
                    "bytes": sink["bytes"],
                    "retransmits": info.get("total_retrans"),
                    "srtt_us": info.get("rtt_us"),
                    "cwnd_segments": info.get("snd_cwnd"),
                }
            )
        if name == directions[0][0]:
            result.intervals = merge_intervals(sinks, params.interval_s)
    metrics["throughput_gbps"] = total_gbps
    metrics["retransmits_count"] = retrans
    senders = [r.get("tcp_info", {}) for r in everyone if r.get("role") == "source"]
    result.counters.sockets = {
        "tcp_total_retrans": sum(int(i.get("total_retrans", 0)) for i in senders),
        "tcp_bytes_retrans": sum(int(i.get("bytes_retrans", 0)) for i in senders),
        "tcp_bytes_sent": sum(int(i.get("bytes_sent", 0)) for i in senders),
        "tcp_delivered_ce": sum(int(i.get("delivered_ce", 0)) for i in senders),  # ECN-marked deliveries
        "tcp_rcv_ooopack": sum(
            int(r.get("tcp_info", {}).get("rcv_ooopack", 0)) for r in everyone if r.get("role") == "sink"
        ),
    }
    wall = max((float(r.get("wall_s", 0.0)) for r in everyone), default=0.0)
    metrics["client_cpu_pct"] = cpu_pct(client, wall)
    metrics["server_cpu_pct"] = cpu_pct(server, wall)
    result.finish(metrics)
    result.detail["streams"] = streams_detail
