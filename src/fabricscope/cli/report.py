"""``fabricscope report RUN_ID... -o report.html``: a self-contained HTML report of stored runs."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricscope.cli.common import DB_OPTION, die
from fabricscope.cli.main import app
from fabricscope.host.tempfiles import atomic_write

AUTO_BASELINE_RUNS = 5


@app.command("report")
def report(
    run_ids: list[int] = typer.Argument(..., help="Stored run ids (see `fabricscope history list`)."),
    output: Path = typer.Option(
        Path("fabricscope-report.html"), "--output", "-o", help="HTML file to write."
    ),
    baseline: str = typer.Option(
        None, "--baseline", "-B", help="Compare runs of its kind with this named baseline."
    ),
    auto_baseline: bool = typer.Option(
        True,
        "--auto-baseline/--no-auto-baseline",
        help=f"Without --baseline: compare each run with up to {AUTO_BASELINE_RUNS} earlier runs of the same parameters.",
    ),
    db: str = DB_OPTION,
) -> None:
    """Parameters, metrics, counter deltas and plots (throughput over time, latency percentiles,
    baseline against run) of stored runs, in one HTML file that needs no network to view."""
    from fabricscope.bench.results.history import baseline_stats
    from fabricscope.report.html import render_report
    from fabricscope.store import Store

    with Store.open(db, create=False) as store:  # a report never creates a history
        runs = store.results(list(dict.fromkeys(run_ids)))
        baselines = {}
        if baseline is not None:
            named = store.get_baseline(baseline)
            stats = baseline_stats([r.result for r in store.results(named.run_ids)])
            for run in runs:
                if run.result.kind == named.kind:
                    baselines[run.id] = (f"baseline {named.name}", stats)
        elif auto_baseline:
            for run in runs:
                if run.result.status.value != "ok":
                    continue
                params = {k: v for k, v in run.result.params.items() if k != "timeout_s"}
                earlier = [
                    r
                    for r in store.list(kind=run.result.kind, status="ok", params=params, limit=None)
                    if r.id < run.id
                ][:AUTO_BASELINE_RUNS]
                if earlier:
                    label = f"median of runs {', '.join(str(r.id) for r in earlier)}"
                    baselines[run.id] = (label, baseline_stats([r.result for r in earlier]))
    html = render_report(runs, baselines)
    target = output.expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, html.encode("utf-8"))
    except OSError as exc:
        die(f"cannot write {target}: {exc.strerror or exc}")
    typer.echo(f"wrote {target} ({len(runs)} run(s), {len(html) // 1024} KiB)")
