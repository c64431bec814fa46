"""``fabricscope history ...``: list, show and compare stored bench results; baselines.

Other modules add commands with ``from fabricscope.cli.history import history_app``.
"""

from __future__ import annotations

import re
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from fabricscope.cli.common import JSON_HELP, print_json
from fabricscope.cli.main import app
from fabricscope.errors import FabricscopeError

history_app = typer.Typer(
    name="history",
    help="List, show and compare stored bench results; define baselines (median and MAD).",
    no_args_is_help=True,
)
app.add_typer(history_app, name="history")
baseline_app = typer.Typer(
    name="baseline", help="Named baselines: the median and MAD of chosen runs.", no_args_is_help=True
)
history_app.add_typer(baseline_app, name="baseline")

DB_HELP = "History database (default $FABRICSCOPE_DB or the user data directory)."


def _err(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"fabricscope: error: {message}", err=True)
    return typer.Exit(code)


def _open(db: str | None):
    from fabricscope.store import Store

    try:
        return Store.open(db)
    except FabricscopeError as exc:
        raise _err(str(exc)) from None


def _console():
    from fabricscope.report.terminal import console

    return console()


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _params_filter(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _err(f"--param takes KEY=VALUE, got {item!r}")
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
    db: str = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Stored runs, newest first, with their headline numbers."""
    from fabricscope.bench.history import headline_text

    if status is not None and status not in ("ok", "failed", "skipped"):
        raise _err("--status takes ok, failed or skipped")
    with _open(db) as store:
        runs = store.list(
            kind=kind, status=status, peer=peer, params=_params_filter(param) or None, limit=limit
        )
    if json_out:
        print_json({"schema": "fabricscope.history/v1", "runs": [r.result.to_json_dict() for r in runs]})
        return
    if not runs:
        _console().print(
            "no stored runs match"
            + ("" if (kind or status or peer or param) else f" (database {escape(str(store.path))})")
        )
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("id", "started (UTC)", "kind", "status", "peer", "result", "time"):
        table.add_column(col, justify="right" if col in ("id", "time") else "left", no_wrap=col != "result")
    for run in runs:
        r = run.result
        head = headline_text(r) if r.status.value == "ok" else (r.reason or "")[:50]
        style = {"failed": "red", "skipped": "yellow"}.get(r.status.value, "")
        table.add_row(
            str(run.id),
            r.started.strftime("%Y-%m-%d %H:%M"),
            r.kind,
            f"[{style}]{r.status.value}[/{style}]" if style else r.status.value,
            escape(r.peer or "-"),
            escape(head),
            f"{r.duration_s:.1f} s",
        )
    _console().print(table)


@history_app.command("show")
def show(
    run_id: int = typer.Argument(..., help="Run id (see `history list`)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """One run in full: parameters, metrics, counter deltas, thresholds."""
    from fabricscope.bench.counters import counter_lines

    with _open(db) as store:
        run = store.get(run_id)
    r = run.result
    if json_out:
        print_json(r.to_json_dict())
        return
    out = _console()
    out.print(
        f"[bold]run {run.id}[/bold]: {r.kind} {r.status.value} at {r.started.isoformat()} ({r.duration_s:.2f} s) on {escape(r.host.hostname or '?')}"
    )
    if r.reason:
        out.print(f"  reason: {escape(r.reason)}")
    out.print("  params: " + escape(", ".join(f"{k}={v}" for k, v in r.params.items())))
    structured = _structured_text(r)
    metrics = {k: v for k, v in r.metrics.items() if not (structured and _per_item_metric(k))}
    if metrics:
        table = Table(box=None, pad_edge=False, header_style="bold")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in metrics.items():
            table.add_row(escape(name), _fmt(value))
        out.print(table)
    if structured:
        out.print(escape(structured), end="", soft_wrap=True, highlight=False)
    for line in counter_lines(r):
        out.print(f"  {escape(line)}")
    if r.thresholds.get("checks"):
        for check in r.thresholds["checks"]:
            out.print(
                f"  threshold {escape(check['option'])} {check['limit']}: {'pass' if check['passed'] else 'FAIL'} ({check['value']})"
            )


def _per_item_metric(name: str) -> bool:
    """Per-size (collective) and per-pair (older matrix runs) metrics: the tables show them."""
    return bool(re.match(r"^size_\d+_", name)) or (name.startswith("pair_") and name.endswith("_gbps"))


def _structured_text(r) -> str:
    """The nccl-tests-like table of a collective run, or the matrices and suspects of a matrix run."""
    if r.kind == "collective" and r.entries:
        from fabricscope.bench.collective import format_entries

        return format_entries(r)
    if r.kind == "matrix" and r.hosts and r.matrix_gbps is not None:
        from fabricscope.bench.matrix import format_matrix

        return format_matrix(r)
    return ""


def _baseline_for(store, run, baseline: str | None, against: int | None, last: int):
    """The baseline runs: a named baseline, one other run, or the last N matching runs."""
    if baseline is not None and against is not None:
        raise _err("give either a second run id or --baseline, not both")
    if baseline is not None:
        named = store.get_baseline(baseline)
        if named.kind != run.result.kind:
            raise _err(f"baseline {baseline!r} is of kind {named.kind}, run {run.id} is {run.result.kind}")
        return [
            r.result for r in store.results(named.run_ids)
        ], f"baseline {baseline!r} (runs {', '.join(map(str, named.run_ids))})"
    if against is not None:
        other = store.get(against)
        if other.result.kind != run.result.kind:
            raise _err(
                f"run {against} is {other.result.kind}, run {run.id} is {run.result.kind}: compare like with like"
            )
        return [other.result], f"run {against}"
    params = {k: v for k, v in run.result.params.items() if k not in ("timeout_s",)}
    previous = [
        r for r in store.list(kind=run.result.kind, status="ok", params=params, limit=None) if r.id < run.id
    ][:last]
    if not previous:
        raise _err(
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
        5.0, "--threshold-pct", min=0, help="A change smaller than this percentage is never a regression."
    ),
    mad_k: float = typer.Option(
        3.0, "--mad-k", min=0, help="...nor one within this many robust standard deviations (1.4826 x MAD)."
    ),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Each metric's change against a baseline; exit 1 when any metric regressed."""
    from fabricscope.bench.history import baseline_stats, compare, size_changes, suspect_changes

    with _open(db) as store:
        run = store.get(run_id)
        base_runs, label = _baseline_for(store, run, baseline, against, last)
    if run.result.status.value != "ok":
        raise _err(
            f"run {run_id} did not complete ({run.result.status.value}: {run.result.reason}); nothing to compare"
        )
    stats = baseline_stats(base_runs)
    changes = compare(run.result, stats, threshold_pct=threshold_pct, mad_k=mad_k)
    kind = run.result.kind
    sizes, others = size_changes(changes) if kind == "collective" else ([], changes)
    suspects = suspect_changes(run.result, base_runs) if kind == "matrix" else []
    regressions = [c.name for c in changes if c.verdict == "regression"]
    regressions += [f"new suspect {s.label}" + (" (rdma)" if s.transport == "rdma" else "") for s in suspects if s.regression]
    if json_out:
        doc: dict[str, Any] = {
            "schema": "fabricscope.compare/v1",
            "run_id": run_id,
            "kind": kind,
            "baseline": label,
            "threshold_pct": threshold_pct,
            "mad_k": mad_k,
            "regressions": len(regressions),
            "regressed": regressions,
            "changes": [c.__dict__ for c in changes],
        }
        if kind == "collective":
            doc["sizes"] = [
                {
                    "size_bytes": s.size_bytes,
                    "baseline_busbw_GBps": s.change.baseline,
                    "mad_GBps": s.change.spread,
                    "busbw_GBps": s.change.value,
                    "change_pct": s.change.change_pct,
                    "robust_z": s.change.robust_z,
                    "verdict": s.change.verdict,
                }
                for s in sizes
            ]
        if kind == "matrix":
            doc["suspects"] = [{**s.__dict__, "label": s.label} for s in suspects]
        print_json(doc)
    else:
        out = _console()
        out.print(
            f"[bold]run {run_id}[/bold] ({kind}) against {escape(label)}; regression = worse by > {threshold_pct:g} % and > {mad_k:g} sigma"
        )
        if sizes:
            table = Table(box=None, pad_edge=False, header_style="bold", title="busbw by message size", title_justify="left")
            for col in ("size (B)", "baseline GB/s", "MAD", "run GB/s", "change", "verdict"):
                table.add_column(col, justify="left" if col == "verdict" else "right")
            for s in sizes:
                c = s.change
                table.add_row(str(s.size_bytes), _fmt(c.baseline), _fmt(c.spread), _fmt(c.value), _change(c), _verdict(c.verdict))
            out.print(table)
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("metric", "baseline", "MAD", "run", "change", "verdict"):
            table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
        for c in others:
            table.add_row(escape(c.name), _fmt(c.baseline), _fmt(c.spread), _fmt(c.value), _change(c), _verdict(c.verdict))
        out.print(table)
        if kind == "matrix":
            _print_suspects(out, run.result, suspects)
        out.print(
            f"{len(regressions)} regression(s)"
            + (": " + ", ".join(escape(name) for name in regressions) if regressions else "")
        )
    raise typer.Exit(1 if regressions else 0)


_STYLES = {
    "regression": "bold red",
    "improvement": "green",
    "same": "dim",
    "info": "dim",
    "new": "cyan",
    "missing": "yellow",
}


def _change(c) -> str:
    return "-" if c.change_pct is None else f"{c.change_pct:+.1f} %"


def _verdict(verdict: str) -> str:
    return f"[{_STYLES[verdict]}]{verdict}[/{_STYLES[verdict]}]"


def _print_suspects(out, result, suspects) -> None:
    if result.suspects is None:
        out.print("suspects: not recorded for this run (stored before fabricscope kept them)")
        return
    if not suspects:
        out.print("suspects: none in this run or its baseline")
        return
    table = Table(box=None, pad_edge=False, header_style="bold", title="suspects", title_justify="left")
    for col in ("status", "transport", "suspect", "in baseline runs", "retest", "reason"):
        table.add_column(col, justify="right" if col == "in baseline runs" else "left")
    style = {"new": "bold red", "persisting": "yellow", "resolved": "green", "unknown": "dim"}
    for s in suspects:
        status = "new" if s.status == "new" and not s.regression else s.status
        retest = {True: "confirmed", False: "cleared", None: "-"}[s.confirmed]
        table.add_row(
            f"[{style[status]}]{status}[/{style[status]}]",
            s.transport,
            f"{s.kind} {escape(s.label)}",
            str(s.baseline_runs),
            retest,
            escape(s.reason or ""),
        )
    out.print(table)


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
    db: str = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Create or replace a named baseline from runs."""
    from fabricscope.bench.history import baseline_stats

    with _open(db) as store:
        if last is not None:
            if run_ids:
                raise _err("give run ids or --last, not both")
            if kind is None:
                raise _err("--last needs --kind")
            run_ids = [r.id for r in store.list(kind=kind, status="ok", peer=peer, limit=last)]
        if not run_ids:
            raise _err("no runs given (run ids, or --last N --kind K)")
        saved = store.save_baseline(name, run_ids, note=note)
        stats = baseline_stats([r.result for r in store.results(saved.run_ids)])
    _print_baseline(saved, stats, json_out)


@baseline_app.command("show")
def baseline_show(
    name: str = typer.Argument(..., help="Baseline name."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """A baseline's runs and per-metric median and MAD."""
    from fabricscope.bench.history import baseline_stats

    with _open(db) as store:
        saved = store.get_baseline(name)
        stats = baseline_stats([r.result for r in store.results(saved.run_ids)])
    _print_baseline(saved, stats, json_out)


@baseline_app.command("list")
def baseline_list(
    db: str = typer.Option(None, "--db", help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Every named baseline."""
    with _open(db) as store:
        baselines = store.list_baselines()
    if json_out:
        print_json({"schema": "fabricscope.baselines/v1", "baselines": [_baseline_doc(b) for b in baselines]})
        return
    if not baselines:
        _console().print("no baselines (create one: fabricscope history baseline set NAME RUN_ID...)")
    for b in baselines:
        _console().print(
            f"{escape(b.name)}: {b.kind}, runs {', '.join(map(str, b.run_ids))}, created {b.created:%Y-%m-%d %H:%M}"
            + (f" - {escape(b.note)}" if b.note else "")
        )


@baseline_app.command("delete")
def baseline_delete(
    name: str = typer.Argument(...), db: str = typer.Option(None, "--db", help=DB_HELP)
) -> None:
    """Delete a named baseline (its runs stay)."""
    with _open(db) as store:
        if not store.delete_baseline(name):
            raise _err(f"no baseline named {name!r}")
    _console().print(f"deleted baseline {escape(name)}")


def _baseline_doc(b) -> dict[str, Any]:
    return {
        "name": b.name,
        "kind": b.kind,
        "run_ids": list(b.run_ids),
        "created": b.created.isoformat(),
        "note": b.note,
    }


def _print_baseline(saved, stats, json_out: bool) -> None:
    if json_out:
        print_json(
            {
                "schema": "fabricscope.baseline/v1",
                **_baseline_doc(saved),
                "metrics": {
                    n: {"median": s.median, "mad": s.mad, "n": s.n} for n, s in sorted(stats.items())
                },
            }
        )
        return
    out = _console()
    out.print(
        f"[bold]baseline {escape(saved.name)}[/bold]: {saved.kind}, runs {', '.join(map(str, saved.run_ids))}"
    )
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("metric", "median", "MAD", "runs"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for n, s in sorted(stats.items()):
        table.add_row(escape(n), _fmt(s.median), _fmt(s.mad), str(s.n))
    out.print(table)
