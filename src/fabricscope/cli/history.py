"""``fabricscope history ...``: list, show and compare stored bench results; baselines.

Other modules add commands with ``from fabricscope.cli.history import history_app``.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from fabricscope.cli.common import DB_OPTION, JSON_OPTION, die, print_json
from fabricscope.cli.main import command_group
from fabricscope.store.sqlite import MissingHistory

history_app = command_group(
    "history", "List, show and compare stored bench results; define baselines (median and MAD)."
)
baseline_app = command_group("baseline", "Named baselines: the median and MAD of chosen runs.", history_app)


def _open(db: str | None):
    """The history for a command that reads it: one that does not exist is an error (exit 2) and
    is not created, directories included."""
    from fabricscope.store import Store

    return Store.open(db, create=False)


def _nothing_stored(exc: Exception, json_doc: dict[str, Any], json_out: bool) -> None:
    """A list of a history that does not exist: empty (exit 0), saying so."""
    if json_out:
        print_json(json_doc)
    else:
        typer.echo(str(exc))


def _console():
    from fabricscope.report.terminal import console

    return console()


def _params_filter(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            die(f"--param takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


@history_app.command("list")
def list_runs(
    kind: str = typer.Option(None, "--kind", help="Only this kind (tcp, udp, latency, connect, rdma, ...)."),
    status: str = typer.Option(None, "--status", help="Only ok, failed or skipped runs."),
    peer: str = typer.Option(None, "--peer", help="Only runs against this peer (as given to --peer)."),
    param: list[str] = typer.Option(
        [], "--param", help="Only runs with this parameter, KEY=VALUE (repeatable)."
    ),
    limit: int = typer.Option(20, "--limit", "-n", min=1, max=100000, help="Newest runs to show."),
    db: str = DB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Stored runs, newest first, with their headline numbers."""
    from fabricscope.report.history import print_runs

    if status is not None and status not in ("ok", "failed", "skipped"):
        die("--status takes ok, failed or skipped")
    try:
        with _open(db) as store:
            runs = store.list(
                kind=kind, status=status, peer=peer, params=_params_filter(param) or None, limit=limit
            )
    except MissingHistory as exc:
        return _nothing_stored(exc, {"schema": "fabricscope.history/v1", "runs": []}, json_out)
    if json_out:
        print_json({"schema": "fabricscope.history/v1", "runs": [r.result.to_json_dict() for r in runs]})
        return
    filtered = bool(kind or status or peer or param)
    print_runs(runs, _console(), empty_note="" if filtered else f" (database {escape(str(store.path))})")


@history_app.command("show")
def show(
    run_id: int = typer.Argument(..., help="Run id (see `history list`)."),
    db: str = DB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """One run in full: parameters, metrics, counter deltas, thresholds."""
    from fabricscope.report.bench import print_stored

    with _open(db) as store:
        run = store.get(run_id)
    if json_out:
        print_json(run.result.to_json_dict())
        return
    print_stored(run.id, run.result, _console())


def _baseline_for(store, run, baseline: str | None, against: int | None, last: int):
    """The baseline runs: a named baseline, one other run, or the last N matching runs."""
    if baseline is not None and against is not None:
        die("give either a second run id or --baseline, not both")
    if baseline is not None:
        named = store.get_baseline(baseline)
        if named.kind != run.result.kind:
            die(f"baseline {baseline!r} is of kind {named.kind}, run {run.id} is {run.result.kind}")
        return [
            r.result for r in store.results(named.run_ids)
        ], f"baseline {baseline!r} (runs {', '.join(map(str, named.run_ids))})"
    if against is not None:
        other = store.get(against)
        if other.result.kind != run.result.kind:
            die(
                f"run {against} is {other.result.kind}, run {run.id} is {run.result.kind}: compare like with like"
            )
        return [other.result], f"run {against}"
    params = {k: v for k, v in run.result.params.items() if k not in ("timeout_s",)}
    previous = [
        r for r in store.list(kind=run.result.kind, status="ok", params=params, limit=None) if r.id < run.id
    ][:last]
    if not previous:
        die(
            f"no earlier completed {run.result.kind} run with the same parameters to compare run {run.id} with; give a run id or --baseline"
        )
    return [
        r.result for r in previous
    ], f"the last {len(previous)} matching runs ({', '.join(str(r.id) for r in previous)})"


@history_app.command("compare")
def compare_cmd(
    run_id: int = typer.Argument(..., help="The run to judge."),
    against: int = typer.Argument(
        None, help="Compare with this run (default: --baseline, else the last matching runs)."
    ),
    baseline: str = typer.Option(None, "--baseline", "-B", help="Compare with this named baseline."),
    last: int = typer.Option(
        5,
        "--last",
        min=1,
        max=1000,
        help="Without a baseline: this many earlier runs with the same parameters.",
    ),
    threshold_pct: float = typer.Option(
        5.0,
        "--threshold-pct",
        min=0,
        max=1000,
        help="A change smaller than this percentage is never a regression.",
    ),
    mad_k: float = typer.Option(
        3.0,
        "--mad-k",
        min=0,
        max=1000,
        help="...nor one within this many robust standard deviations (1.4826 x MAD).",
    ),
    db: str = DB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Each metric's change against a baseline; exit 1 when any metric regressed."""
    from fabricscope.bench.results.history import judge
    from fabricscope.report.history import compare_doc, print_compare

    with _open(db) as store:
        run = store.get(run_id)
        base_runs, label = _baseline_for(store, run, baseline, against, last)
    if run.result.status.value != "ok":
        die(
            f"run {run_id} did not complete ({run.result.status.value}: {run.result.reason}); nothing to compare"
        )
    cmp = judge(run_id, run.result, base_runs, label, threshold_pct=threshold_pct, mad_k=mad_k)
    if json_out:
        print_json(compare_doc(cmp))
    else:
        print_compare(cmp, _console())
    raise typer.Exit(1 if cmp.regressions else 0)


@baseline_app.command("set")
def baseline_set(
    name: str = typer.Argument(..., help="Baseline name."),
    run_ids: list[int] = typer.Argument(None, help="Runs to use (completed, one kind)."),
    last: int = typer.Option(
        None, "--last", min=1, max=1000, help="Instead of ids: the last N completed runs of --kind."
    ),
    kind: str = typer.Option(None, "--kind", help="With --last: the kind of run."),
    peer: str = typer.Option(None, "--peer", help="With --last: only runs against this peer."),
    note: str = typer.Option(None, "--note", help="Free text kept with the baseline."),
    db: str = DB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Create or replace a named baseline from runs."""
    from fabricscope.bench.results.history import baseline_stats

    with _open(db) as store:
        if last is not None:
            if run_ids:
                die("give run ids or --last, not both")
            if kind is None:
                die("--last needs --kind")
            run_ids = [r.id for r in store.list(kind=kind, status="ok", peer=peer, limit=last)]
        if not run_ids:
            die("no runs given (run ids, or --last N --kind K)")
        saved = store.save_baseline(name, run_ids, note=note)
        stats = baseline_stats([r.result for r in store.results(saved.run_ids)])
    _print_baseline(saved, stats, json_out)


@baseline_app.command("show")
def baseline_show(
    name: str = typer.Argument(..., help="Baseline name."),
    db: str = DB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """A baseline's runs and per-metric median and MAD."""
    from fabricscope.bench.results.history import baseline_stats

    with _open(db) as store:
        saved = store.get_baseline(name)
        stats = baseline_stats([r.result for r in store.results(saved.run_ids)])
    _print_baseline(saved, stats, json_out)


@baseline_app.command("list")
def baseline_list(
    db: str = DB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Every named baseline."""
    try:
        with _open(db) as store:
            baselines = store.list_baselines()
    except MissingHistory as exc:
        return _nothing_stored(exc, {"schema": "fabricscope.baselines/v1", "baselines": []}, json_out)
    from fabricscope.report.history import baseline_doc, print_baselines

    if json_out:
        print_json({"schema": "fabricscope.baselines/v1", "baselines": [baseline_doc(b) for b in baselines]})
        return
    print_baselines(baselines, _console())


@baseline_app.command("delete")
def baseline_delete(name: str = typer.Argument(...), db: str = DB_OPTION) -> None:
    """Delete a named baseline (its runs stay)."""
    with _open(db) as store:
        if not store.delete_baseline(name):
            die(f"no baseline named {name!r}")
    _console().print(f"deleted baseline {escape(name)}")


def _print_baseline(saved, stats, json_out: bool) -> None:
    from fabricscope.report.history import baseline_stats_doc, print_baseline

    if json_out:
        print_json(baseline_stats_doc(saved, stats))
    else:
        print_baseline(saved, stats, _console())
