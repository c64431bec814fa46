"""`fabricscope nccl env|lint|log`: settings for this node, a lint of a job's settings, NCCL log reading."""

from __future__ import annotations

import os
import sys

import typer

from fabricscope.cli.common import FAIL_ON_HELP, JSON_HELP, die, parse_fail_on, print_json
from fabricscope.cli.main import app
from fabricscope.findings import exit_code
from fabricscope.nccl.log import LogAggregator, LogInputError, feed_file
from fabricscope.report.terminal import console, render_findings

nccl_app = typer.Typer(
    help="NCCL: the right environment for this node, a lint of the one a job uses, and a reading of NCCL's logs.",
    no_args_is_help=True,
)
app.add_typer(nccl_app, name="nccl")

LOG_AREAS = {"nccl_log": "NCCL log"}
# Show a progress bar on stderr when there is at least this much to read and stderr is a terminal.
PROGRESS_MIN_BYTES = 64 << 20
MAX_TABLE_RANKS = 64


@nccl_app.command("log")
def log_cmd(
    files: list[str] = typer.Argument(..., metavar="FILE...", help="NCCL_DEBUG=INFO/WARN output: one interleaved file, one per rank, .gz, or - for stdin."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    expect: str = typer.Option("auto", "--expect", help="What inter-node traffic should use: rdma, socket or auto (judge from the log)."),
    fail_on: str = typer.Option("fail", "--fail-on", help=FAIL_ON_HELP),
    show_ranks: bool = typer.Option(False, "--ranks", help=f"Print the per-rank table even above {MAX_TABLE_RANKS} ranks."),
    show_pass: bool = typer.Option(True, "--pass/--no-pass", help="Show passing verdicts too."),
) -> None:
    """Which transport each rank really used, and why the job failed: verdicts with fixes."""
    threshold = parse_fail_on(fail_on)
    if expect not in ("auto", "rdma", "socket"):
        die("--expect takes rdma, socket or auto")
    if files.count("-") > 1:
        die("stdin (-) can be read only once")
    agg = LogAggregator(expect=expect)
    total = 0
    for path in files:
        if path != "-":
            if os.path.isdir(path):
                die(f"{path}: is a directory (pass the log files, e.g. {path}/*.log)")
            try:
                total += os.path.getsize(path)
            except OSError as exc:
                die(f"{path}: {exc.strerror or exc}")
    try:
        if total >= PROGRESS_MIN_BYTES and sys.stderr.isatty() and not json_out:
            _read_with_progress(agg, files, total)
        else:
            for path in files:
                feed_file(agg, path)
    except LogInputError as exc:
        die(str(exc))
    report = agg.report()
    if report.nccl_lines == 0:
        binary = any(f["binary_lines"] for f in report.files)
        what = "binary data" if binary else "no NCCL log line"
        die(f"{', '.join(files)}: {what}; expected NCCL_DEBUG=INFO or WARN output (lines like 'host:pid:tid [0] NCCL INFO ...')")
    if json_out:
        print_json(report.to_dict())
    else:
        out = console()
        _render_summary(out, report, show_ranks)
        render_findings(report.findings, title="Verdicts", out=out, show_pass=show_pass, area_titles=LOG_AREAS)
    raise typer.Exit(exit_code(report.findings, threshold))


def _read_with_progress(agg: LogAggregator, files: list[str], total: int) -> None:
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        TimeRemainingColumn(), console=console(stderr=True), transient=True,
    ) as progress:
        task = progress.add_task("reading", total=total)
        done = 0
        for path in files:
            progress.update(task, description=os.path.basename(path)[:30])
            stats = feed_file(agg, path, progress=lambda n, base=done: progress.update(task, completed=base + n))
            done += stats.bytes
            progress.update(task, completed=done)


def _render_summary(out, report, show_ranks: bool) -> None:
    from rich.table import Table

    s = report.summary
    versions = ", ".join(s["nccl_versions"]) or "not in log"
    out.print(
        f"[bold]NCCL log[/bold]: {len(report.files)} file(s), {s['nccl_lines']:,} NCCL lines of {s['lines']:,}, "
        f"{s['hosts']} host(s), {s['ranks']} rank(s), NCCL {versions}"
    )
    ranks = report.ranks
    if not ranks:
        return
    if len(ranks) > MAX_TABLE_RANKS and not show_ranks:
        out.print(f"[dim]{len(ranks)} ranks: per-rank table omitted (--ranks shows it, --json has it)[/dim]")
        return
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column in ("host", "pid", "dev", "rank", "network", "devices", "GDR", "transports", "error"):
        table.add_column(column, overflow="fold")
    for r in ranks:
        layers: dict[str, int] = {}
        for d in r["net_devices"]:
            layers[d["link_layer"]] = layers.get(d["link_layer"], 0) + 1
        devices = "+".join(f"{n} {ll}" for ll, n in sorted(layers.items()))
        if not devices and r["socket_interfaces"]:
            devices = ",".join(i["name"] for i in r["socket_interfaces"][:3])
        gdr = {True: "yes", False: "[yellow]no[/yellow]", None: "-"}[r["gpudirect_rdma"]]
        transports = " ".join(f"{k}×{v}" for k, v in r["transports"].items())
        table.add_row(
            r["host"] or "?",
            str(r["pid"]),
            str(r["cuda_dev"]),
            "?" if r["rank"] is None else str(r["rank"]),
            r["network"] or "-",
            devices or "-",
            gdr,
            transports or "-",
            f"[red]{r['error']}[/red]" if r["error"] else "",
        )
    out.print(table)
    out.print()
