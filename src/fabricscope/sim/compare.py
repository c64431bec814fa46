"""``sim compare``: the same question asked over a grid of parameters, as a table and a plot."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.sim.engine import SCHEMA
from fabricscope.sim.scenario import MAX_SIZES
from fabricscope.units import parse_sizes


def run_grid(workload: str, base: dict[str, Any], vary: dict[str, list[str]],
             tick: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Every combination of ``vary`` applied to ``base``. A combination that is invalid (say, a
    radix too small for the node count) becomes a row with its error, not a failed grid."""
    from fabricscope.sim.scenario import run_collective
    from fabricscope.sim.workloads import run_train

    if not vary:
        raise FabricscopeError("--vary at least one parameter")
    keys = list(vary)
    base = dict(base)
    if "transport" in vary and "routing" not in vary and not base.get("routing"):
        # Routing is the fabric's, not the transport's: every row takes the same routing so that
        # the grid compares transports only (the first transport's default, named in the output).
        from fabricscope.sim.transport import make_transport

        base["routing"] = make_transport(str(vary["transport"][0])).default_routing
    rows: list[dict[str, Any]] = []
    sweep = workload == "collective" and len(parse_sizes(str(base.get("size", "1G")), max_count=MAX_SIZES)) > 1
    if workload == "collective":
        columns = ["time_s", "algbw_GBps", "busbw_GBps"]
    else:
        columns = ["step_time_s", "exposed_comm_s", "comm_share", "tokens_per_s"]
    for combo in itertools.product(*(vary[k] for k in keys)):
        point = dict(zip(keys, combo, strict=False))
        params = {**base, **point}
        row: dict[str, Any] = {"point": point}
        try:
            doc = run_collective(params) if workload == "collective" else run_train(params)
        except FabricscopeError as exc:
            row["error"] = str(exc)
            rows.append(row)
            if tick:
                tick(1)
            continue
        row["metrics"] = {c: doc.get(c) for c in columns}
        row["limited_by"] = doc.get("limited_by") or _train_limit(doc)
        if sweep:
            row["curve"] = [{"size_bytes": r["size_bytes"], "busbw_GBps": r["busbw_GBps"], "time_s": r["time_s"]}
                            for r in doc["results"]]
        rows.append(row)
        if tick:
            tick(1)
    ok = [r for r in rows if "metrics" in r]
    if not ok:
        raise FabricscopeError(f"every combination failed; first error: {rows[0]['error']}")
    return {"schema": SCHEMA, "kind": "compare", "workload": workload, "base": _jsonable(base), "vary": vary,
            "columns": columns, "rows": rows}


def _train_limit(doc: dict[str, Any]) -> str:
    comm = doc.get("comm") or {}
    if not comm:
        return "compute"
    name, worst = max(comm.items(), key=lambda kv: kv[1].get("exposed_s", 0.0))
    return f"{name} ({worst.get('limited_by')})" if worst.get("exposed_s", 0) > 0 else "compute"


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def write_plot(doc: dict[str, Any], path: Path) -> None:
    """busbw against size per combination (a size sweep), else a bar per combination.
    Raises ImportError when matplotlib is missing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if "metrics" in r]
    label = lambda r: ", ".join(f"{k}={v}" for k, v in r["point"].items())  # noqa: E731
    fig, ax = plt.subplots(figsize=(9, 5))
    if rows and "curve" in rows[0]:
        for r in rows:
            xs = [c["size_bytes"] for c in r["curve"]]
            ys = [c["busbw_GBps"] for c in r["curve"]]
            ax.plot(xs, ys, marker="o", label=label(r))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.legend(fontsize=8)
        ax.set_title(f"simulated {doc['base'].get('op', 'all_reduce')} busbw")
    else:
        metric = "busbw_GBps" if doc["workload"] == "collective" else "tokens_per_s"
        names = [label(r) for r in rows]
        vals = [r["metrics"][metric] for r in rows]
        ax.barh(range(len(vals)), vals)
        ax.set_yticks(range(len(vals)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(metric)
        ax.set_title(f"simulated {doc['workload']}: {metric}")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise FabricscopeError(f"cannot write plot {path}: {exc}") from None
    finally:
        plt.close(fig)
