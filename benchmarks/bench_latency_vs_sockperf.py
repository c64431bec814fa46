#!/usr/bin/env python3
"""Round-trip latency of `fabricscope bench latency` against sockperf ping-pong, alternating rounds.

Usage: python benchmarks/bench_latency_vs_sockperf.py [--rounds 5] [--duration 3] [--size 64] [--host 127.0.0.1]

Same message size, one message in flight, full round trip on both sides (sockperf --full-rtt),
UDP and TCP. Prints the median of per-round p50 ratios fabricscope/sockperf; the target is
within 1.5x (ratio <= 1.5).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from bench_common import Background, ensure_tool, fabricscope, serve_fabricscope, summarize

TARGET = 1.5
_P50 = re.compile(r"percentile 50\.000 =\s*([\d.]+)")


def sockperf_p50(sockperf: str, host: str, port: int, duration: float, size: int, tcp: bool) -> float:
    argv = [
        sockperf,
        "ping-pong",
        "-i",
        host,
        "-p",
        str(port),
        "-t",
        f"{max(1, round(duration))}",
        "-m",
        str(size),
        "--full-rtt",
    ]
    if tcp:
        argv.append("--tcp")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60).stdout
    match = _P50.search(out)
    if not match:
        sys.exit(f"sockperf printed no p50:\n{out[-2000:]}")
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    sockperf = ensure_tool("sockperf", "sockperf")
    version = subprocess.run([sockperf, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    udp_port, tcp_port = 11311, 11312
    servers = [
        Background([sockperf, "server", "-i", args.host, "-p", str(udp_port)]),
        Background([sockperf, "server", "-i", args.host, "-p", str(tcp_port), "--tcp"]),
    ]
    ours_server = serve_fabricscope()
    results: dict[str, tuple[list[float], list[float]]] = {"udp": ([], []), "tcp": ([], [])}
    try:
        for rnd in range(args.rounds):
            for proto in ("udp", "tcp"):
                ours, ref = results[proto]
                order = ("ours", "ref") if rnd % 2 == 0 else ("ref", "ours")
                for who in order:
                    if who == "ours":
                        doc = fabricscope(
                            "bench", "latency", "--peer", f"{args.host}:{ours_server.port}", "--proto", proto,
                            "--sizes", str(args.size), "-t", f"{args.duration:g}",
                        )  # fmt: skip
                        ours.append(float(doc["metrics"]["rtt_p50_us"]))
                    else:
                        ref.append(
                            sockperf_p50(
                                sockperf,
                                args.host,
                                udp_port if proto == "udp" else tcp_port,
                                args.duration,
                                args.size,
                                proto == "tcp",
                            )
                        )
                print(
                    f"round {rnd + 1} {proto}: fabricscope p50 {ours[-1]:.1f} us, sockperf p50 {ref[-1]:.1f} us",
                    file=sys.stderr,
                )
    finally:
        ours_server.stop()
        for server in servers:
            server.stop()
    for proto in ("udp", "tcp"):
        ours, ref = results[proto]
        ratio = summarize(
            f"{proto.upper()} round trip p50, {args.size} B, {args.host}, {args.duration:g} s x {args.rounds} rounds (reference: {version} ping-pong --full-rtt)",
            ours, ref, "sockperf", "us", "lower is better",
        )  # fmt: skip
        print(f"  target <= {TARGET}: {'MET' if ratio <= TARGET else 'NOT MET'}")


if __name__ == "__main__":
    main()
