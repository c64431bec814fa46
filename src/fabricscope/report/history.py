"""The history's text and documents: stored runs, comparisons against a baseline, baselines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fabricscope.bench.results.history import Comparison, MetricChange, MetricStat, SuspectChange
from fabricscope.report.bench import headline_text, plain_number

VERDICT_STYLES = {
    "regression": "bold red",
    "improvement": "green",
    "same": "dim",
    "info": "dim",
    "new": "cyan",
    "missing": "yellow",
}
SUSPECT_STYLES = {"new": "bold red", "persisting": "yellow", "resolved": "green", "unknown": "dim"}


def _table(columns: Sequence[str], right: Sequence[str] = (), **kwargs: Any) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", **kwargs)
    for col in columns:
        table.add_column(col, justify="right" if col in right else "left")
    return table


# ----- history list -------------------------------------------------------------------------------
def print_runs(runs: Sequence[Any], out: Console, *, empty_note: str = "") -> None:
    """Stored runs (``store.StoredRun``), newest first, with their headline numbers."""
    if not runs:
        out.print("no stored runs match" + empty_note)
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
    out.print(table)


# ----- history compare ----------------------------------------------------------------------------
def compare_doc(cmp: Comparison) -> dict[str, Any]:
    """The ``fabricscope.compare/v1`` document."""
    regressions = cmp.regressions
    doc: dict[str, Any] = {
        "schema": "fabricscope.compare/v1",
        "run_id": cmp.run_id,
        "kind": cmp.result.kind,
        "baseline": cmp.baseline_label,
        "threshold_pct": cmp.threshold_pct,
        "mad_k": cmp.mad_k,
        "regressions": len(regressions),
        "regressed": regressions,
        "changes": [c.__dict__ for c in cmp.changes],
    }
    if cmp.result.kind == "collective":
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
            for s in cmp.sizes
        ]
    if cmp.result.kind == "matrix":
        doc["suspects"] = [{**s.__dict__, "label": s.label} for s in cmp.suspects]
    return doc


def _change(c: MetricChange) -> str:
    return "-" if c.change_pct is None else f"{c.change_pct:+.1f} %"


def _change_row(label: str, c: MetricChange) -> tuple[str, ...]:
    """One compared number as a row: label, baseline, its MAD, the run's value, change, verdict."""
    return (
        label,
        plain_number(c.baseline),
        plain_number(c.spread),
        plain_number(c.value),
        _change(c),
        _verdict(c.verdict),
    )


def _verdict(verdict: str) -> str:
    return f"[{VERDICT_STYLES[verdict]}]{verdict}[/{VERDICT_STYLES[verdict]}]"


def print_compare(cmp: Comparison, out: Console) -> None:
    """The comparison as tables: busbw per size (collective), every metric, suspects (matrix)."""
    out.print(
        f"[bold]run {cmp.run_id}[/bold] ({cmp.result.kind}) against {escape(cmp.baseline_label)}; "
        f"regression = worse by > {cmp.threshold_pct:g} % and > {cmp.mad_k:g} sigma"
    )
    right = ("size (B)", "baseline GB/s", "baseline", "MAD", "run GB/s", "run", "change")
    if cmp.sizes:
        table = _table(("size (B)", "baseline GB/s", "MAD", "run GB/s", "change", "verdict"), right,
                       title="busbw by message size", title_justify="left")  # fmt: skip
        for s in cmp.sizes:
            table.add_row(*_change_row(str(s.size_bytes), s.change))
        out.print(table)
    table = _table(("metric", "baseline", "MAD", "run", "change", "verdict"), right)
    for c in cmp.others:
        table.add_row(*_change_row(escape(c.name), c))
    out.print(table)
    if cmp.result.kind == "matrix":
        _print_suspects(out, cmp.result.suspects is None, cmp.suspects)
    regressions = cmp.regressions
    out.print(
        f"{len(regressions)} regression(s)"
        + (": " + ", ".join(escape(name) for name in regressions) if regressions else "")
    )


def _print_suspects(out: Console, not_recorded: bool, suspects: Sequence[SuspectChange]) -> None:
    if not_recorded:
        out.print("suspects: not recorded for this run (stored before fabricscope kept them)")
        return
    if not suspects:
        out.print("suspects: none in this run or its baseline")
        return
    table = _table(("status", "transport", "suspect", "in baseline runs", "retest", "reason"), ("in baseline runs",),
                   title="suspects", title_justify="left")  # fmt: skip
    for s in suspects:
        status = "new" if s.status == "new" and not s.regression else s.status
        retest = {True: "confirmed", False: "cleared", None: "-"}[s.confirmed]
        style = SUSPECT_STYLES[status]
        table.add_row(
            f"[{style}]{status}[/{style}]",
            s.transport,
            f"{s.kind} {escape(s.label)}",
            str(s.baseline_runs),
            retest,
            escape(s.reason or ""),
        )
    out.print(table)


# ----- baselines ----------------------------------------------------------------------------------
def baseline_doc(b: Any) -> dict[str, Any]:
    """One named baseline (``store.Baseline``) as JSON."""
    return {
        "name": b.name,
        "kind": b.kind,
        "run_ids": list(b.run_ids),
        "created": b.created.isoformat(),
        "note": b.note,
    }


def baseline_stats_doc(saved: Any, stats: dict[str, MetricStat]) -> dict[str, Any]:
    """The ``fabricscope.baseline/v1`` document: the baseline and each metric's median and MAD."""
    metrics = {n: {"median": s.median, "mad": s.mad, "n": s.n} for n, s in sorted(stats.items())}
    return {"schema": "fabricscope.baseline/v1", **baseline_doc(saved), "metrics": metrics}


def print_baseline(saved: Any, stats: dict[str, MetricStat], out: Console) -> None:
    out.print(
        f"[bold]baseline {escape(saved.name)}[/bold]: {saved.kind}, runs {', '.join(map(str, saved.run_ids))}"
    )
    table = _table(("metric", "median", "MAD", "runs"), ("median", "MAD", "runs"))
    for n, s in sorted(stats.items()):
        table.add_row(escape(n), plain_number(s.median), plain_number(s.mad), str(s.n))
    out.print(table)


def print_baselines(baselines: Sequence[Any], out: Console) -> None:
    if not baselines:
        out.print("no baselines (create one: fabricscope history baseline set NAME RUN_ID...)")
    for b in baselines:
        out.print(
            f"{escape(b.name)}: {b.kind}, runs {', '.join(map(str, b.run_ids))}, created {b.created:%Y-%m-%d %H:%M}"
            + (f" - {escape(b.note)}" if b.note else "")
        )
