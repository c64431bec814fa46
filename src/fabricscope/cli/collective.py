"""``bench collective``, ``bench matrix`` and ``bench import nccl-tests``: multi-rank benchmarks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer

from fabricscope.bench.launch import DistEnv, LaunchError, detect, lab_specs, local_specs, parse_launch
from fabricscope.cli.bench import bench_app
from fabricscope.cli.common import JSON_HELP, die, print_json
from fabricscope.errors import FabricscopeError
from fabricscope.units import parse_sizes, size_token

LAUNCH_HELP = (
    "Start the job here instead of joining one: local:N (N processes on this machine) or "
    "lab:NAME[:h1,h5,...] (one rank per lab host, in this order). Without it, the job is read from "
    "torchrun, srun or mpirun variables."
)

import_app = typer.Typer(name="import", help="Read results of other tools into the history.", no_args_is_help=True)
bench_app.add_typer(import_app, name="import")


def _store(result) -> int | None:
    """Save to the history; a store problem is reported, never loses the printed result."""
    try:
        from fabricscope.store import Store

        with Store.open() as store:
            return store.save(result)
    except FabricscopeError as exc:
        typer.echo(f"fabricscope: warning: result not stored: {exc}", err=True)
    except Exception as exc:  # sqlite/OS errors not wrapped by the store
        typer.echo(f"fabricscope: warning: result not stored: {type(exc).__name__}: {exc}", err=True)
    return None


def _launch(launch: str, child_args: list[str], timeout_s: float, master_port: int | None) -> None:
    """Start every rank (each runs this same command without --launch) and exit with the worst status."""
    from fabricscope.lab.procgroup import run_group

    try:
        spec = parse_launch(launch)
        specs = local_specs(spec.count or 1, child_args, port=master_port) if spec.kind == "local" else lab_specs(spec, child_args, port=master_port)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    try:
        result = run_group(specs, timeout_s=timeout_s, grace_s=min(30.0, max(5.0, timeout_s / 10)))
    except RuntimeError as exc:
        die(str(exc))
    if result.timed_out:
        typer.echo(f"fabricscope: error: the job did not finish within {timeout_s:g} s; all ranks ended", err=True)
        raise typer.Exit(2)
    failed = {k: v for k, v in result.codes.items() if v not in (0, 1)}  # 1 = a verdict, reported by rank 0
    if failed:
        first = result.first_failure if result.first_failure in failed else next(iter(failed))
        code = result.codes[first]
        how = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        typer.echo(f"fabricscope: error: {len(failed)} of {len(specs)} ranks failed (first: {first}, {how})", err=True)
        raise typer.Exit(2)  # the run could not complete
    raise typer.Exit(result.worst)


def _dist_env(master_addr: str | None, master_port: int | None) -> DistEnv:
    try:
        return detect(os.environ, master_addr=master_addr, master_port=master_port)
    except LaunchError as exc:
        die(str(exc))


@bench_app.command("collective")
def collective(
    op: str = typer.Option("all_reduce", "--op", help="all_reduce, all_gather, reduce_scatter, alltoall, broadcast or sendrecv."),
    sizes: str = typer.Option("1M:64M", "--sizes", help="MIN:MAX (doubling), MIN:MAX:FACTOR, or a list 1M,4M,64M."),
    dtype: str = typer.Option("float", "--dtype", help="float, half, bfloat16, double, int32, int64, uint8, int8."),
    warmup: int = typer.Option(5, "--warmup", min=0, help="Warm-up iterations per size."),
    iters: int = typer.Option(20, "--iters", min=1, help="Timed iterations per size."),
    backend: str = typer.Option("auto", "--backend", help="gloo (CPU), nccl (GPU) or auto (nccl when CUDA is there)."),
    check: bool = typer.Option(True, "--check/--no-check", help="Verify every result buffer (nccl-tests #wrong)."),
    root: int = typer.Option(0, "--root", min=0, help="Root rank of broadcast."),
    timeout: float = typer.Option(300.0, "--timeout", min=1, help="Deadline in seconds for joining and for each operation."),
    launch: str = typer.Option(None, "--launch", help=LAUNCH_HELP),
    master_addr: str = typer.Option(None, "--master-addr", help="Host of rank 0 (default MASTER_ADDR; needed under mpirun)."),
    master_port: int = typer.Option(None, "--master-port", help="Port of rank 0's store (default MASTER_PORT or 29500)."),
    min_busbw: float = typer.Option(None, "--min-busbw", help="Exit 1 when the average busbw (GB/s) is below this."),
    straggle_rank: int = typer.Option(None, "--straggle-rank", help="Self-test: make this rank late by --straggle-ms each iteration."),
    straggle_ms: float = typer.Option(0.0, "--straggle-ms", min=0, max=10000, help="Self-test delay for --straggle-rank."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    store: bool = typer.Option(True, "--store/--no-store", help="Save the result in the history."),
) -> None:
    """nccl-tests' algbw, busbw and #wrong over torch.distributed; per-rank times name a straggler."""
    from fabricscope.bench.collective import MAX_SIZE, CollectiveError, CollectiveParams

    try:
        size_list = parse_sizes(sizes, maximum=MAX_SIZE)
    except FabricscopeError as exc:
        die(f"--sizes: {exc}")
    if launch:
        args = ["bench", "collective", "--op", op, "--sizes", ",".join(map(size_token, size_list)), "--dtype", dtype,
                "--warmup", str(warmup), "--iters", str(iters), "--backend", backend, "--root", str(root),
                "--timeout", str(timeout), "--check" if check else "--no-check", "--store" if store else "--no-store"]
        if json_out:
            args.append("--json")
        if min_busbw is not None:
            args += ["--min-busbw", str(min_busbw)]
        if straggle_rank is not None:
            args += ["--straggle-rank", str(straggle_rank), "--straggle-ms", str(straggle_ms)]
        _launch(launch, args, timeout_s=timeout * (len(size_list) + 2) + 60, master_port=master_port)
    env = _dist_env(master_addr, master_port)
    if backend == "auto":
        backend = _auto_backend()
    try:
        params = CollectiveParams(
            op=op, sizes=size_list, dtype=dtype, warmup=warmup, iters=iters, backend=backend, check=check,
            root=root, timeout_s=timeout, straggle_rank=straggle_rank, straggle_s=straggle_ms / 1000.0,
        )
    except ValueError as exc:
        die(_first_error(exc))
    try:
        from fabricscope.bench.collective import run_worker, to_bench_result

        progress = (lambda what: sys.stderr.write(f"# {what}\n")) if sys.stderr.isatty() and not json_out else None
        run = run_worker(params, env, progress=progress)
    except CollectiveError as exc:
        typer.echo(f"fabricscope: error: {exc}", err=True)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(2)  # torch's background threads must not keep a failed rank alive
    if run is None:  # not rank 0: rank 0 reports
        return
    result = to_bench_result(run)
    if min_busbw is not None:
        passed = run.avg_busbw_GBps >= min_busbw
        result.thresholds = {"min_busbw_GBps": min_busbw, "passed": passed}
    if store:
        _store(result)
    if json_out:
        print_json(result.to_json_dict())
    else:
        from fabricscope.bench.collective import format_table

        sys.stdout.write(format_table(run))
        if result.run_id:
            sys.stdout.write(f"# stored as run {result.run_id} (fabricscope history show {result.run_id})\n")
    bad = bool(run.wrong_total) or (min_busbw is not None and run.avg_busbw_GBps < min_busbw)
    raise typer.Exit(1 if bad else 0)


def _auto_backend() -> str:
    try:
        import torch

        return "nccl" if torch.cuda.is_available() and torch.distributed.is_nccl_available() else "gloo"
    except ImportError:
        return "gloo"


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {str(first.get('msg', exc)).removeprefix('Value error, ')}"
    return str(exc)


@bench_app.command("matrix")
def matrix(
    duration: float = typer.Option(2.0, "--duration", min=0.1, max=600, help="Seconds per flow."),
    warmup: float = typer.Option(0.25, "--warmup", min=0, max=60, help="Seconds at the start of each flow not counted."),
    retest: bool = typer.Option(True, "--retest/--no-retest", help="Retest suspects against known-good hosts before reporting."),
    margin: float = typer.Option(0.2, "--margin", min=0.01, max=0.99, help="A pair is low below (1 - MARGIN) x the median (or 3 robust sigmas)."),
    bind: str = typer.Option(None, "--bind", help="Address to receive on (default: the one that reaches rank 0)."),
    timeout: float = typer.Option(120.0, "--timeout", min=1, help="Deadline in seconds for every wait on a peer."),
    launch: str = typer.Option(None, "--launch", help=LAUNCH_HELP),
    master_addr: str = typer.Option(None, "--master-addr", help="Host of rank 0 (default MASTER_ADDR; needed under mpirun)."),
    master_port: int = typer.Option(None, "--master-port", help="Port of rank 0's store (default MASTER_PORT or 29500)."),
    svg: Path = typer.Option(None, "--svg", help="Also write the heat map as an SVG file (rank 0)."),
    rdma: bool = typer.Option(True, "--rdma/--no-rdma", help="Also measure RDMA with perftest where every host has an RDMA device and perftest (else the result says why not)."),
    rdma_test: str = typer.Option("write_bw", "--rdma-test", help="perftest bandwidth test: write_bw, read_bw or send_bw."),
    rdma_device: str = typer.Option(None, "--rdma-device", help="RDMA device on every host (default: the port on the interface that reaches rank 0, else the first active port)."),
    rdma_port: int = typer.Option(18515, "--rdma-port", min=1024, max=60000, help="perftest handshake port; host i listens on PORT + i."),
    root: str = typer.Option(None, "--root", help="Read the RDMA inventory (devices, ports, GIDs) from this snapshot or mounted host filesystem instead of the live machine."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    store: bool = typer.Option(True, "--store/--no-store", help="Save the result in the history."),
) -> None:
    """Pairwise TCP (and RDMA, with perftest where present) bandwidth between all hosts in rounds of
    disjoint pairs; names the bad host or link.

    Exit 1 when a suspect is confirmed, 2 when a pair could not be measured.
    """
    from fabricscope.bench.matrix import (
        MatrixError,
        MatrixParams,
        format_matrix,
        heatmap_svg,
        run_worker,
        to_bench_result,
    )

    try:
        params = MatrixParams(duration_s=duration, warmup_s=warmup, retest=retest, rel_margin=margin, timeout_s=timeout,
                              bind=bind, rdma=rdma, rdma_test=rdma_test, rdma_device=rdma_device, rdma_port=rdma_port,
                              root=root)  # checked before any rank starts
    except ValueError as exc:
        die(_first_error(exc))
    if root:
        from fabricscope.host import Root, RootError

        try:
            Root.at(root)
        except RootError as exc:
            die(str(exc))
    if launch:
        args = ["bench", "matrix", "--duration", str(duration), "--warmup", str(warmup), "--retest" if retest else "--no-retest",
                "--margin", str(margin), "--timeout", str(timeout), "--store" if store else "--no-store"]
        if svg:
            args += ["--svg", str(svg.resolve())]
        if json_out:
            args.append("--json")
        args += ["--rdma" if rdma else "--no-rdma", "--rdma-test", rdma_test, "--rdma-port", str(rdma_port)]
        if rdma_device:
            args += ["--rdma-device", rdma_device]
        if root:
            args += ["--root", str(Path(root).resolve())]
        _launch(launch, args, timeout_s=timeout * 3 + 600, master_port=master_port)
    env = _dist_env(master_addr, master_port)
    try:
        progress = (lambda what: sys.stderr.write(f"# {what}\n")) if sys.stderr.isatty() and not json_out else None
        run = run_worker(params, env, progress=progress)
    except MatrixError as exc:
        typer.echo(f"fabricscope: error: {exc}", err=True)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(2)
    if run is None:
        return
    result = to_bench_result(run)
    if svg:
        try:
            svg.write_text(heatmap_svg(run.hosts, run.matrix_gbps, reference_gbps=run.tcp.verdict.fleet_median_gbps))
        except OSError as exc:
            typer.echo(f"fabricscope: warning: cannot write {svg}: {exc.strerror or exc}", err=True)
    if store:
        _store(result)
    if json_out:
        print_json(result.to_json_dict())
    else:
        sys.stdout.write(format_matrix(result))
        if result.run_id:
            sys.stdout.write(f"stored as run {result.run_id} (fabricscope history show {result.run_id})\n")
    if run.failures:
        raise typer.Exit(2)
    raise typer.Exit(1 if run.suspects else 0)


@import_app.command("nccl-tests")
def import_nccl_tests(
    file: Path = typer.Argument(..., help="all_reduce_perf (or any *_perf) output: text, or nccl-tests' JSON file."),
    op: str = typer.Option(None, "--op", help="Operation when the file does not say (e.g. all_reduce)."),
    ranks: int = typer.Option(None, "--ranks", help="Number of ranks when the file does not list them."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    store: bool = typer.Option(True, "--store/--no-store", help="Save the result in the history."),
) -> None:
    """Read nccl-tests output into the fabricscope.bench/v1 schema and the history."""
    from fabricscope.bench.nccl_tests import NcclTestsError, parse_file, to_bench_result

    try:
        parsed = parse_file(file, op=op, ranks=ranks)
    except NcclTestsError as exc:
        die(str(exc))
    try:
        result = to_bench_result(parsed, source=str(file))
    except NcclTestsError as exc:
        die(str(exc))
    if store:
        _store(result)
    if json_out:
        print_json(result.to_json_dict())
        return
    _print_import(parsed, result)


def _print_import(parsed: Any, result: Any) -> None:
    typer.echo(f"{parsed.op} from {result.params['source']}: {len(parsed.rows)} sizes, {parsed.ranks or '?'} ranks"
               + (f", stored as run {result.run_id}" if result.run_id else ""))
    typer.echo(f"{'size (B)':>12}  {'time (us)':>10}  {'algbw':>7}  {'busbw':>7}  {'#wrong':>6}")
    for r in parsed.rows:
        wrong = "N/A" if r.wrong is None else str(r.wrong)
        typer.echo(f"{r.size_bytes:12d}  {r.time_s * 1e6:10.2f}  {r.algbw_GBps:7.2f}  {r.busbw_GBps:7.2f}  {wrong:>6}")
    if parsed.avg_busbw_GBps is not None:
        typer.echo(f"avg bus bandwidth (from the file): {parsed.avg_busbw_GBps:g} GB/s")
