"""``fabricscope sim train``: one Megatron-LM training step on a fabric (sim/training.py).

Its options are TrainPlan's and the fabric's (cli/sim_options.py), the same ``sim compare
--workload train`` takes; report/sim.py draws the table.
"""

from __future__ import annotations

from typing import Any

from fabricscope.cli.common import print_json
from fabricscope.cli.sim import Calib, Json, calibrate, echo, need_numpy, number, sim_app
from fabricscope.cli.sim_options import FABRIC, TRAIN, TRANSPORT, scenario_options
from fabricscope.sim.params import Scenario, TrainPlan


@sim_app.command("train")
@scenario_options(
    TRAIN, [f for f in FABRIC if f != "nodes"], TRANSPORT, ["explain"], models=(TrainPlan, Scenario)
)
def train(scenario: dict[str, Any], calibrate_run: Calib = None, json_out: Json = False) -> None:
    """One Megatron-LM training step: compute, bubble, TP/PP/DP/EP/CP communication, TFLOP/s per GPU."""
    need_numpy()
    from fabricscope.report.sim import train_lines
    from fabricscope.sim.workloads import run_train

    p = dict(scenario)
    for key in ("params", "tokens_per_step"):
        if key in p:
            p[key] = number(p[key], "--" + key.replace("_", "-"))
    report = None
    if calibrate_run is not None:
        report = calibrate(p, calibrate_run, ranks_topology=True)
        p.update(report["applied"])
    doc = run_train(p)
    if report:
        doc["calibration"] = report
    if json_out:
        print_json(doc)
        return
    echo(train_lines(doc, bool(p.get("explain"))))
