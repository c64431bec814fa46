"""``fabricscope sim``: a flow-level model of collectives, training steps and inference on a fabric.

Thin shell: the options come from the scenario models (cli/sim_options.py), ``fabricscope.sim``
does the work, report/sim.py draws the tables. numpy (the ``sim`` extra) is imported only when a
command runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricscope.cli.common import JSON_HELP, die, print_json
from fabricscope.cli.main import app
from fabricscope.cli.sim_options import COLLECTIVE, FABRIC, INFER, TRAIN, TRANSPORT, scenario_options
from fabricscope.report.progress import progress_sink
from fabricscope.sim.params import DEFAULTS, InferPlan, Scenario, TrainPlan

sim_app = typer.Typer(
    name="sim",
    help="Flow-level model of collectives on real topologies: time, algbw/busbw and the bottleneck links.",
    no_args_is_help=True,
)
app.add_typer(sim_app, name="sim")

Calib = Annotated[
    int | None,
    typer.Option(
        "--calibrate",
        help="Fit alpha and efficiency to a stored collective run (its id in the bench history) first.",
    ),
]
Json = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


def need_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:
        die("fabricscope sim needs numpy: pip install 'fabricscope[sim]'")


def echo(lines: list[str]) -> None:
    for line in lines:
        typer.echo(line)


def calibrate(params: dict[str, Any], run_id: int, ranks_topology: bool) -> dict[str, Any]:
    """Calibrate on the fabric the user described, with a run from the bench history; returns the
    report with the fitted parameters under ``applied``."""
    from fabricscope.sim.calibrate import calibrate_scenario, samples_from_result
    from fabricscope.store import Store

    with Store.open(create=False) as store:  # $FABRICSCOPE_DB or the default path; never created here
        samples = samples_from_result(store.get(int(run_id)).result)
    return calibrate_scenario({k: v for k, v in params.items() if k in DEFAULTS}, samples, ranks_topology)


def number(v: Any, name: str) -> float:
    """A positive number given as text (``70e9``, ``1_000``), or exit 2 with one line."""
    try:
        x = float(str(v).replace("_", ""))
    except ValueError:
        die(f"{name} must be a number (e.g. 70e9), got {v!r}")
    if not math.isfinite(x) or x <= 0:
        die(f"{name} must be positive")
    return x


@sim_app.command("collective")
@scenario_options(COLLECTIVE, FABRIC, TRANSPORT, models=(Scenario,))
def collective(scenario: dict[str, Any], calibrate_run: Calib = None, json_out: Json = False) -> None:
    """Time, algbw and busbw (nccl-tests definitions) of one collective, and its bottleneck links."""
    need_numpy()
    from fabricscope.report.sim import collective_lines
    from fabricscope.sim.scenario import build_simulator, normalise, run_collective, summary_line

    params = dict(scenario)
    report = None
    if calibrate_run is not None:
        report = calibrate(params, calibrate_run, ranks_topology=False)
        params.update(report["applied"])
    with progress_sink(json_out) as show:
        sim = build_simulator(normalise(params))
        doc = run_collective(params, sim, progress=show)
    if report:
        doc["calibration"] = report
    if json_out:
        print_json(doc)
        return
    echo(collective_lines(doc, summary_line(sim), bool(params.get("explain"))))


@sim_app.command("infer")
@scenario_options(
    INFER, FABRIC, TRANSPORT, ["explain"], defaults={"transport": "tcp"}, models=(InferPlan, Scenario)
)
def infer(
    scenario: dict[str, Any],
    params: Annotated[str, typer.Option("--params", help="Model parameters, e.g. 70e9.")] = "70e9",
    active_params: Annotated[
        str | None,
        typer.Option("--active-params", help="MoE: parameters active per token, e.g. 13e9 (default: all)."),
    ] = None,
    json_out: Json = False,
) -> None:
    """LLM serving: TP all-reduces and MoE expert alltoalls per token, the KV-cache move from prefill to decode, TPOT and TTFT."""
    need_numpy()
    from fabricscope.report.sim import infer_lines
    from fabricscope.sim.infer import run_infer

    p = {**scenario, "params": number(params, "--params")}
    if active_params is not None:
        p["active_params"] = number(active_params, "--active-params")
    doc = run_infer(p)
    if json_out:
        print_json(doc)
        return
    echo(infer_lines(doc, bool(scenario.get("explain"))))


@sim_app.command("network")
@scenario_options(
    TRAIN,
    INFER,
    [f for f in FABRIC if f != "nodes"],
    [t for t in TRANSPORT if t != "transport"],
    models=(TrainPlan, InferPlan, Scenario),
)
def network(
    scenario: dict[str, Any],
    workload: Annotated[
        str,
        typer.Option(
            "--workload", help="train (tokens/s of a training step) or infer (output tokens/s of a server)."
        ),
    ] = "train",
    candidate: Annotated[
        list[str] | None,
        typer.Option(
            "--candidate",
            help="A network: TRANSPORT[:NxRATE], e.g. ib:8x400G, roce:8x400G, tcp:2x200G, efa (repeatable; default ib, roce, tcp on the system's NICs).",
        ),
    ] = None,
    json_out: Json = False,
) -> None:
    """Which network for a workload: IB vs RoCE vs TCP vs a cloud transport, ratio and reason."""
    need_numpy()
    from fabricscope.report.sim import network_lines
    from fabricscope.sim.network import compare as compare_networks

    with progress_sink(json_out) as show:
        doc = compare_networks(workload, dict(scenario), candidate, progress=show)
    if json_out:
        print_json(doc)
        return
    echo(network_lines(doc))


def parse_vary(items: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for it in items:
        if "=" not in it:
            die(f"--vary takes NAME=V1,V2,... (e.g. transport=ib,roce,tcp), got {it!r}")
        k, v = it.split("=", 1)
        vals = [x.strip() for x in v.split(",") if x.strip()]
        if not vals:
            die(f"--vary {k}: no values")
        out[k.strip().replace("-", "_")] = vals
    return out


@sim_app.command("compare")
@scenario_options(COLLECTIVE, FABRIC, TRANSPORT, TRAIN, models=(Scenario, TrainPlan))
def compare(
    scenario: dict[str, Any],
    vary: Annotated[
        list[str],
        typer.Option(
            "--vary",
            help="A parameter and its values, e.g. transport=ib,roce,tcp or nic-rate=400G,800G (repeatable; the grid is every combination).",
        ),
    ],
    workload: Annotated[
        str, typer.Option("--workload", help="collective or train (every sim train option applies).")
    ] = "collective",
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Write the plot here (.png, .svg or .pdf); without it no file is written."
        ),
    ] = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Print the table only.")] = False,
    json_out: Json = False,
) -> None:
    """Run a grid over any parameters, print a table, and plot it (matplotlib, the plot extra)."""
    need_numpy()
    from fabricscope.report.sim import compare_lines, write_compare_plot
    from fabricscope.sim.compare import compare_base, run_grid

    grid = parse_vary(vary)
    base = compare_base(scenario, workload)
    n = math.prod(len(v) for v in grid.values())
    if n > 200:
        die(f"the grid has {n} combinations; at most 200")
    with progress_sink(json_out) as show:
        doc = run_grid(workload, base, grid, progress=show)
    if plot is not None and not no_plot:  # a file only when asked for (issue 26 item 6)
        try:
            write_compare_plot(doc, plot)
            doc["plot"] = str(plot)
        except ImportError:
            if not json_out:
                echo(compare_lines(doc))
            die("no plot written: matplotlib is not installed (pip install 'fabricscope[plot]')")
    if json_out:
        print_json(doc)
    else:
        echo(compare_lines(doc))
        if doc.get("plot"):
            typer.echo(f"plot written to {doc['plot']}")
