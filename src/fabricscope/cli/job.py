"""``fabricscope job diagnose|watch``: which rank, node or link holds a running or hung job."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricscope.cli.common import JSON_OPTION, die, print_json
from fabricscope.cli.main import command_group

job_app = command_group(
    "job", "Which rank, node or link holds a running or hung job, and what to do about it."
)


def _host_map(items: list[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in items:
        rank, sep, host = item.partition("=")
        if not sep or not rank.strip().isdigit() or not host.strip():
            die(f"--host takes RANK=HOST, got {item[:80]!r}")
        out[int(rank)] = host.strip()
    return out


def _render(doc: dict, json_out: bool, html_path: Path | None) -> None:
    from fabricscope.report.job import html_page, terminal_lines

    if html_path is not None:
        try:
            html_path.write_text(html_page(doc))
        except OSError as exc:
            die(f"--html {html_path}: {exc.strerror or exc}")
    if json_out:
        print_json(doc)
        return
    from fabricscope.report.terminal import console

    out = console()
    for line in terminal_lines(doc):
        out.print(line, highlight=False, soft_wrap=True)


@job_app.command("diagnose")
def diagnose(
    paths: list[Path] = typer.Argument(
        ...,
        help="Directories or files: Flight Recorder dumps (pickle/JSON), RAS output, job stderr, NCCL logs.",
    ),
    stall_after: float = typer.Option(
        10.0,
        "--stall-after",
        min=0.0,
        max=86400.0,
        help="A collective open this many SECONDS at dump time is a stall.",
    ),
    host: list[str] = typer.Option(
        [], "--host", help="RANK=HOST, when the dumps' folders do not name hosts (repeatable)."
    ),
    html_out: Path | None = typer.Option(
        None, "--html", help="Also write the HTML page (ranks x collectives timeline) here."
    ),
    topology: str | None = typer.Option(
        None, "--topology", help="FILE or lab:NAME: name the cable or switch behind a slow link."
    ),
    drain: list[str] = typer.Option(
        [], "--drain", help="Drain this host in Slurm if the verdict names it (repeatable)."
    ),
    apply: bool = typer.Option(
        False, "--apply", help="With --drain: run scontrol (default: print the command)."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Read what a job left behind and name the rank, node or link that holds it (exit 0 healthy, 1 culprit, 2 unusable)."""
    from fabricscope.triage.collect import collect
    from fabricscope.triage.document import build, exit_code

    doc = build(collect(paths, _host_map(host)), stall_s=stall_after, topology=topology)
    code = exit_code(doc)
    if code == 2:
        reasons = "; ".join(f"{s['path']}: {s['reason']}" for s in doc["rests_on"]["skipped"][:3])
        die("no usable Flight Recorder dump or RAS output" + (f" ({reasons})" if reasons else ""))
    if drain:
        from fabricscope.triage.drain import drain_named

        doc["drain"] = drain_named(doc, drain, apply=apply)
    _render(doc, json_out, html_out)
    raise typer.Exit(code)


def _ras_addr(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        die(f"--ras takes HOST:PORT (NCCL's default is 127.0.0.1:28028), got {value[:80]!r}")
    return host, int(port)


@job_app.command("watch")
def watch(
    paths: list[Path] = typer.Argument(
        ..., help="The job's dump directories (Flight Recorder, Inspector, logs)."
    ),
    interval: float = typer.Option(
        5.0, "--interval", min=1.0, max=3600.0, help="Seconds between polls of the directories."
    ),
    stall_after: float = typer.Option(
        10.0, "--stall-after", min=0.0, max=86400.0, help="A collective open this many SECONDS is a stall."
    ),
    ras: str | None = typer.Option(
        None, "--ras", help="Also poll NCCL RAS at HOST:PORT (e.g. 127.0.0.1:28028), every 10 s at most."
    ),
    out: Path = typer.Option(Path("."), "--out", help="Directory for job-diagnosis-<time>.json files."),
    textfile: Path | None = typer.Option(
        None, "--textfile", help="Write fabricscope_job_* metrics here (node_exporter textfile collector)."
    ),
    host: list[str] = typer.Option([], "--host", help="RANK=HOST (repeatable)."),
    duration: float | None = typer.Option(
        None, "--duration", min=1.0, max=2_592_000.0, help="Stop after SECONDS (default: run until stopped)."
    ),
    exit_on_stall: bool = typer.Option(
        False, "--exit-on-stall", help="Exit 1 after writing the first diagnosis."
    ),
) -> None:
    """Poll beside a running job: export progress metrics; write the diagnosis on a stall at once, on a
    straggler or slow link once it held 3 polls (exit 0, or 1 with --exit-on-stall)."""
    from fabricscope.report.job import terminal_lines
    from fabricscope.report.terminal import console
    from fabricscope.triage.watch import watch as run_watch

    if not out.is_dir():
        die(f"--out {out}: not a directory")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        die(f"no such directory: {', '.join(missing)[:200]}")

    def report(doc: dict, path: Path) -> None:
        for line in terminal_lines(doc):
            console().print(line, highlight=False, soft_wrap=True)
        console().print(f"diagnosis written to {path}", highlight=False)

    state = run_watch(
        paths,
        interval_s=interval,
        stall_s=stall_after,
        out_dir=out,
        textfile=textfile,
        ras_addr=_ras_addr(ras),
        duration_s=duration,
        exit_on_stall=exit_on_stall,
        on_diagnosis=report,
        host_map=_host_map(host),
    )
    raise typer.Exit(1 if exit_on_stall and state.written else 0)
