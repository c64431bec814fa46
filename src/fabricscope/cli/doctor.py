"""`fabricscope doctor`, `inventory` and `checks`: the node's path, end to end."""

from __future__ import annotations

import typer

from fabricscope.checks.doctor import run_doctor
from fabricscope.checks.registry import all_checks
from fabricscope.cli.common import (
    FAIL_ON_OPTION,
    JSON_OPTION,
    ROOT_OPTION,
    die,
    open_root,
    parse_fail_on,
    print_json,
)
from fabricscope.cli.main import app
from fabricscope.findings import exit_code
from fabricscope.host import read_inventory
from fabricscope.report.inventory import render_inventory
from fabricscope.report.terminal import console, render_findings


def _wait_with_progress(seconds: float) -> None:
    """Sleep between the two counter samples, with a progress bar on a terminal."""
    import time

    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    err = console(stderr=True)
    if seconds < 2 or not err.is_terminal:
        time.sleep(seconds)
        return
    with Progress(
        TextColumn("counters: second sample in"),
        BarColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("wait", total=seconds)
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(0.2, left))
            bar.update(task, completed=seconds - max(left, 0))


@app.command()
def doctor(
    root: str = ROOT_OPTION,
    json_out: bool = JSON_OPTION,
    interval: float = typer.Option(
        None, "--interval", min=0.1, max=3600, help="Read counters twice, SECONDS apart, and judge rates."
    ),
    fail_on: str = FAIL_ON_OPTION,
    show_pass: bool = typer.Option(True, "--pass/--no-pass", help="Show passing checks too."),
    expect: str = typer.Option(
        None,
        "--expect",
        help="Expected-hardware manifest (YAML): fail where this node has less or something different.",
    ),
    nhc: bool = typer.Option(
        False,
        "--nhc",
        help="One-line reason and exit status for LBNL NHC / Slurm HealthCheckProgram (docs/fleet.md).",
    ),
) -> None:
    """Inspect GPU, PCIe, NIC, port, cable, PFC/ECN, GIDs and TCP settings; print findings with fixes."""
    threshold = parse_fail_on(fail_on)
    manifest = _load_manifest(expect)
    node = open_root(root)
    report = run_doctor(node, interval_s=interval, sleep=_wait_with_progress)
    if manifest is not None:
        report = _with_manifest(report, manifest)
    if nhc:
        from fabricscope.fleet.nhc import nhc_reason

        code = exit_code(report.findings, threshold)
        if code:
            typer.echo(nhc_reason(report.findings, threshold))
        raise typer.Exit(code)
    if json_out:
        print_json(report.to_dict())
    else:
        host = report.inventory.hostname or "node"
        render_findings(
            report.findings,
            title=f"fabricscope doctor: {host} (root {node.label})",
            show_pass=show_pass,
            area_titles={"expect": f"Expected hardware ({expect})"},
        )
    raise typer.Exit(exit_code(report.findings, threshold))


def _load_manifest(path: str | None):
    if path is None:
        return None
    from pathlib import Path

    from fabricscope.fleet.manifest import load_manifest

    return load_manifest(Path(path))


def _with_manifest(report, manifest):
    """The doctor's findings plus the manifest's (``expect.*``), in doctor's order."""
    import dataclasses

    from fabricscope.checks.facts import node_facts
    from fabricscope.findings import sort_key
    from fabricscope.fleet.expect import check_manifest

    extra = check_manifest(manifest, node_facts(report.inventory))
    return dataclasses.replace(report, findings=sorted([*report.findings, *extra], key=sort_key))


@app.command()
def inventory(
    root: str = ROOT_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """What the node has: RDMA ports and GIDs, netdevs, PCIe links, GPU-NIC distances, modules."""
    inv = read_inventory(open_root(root))
    if json_out:
        doc = {"schema": "fabricscope.inventory/v1", **inv.to_dict()}
        print_json(doc)
    else:
        render_inventory(inv, console())


@app.command("checks")
def list_checks(
    json_out: bool = JSON_OPTION,
    markdown: bool = typer.Option(
        False, "--markdown", help="Print docs/checks.md (generated from the registry)."
    ),
) -> None:
    """List every doctor check with what it looks at and why."""
    specs = all_checks()
    if json_out:
        print_json(
            [{"id": s.id, "area": s.area, "title": s.title, "description": s.description} for s in specs]
        )
    elif markdown:
        from fabricscope.report.checks_doc import checks_markdown

        typer.echo(checks_markdown(specs), nl=False)
    else:
        out = console()
        for spec in specs:
            out.print(f"[bold]{spec.id:<24}[/bold] {spec.title}")
    if not specs:
        die("no checks registered")


@app.command()
def snapshot(
    output: str = typer.Option(..., "-o", "--output", help="Write the snapshot to this .tar.gz file."),
    scrub: bool = typer.Option(
        False,
        "--scrub",
        help="Replace GUIDs, MACs, IP addresses, UUIDs, the hostname and serial numbers consistently; redact secret-looking kernel parameters.",
    ),
    scrub_level: str = typer.Option(
        None,
        "--scrub-level",
        help="standard (what --scrub does) or strict: also cut PCI config space and the kernel command line to what doctor reads. Implies --scrub.",
    ),
    root: str = typer.Option(
        None, "--root", help="Re-capture an existing snapshot (e.g. to scrub it) instead of this machine."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Capture what doctor reads on this node, so it can be examined elsewhere with --root FILE."""
    from pathlib import Path

    from fabricscope.host.scrub import LEVELS, STANDARD
    from fabricscope.host.snapshot import take_snapshot

    if scrub_level is not None and scrub_level not in LEVELS:
        die(f"--scrub-level takes {' or '.join(LEVELS)}, not {scrub_level[:40]!r}")
    level = scrub_level or (STANDARD if scrub else None)
    scrub = level is not None
    out = Path(output)
    if out.exists() and out.is_dir():
        die(f"-o {output}: is a directory")
    node = open_root(root)
    try:
        path, recording = take_snapshot(node, out, scrub=level or False)
    except OSError as exc:
        die(f"cannot write {output}: {exc.strerror or exc}")
    summary = {
        "schema": "fabricscope.snapshot/v1",
        "path": str(path),
        "files": len(recording.files),
        "commands": sorted(" ".join(r.argv) for r in recording.commands.values() if r.available),
        "scrubbed": scrub,
        "scrub_level": level,
    }
    if json_out:
        print_json(summary)
    else:
        typer.echo(
            f"wrote {path}: {summary['files']} files, {len(summary['commands'])} command outputs{f' (scrubbed: {level})' if scrub else ''}"
        )
