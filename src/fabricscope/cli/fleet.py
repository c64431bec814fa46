"""`fabricscope fleet doctor|collect|baseline`: one verdict for many nodes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from fabricscope.cli.common import (
    FAIL_ON_OPTION,
    JSON_OPTION,
    ROOT_HELP,
    die,
    end_rank,
    open_root,
    parse_fail_on,
    print_json,
    scheduler_options,
)
from fabricscope.cli.launching import Ranks, deadline_option, launch_ranks, ranks_options
from fabricscope.cli.main import command_group
from fabricscope.findings import Severity
from fabricscope.jobs.launch import Flag, Flags, child_argv
from fabricscope.jobs.secret import SET_TOKEN_HINT

fleet_app = command_group(
    "fleet",
    "Many nodes at once: doctor findings per node, drift between nodes, the expected-hardware manifest, scheduler actions.",
)

FROM_HELP = (
    "doctor --json documents, snapshots (.tar.gz or directory), or a directory of them (repeatable; more FILES may follow). "
    "Without it the command runs as a job: under srun, torchrun or mpirun (or with --launch) every node reads itself."
)
FLEET_DRAIN, FLEET_TAINT, FLEET_APPLY = scheduler_options("every failing node")
LAUNCHED_ROOT_HELP = "Launched runs: read this snapshot or mounted filesystem instead of the live node; {host} becomes the node's name."
TIMEOUT_OPTION = deadline_option(
    120.0, "the ranks to meet and for every node's document", lead="Launched runs: deadline"
)


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
    _expect(nodes, expect)
    return nodes


def _expect(nodes, expect: str | None) -> None:
    if expect is not None:
        from fabricscope.fleet.expect import apply_manifest
        from fabricscope.fleet.manifest import load_manifest

        manifest = load_manifest(Path(expect))
        apply_manifest(manifest, nodes)


def _gathered(root: str | None, timeout: float, ranks: Ranks, *, snapshot: bool = False):
    """This rank's part of a launched run: rank 0 gets what every node sent, the others None.
    Outside any job (no srun, torchrun or mpirun variables) there is nothing to gather: say so."""
    from fabricscope.cli.launching import dist_env
    from fabricscope.errors import FabricscopeError
    from fabricscope.fleet.launched import run_ranks

    env = dist_env(ranks.master_addr, ranks.master_port)
    if env.launcher == "single":
        die(
            "give the nodes: --from DIR or FILES, or run it as a job: srun -N 4 fabricscope fleet ..., torchrun, mpirun, or --launch lab:NAME"
        )
    try:
        return run_ranks(env, _absolute_root(root), timeout, snapshot=snapshot)
    except FabricscopeError as exc:
        end_rank(str(exc))


def _absolute_root(root: str | None) -> str | None:
    """``--root`` as ranks started elsewhere (another working directory) must read it."""
    if root is None:
        return None
    return root if Path(root).is_absolute() else str(Path.cwd() / root)


@dataclass(frozen=True)
class DoctorJob:
    """What every launched rank of `fleet doctor` runs with (paths made absolute)."""

    fail_on: str
    timeout: float
    root: str | None
    expect: str | None
    html: str | None
    all_nodes: bool
    slurm_drain: bool
    slurm_resume: bool
    k8s_taint: str | None
    k8s_label: str | None
    apply: bool
    json_out: bool


@dataclass(frozen=True)
class CollectJob:
    """What every launched rank of `fleet collect` runs with (paths made absolute)."""

    output: str
    timeout: float
    root: str | None
    snapshot: bool
    json_out: bool


_SWITCHES = ("all_nodes", "slurm_drain", "slurm_resume", "apply", "snapshot")  # given only when on
JOB_FLAGS: Flags = {
    "fail_on": "--fail-on", "timeout": "--timeout", "root": "--root", "expect": "--expect", "html": "--html",
    "k8s_taint": "--k8s-taint", "k8s_label": "--k8s-label", "output": "--output", "json_out": Flag("--json"),
    **{name: Flag("--" + name.replace("_", "-")) for name in _SWITCHES},
}  # fmt: skip


def _resolved(path: str | Path | None) -> str | None:
    return str(Path(path).resolve()) if path else None


@fleet_app.command("doctor")
@ranks_options
def fleet_doctor(
    sources: list[str] = typer.Option([], "--from", help=FROM_HELP),
    files: list[str] = typer.Argument(None, help="More documents or snapshots.", show_default=False),
    json_out: bool = JSON_OPTION,
    html: Path = typer.Option(
        None, "--html", help="Also write the fleet page (heat map, drift list) to this HTML file."
    ),
    fail_on: str = FAIL_ON_OPTION,
    expect: str = typer.Option(
        None, "--expect", help="Expected-hardware manifest (YAML) every node must meet."
    ),
    all_nodes: bool = typer.Option(
        False, "--all-nodes", help="List every node in the table, not only those with warn or fail."
    ),
    slurm_drain: bool = FLEET_DRAIN,
    slurm_resume: bool = typer.Option(
        False,
        "--slurm-resume",
        help="Resume nodes fabricscope drained whose findings have cleared (dry run unless --apply).",
    ),
    k8s_taint: str = FLEET_TAINT,
    k8s_label: str = typer.Option(
        None, "--k8s-label", help="Label every failing node KEY=VALUE (dry run unless --apply)."
    ),
    apply: bool = FLEET_APPLY,
    root: str = typer.Option(None, "--root", help=LAUNCHED_ROOT_HELP),
    timeout: float = TIMEOUT_OPTION,
    *,
    ranks: Ranks,
) -> None:
    """Judge every node (its doctor findings) and the fleet (drift between nodes); exit 1 when something reaches --fail-on.

    With --from it reads documents or snapshots; without, it runs as a job (`srun -N 4 fabricscope
    fleet doctor`, torchrun, mpirun or --launch lab:NAME): every node reads itself, rank 0 judges.
    """
    from fabricscope.findings import exit_code
    from fabricscope.fleet.doctor import judge_fleet
    from fabricscope.report.terminal import console

    threshold = parse_fail_on(fail_on)
    trusted = None  # --from: the operator's own documents, acted on as given
    if sources or files:
        if root or ranks.launch:
            die("--root and --launch are for launched runs; with --from the documents say everything")
        nodes = _load(sources, files, expect)
    else:
        if ranks.launch:
            job = DoctorJob(fail_on, timeout, _absolute_root(root), _resolved(expect), _resolved(html), all_nodes, slurm_drain,
                            slurm_resume, k8s_taint, k8s_label, apply, json_out)  # fmt: skip
            args = child_argv(["fleet", "doctor"], job, JOB_FLAGS)
            launch_ranks(ranks.launch, args, timeout_s=timeout * 2 + 60, master_port=ranks.master_port)
        nodes, trusted = _launched_nodes(root, timeout, ranks, expect)
        if apply and trusted is None:
            end_rank(
                f"--apply needs evidence signed by the job's own ranks, and this job has no secret: {SET_TOKEN_HINT}"
            )
    report = judge_fleet(nodes, manifest=expect)
    actions = _actions(report, threshold, slurm_drain, slurm_resume, k8s_taint, k8s_label, apply, trusted)
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


def _launched_nodes(root: str | None, timeout: float, ranks: Ranks, expect: str | None):
    from fabricscope.errors import FabricscopeError
    from fabricscope.fleet.launched import to_nodes

    gathering = _gathered(root, timeout, ranks)
    if gathering is None:
        raise typer.Exit(0)  # not rank 0: rank 0 reports
    try:
        nodes = to_nodes(gathering.received)
        _expect(nodes, expect)
    except FabricscopeError as exc:
        end_rank(str(exc), exc.exit_code)
    return nodes, (gathering.trusted_names() if gathering.authenticated else None)


def _write_html(report, target: Path) -> None:
    from fabricscope.fleet.collect import write_atomic
    from fabricscope.report.fleet import render_fleet_html

    try:
        write_atomic(target.expanduser(), render_fleet_html(report).encode("utf-8"))
    except OSError as exc:
        die(f"cannot write {target}: {exc.strerror or exc}")


def _actions(report, threshold: Severity, drain: bool, resume: bool, taint: str | None, label: str | None, apply: bool,
             trusted: set[str] | None = None) -> list[dict] | None:  # fmt: skip
    """The scheduler actions asked for; ``trusted``: a launched run's nodes that may be acted on."""
    if not (drain or resume or taint or label):
        if apply:
            die("--apply needs an action: --slurm-drain, --slurm-resume, --k8s-taint or --k8s-label")
        return None
    from fabricscope.fleet.actions import plan_and_run

    return plan_and_run(
        report, threshold, drain=drain, resume=resume, taint=taint, label=label, apply=apply, only=trusted
    )


def _show_actions(actions: list[dict]) -> None:
    typer.echo("")
    typer.echo(
        "Scheduler actions"
        + ("" if any(a["applied"] for a in actions) else " (dry run: --apply carries them out)")
    )
    if not actions:
        typer.echo(" none")
    for action in actions:
        state = (
            "done"
            if action["applied"] and action.get("ok")
            else "FAILED"
            if action["applied"]
            else "would run"
        )
        typer.echo(
            f" {state:<9} {action['command']}" + (f"  ({action['detail']})" if action.get("detail") else "")
        )


@fleet_app.command("collect")
@ranks_options
def fleet_collect(
    output: Path = typer.Option(..., "-o", "--output", help="Directory to keep the node documents in."),
    sources: list[str] = typer.Option(
        [], "--from", help="Documents or snapshots to keep as well (repeatable)."
    ),
    files: list[str] = typer.Argument(None, help="More documents or snapshots.", show_default=False),
    local: bool = typer.Option(
        True, "--local/--no-local", help="Judge this node (or --root) and keep its document."
    ),
    root: str = typer.Option(
        None, "--root", help=ROOT_HELP + " Launched runs: {host} becomes the node's name."
    ),
    snapshot: bool = typer.Option(
        False, "--snapshot", help="Keep a scrubbed snapshot of each judged node under DIR/snapshots/."
    ),
    json_out: bool = JSON_OPTION,
    timeout: float = TIMEOUT_OPTION,
    *,
    ranks: Ranks,
) -> None:
    """Keep every node's doctor document (and, with --snapshot, its scrubbed snapshot) in DIR for `fleet doctor --from DIR`.

    Run as a job (`srun -N 4 fabricscope fleet collect -o DIR`, torchrun, mpirun or --launch
    lab:NAME), every node reads itself and rank 0 writes all of them into DIR.
    """
    from fabricscope.cli.launching import dist_env
    from fabricscope.fleet.collect import Collected, collect_root, collect_sources

    if output.exists() and not output.is_dir():
        die(f"-o {output}: exists and is not a directory")
    if ranks.launch:
        job = CollectJob(str(output.resolve()), timeout, _absolute_root(root), snapshot, json_out)
        args = child_argv(["fleet", "collect"], job, JOB_FLAGS)
        launch_ranks(ranks.launch, args, timeout_s=timeout * 2 + 60, master_port=ranks.master_port)
    done: list[Collected] = []
    failed: list[str] = []
    if dist_env(ranks.master_addr, ranks.master_port).launcher != "single":
        done, failed = _collect_launched(output, root, timeout, ranks, snapshot)
    elif local:
        done.append(collect_root(open_root(root), output, snapshot=snapshot))
    items = [*sources, *(files or [])]
    if items:
        done.extend(collect_sources(items, output, snapshot=snapshot))
    if not done and not failed:
        die("nothing to collect: drop --no-local or give --from FILES")
    if json_out:
        print_json(
            {
                "schema": "fabricscope.fleet_collect/v1",
                "directory": str(output),
                "nodes": [
                    {
                        "node": c.node,
                        "document": str(c.document),
                        "snapshot": str(c.snapshot) if c.snapshot else None,
                        "source": c.source,
                    }
                    for c in done
                ],
            }
        )
    else:
        for c in done:
            typer.echo(f"kept {c.node}: {c.document}" + (f" and {c.snapshot}" if c.snapshot else ""))
    for why in failed:
        typer.echo(f"fabricscope: error: not kept: {why}", err=True)
    if failed:
        raise typer.Exit(2)


def _collect_launched(output: Path, root: str | None, timeout: float, ranks: Ranks, snapshot: bool):
    """Rank 0 keeps what every node sent; the other ranks end here."""
    from fabricscope.errors import FabricscopeError
    from fabricscope.fleet.collect import Collected
    from fabricscope.fleet.launched import keep

    gathering = _gathered(root, timeout, ranks, snapshot=snapshot)
    if gathering is None:
        raise typer.Exit(0)
    try:
        kept, failed = keep(gathering.received, output)
    except FabricscopeError as exc:
        end_rank(str(exc))
    return [Collected(name, doc, snap, "launched") for name, doc, snap in kept], failed


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
