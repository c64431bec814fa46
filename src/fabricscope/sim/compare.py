"""``sim compare``: the same question asked over a grid of parameters, as a table and a plot."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.sim.engine import SCHEMA
from fabricscope.sim.scenario import MAX_SIZES
from fabricscope.units import parse_sizes


def run_grid(
    workload: str,
    base: dict[str, Any],
    vary: dict[str, list[str]],
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every combination of ``vary`` applied to ``base``. A combination that is invalid (say, a
    radix too small for the node count) becomes a row with its error, not a failed grid.
    ``progress`` gets one line as each combination is done (report/progress.py shows it); an
    invalid one says nothing there (its error is its row's)."""
    from fabricscope.sim.scenario import run_collective
    from fabricscope.sim.workloads import run_train

    if not vary:
        raise FabricscopeError("--vary at least one parameter")
    from fabricscope.sim.params import DEFAULTS, TrainPlan

    known = set(DEFAULTS) | (set(TrainPlan.model_fields) if workload == "train" else set())
    for k in vary:
        if k not in known:
            raise FabricscopeError(
                f"--vary {k}: not a parameter of {workload} (see fabricscope sim {'train' if workload == 'train' else 'collective'} --help)"
            )
    keys = list(vary)
    base = dict(base)
    if "transport" in vary and "routing" not in vary and not base.get("routing"):
        # Routing is the fabric's, not the transport's: every row takes the same routing so that
        # the grid compares transports only (the first transport's default, named in the output).
        from fabricscope.sim.transport import make_transport

        base["routing"] = make_transport(str(vary["transport"][0])).default_routing
    rows: list[dict[str, Any]] = []
    sweep = (
        workload == "collective" and len(parse_sizes(str(base.get("size", "1G")), max_count=MAX_SIZES)) > 1
    )
    if workload == "collective":
        columns = ["time_s", "algbw_GBps", "busbw_GBps"]
    else:
        columns = ["step_time_s", "exposed_comm_s", "comm_share", "tokens_per_s"]
    combos = list(itertools.product(*(vary[k] for k in keys)))
    for done, combo in enumerate(combos, 1):
        point = dict(zip(keys, combo, strict=False))
        params = {**base, **point}
        row: dict[str, Any] = {"point": point}
        try:
            doc = run_collective(params) if workload == "collective" else run_train(params)
        except FabricscopeError as exc:
            row["error"] = str(exc)
            rows.append(row)
            continue
        row["metrics"] = {c: doc.get(c) for c in columns}
        row["limited_by"] = doc.get("limited_by") or _train_limit(doc)
        if sweep:
            row["curve"] = [
                {"size_bytes": r["size_bytes"], "busbw_GBps": r["busbw_GBps"], "time_s": r["time_s"]}
                for r in doc["results"]
            ]
        rows.append(row)
        if progress:
            progress(
                f"sim compare {done}/{len(combos)} done: " + ", ".join(f"{n}={v}" for n, v in point.items())
            )
    ok = [r for r in rows if "metrics" in r]
    if not ok:
        raise FabricscopeError(f"every combination failed; first error: {rows[0]['error']}")
    return {
        "schema": SCHEMA,
        "kind": "compare",
        "workload": workload,
        "base": _jsonable(base),
        "vary": vary,
        "columns": columns,
        "rows": rows,
    }


def _train_limit(doc: dict[str, Any]) -> str:
    comm = doc.get("comm") or {}
    if not comm:
        return "compute"
    name, worst = max(comm.items(), key=lambda kv: kv[1].get("exposed_s", 0.0))
    return f"{name} ({worst.get('limited_by')})" if worst.get("exposed_s", 0) > 0 else "compute"


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def compare_base(scenario: dict[str, Any], workload: str) -> dict[str, Any]:
    """The parameters every cell shares, without those of the other workload."""
    from fabricscope.sim.params import DEFAULTS, TrainPlan

    if workload not in ("collective", "train"):
        raise FabricscopeError("--workload is collective or train")
    if workload == "train":
        drop = ("nodes", "op", "algo", "proto", "explain", "size", "channels", "node_order", "sharp", "pxn")
        return {k: v for k, v in scenario.items() if k not in drop}
    return {k: v for k, v in scenario.items() if k in DEFAULTS or k not in TrainPlan.model_fields}
