#!/usr/bin/env python3
"""TCP throughput of `fabricscope bench tcp` against iperf3 on the same path, alternating rounds.

Usage: python benchmarks/bench_tcp_vs_iperf3.py [--rounds 5] [--duration 5] [--streams 1] [--host 127.0.0.1]

Both tools: one connection per stream, 128 KiB writes, receiver-side rate (iperf3's
end.sum_received.bits_per_second, fabricscope's throughput_gbps). Rounds alternate which tool
goes first (ABBA), so slow drift of a shared machine hits both. Prints the median of the per-round
ratios fabricscope/iperf3; the target is >= 0.95 on loopback.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from bench_common import Background, ensure_tool, fabricscope, serve_fabricscope, summarize

TARGET = 0.95


def iperf3_gbps(iperf3: str, host: str, port: int, duration: float, streams: int) -> float:
    proc = subprocess.run(
        [iperf3, "-c", host, "-p", str(port), "-t", f"{duration:g}", "-P", str(streams), "-l", "128K", "-J"],
        capture_output=True, text=True, timeout=duration + 60,
    )  # fmt: skip
    doc = json.loads(proc.stdout)
    if "error" in doc:
        sys.exit(f"iperf3: {doc['error']}")
    return doc["end"]["sum_received"]["bits_per_second"] / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    iperf3 = ensure_tool("iperf3", "iperf3")
    version = subprocess.run([iperf3, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    iperf_port = 5201 + 17
    iperf_server = Background([iperf3, "-s", "-p", str(iperf_port), "-B", args.host])
    ours_server = serve_fabricscope()
    ours, ref = [], []
    try:
        for rnd in range(args.rounds):
            order = ("ours", "ref") if rnd % 2 == 0 else ("ref", "ours")
            for who in order:
                if who == "ours":
                    doc = fabricscope(
                        "bench",
                        "tcp",
                        "--peer",
                        f"{args.host}:{ours_server.port}",
                        "-t",
                        f"{args.duration:g}",
                        "-P",
                        str(args.streams),
                    )
                    ours.append(float(doc["metrics"]["throughput_gbps"]))
                else:
                    ref.append(iperf3_gbps(iperf3, args.host, iperf_port, args.duration, args.streams))
            print(
                f"round {rnd + 1}: fabricscope {ours[-1]:.2f} Gb/s, iperf3 {ref[-1]:.2f} Gb/s",
                file=sys.stderr,
            )
    finally:
        ours_server.stop()
        iperf_server.stop()
    ratio = summarize(
        f"TCP throughput, {args.host}, {args.streams} stream(s), {args.duration:g} s x {args.rounds} rounds (reference: {version})",
        ours, ref, "iperf3", "Gb/s", "higher is better",
    )  # fmt: skip
    print(f"  target >= {TARGET}: {'MET' if ratio >= TARGET else 'NOT MET'}")


if __name__ == "__main__":
    main()
