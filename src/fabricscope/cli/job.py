"""``fabricscope job diagnose|watch``: which rank, node or link holds a running or hung job."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricscope.cli.common import JSON_HELP, die, print_json
from fabricscope.cli.main import app

job_app = typer.Typer(name="job", help="Which rank, node or link holds a running or hung job, and what to do about it.",
                      no_args_is_help=True)
app.add_typer(job_app, name="job")


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
    paths: list[Path] = typer.Argument(..., help="Directories or files: Flight Recorder dumps (pickle/JSON), RAS output, job stderr, NCCL logs."),
    stall_after: float = typer.Option(10.0, "--stall-after", min=0.0, max=86400.0, help="A collective open this many SECONDS at dump time is a stall."),
    host: list[str] = typer.Option([], "--host", help="RANK=HOST, when the dumps' folders do not name hosts (repeatable)."),
    html_out: Path | None = typer.Option(None, "--html", help="Also write the HTML page (ranks x collectives timeline) here."),
    drain: list[str] = typer.Option([], "--drain", help="Drain this host in Slurm if the verdict names it (repeatable)."),
    apply: bool = typer.Option(False, "--apply", help="With --drain: run scontrol (default: print the command)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Read what a job left behind and name the rank, node or link that holds it (exit 0 healthy, 1 culprit, 2 unusable)."""
    from fabricscope.triage.collect import collect
    from fabricscope.triage.document import build, exit_code

    doc = build(collect(paths, _host_map(host)), stall_s=stall_after)
    code = exit_code(doc)
    if code == 2:
        reasons = "; ".join(f"{s['path']}: {s['reason']}" for s in doc["rests_on"]["skipped"][:3])
        die("no usable Flight Recorder dump or RAS output" + (f" ({reasons})" if reasons else ""))
    if drain:
        from fabricscope.triage.drain import drain_named

        doc["drain"] = drain_named(doc, drain, apply=apply)
    _render(doc, json_out, html_out)
    raise typer.Exit(code)
