"""``fabricscope bench ...``: serve, tcp, udp, latency, connect, rdma.

Other modules add commands with ``from fabricscope.cli.bench import bench_app`` and
``@bench_app.command("name")``. Every client command prints one result (``--json``: the
``fabricscope.bench/v1`` document), stores it in the history unless ``--no-store`` and exits
0 (ok, or skipped without a threshold), 1 (a threshold failed) or 2 (the run could not complete,
stored as failed; or a threshold was given and the run tested nothing it is about: a skipped
run, or UDP that did not offer the load asked for. A run that tested nothing is never a pass).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import typer

from fabricscope.cli.common import JSON_OPTION, die, read_option, store_and_print, validated
from fabricscope.cli.launching import STORE_OPTION
from fabricscope.cli.main import command_group
from fabricscope.cli.options import option_group
from fabricscope.units import parse_sizes

bench_app = command_group(
    "bench",
    "Measure TCP, UDP, latency, connection setup and RDMA between two hosts; results go to the history.",
)

PEER_HELP = "The host running `fabricscope bench serve`: HOST, HOST:PORT or [IPv6]:PORT (default port 5211)."
TOKEN_HELP = "Token the server requires (servers off loopback always require one)."
TOKEN_ENV = "FABRICSCOPE_BENCH_TOKEN"
TIMEOUT_HELP = "Seconds without progress after which the peer counts as dead."
PROGRESS_MIN_S = 2.0


def _peer(value: str) -> str:
    """``--peer`` checked where it is parsed, for every command that takes it."""
    from fabricscope.bench.sockets.client import Peer

    read_option("--peer", Peer.parse, value)
    return value


# Options every client command shares, declared once (a typer OptionInfo is only read, never
# changed, so one declaration serves every command that names it as a default).
PEER_OPTION = typer.Option(..., "--peer", callback=_peer, help=PEER_HELP, rich_help_panel="Connection")
TOKEN_OPTION = typer.Option(None, "--token", envvar=TOKEN_ENV, help=TOKEN_HELP, rich_help_panel="Connection")
TIMEOUT_OPTION = typer.Option(
    10.0, "--timeout", min=0.5, max=300, help=TIMEOUT_HELP, rich_help_panel="Connection"
)
INTERVAL_OPTION = typer.Option(1.0, "--interval", min=0.05, max=60, help="Seconds per reported interval.")


@dataclass(frozen=True)
class Client:
    """What the socket clients (tcp, udp, latency, connect) take after their own options."""

    timeout: float
    token: str | None
    json_out: bool
    store: bool


client_options = option_group(
    Client, timeout=TIMEOUT_OPTION, token=TOKEN_OPTION, json_out=JSON_OPTION, store=STORE_OPTION
)


def duration_option(default: float, help: str = "Seconds to send.") -> typer.models.OptionInfo:
    return typer.Option(default, "--duration", "-t", min=0.1, max=3600, help=help)


def threshold_option(flag: str, what: str, maximum: float = 1e6) -> typer.models.OptionInfo:
    """A pass/fail threshold: exit 1 when it fails, 2 when the run tested nothing (see module doc)."""
    return typer.Option(
        None, flag, min=0, max=maximum, help=f"Exit 1 when {what}.", rich_help_panel="Verdict"
    )


# ----- shared plumbing ------------------------------------------------------------------------


@contextmanager
def _progress(label: str, expected_s: float, quiet: bool) -> Iterator[Callable[[float], None] | None]:
    """A rich progress bar on stderr for runs longer than two seconds (only on a terminal)."""
    if quiet or expected_s <= PROGRESS_MIN_S or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from fabricscope.report.terminal import console

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=expected_s)

        def tick(elapsed_s: float) -> None:
            bar.update(task, completed=min(elapsed_s, expected_s))

        yield tick


def _with_ticks(func: Callable[[], object], tick: Callable[[float], None] | None):
    """Run a blocking call (perftest) while the progress bar keeps moving."""
    if tick is None:
        return func()
    import threading
    import time

    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = func()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    worker.start()
    while worker.is_alive():
        tick(time.monotonic() - started)
        worker.join(0.2)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]


def _given(*thresholds: Any) -> list[Any]:
    """The thresholds the user set (an option left out has the limit None)."""
    return [t for t in thresholds if t.limit is not None]


def _finish(result, *, json_out: bool, store: bool, thresholds: list) -> None:
    """Judge thresholds, store, print (report.bench.print_live), and exit with the documented
    status; a run that tested nothing a threshold is about ends with one line and exit 2."""
    from fabricscope.bench.results.schema import Status
    from fabricscope.bench.results.thresholds import apply_thresholds, untested_reason

    failures = apply_thresholds(result, thresholds)
    untested = untested_reason(result, thresholds)
    store_and_print(result, store=store, json_out=json_out)
    if result.status == Status.FAILED:
        die(result.reason or "run failed")
    if untested:
        die(untested)
    if failures:
        typer.echo("fabricscope: threshold failed: " + "; ".join(failures), err=True)
        raise typer.Exit(1)
    raise typer.Exit(0)


def _choice(value: str, table: dict[str, tuple[str, ...]], option: str) -> tuple[str, ...]:
    """A keyword option's value as what it stands for; one line and exit 2 for anything else."""
    if value not in table:
        die(f"{option} takes {', '.join(table)}")
    return table[value]


def _run_client(
    label: str,
    duration: float,
    run: Callable[..., Any],
    params: Any,
    client: Client,
    thresholds: tuple[Any, ...],
) -> None:
    """Every two-host client ends the same way: run with a progress bar, judge, store, print, exit."""
    with _progress(label, duration, False) as tick:
        result = run(params, token=client.token, tick=tick)
    _finish(result, json_out=client.json_out, store=client.store, thresholds=_given(*thresholds))


# ----- serve ----------------------------------------------------------------------------------
@bench_app.command("serve")
def serve(
    bind: str = typer.Option(
        "127.0.0.1", "--bind", help="Address to listen on (0.0.0.0 or :: for all; needs --token)."
    ),
    port: int = typer.Option(
        5211, "--port", min=0, max=65535, help="Control port (data ports are picked per test)."
    ),
    token: str = typer.Option(
        None,
        "--token",
        envvar=TOKEN_ENV,
        help="Token clients must present (required off loopback; 16+ characters, 64+ bits: `openssl rand -hex 16`).",
    ),
    max_duration: float = typer.Option(
        60.0, "--max-duration", min=0.1, max=3600, help="Longest test a client may ask for, seconds."
    ),
    max_tests: int = typer.Option(
        2, "--max-tests", min=1, max=64, help="Tests run at the same time at most."
    ),
    max_streams: int = typer.Option(
        32, "--max-streams", min=1, max=128, help="Streams (worker processes) per test at most."
    ),
    data_ports: str = typer.Option(
        None, "--data-ports", help="Port range LOW-HIGH for data connections (default: any free port)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Log only problems."),
) -> None:
    """Serve bench tests (like iperf3 -s) until interrupted; validates and caps every request."""
    from fabricscope.bench.sockets.protocol import ServerLimits
    from fabricscope.bench.sockets.server import BenchServer

    ports = None
    if data_ports:
        from fabricscope.units import parse_port

        low, sep, high = data_ports.partition("-")
        try:
            ports = (parse_port(low), parse_port(high))
        except ValueError:
            ports = (0, 0)
        if not sep or not ports[0] or ports[0] > ports[1]:
            die("--data-ports takes LOW-HIGH with 1 <= LOW <= HIGH <= 65535, e.g. 5300-5399")
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s fabricscope bench serve: %(message)s",
        stream=sys.stderr,
    )
    limits = ServerLimits(max_duration_s=max_duration, max_tests=max_tests, max_streams=max_streams)
    server = BenchServer(bind=bind, port=port, token=token, limits=limits, data_ports=ports)
    server.start()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: server.stop())
    try:
        typer.echo(f"fabricscope bench serve: listening on {bind} port {server.port}", err=True)
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
    typer.echo(
        f"fabricscope bench serve: stopped ({server.stats.tests_ok} tests ok, {server.stats.tests_failed} failed, {server.stats.rejected} requests rejected)",
        err=True,
    )


# ----- clients --------------------------------------------------------------------------------
@bench_app.command("tcp")
@client_options
def tcp(
    peer: str = PEER_OPTION,
    streams: int = typer.Option(
        1, "--streams", "-P", min=1, max=128, help="Parallel streams (one process each, each end)."
    ),
    duration: float = duration_option(10.0),
    direction: str = typer.Option(
        "send", "--direction", help="send (to the peer), recv (from the peer) or bidir."
    ),
    msg_bytes: int = typer.Option(
        128 * 1024, "--msg-bytes", "-l", min=1, max=16 * 1024 * 1024, help="Bytes per send() call."
    ),
    window: int = typer.Option(
        None,
        "--window",
        min=4096,
        max=1 << 30,
        help="SO_SNDBUF/SO_RCVBUF bytes (default: kernel autotuning).",
    ),
    interval: float = INTERVAL_OPTION,
    min_gbps: float = threshold_option("--min-gbps", "total throughput is below this (Gb/s)"),
    *,
    client: Client,
) -> None:
    """TCP throughput: N streams, either direction or both, with retransmits and CPU of both ends."""
    from fabricscope.bench.results.thresholds import Threshold
    from fabricscope.bench.sockets.tcp import TcpParams, run_tcp

    _choice(direction, {"send": (), "recv": (), "bidir": ()}, "--direction")
    params = validated(
        TcpParams, peer=peer, streams=streams, duration_s=duration, msg_bytes=msg_bytes, direction=direction,
        window_bytes=window, interval_s=interval, timeout_s=client.timeout,
    )  # fmt: skip
    _run_client(f"tcp {direction} x{streams}", duration, run_tcp, params, client,
                (Threshold("throughput_gbps", ">=", min_gbps, "--min-gbps"),))  # fmt: skip


@bench_app.command("udp")
@client_options
def udp(
    peer: str = PEER_OPTION,
    rate: str = typer.Option(
        "1G", "--rate", "-b", help="Offered rate in bit/s over all streams: 500M, 5G, ... or 'max'."
    ),
    streams: int = typer.Option(
        1, "--streams", "-P", min=1, max=128, help="Parallel senders (one process each)."
    ),
    duration: float = duration_option(10.0),
    size: int = typer.Option(
        1472, "--size", "-l", min=28, max=65507, help="Datagram payload bytes (1472 fits a 1500 MTU)."
    ),
    interval: float = INTERVAL_OPTION,
    min_gbps: float = threshold_option("--min-gbps", "the delivered rate is below this (Gb/s)"),
    max_loss: float = threshold_option(
        "--max-loss-pct",
        "loss exceeds this percentage (exit 2 when the sender did not reach 90% of --rate)",
        100,
    ),
    *,
    client: Client,
) -> None:
    """UDP at an offered rate: delivered Gb/s, loss %, out-of-order datagrams, jitter."""
    from fabricscope.bench.results.thresholds import Threshold
    from fabricscope.bench.sockets.udp import UdpParams, offered_load_shortfall, parse_offered_rate, run_udp

    rate_bps = read_option("--rate", parse_offered_rate, rate)
    params = validated(
        UdpParams, peer=peer, streams=streams, duration_s=duration, size_bytes=size, rate_bps=rate_bps,
        interval_s=interval, timeout_s=client.timeout,
    )  # fmt: skip
    thresholds = (
        Threshold("throughput_gbps", ">=", min_gbps, "--min-gbps"),
        Threshold("loss_pct", "<=", max_loss, "--max-loss-pct", needs=offered_load_shortfall),
    )
    _run_client(f"udp x{streams}", duration, run_udp, params, client, thresholds)


@bench_app.command("latency")
@client_options
def latency(
    peer: str = PEER_OPTION,
    proto: str = typer.Option("both", "--proto", help="tcp, udp or both."),
    sizes: str = typer.Option(
        "64,1K,16K,64K,1M", "--sizes", help="Message sizes: a list 64,1K,1M or a sweep 64:1M (K/M = KiB/MiB)."
    ),
    duration: float = duration_option(10.0, "Seconds for all sizes and protocols together."),
    max_p99: float = threshold_option(
        "--max-p99-us", "the first size's p99 round trip exceeds this (us)", 1e9
    ),
    *,
    client: Client,
) -> None:
    """Request/response round trips over TCP and UDP: p50, p99, p99.9 and max per message size."""
    from fabricscope.bench.results.thresholds import Threshold
    from fabricscope.bench.sockets.latency import MAX_SIZE, LatencyParams, run_latency

    protos = _choice(proto, {"tcp": ("tcp",), "udp": ("udp",), "both": ("tcp", "udp")}, "--proto")
    size_list = tuple(read_option("--sizes", parse_sizes, sizes, maximum=MAX_SIZE))
    params = validated(
        LatencyParams,
        peer=peer,
        protos=protos,
        sizes=size_list,
        duration_s=duration,
        timeout_s=client.timeout,
    )
    _run_client(f"latency {proto}", duration, run_latency, params, client,
                (Threshold("rtt_p99_us", "<=", max_p99, "--max-p99-us"),))  # fmt: skip


@bench_app.command("connect")
@client_options
def connect(
    peer: str = PEER_OPTION,
    mode: str = typer.Option("both", "--mode", help="per-request, pooled or both."),
    concurrency: int = typer.Option(
        1, "--concurrency", "-c", min=1, max=64, help="Clients in parallel (one process each)."
    ),
    request_bytes: int = typer.Option(64, "--request-bytes", min=12, max=1024 * 1024, help="Request size."),
    response_bytes: int = typer.Option(64, "--response-bytes", min=1, max=1024 * 1024, help="Response size."),
    duration: float = duration_option(6.0, "Seconds for both modes together."),
    min_rate: float = threshold_option(
        "--min-connect-per-s", "per-request connections/s fall below this", 1e9
    ),
    *,
    client: Client,
) -> None:
    """Connection setup rate and latency (connect, first byte, close) versus one pooled connection."""
    from fabricscope.bench.results.thresholds import Threshold
    from fabricscope.bench.sockets.connect import ConnectParams, run_connect

    modes = _choice(
        mode,
        {"per-request": ("per_request",), "pooled": ("pooled",), "both": ("per_request", "pooled")},
        "--mode",
    )
    params = validated(
        ConnectParams, peer=peer, modes=modes, concurrency=concurrency, request_bytes=request_bytes,
        response_bytes=response_bytes, duration_s=duration, timeout_s=client.timeout,
    )  # fmt: skip
    _run_client(f"connect {mode}", duration, run_connect, params, client,
                (Threshold("connect_per_s", ">=", min_rate, "--min-connect-per-s"),))  # fmt: skip


@bench_app.command("rdma")
def rdma(
    peer: str = typer.Option(
        None, "--peer", help="Host running the perftest server side (`bench rdma --listen`)."
    ),
    listen: bool = typer.Option(
        False, "--listen", help="Be the perftest server side and wait for one client."
    ),
    loopback: bool = typer.Option(
        False,
        "--loopback",
        help="ib_write_bw from each active HCA to itself on this node (with --use-cuda: through GPU memory).",
    ),
    test: str = typer.Option("write_bw", "--test", help="write_bw, read_bw, send_bw, write_lat or send_lat."),
    device: str = typer.Option(
        None,
        "--device",
        "-d",
        help="RDMA device (default: the port routing to the peer).",
        rich_help_panel="perftest",
    ),
    ib_port: int = typer.Option(
        None, "--ib-port", "-i", min=1, max=3, help="Port of the device.", rich_help_panel="perftest"
    ),
    gid_index: int = typer.Option(
        None,
        "--gid-index",
        "-x",
        min=0,
        max=1024,
        help="GID index (default: the RoCE v2 IPv4 GID).",
        rich_help_panel="perftest",
    ),
    size: int = typer.Option(
        None,
        "--size",
        "-s",
        min=1,
        max=8 * 1024 * 1024,
        help="Message size in bytes.",
        rich_help_panel="perftest",
    ),
    all_sizes: bool = typer.Option(
        False, "--all-sizes", "-a", help="Sweep sizes 2 B..8 MiB (perftest -a).", rich_help_panel="perftest"
    ),
    duration: int = typer.Option(
        None, "--duration", "-D", min=1, max=3600, help="Seconds per size (perftest -D)."
    ),
    iters: int = typer.Option(
        None,
        "--iters",
        "-n",
        min=5,
        max=100_000_000,
        help="Iterations per size (perftest -n).",
        rich_help_panel="perftest",
    ),
    qps: int = typer.Option(
        1, "--qps", "-q", min=1, max=16384, help="Queue pairs (bandwidth tests).", rich_help_panel="perftest"
    ),
    bidirectional: bool = typer.Option(
        False,
        "--bidirectional",
        "-b",
        help="Both directions at once (bandwidth tests).",
        rich_help_panel="perftest",
    ),
    use_cuda: bool = typer.Option(
        False,
        "--use-cuda",
        help="GPU memory buffers (GPUDirect RDMA); picks the GPU nearest the NIC.",
        rich_help_panel="perftest",
    ),
    gpu: int = typer.Option(
        None, "--gpu", min=0, max=1023, help="GPU index for --use-cuda.", rich_help_panel="perftest"
    ),
    perftest_port: int = typer.Option(
        18515,
        "--perftest-port",
        min=1024,
        max=65535,
        help="perftest's TCP port for its handshake.",
        rich_help_panel="perftest",
    ),
    wait: float = typer.Option(
        120.0, "--wait", min=1, max=3600, help="--listen: seconds to wait for the client."
    ),
    min_gbps: float = threshold_option("--min-gbps", "bandwidth is below this (Gb/s)"),
    max_lat: float = threshold_option("--max-lat-us", "typical latency exceeds this (us)", 1e9),
    json_out: bool = JSON_OPTION,
    store: bool = STORE_OPTION,
) -> None:
    """RDMA bandwidth/latency with perftest, device/port/GID picked from the inventory; skips without perftest."""
    from fabricscope.bench.rdma.loopback import run_loopback
    from fabricscope.bench.rdma.run import RdmaParams, run_rdma
    from fabricscope.bench.results.thresholds import Threshold

    if loopback and (peer is not None or listen):
        die("--loopback runs both sides on this node: leave out --peer and --listen")
    if not loopback and (peer is None) == (not listen):
        die("give --peer HOST (client), --listen (server) or --loopback, one of them")
    if loopback and test != "write_bw":
        die("--loopback runs write_bw (ib_write_bw); leave out --test")
    if test not in ("write_bw", "read_bw", "send_bw", "write_lat", "send_lat"):
        die("--test takes write_bw, read_bw, send_bw, write_lat or send_lat")
    params = validated(
        RdmaParams, test=test, peer=peer, device=device, ib_port=ib_port, gid_index=gid_index, size_bytes=size,
        all_sizes=all_sizes, duration_s=duration, iterations=iters, qps=qps, bidirectional=bidirectional,
        use_cuda=use_cuda or gpu is not None, gpu=gpu, perftest_port=perftest_port, wait_s=wait,
    )  # fmt: skip
    if listen and not json_out:
        typer.echo(
            f"fabricscope: waiting up to {wait:g} s for `bench rdma --peer` from the client side...", err=True
        )
    expected = float(duration or 5) * (30 if all_sizes else 1) + (wait if listen else 0)
    with _progress(f"rdma {test}", expected, False) as tick:
        result = _with_ticks(lambda: run_loopback(params) if loopback else run_rdma(params), tick)
    thresholds = _given(
        Threshold("throughput_gbps", ">=", min_gbps, "--min-gbps"),
        Threshold("lat_typical_us", "<=", max_lat, "--max-lat-us"),
    )
    _finish(result, json_out=json_out, store=store, thresholds=thresholds)
