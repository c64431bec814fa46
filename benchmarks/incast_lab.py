"""Benchmark: TCP incast in the lab, against the link rate and against `sim incast`.

Needs root (it builds a lab) and iproute2. A 9-host star at 200 Mbit/s; h1 receives, h2..h9 send
256 KiB each per round with TCP CUBIC. Prints, for each queue depth of the switch port towards h1
(the lab default of 50 ms at the rate, then the shallow queues given), the curve as N grows:
goodput (reference: the TCP goodput ceiling, 200 Mbit/s x 1448/1514 at MTU 1500), p50/p99 round
time, timeouts, and the model's goodput for the same settings (its expected curve: at least 400
rounds) with its ratio to the lab.

    sudo .venv/bin/python benchmarks/incast_lab.py [--rounds 100] [--queues 64KiB,96KiB]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

LAB = "benchinc"
RATE_BPS = 200_000_000
CEILING_GBPS = RATE_BPS / 1e9 * 1448 / 1514


def fs(*args: str, timeout: float = 900) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", *args], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise SystemExit(f"fabricscope {' '.join(args)} failed: {proc.stderr.strip()[-800:]}")
    return proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--queues", default="64KiB,96KiB")
    parser.add_argument("--senders", default="1,2,4,8")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: it builds a lab of network namespaces")
    from fabricscope.lab.plan import host_bucket_bytes, switch_gso_frames
    from fabricscope.sim.incast import IncastFabric, simulate
    from fabricscope.units import parse_size

    fs("lab", "up", "--name", LAB, "--hosts", "9", "--link-rate", "200mbit", "--replace")
    try:
        for queue in ["default", *args.queues.split(",")]:
            fs("lab", "set", LAB, "h1", "--queue", queue)
            started = time.monotonic()
            doc = json.loads(
                fs(
                    "bench",
                    "incast",
                    "--launch",
                    f"lab:{LAB}",
                    "--senders",
                    args.senders,
                    "--size",
                    "256KiB",
                    "--rounds",
                    str(args.rounds),
                    "--congestion",
                    "cubic",
                    "--json",
                    "--no-store",
                )
            )
            took = time.monotonic() - started
            queue_bytes = parse_size(queue) if queue != "default" else int(RATE_BPS / 8 * 0.05 + 131072)
            # the default queue is a host-style tbf (bucket 128 KiB): it takes every GSO packet whole
            frames = switch_gso_frames(RATE_BPS) if queue != "default" else 45
            fabric = IncastFabric(
                link_bps=RATE_BPS,
                queue_bytes=queue_bytes,
                base_rtt_s=50e-6,
                sender_bucket_bytes=host_bucket_bytes(RATE_BPS),
                switch_gso_frames=frames,
            )
            print(
                f"\nqueue towards the receiver: {queue} ({queue_bytes} bytes); {args.rounds} rounds per point, {took:.0f} s"
            )
            print(
                f"{'senders':>7} {'goodput Gb/s':>12} {'of ceiling':>10} {'p50 ms':>8} {'p99 ms':>8} {'timeouts':>8} {'model Gb/s':>10} {'model/lab':>9}"
            )
            for p in doc["incast"]:
                model = (
                    simulate("tcp", fabric, p["senders"], 256 * 1024, max(400, args.rounds)).goodput_bps / 1e9
                )
                print(
                    f"{p['senders']:>7} {p['goodput_gbps']:>12.4f} {p['goodput_gbps'] / CEILING_GBPS:>10.3f} "
                    f"{p['round_p50_ms']:>8.1f} {p['round_p99_ms']:>8.1f} {p['timeouts']:>8} {model:>10.4f} {model / p['goodput_gbps']:>9.3f}"
                )
    finally:
        fs("lab", "down", LAB)


if __name__ == "__main__":
    main()
