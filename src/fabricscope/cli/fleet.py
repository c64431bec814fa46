"""`fabricscope fleet doctor|collect|baseline`: one verdict for many nodes."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricscope.cli.common import (
    FAIL_ON_HELP,
    JSON_HELP,
    ROOT_HELP,
    die,
    open_root,
    parse_fail_on,
    print_json,
)
from fabricscope.cli.main import app
from fabricscope.findings import Severity

fleet_app = typer.Typer(
    name="fleet",
    help="Many nodes at once: doctor findings per node, drift between nodes, the expected-hardware manifest, scheduler actions.",
    no_args_is_help=True,
)
app.add_typer(fleet_app, name="fleet")

FROM_HELP = "doctor --json documents, snapshots (.tar.gz or directory), or a directory of them (repeatable; more FILES may follow)."


def _progress(done: int, total: int) -> None:
    from fabricscope.report.terminal import console

    err = console(stderr=True)
    if err.is_terminal and total >= 20 and (done == total or done % 50 == 0):
        err.print(f"read {done}/{total} node(s)", end="\r" if done < total else "\n")


def _load(sources: list[str], files: list[str] | None, expect: str | None):
    from fabricscope.fleet.inputs import expand_sources, load_nodes

    items = [*sources, *(files or [])]
    if not items:
        die("give the nodes: --from DIR or --from FILE [FILE...]")
    nodes = load_nodes(expand_sources(items), progress=_progress)
    if expect is not None:
        from fabricscope.fleet.expect import apply_manifest
        from fabricscope.fleet.manifest import load_manifest

        manifest = load_manifest(Path(expect))
        apply_manifest(manifest, nodes)
    return nodes


@fleet_app.command("doctor")
def fleet_doctor(
    sources: list[str] = typer.Option([], "--from", help=FROM_HELP),
    files: list[str] = typer.Argument(None, help="More documents or snapshots.", show_default=False),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    html: Path = typer.Option(None, "--html", help="Also write the fleet page (heat map, drift list) to this HTML file."),
    fail_on: str = typer.Option("fail", "--fail-on", help=FAIL_ON_HELP),
    expect: str = typer.Option(None, "--expect", help="Expected-hardware manifest (YAML) every node must meet."),
    all_nodes: bool = typer.Option(False, "--all-nodes", help="List every node in the table, not only those with warn or fail."),
    slurm_drain: bool = typer.Option(False, "--slurm-drain", help="Drain every failing node in Slurm (dry run unless --apply)."),
    slurm_resume: bool = typer.Option(False, "--slurm-resume", help="Resume nodes fabricscope drained whose findings have cleared (dry run unless --apply)."),
    k8s_taint: str = typer.Option(None, "--k8s-taint", help="Taint every failing node: KEY=VALUE:EFFECT (dry run unless --apply)."),
    k8s_label: str = typer.Option(None, "--k8s-label", help="Label every failing node KEY=VALUE (dry run unless --apply)."),
    apply: bool = typer.Option(False, "--apply", help="Carry out the scheduler actions instead of only showing them."),
) -> None:
    """Judge every node (its doctor findings) and the fleet (drift between nodes); exit 1 when something reaches --fail-on."""
    from fabricscope.findings import exit_code
    from fabricscope.fleet.doctor import judge_fleet
    from fabricscope.report.terminal import console

    threshold = parse_fail_on(fail_on)
    nodes = _load(sources, files, expect)
    report = judge_fleet(nodes, manifest=expect)
    actions = _actions(report, threshold, slurm_drain, slurm_resume, k8s_taint, k8s_label, apply)
    if json_out:
        doc = report.to_dict()
        if actions is not None:
            doc["actions"] = actions
        print_json(doc)
    else:
        from fabricscope.report.fleet import render_fleet

        render_fleet(report, console(), all_nodes=all_nodes)
        if actions is not None:
            _show_actions(actions)
    if html is not None:
        _write_html(report, html)
    raise typer.Exit(exit_code((f for _n, f in report.findings()), threshold))


def _write_html(report, target: Path) -> None:
    from fabricscope.fleet.collect import write_atomic
    from fabricscope.report.fleet import render_fleet_html

    try:
        write_atomic(target.expanduser(), render_fleet_html(report).encode("utf-8"))
    except OSError as exc:
        die(f"cannot write {target}: {exc.strerror or exc}")


def _actions(report, threshold: Severity, drain: bool, resume: bool, taint: str | None, label: str | None, apply: bool) -> list[dict] | None:
    if not (drain or resume or taint or label):
        if apply:
            die("--apply needs an action: --slurm-drain, --slurm-resume, --k8s-taint or --k8s-label")
        return None
    from fabricscope.fleet.actions import plan_and_run

    return plan_and_run(report, threshold, drain=drain, resume=resume, taint=taint, label=label, apply=apply)


def _show_actions(actions: list[dict]) -> None:
    typer.echo("")
    typer.echo("Scheduler actions" + ("" if any(a["applied"] for a in actions) else " (dry run: --apply carries them out)"))
    if not actions:
        typer.echo(" none")
    for action in actions:
        state = "done" if action["applied"] and action.get("ok") else "FAILED" if action["applied"] else "would run"
        typer.echo(f" {state:<9} {action['command']}" + (f"  ({action['detail']})" if action.get("detail") else ""))


@fleet_app.command("collect")
def fleet_collect(
    output: Path = typer.Option(..., "-o", "--output", help="Directory to keep the node documents in."),
    sources: list[str] = typer.Option([], "--from", help="Documents or snapshots to keep as well (repeatable)."),
    files: list[str] = typer.Argument(None, help="More documents or snapshots.", show_default=False),
    local: bool = typer.Option(True, "--local/--no-local", help="Judge this node (or --root) and keep its document."),
    root: str = typer.Option(None, "--root", help=ROOT_HELP),
    snapshot: bool = typer.Option(False, "--snapshot", help="Keep a scrubbed snapshot of each judged node under DIR/snapshots/."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Keep every node's doctor document (and, with --snapshot, its scrubbed snapshot) in DIR for `fleet doctor --from DIR`."""
    from fabricscope.fleet.collect import collect_root, collect_sources

    if output.exists() and not output.is_dir():
        die(f"-o {output}: exists and is not a directory")
    done = []
    if local:
        done.append(collect_root(open_root(root), output, snapshot=snapshot))
    items = [*sources, *(files or [])]
    if items:
        done.extend(collect_sources(items, output, snapshot=snapshot))
    if not done:
        die("nothing to collect: drop --no-local or give --from FILES")
    if json_out:
        print_json({
            "schema": "fabricscope.fleet_collect/v1",
            "directory": str(output),
            "nodes": [{"node": c.node, "document": str(c.document), "snapshot": str(c.snapshot) if c.snapshot else None, "source": c.source}
                      for c in done],
        })
    else:
        for c in done:
            typer.echo(f"kept {c.node}: {c.document}" + (f" and {c.snapshot}" if c.snapshot else ""))


@fleet_app.command("baseline")
def fleet_baseline(
    output: Path = typer.Option(..., "-o", "--output", help="Manifest (YAML) to write."),
    sources: list[str] = typer.Option([], "--from", help=FROM_HELP),
    files: list[str] = typer.Argument(None, help="More documents or snapshots.", show_default=False),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write the expected-hardware manifest a healthy fleet meets: the value most nodes have, per entry."""
    from fabricscope.fleet.baseline import baseline_yaml
    from fabricscope.fleet.collect import write_atomic
    from fabricscope.fleet.manifest import parse_manifest

    target = output.expanduser()
    if target.exists() and not force:
        die(f"-o {output}: exists (use --force to overwrite)")
    nodes = _load(sources, files, None)
    text = baseline_yaml(nodes)
    parse_manifest(text, str(target))  # what we write must be what --expect reads
    try:
        write_atomic(target, text.encode("utf-8"))
    except OSError as exc:
        die(f"cannot write {output}: {exc.strerror or exc}")
    typer.echo(f"wrote {target} from {len(nodes)} node(s):")
    typer.echo(text.rstrip("\n"))
