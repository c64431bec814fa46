"""``bench udp``: datagrams at an offered rate (or as fast as possible), and what arrived.

UDP is fast because nothing retransmits; the result makes the price visible: delivered rate
against offered rate, loss, reordering and jitter (RFC 3550 interarrival jitter).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench.results.schema import BenchResult
from fabricscope.bench.sockets.client import Peer, Tick, cpu_pct, gbps, record_run, run_socket_test
from fabricscope.bench.sockets.procs import WorkerSet
from fabricscope.bench.sockets.specs import MAX_DURATION_S, MAX_RATE_BPS, MAX_STREAMS
from fabricscope.bench.sockets.tcp import merge_intervals
from fabricscope.bench.sockets.wire import MAX_UDP_PAYLOAD, UDP_HEADER_BYTES
from fabricscope.jobs.frames import PeerError
from fabricscope.units import parse_rate

# A sender below this share of the offered rate did not offer the load: its loss says nothing
# about the path at that load, so a loss threshold cannot pass on it (issue 26).
OFFERED_MIN_RATIO = 0.9


def parse_offered_rate(text: str) -> float:
    """``5G``, ``500M``, ``1gbit`` (bit/s, :mod:`fabricscope.units`) or ``max``/``0`` (unlimited) -> bit/s."""
    if text.strip().lower() in ("max", "0", "unlimited"):
        return 0.0
    return parse_rate(text, maximum=MAX_RATE_BPS)


class UdpParams(BaseModel):
    """What ``bench udp`` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    peer: str
    streams: int = Field(default=1, ge=1, le=MAX_STREAMS)
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)
    size_bytes: int = Field(default=1472, ge=UDP_HEADER_BYTES, le=MAX_UDP_PAYLOAD)
    rate_bps: float = Field(
        default=1e9, ge=0, le=MAX_RATE_BPS
    )  # total over all streams; 0 = as fast as possible
    interval_s: float = Field(default=1.0, ge=0.05, le=60)
    timeout_s: float = Field(default=10.0, gt=0, le=300)

    def spec(self) -> dict[str, Any]:
        return {
            "kind": "udp",
            "streams": self.streams,
            "duration_s": self.duration_s,
            "size_bytes": self.size_bytes,
            "rate_bps": self.rate_bps / self.streams,
            "interval_s": self.interval_s,
        }


def run_udp(params: UdpParams, token: str | None = None, tick: Tick | None = None) -> BenchResult:
    peer = Peer.parse(params.peer)

    def spawn(workers: WorkerSet, ip: str, reply: dict[str, Any], cookie: bytes) -> None:
        ports = reply["ports"].get("udp")
        if not isinstance(ports, list) or len(ports) != params.streams:
            raise PeerError("server sent the wrong number of UDP ports")
        for i, port in enumerate(ports):
            cfg = {
                "timeout_s": params.timeout_s,
                "duration_s": params.duration_s,
                "size_bytes": params.size_bytes,
                "rate_bps": params.rate_bps / params.streams,
                "stream": i,
            }
            workers.spawn("udp_source", (ip, int(port)), cookie, cfg, sync=True)

    def body(result: BenchResult) -> None:
        outcome = run_socket_test(
            peer, token, params.spec(), spawn, params.duration_s, params.timeout_s, tick
        )
        result.detail["server"] = outcome.server_summary()
        build_udp_metrics(result, outcome.client, outcome.server, params)

    return record_run("udp", params, peer, body)


def offered_load_shortfall(result: BenchResult) -> str | None:
    """Why a loss figure does not speak for the load asked for (the sender fell short), or None."""
    offered, sent = result.metrics.get("offered_gbps"), result.metrics.get("sent_gbps")
    if offered is None:  # --rate max: no load was asked for
        return None
    if sent is None or sent < OFFERED_MIN_RATIO * offered:
        shown = "nothing" if sent is None else f"{sent:.3g} Gb/s"
        return f"the sender reached {shown} of the {offered:.3g} Gb/s asked for (--rate)"
    return None


def build_udp_metrics(
    result: BenchResult, client: list[dict[str, Any]], server: list[dict[str, Any]], params: UdpParams
) -> None:
    """Pure: sender and receiver reports -> delivered rate, loss, reordering, jitter."""
    sent = sum(int(r.get("sent", 0)) for r in client)
    sent_bytes = sum(int(r.get("bytes", 0)) for r in client)
    send_s = max((float(r.get("send_s", 0.0)) for r in client), default=0.0)
    received = sum(int(r.get("received", 0)) for r in server)
    received_bytes = sum(int(r.get("bytes", 0)) for r in server)
    lost = max(0, sent - received)
    jitters = [float(r["jitter_us"]) for r in server if r.get("received")]
    metrics: dict[str, float | int | None] = {
        "offered_gbps": params.rate_bps / 1e9 if params.rate_bps > 0 else None,
        "sent_gbps": gbps(sent_bytes, send_s),
        "throughput_gbps": gbps(received_bytes, send_s),
        "loss_pct": round(lost / sent * 100.0, 6) if sent else None,
        "datagrams_sent_count": sent,
        "datagrams_received_count": received,
        "datagrams_lost_count": lost,
        "out_of_order_count": sum(int(r.get("out_of_order", 0)) for r in server),
        "local_drops_count": sum(int(r.get("dropped_local", 0)) for r in client),
        "jitter_us": round(max(jitters), 3) if jitters else None,
        "client_cpu_pct": cpu_pct(client, send_s),
        "server_cpu_pct": cpu_pct(server, send_s),
    }
    result.finish(metrics)
    result.intervals = merge_intervals([r for r in server if r.get("received")], params.interval_s)
    result.detail["streams"] = [
        {
            "stream": i,
            "sent": c.get("sent"),
            "received": s.get("received"),
            "out_of_order": s.get("out_of_order"),
            "jitter_us": s.get("jitter_us"),
            "foreign_datagrams": s.get("foreign"),
        }
        for i, (c, s) in enumerate(zip(client, server))
    ]
