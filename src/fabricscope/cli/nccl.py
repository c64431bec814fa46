"""`fabricscope nccl env|lint|log`: settings for this node, a lint of a job's settings, NCCL log reading."""

from __future__ import annotations

import os
import sys

import typer

from fabricscope.cli.common import (
    FAIL_ON_OPTION,
    JSON_OPTION,
    ROOT_OPTION,
    die,
    open_root,
    parse_fail_on,
    print_json,
)
from fabricscope.cli.main import command_group
from fabricscope.findings import Severity, exit_code, summarize
from fabricscope.host import read_inventory
from fabricscope.nccl.log.aggregate import LogAggregator
from fabricscope.nccl.log.merge import merge
from fabricscope.nccl.log.read import LogInputError, default_jobs, read_file, read_files
from fabricscope.nccl.log.report import build_report
from fabricscope.nccl.variables import parse_version
from fabricscope.report.terminal import console, render_findings

nccl_app = command_group(
    "nccl",
    "NCCL: the right environment for this node, a lint of the one a job uses, and a reading of NCCL's logs.",
)

LOG_AREAS = {"nccl_log": "NCCL log"}
# Show a progress bar on stderr when there is at least this much to read and stderr is a terminal.
PROGRESS_MIN_BYTES = 64 << 20
MAX_TABLE_RANKS = 64


@nccl_app.command("log")
def log_cmd(
    files: list[str] = typer.Argument(
        ...,
        metavar="FILE...",
        help="NCCL_DEBUG=INFO/WARN output: one interleaved file, one per rank, .gz, or - for stdin.",
    ),
    json_out: bool = JSON_OPTION,
    expect: str = typer.Option(
        "auto",
        "--expect",
        help="What inter-node traffic should use: rdma, socket or auto (judge from the log).",
    ),
    fail_on: str = FAIL_ON_OPTION,
    show_ranks: bool = typer.Option(
        False, "--ranks", help=f"Print the per-rank table even above {MAX_TABLE_RANKS} ranks."
    ),
    show_pass: bool = typer.Option(True, "--pass/--no-pass", help="Show passing verdicts too."),
    jobs: int = typer.Option(
        0,
        "--jobs",
        "-j",
        min=0,
        max=1024,
        help="Files read at once, one process each (0: one per core). Same result for any value.",
    ),
) -> None:
    """Which transport each rank really used, and why the job failed: verdicts with fixes."""
    threshold = parse_fail_on(fail_on)
    if expect not in ("auto", "rdma", "socket"):
        die("--expect takes rdma, socket or auto")
    if files.count("-") > 1:
        die("stdin (-) can be read only once")
    jobs = jobs or default_jobs()
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
            agg = _read_with_progress(files, expect, jobs, total)
        else:
            agg = read_files(files, expect, jobs)
    except LogInputError as exc:
        die(str(exc))
    report = build_report(agg)
    if report.recognised_lines == 0:
        binary = any(f["binary_lines"] for f in report.files)
        what = (
            "binary data"
            if binary
            else "no NCCL log line and no message NCCL, PyTorch or the network plugins print"
        )
        die(
            f"{', '.join(files)}: {what}; expected NCCL_DEBUG=INFO or WARN output (lines like 'host:pid:tid [0] NCCL INFO ...')"
        )
    if json_out:
        print_json(report.to_dict())
    else:
        out = console()
        _render_summary(out, report, show_ranks)
        render_findings(
            report.findings, title="Verdicts", out=out, show_pass=show_pass, area_titles=LOG_AREAS
        )
    raise typer.Exit(exit_code(report.findings, threshold))


def _read_with_progress(files: list[str], expect: str, jobs: int, total: int) -> LogAggregator:
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("reading", total=total)
        if jobs > 1 and len(files) > 1:  # progress per file read
            return read_files(files, expect, jobs, done=lambda _path, n: progress.advance(task, n))
        agg, done = LogAggregator(expect=expect), 0
        for path in files:
            progress.update(task, description=os.path.basename(path)[:30])
            part = read_file(
                path, expect, progress=lambda n, base=done: progress.update(task, completed=base + n)
            )
            done += part.files[-1].bytes
            merge(agg, part)
            progress.update(task, completed=done)
        return agg


def _render_summary(out, report, show_ranks: bool) -> None:
    from rich.table import Table

    s = report.summary
    versions = ", ".join(s["nccl_versions"]) or "not in log"
    out.print(
        f"[bold]NCCL log[/bold]: {len(report.files)} file(s), {s['nccl_lines']:,} NCCL lines of {s['lines']:,}"
        + (f" (+{s['placed_lines']:,} quoting NCCL/PyTorch/plugin messages)" if s["placed_lines"] else "")
        + f", {s['hosts']} host(s), {s['ranks']} rank(s), NCCL {versions}"
    )
    if s["unrecognised_lines"]:
        out.print(
            f"{s['unrecognised_lines']:,} lines not recognised (neither NCCL's nor a catalogued message)"
        )
    v = report.verdict
    fatal = {True: "the job stopped", False: "NCCL went on", None: "nothing failed"}[v["fatal"]]
    out.print(f"[bold]Verdict[/bold]: {v['root_cause']} ({fatal}; transport {v['transport'] or 'not shown'})")
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


# ----- nccl env -----------------------------------------------------------------------------------
@nccl_app.command("env")
def env_cmd(
    root: str = ROOT_OPTION,
    workload: str = typer.Option("training", "--workload", help="training or inference."),
    fmt: str = typer.Option("shell", "--format", help="shell, json, slurm or k8s."),
    nccl_version: str = typer.Option(
        None, "--nccl-version", help="NCCL version the job uses (GID index is set explicitly below 2.21)."
    ),
    rail_optimized: bool = typer.Option(
        False,
        "--rail-optimized",
        help="The fabric is rail-optimised: keep rings on one rail (NCCL_CROSS_NIC=0).",
    ),
    switch_tiers: int | None = typer.Option(
        None,
        "--switch-tiers",
        min=1,
        max=5,
        help="Switch tiers between nodes (RoCE with 2+ tiers gets more QPs for ECMP entropy); 2 is assumed, and said to be, when not given.",
    ),
    ar_sl: int = typer.Option(
        None,
        "--ar-sl",
        min=0,
        max=15,
        help="InfiniBand service level with adaptive routing enabled by the subnet manager.",
    ),
) -> None:
    """The NCCL settings to use on this node, each with the reason, ready to paste."""
    from fabricscope.nccl.envgen import FORMATS, WORKLOADS, plan_env, render

    if workload not in WORKLOADS:
        die(f"--workload takes {' or '.join(WORKLOADS)}")
    if fmt not in FORMATS:
        die(f"--format takes {', '.join(FORMATS)}")
    if nccl_version is not None and parse_version(nccl_version) is None:
        die(f"--nccl-version {nccl_version!r} is not a version like 2.19.3")
    inv = read_inventory(open_root(root))
    plan = plan_env(
        inv,
        workload=workload,
        nccl_version=nccl_version,
        rail_optimized=rail_optimized,
        switch_tiers=switch_tiers,
        ar_sl=ar_sl,
    )
    sys.stdout.write(render(plan, fmt))


# ----- nccl lint ----------------------------------------------------------------------------------
MAX_INPUT_BYTES = 4 << 20


def _read_text(path: str, what: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        die(f"{what} {path}: {exc.strerror or exc}")
    if len(data) > MAX_INPUT_BYTES:
        die(f"{what} {path}: larger than {MAX_INPUT_BYTES >> 20} MiB, not an env file or job script")
    if b"\x00" in data:
        die(f"{what} {path}: binary data, not a text file")
    return data.decode("utf-8", "replace")


@nccl_app.command("lint")
def lint_cmd(
    env_file: list[str] = typer.Option(None, "--env-file", help="KEY=VALUE file (repeatable)."),
    script: list[str] = typer.Option(
        None,
        "--script",
        help="Job script, Slurm batch file, Kubernetes manifest or Python launcher (repeatable).",
    ),
    from_environ: bool = typer.Option(
        False, "--from-environ", help="Lint the NCCL_* variables of this process's environment."
    ),
    root: str = ROOT_OPTION,
    no_node: bool = typer.Option(False, "--no-node", help="Check names and values only, not against a node."),
    nccl_version: str = typer.Option(
        None, "--nccl-version", help="NCCL version the job uses (default: assume a current one)."
    ),
    debugging: bool = typer.Option(
        False, "--debugging", help="The job is a debugging run: NCCL_DEBUG=INFO is info, not warn."
    ),
    json_out: bool = JSON_OPTION,
    fail_on: str = FAIL_ON_OPTION,
    show_pass: bool = typer.Option(True, "--pass/--no-pass", help="Show passing checks too."),
) -> None:
    """Check the NCCL settings a job uses (and /etc/nccl.conf, NCCL_CONF_FILE) against this node."""
    from fabricscope.nccl.job import JobSources, lint_job
    from fabricscope.nccl.lint import SCHEMA

    threshold = parse_fail_on(fail_on)
    if nccl_version is not None and parse_version(nccl_version) is None:
        die(f"--nccl-version {nccl_version!r} is not a version like 2.19.3")
    sources = JobSources(
        env_files=[(path, _read_text(path, "--env-file")) for path in env_file or []],
        scripts=[(path, _read_text(path, "--script")) for path in script or []],
        environ=os.environ if from_environ else None,
    )
    node = None if no_node else open_root(root)
    inv = read_inventory(node) if node is not None else None
    settings, findings = lint_job(sources, node, inv, nccl_version=nccl_version, production=not debugging)
    if not settings.effective and not settings.unparsed:
        where = ", ".join(sources.labels) or "no --env-file, --script or --from-environ given"
        die(
            f"no NCCL_* setting found ({where}; /etc/nccl.conf {'absent' if inv is not None else 'not read'})"
        )
    if json_out:
        print_json(
            {
                "schema": SCHEMA,
                "host": inv.hostname if inv is not None else None,
                "root": node.label if node is not None else None,
                "settings": [
                    {"name": s.name, "value": s.value, "source": s.where} for s in settings.effective.values()
                ],
                "findings": [f.to_dict() for f in findings],
                "summary": summarize(findings),
            }
        )
    else:
        _render_lint(findings, settings, inv, show_pass)
    raise typer.Exit(exit_code(findings, threshold))


def _render_lint(findings, settings, inv, show_pass: bool) -> None:
    """ruff-style: ``source: CODE [severity] VAR=value: message`` then the fix."""
    from rich.markup import escape
    from rich.text import Text

    from fabricscope.report.terminal import SEVERITY_STYLE, summary_line

    out = console()
    host = inv.hostname if inv is not None else None
    out.print(
        Text(
            f"fabricscope nccl lint: {len(settings.effective)} NCCL setting(s)"
            + (f" against {host}" if host else " (no node)"),
            style="bold",
        )
    )
    for f in findings:
        if f.severity is Severity.PASS and not show_pass:
            continue
        label, style = SEVERITY_STYLE[f.severity]
        line = Text()
        line.append(f"{f.evidence.get('source') or f.subject}: ", style="bold")
        line.append(f"{f.id} ", style="bold")
        line.append(f"[{label.lower()}]", style=style)
        value = f.evidence.get("value")
        if f.message.startswith(f"{f.subject}="):
            line.append(f" {f.message}")
        else:
            line.append(f" {f.subject}" + (f"={value}" if value is not None else "") + f": {f.message}")
        out.print(line)
        if f.fix and f.severity is not Severity.PASS:
            out.print(f"    [dim]fix:[/dim] {escape(f.fix)}")
    out.print(summary_line(findings))
