"""``bench incast`` (measure N-to-1 fan-in) and ``sim incast`` (the same curve from the transport models)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from fabricscope.cli.bench import bench_app
from fabricscope.cli.common import JSON_OPTION, die, print_json, read_option, store_and_print, validated
from fabricscope.cli.launching import (
    STORE_OPTION,
    Ranks,
    dist_env,
    launch_ranks,
    output_args,
    ranks_options,
)
from fabricscope.cli.sim import need_numpy, sim_app
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.launch import Flag, Flags, child_argv
from fabricscope.units import parse_rate, parse_size, size_token

if TYPE_CHECKING:
    from fabricscope.bench.incast import IncastParams

# The measured and the modelled incast run the same experiment: one --size declaration serves both.
SIZE_OPTION = typer.Option(
    "256KiB", "--size", help="Response size each sender sends per round, e.g. 64KiB, 1MiB."
)


def _counts(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        die(f"--senders {text!r}: write sender counts, e.g. 1,2,4,8")
    if not counts or any(not 1 <= n <= 4096 for n in counts):
        die(f"--senders {text!r}: each count must be 1..4096")
    return sorted(set(counts))


# How each IncastParams field reaches a launched rank (jobs/launch.child_argv; the round trip is
# held by tests/collective/test_launch_args.py). No --senders is an empty list: "" reads back as one.
INCAST_FLAGS: Flags = {
    "senders": Flag("--senders", text=lambda counts: ",".join(map(str, counts))),
    "size_bytes": Flag("--size", text=size_token),
    "rounds": "--rounds",
    "warmup": "--warmup",
    "congestion": "--congestion",
    "round_timeout_s": "--round-timeout",
    "join_timeout_s": "--timeout",
}


def incast_params(
    senders: str | None,
    size: str,
    rounds: int,
    warmup: int,
    congestion: str | None,
    round_timeout: float,
    timeout: float,
) -> IncastParams:
    """The options of `bench incast` as its validated parameters (one line and exit 2 when they are not)."""
    from fabricscope.bench.incast import IncastParams

    size_bytes = read_option("--size", parse_size, size)
    return validated(IncastParams, senders=_counts(senders), size_bytes=size_bytes, rounds=rounds, warmup=warmup,
                     congestion=congestion, round_timeout_s=round_timeout, join_timeout_s=timeout)  # fmt: skip


@bench_app.command("incast")
@ranks_options
def bench_incast(
    senders: str = typer.Option(
        None, "--senders", help="Sender counts to measure, e.g. 1,2,4,8 (default: 1, 2, 4 ... every sender)."
    ),
    size: str = SIZE_OPTION,
    rounds: int = typer.Option(50, "--rounds", min=1, max=100_000, help="Timed rounds per sender count."),
    warmup: int = typer.Option(
        2, "--warmup", min=0, max=1000, help="Untimed rounds before each sender count."
    ),
    congestion: str = typer.Option(
        None,
        "--congestion",
        help="TCP congestion control of the senders (cubic, reno, bbr...; default: the host's).",
    ),
    round_timeout: float = typer.Option(
        10.0, "--round-timeout", min=0.01, max=600, help="Seconds a round may take before the run fails."
    ),
    timeout: float = typer.Option(60.0, "--timeout", min=1, max=3600, help="Seconds for every rank to join."),
    *,
    ranks: Ranks,
    json_out: bool = JSON_OPTION,
    store: bool = STORE_OPTION,
) -> None:
    """N senders answer rank 0 (the receiver) at once, round after round: goodput and round completion time as N
    grows, with the retransmits and timeouts behind them (TCP incast collapse)."""
    from fabricscope.bench.incast import IncastError, run_receiver, run_sender

    params = incast_params(senders, size, rounds, warmup, congestion, round_timeout, timeout)
    if ranks.launch:
        args = child_argv(["bench", "incast"], params, INCAST_FLAGS, output_args(json_out, store))
        budget = timeout + (rounds + warmup + 2) * round_timeout * max(1, len(params.senders) or 8) + 60
        launch_ranks(ranks.launch, args, timeout_s=budget, master_port=ranks.master_port)
    env = dist_env(ranks.master_addr, ranks.master_port)
    try:
        if env.rank != 0:
            run_sender(env, params)
            return
        result = _receive(env, params, json_out, run_receiver)
    except IncastError as exc:
        die(str(exc))
    store_and_print(result, store=store, json_out=json_out)


def _receive(env, params, json_out: bool, run_receiver):  # type: ignore[no-untyped-def]
    """Rank 0's run, saying how far it is (report/progress.py): every round on a terminal, the first
    and last round of each sender count as plain lines under a launcher or in a log."""
    from fabricscope.report.progress import progress_sink

    every = sys.stderr.isatty()
    with progress_sink(json_out) as show:

        def step(count: int, done: int) -> None:
            if show and (every or done in (1, params.rounds)):
                show(f"incast: {count} senders, round {done} of {params.rounds}")

        return run_receiver(env, params, progress=step if show else None)


@sim_app.command("incast")
def sim_incast(
    transport: str = typer.Option(
        "tcp,roce-pfc,roce-ecn", "--transport", help="Comma-separated: tcp, roce-pfc, roce-ecn."
    ),
    senders: str = typer.Option("1,2,4,8,16,32", "--senders", help="Sender counts, e.g. 1,2,4,8."),
    size: str = SIZE_OPTION,
    link_rate: str = typer.Option(
        "100gbit", "--link-rate", help="Every host's link rate (bit/s), e.g. 100gbit, 200mbit."
    ),
    queue: str = typer.Option(
        "1MiB", "--queue", help="Queue of the switch port towards the receiver, in bytes."
    ),
    mtu: int = typer.Option(1500, "--mtu", min=576, max=9216, help="MTU in bytes."),
    rtt_us: float = typer.Option(
        10.0, "--rtt-us", min=0.1, max=1e6, help="Base round-trip time without queueing, us."
    ),
    sender_burst: str = typer.Option(
        "0",
        "--sender-burst",
        help="Bytes a sender's NIC may release back to back (0: paced at line rate; a lab host: its tc tbf bucket).",
    ),
    port_gso_frames: int = typer.Option(
        1,
        "--port-gso-frames",
        min=1,
        max=45,
        help="Largest GSO packet, in frames, the receiver's port queues or drops whole (1: a physical switch; a lab port: see docs/sim.md).",
    ),
    rounds: int = typer.Option(50, "--rounds", min=1, max=10_000, help="Rounds per sender count (TCP)."),
    seed: int = typer.Option(1, "--seed", min=0, max=2**32 - 1, help="Seed of the request jitter (TCP)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Incast goodput and round completion time as N grows: TCP with its minimum RTO and a
    shallow queue, RoCE with PFC, RoCE with ECN/DCQCN."""
    need_numpy()
    from fabricscope.sim.incast import TRANSPORTS, IncastFabric, simulate

    transports = [t.strip() for t in transport.split(",") if t.strip()]
    bad = [t for t in transports if t not in TRANSPORTS]
    if bad or not transports:
        die(f"--transport {transport!r}: use {', '.join(TRANSPORTS)}")
    try:
        fabric = IncastFabric(
            link_bps=parse_rate(link_rate),
            queue_bytes=parse_size(queue),
            mtu=mtu,
            base_rtt_s=rtt_us * 1e-6,
            sender_bucket_bytes=parse_size(sender_burst) if sender_burst.strip() != "0" else 0,
            switch_gso_frames=port_gso_frames,
        )
        size_bytes = parse_size(size)
    except FabricscopeError as exc:
        die(str(exc))
    if size_bytes > 1 << 30:
        die("--size: at most 1 GiB per response")
    counts = _counts(senders)
    if max(counts) > 1024:
        die("--senders: the model takes at most 1024 senders")
    from fabricscope.report.progress import progress_sink

    rows = []
    with progress_sink(json_out) as show:  # the model takes tens of seconds at large sender counts
        for k, (name, count) in enumerate((n, c) for n in transports for c in counts):
            if show:
                show(f"sim incast {k + 1}/{len(transports) * len(counts)}: {name}, {count} senders")
            point = simulate(name, fabric, count, size_bytes, rounds, seed=seed)
            rows.append({
                "transport": name, "senders": count, "goodput_gbps": point.goodput_bps / 1e9,
                "round_p50_ms": point.percentile_s(50) * 1e3, "round_p99_ms": point.percentile_s(99) * 1e3,
                "round_max_ms": max(point.round_times_s) * 1e3, "timeouts": point.timeouts,
                "retransmits": point.retransmits, "drops": point.drops,
            })  # fmt: skip
    doc = {
        "schema": "fabricscope.sim_incast/v1",
        "fabric": {
            "link_bps": fabric.link_bps,
            "queue_bytes": fabric.queue_bytes,
            "mtu": fabric.mtu,
            "base_rtt_s": fabric.base_rtt_s,
            "sender_bucket_bytes": fabric.sender_bucket_bytes,
            "switch_gso_frames": fabric.switch_gso_frames,
        },
        "size_bytes": size_bytes,
        "rounds": rounds,
        "points": rows,
    }
    if json_out:
        print_json(doc)
        return
    from fabricscope.report.incast import sim_incast_text

    sys.stdout.write(sim_incast_text(doc))
