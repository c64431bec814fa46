"""``bench collective``, ``bench matrix`` and ``bench import nccl-tests``: multi-rank benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from fabricscope.cli.bench import bench_app, threshold_option
from fabricscope.cli.common import (
    JSON_OPTION,
    die,
    end_rank,
    lldp_options,
    read_option,
    store_and_print,
    validated,
)
from fabricscope.cli.launching import (
    SINGLE_RANK_OPTION,
    STORE_OPTION,
    Ranks,
    absolute_item,
    deadline_option,
    output_args,
    ranks_options,
    refuse_one_rank,
)
from fabricscope.cli.launching import dist_env as _dist_env
from fabricscope.cli.launching import launch_ranks as _launch
from fabricscope.cli.main import command_group
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.launch import Flag, Flags, child_argv, toggle
from fabricscope.units import parse_sizes, size_token

import_app = command_group("import", "Read results of other tools into the history.", bench_app)


# How each CollectiveParams field reaches a launched rank (jobs/launch.py child_argv; the test
# tests/collective/test_launch_args.py holds every field to a round trip through these options).
COLLECTIVE_FLAGS: Flags = {
    "op": "--op",
    "sizes": Flag("--sizes", text=lambda sizes: ",".join(map(size_token, sizes))),
    "dtype": "--dtype",
    "warmup": "--warmup",
    "iters": "--iters",
    "backend": "--backend",
    "check": toggle("check"),
    "root": "--root",
    "timeout_s": "--timeout",
    "straggle_rank": "--straggle-rank",
    "straggle_s": Flag("--straggle-ms", text=lambda seconds: repr(seconds * 1000.0)),
}


def collective_params(
    op: str, sizes: str, dtype: str, warmup: int, iters: int, backend: str, check: bool, root: int, timeout: float,
    straggle_rank: int | None, straggle_ms: float,
):  # fmt: skip
    """The options of `bench collective` as its validated parameters (one line and exit 2 when they are not)."""
    from fabricscope.bench.collective import MAX_SIZE, CollectiveParams

    size_list = read_option("--sizes", parse_sizes, sizes, maximum=MAX_SIZE)
    return validated(
        CollectiveParams, op=op, sizes=size_list, dtype=dtype, warmup=warmup, iters=iters, check=check, root=root,
        timeout_s=timeout, backend=auto_backend() if backend == "auto" else backend, straggle_rank=straggle_rank,
        straggle_s=straggle_ms / 1000.0,
    )  # fmt: skip


@bench_app.command("collective")
@ranks_options
def collective(
    op: str = typer.Option(
        "all_reduce", "--op", help="all_reduce, all_gather, reduce_scatter, alltoall, broadcast or sendrecv."
    ),
    sizes: str = typer.Option(
        "1M:64M", "--sizes", help="MIN:MAX (doubling), MIN:MAX:FACTOR, or a list 1M,4M,64M."
    ),
    dtype: str = typer.Option(
        "float", "--dtype", help="float, half, bfloat16, double, int32, int64, uint8, int8."
    ),
    warmup: int = typer.Option(5, "--warmup", min=0, max=100_000, help="Warm-up iterations per size."),
    iters: int = typer.Option(20, "--iters", min=1, max=1_000_000, help="Timed iterations per size."),
    backend: str = typer.Option(
        "auto", "--backend", help="gloo (CPU), nccl (GPU) or auto (nccl when CUDA is there)."
    ),
    check: bool = typer.Option(
        True, "--check/--no-check", help="Verify every result buffer (nccl-tests #wrong)."
    ),
    root: int = typer.Option(0, "--root", min=0, max=1 << 20, help="Root rank of broadcast."),
    timeout: float = deadline_option(300.0, "joining and for each operation"),
    *,
    ranks: Ranks,
    single_rank: bool = SINGLE_RANK_OPTION,
    min_busbw: float = threshold_option(
        "--min-busbw", "the average busbw (GB/s) is below this (exit 2 when no size was measured)"
    ),
    straggle_rank: int = typer.Option(
        None,
        "--straggle-rank",
        min=0,
        max=1 << 20,
        help="Self-test: make this rank late by --straggle-ms each iteration.",
    ),
    straggle_ms: float = typer.Option(
        0.0, "--straggle-ms", min=0, max=10000, help="Self-test delay for --straggle-rank."
    ),
    json_out: bool = JSON_OPTION,
    store: bool = STORE_OPTION,
) -> None:
    """nccl-tests' algbw, busbw and #wrong over torch.distributed; per-rank times name a straggler."""
    from fabricscope.bench.collective import CollectiveError, run_worker, to_bench_result
    from fabricscope.bench.results.thresholds import Threshold, apply_thresholds, untested_reason
    from fabricscope.bench.results.verdict import exit_status

    params = collective_params(
        op, sizes, dtype, warmup, iters, backend, check, root, timeout, straggle_rank, straggle_ms
    )
    if ranks.launch:
        refuse_one_rank("bench collective", ranks.launch, None, single_rank)
        extra = output_args(json_out, store) + (
            ["--min-busbw", str(min_busbw)] if min_busbw is not None else []
        )
        args = child_argv(
            ["bench", "collective"],
            params,
            COLLECTIVE_FLAGS,
            [*extra, *(["--single-rank"] if single_rank else [])],
        )
        _launch(
            ranks.launch,
            args,
            timeout_s=timeout * (len(params.sizes) + 2) + 60,
            master_port=ranks.master_port,
        )
    run = _run_rank(
        run_worker,
        params,
        CollectiveError,
        ranks,
        json_out,
        ("bench collective", single_rank),
    )
    if run is None:  # not rank 0: rank 0 reports
        return
    result = to_bench_result(run)
    thresholds = (
        []
        if min_busbw is None
        else [Threshold("busbw_avg_GBps", ">=", min_busbw, "--min-busbw", needs=_measured)]
    )
    apply_thresholds(result, thresholds)
    untested = untested_reason(result, thresholds)
    store_and_print(result, store=store, json_out=json_out)
    if untested:
        end_rank(untested)
    raise typer.Exit(exit_status(result))  # the verdict the report shows for it (bench/results/verdict.py)


def _measured(result: Any) -> str | None:
    """``--min-busbw`` judges the sizes measured; none measured is no verdict (exit 2)."""
    return None if result.entries else "no message size was measured (all were skipped)"


def auto_backend() -> str:
    try:
        import torch

        return "nccl" if torch.cuda.is_available() and torch.distributed.is_nccl_available() else "gloo"
    except ImportError:
        return "gloo"


MATRIX_LLDP_SOCKET, MATRIX_SWITCH_LLDP = lldp_options(
    "With --topology discover: ", rich_help_panel="Topology"
)


@bench_app.command("matrix")
@ranks_options
def matrix(
    duration: float = typer.Option(2.0, "--duration", min=0.1, max=600, help="Seconds per flow."),
    warmup: float = typer.Option(
        0.25, "--warmup", min=0, max=60, help="Seconds at the start of each flow not counted."
    ),
    retest: bool = typer.Option(
        True, "--retest/--no-retest", help="Retest suspects against known-good hosts before reporting."
    ),
    margin: float = typer.Option(
        0.2,
        "--margin",
        min=0.01,
        max=0.99,
        help="A pair is low below (1 - MARGIN) x the median (or 3 robust sigmas).",
    ),
    bind: str = typer.Option(
        None, "--bind", help="Address to receive on (default: the one that reaches rank 0)."
    ),
    timeout: float = deadline_option(120.0, "every wait on a peer"),
    *,
    ranks: Ranks,
    single_rank: bool = SINGLE_RANK_OPTION,
    svg: Path = typer.Option(None, "--svg", help="Also write the heat map as an SVG file (rank 0)."),
    rdma: bool = typer.Option(
        True,
        "--rdma/--no-rdma",
        help="Also measure RDMA with perftest where every host has an RDMA device and perftest (else the result says why not).",
        rich_help_panel="RDMA",
    ),
    rdma_test: str = typer.Option(
        "write_bw",
        "--rdma-test",
        help="perftest bandwidth test: write_bw, read_bw or send_bw.",
        rich_help_panel="RDMA",
    ),
    rdma_device: str = typer.Option(
        None,
        "--rdma-device",
        help="RDMA device on every host (default: the port on the interface that reaches rank 0, else the first active port).",
        rich_help_panel="RDMA",
    ),
    rdma_port: int = typer.Option(
        18515,
        "--rdma-port",
        min=1024,
        max=60000,
        help="perftest handshake port; host i listens on PORT + i.",
        rich_help_panel="RDMA",
    ),
    root: str = typer.Option(
        None,
        "--root",
        help="Read the RDMA inventory (devices, ports, GIDs) from this snapshot or mounted host filesystem instead of the live machine.",
    ),
    topology: str = typer.Option(
        None,
        "--topology",
        help="Localize on the fabric: FILE (`topology discover` output or the sim's YAML), lab:NAME, or discover (every rank reads its LLDP neighbours). Names the bad switch cable or switch, not only the bad host.",
        rich_help_panel="Topology",
    ),
    lldp_socket: str = MATRIX_LLDP_SOCKET,
    switch_lldp: list[str] = MATRIX_SWITCH_LLDP,
    json_out: bool = JSON_OPTION,
    store: bool = STORE_OPTION,
) -> None:
    """Pairwise TCP (and RDMA, with perftest where present) bandwidth between all hosts in rounds of
    disjoint pairs; names the bad host or link (with --topology: the bad switch cable or switch).

    Exit 1 when a suspect is confirmed, 2 when a pair could not be measured.
    """
    from fabricscope.bench.matrix import MatrixError, run_worker, to_bench_result
    from fabricscope.bench.results.verdict import exit_status

    launch = ranks.launch
    if launch and topology == "discover" and launch.startswith("lab:"):
        from fabricscope.lab import lldp as lab_lldp

        lab = launch[4:].split(":")[0]  # the lab's own lldpd sockets and switch tables
        lldp_socket = lldp_socket or lab_lldp.socket_template(lab)
        switch_lldp = switch_lldp or [f"lab:{lab}"]
    params = matrix_params(duration, warmup, retest, margin, bind, timeout, rdma, rdma_test, rdma_device, rdma_port, root,
                           topology, lldp_socket, switch_lldp)  # fmt: skip
    if launch:
        refuse_one_rank("bench matrix", launch, None, single_rank)
        extra = output_args(json_out, store) + (["--svg", str(svg.resolve())] if svg else [])
        extra += ["--single-rank"] if single_rank else []
        args = child_argv(["bench", "matrix"], params, MATRIX_FLAGS, extra)
        _launch(launch, args, timeout_s=timeout * 3 + 600, master_port=ranks.master_port)
    run = _run_rank(run_worker, params, MatrixError, ranks, json_out, ("bench matrix", single_rank))
    if run is None:
        return  # not rank 0: rank 0 reports
    result = to_bench_result(run)
    if svg:
        _write_heatmap(svg, result)
    store_and_print(result, store=store, json_out=json_out)
    raise typer.Exit(exit_status(result))  # 2: a pair not measured, 1: a suspect; the report shows the same


# How each MatrixParams field reaches a launched rank (see COLLECTIVE_FLAGS).
MATRIX_FLAGS: Flags = {
    "duration_s": "--duration",
    "warmup_s": "--warmup",
    "retest": toggle("retest"),
    "retest_peers": None,  # no option sets it: every rank keeps the default
    "rel_margin": "--margin",
    "retx_floor_pct": None,  # no option sets it: every rank keeps the default
    "timeout_s": "--timeout",
    "bind": None,  # one host's address: each launched rank finds its own towards rank 0
    "rdma": toggle("rdma"),
    "rdma_test": "--rdma-test",
    "rdma_device": "--rdma-device",
    "rdma_port": "--rdma-port",
    "root": Flag("--root", text=lambda root: str(Path(root).resolve())),
    "topology": "--topology",  # already absolute (matrix_params)
    "lldp_socket": "--lldp-socket",
    "switch_lldp": Flag("--switch-lldp", repeat=True),
}


def matrix_params(
    duration: float, warmup: float, retest: bool, margin: float, bind: str | None, timeout: float, rdma: bool,
    rdma_test: str, rdma_device: str | None, rdma_port: int, root: str | None, topology: str | None = None,
    lldp_socket: str | None = None, switch_lldp: Sequence[str] = (),
):  # fmt: skip
    """The options of `bench matrix` as its validated parameters, checked before any rank starts."""
    from fabricscope.bench.matrix import MatrixParams

    topology = _matrix_topology(topology)
    params = validated(MatrixParams, duration_s=duration, warmup_s=warmup, retest=retest, rel_margin=margin,
                       timeout_s=timeout, bind=bind, rdma=rdma, rdma_test=rdma_test, rdma_device=rdma_device,
                       rdma_port=rdma_port, root=root, topology=topology, lldp_socket=lldp_socket,
                       switch_lldp=[absolute_item(i) for i in switch_lldp])  # fmt: skip
    if root:
        from fabricscope.host import Root, RootError

        try:
            Root.at(root)
        except RootError as exc:
            die(str(exc))
    return params


def _matrix_topology(spec: str | None) -> str | None:
    """``--topology``: a file made absolute and read once here (ranks may start elsewhere), a
    lab that must exist, or ``discover``; one line and exit 2 when it cannot be used."""
    if spec is None or spec == "discover":
        return spec
    from fabricscope.bench.matrix.localize import load_document

    if not spec.startswith("lab:"):
        spec = str(Path(spec).resolve())
    try:
        load_document(spec)
    except FabricscopeError as exc:
        die(f"--topology {spec}: {exc}", exc.exit_code)
    return spec


def _write_heatmap(path: Path, result: Any) -> None:
    from fabricscope.report.plots import heatmap_svg

    reference = result.thresholds_gbps.fleet_median if result.thresholds_gbps else None
    try:
        path.write_text(heatmap_svg(result.hosts, result.matrix_gbps, reference_gbps=reference))
    except OSError as exc:
        typer.echo(f"fabricscope: warning: cannot write {path}: {exc.strerror or exc}", err=True)


def _run_rank(
    run_worker: Any,
    params: Any,
    error: type[Exception],
    ranks: Ranks,
    json_out: bool,
    single: tuple[str, bool],
) -> Any:
    """Join the job and run this rank; rank 0 gets the run, the others None. A failure ends the
    process (exit 2); so does a job of one rank unless ``--single-rank`` (``single``: the command, the flag)."""
    from fabricscope.report.progress import collective_row_sink, progress_sink

    env = _dist_env(ranks.master_addr, ranks.master_port)
    refuse_one_rank(single[0], None, env.world_size, single[1])
    # Rank 0 says how far it is on a terminal and under every launcher (report/progress.py); a
    # collective's rows come as each size completes, as nccl-tests prints them.
    with progress_sink(json_out or env.rank != 0) as show:
        sink = (
            collective_row_sink(show, params.model_dump(mode="json"))
            if single[0] == "bench collective"
            else show
        )
        try:
            return run_worker(params, env, progress=sink)
        except error as exc:
            end_rank(str(exc))  # torch's background threads must not keep a failed rank alive


@import_app.command("nccl-tests")
def import_nccl_tests(
    file: Path = typer.Argument(
        ..., help="all_reduce_perf (or any *_perf) output: text, or nccl-tests' JSON file."
    ),
    op: str = typer.Option(None, "--op", help="Operation when the file does not say (e.g. all_reduce)."),
    ranks: int = typer.Option(
        None, "--ranks", min=1, max=1 << 20, help="Number of ranks when the file does not list them."
    ),
    json_out: bool = JSON_OPTION,
    store: bool = STORE_OPTION,
) -> None:
    """Read nccl-tests output into the fabricscope.bench/v1 schema and the history."""
    from fabricscope.bench.collective.nccl_tests import NcclTestsError, parse_file, to_bench_result

    try:
        parsed = parse_file(file, op=op, ranks=ranks)
    except NcclTestsError as exc:
        die(str(exc))
    try:
        result = to_bench_result(parsed, source=str(file))
    except NcclTestsError as exc:
        die(str(exc))
    store_and_print(result, store=store, json_out=json_out)
