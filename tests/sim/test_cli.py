"""``fabricscope sim``: JSON documents, human output, exit codes, plots."""

from __future__ import annotations

import builtins
import json
import sys
from dataclasses import dataclass

import pytest

from fabricscope.cli.main import main


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def run(capsys, monkeypatch):
    """The real entry point (``fabricscope.cli.main.main``) in this process: same option parsing,
    error handling and exit codes as the installed command, without a subprocess per call.

    main() ends with host.command.shutdown(), which refuses every later child in this process:
    monkeypatch puts the flag back for the tests that run after these."""
    from fabricscope.host import command

    monkeypatch.setattr(command, "_closing", False)

    def invoke(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["fabricscope", "sim", *args])
        capsys.readouterr()
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return invoke


def test_collective_json_document(run) -> None:
    r = run(
        "collective",
        "--topology",
        "rail-optimized",
        "--nodes",
        "4",
        "--gpus-per-node",
        "8",
        "--nic-rate",
        "400G",
        "--op",
        "all_reduce",
        "--algo",
        "ring",
        "--size",
        "1G",
        "--transport",
        "ib",
        "--json",
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["schema"] == "fabricscope.sim/v1" and d["kind"] == "collective"
    for key in ("time_s", "algbw_GBps", "busbw_GBps", "bottlenecks"):
        assert key in d
    assert d["busbw_GBps"] == pytest.approx(d["algbw_GBps"] * 2 * 31 / 32)
    assert d["bottlenecks"][0]["link"] and d["model"]["topology"]["gpus"] == 32


def test_collective_human_output_with_sweep(run) -> None:
    r = run(
        "collective",
        "--topology",
        "leaf-spine",
        "--nodes",
        "8",
        "--gpus-per-node",
        "1",
        "--gpu",
        "none",
        "--hosts-per-leaf",
        "4",
        "--oversubscription",
        "8:1",
        "--nic-rate",
        "1gbit",
        "--transport",
        "tcp",
        "--framing",
        "tbf",
        "--size",
        "1M:4M",
    )
    assert r.exit_code == 0, r.output
    assert "1 MiB" in r.stdout and "4 MiB" in r.stdout and "bottleneck links" in r.stdout
    assert "leaf0->spine0" in r.stdout


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["collective", "--topology", "torus"], "unknown topology"),
        (["collective", "--nic-rate", "fast"], "cannot read rate"),
        (["collective", "--size", "huge"], "cannot read size"),
        (["collective", "--size", "\u00b2"], "cannot read size"),
        (["collective", "--size", "-1M"], "negative"),
        (["collective", "--size", "9P"], "larger than"),
        (["collective", "--size", "1K:1G:1"], "FACTOR"),
        (["collective", "--nic-rate", "25Gbps"], "megaBYTES"),
        (["collective", "--nic-rate", "1e999G"], "above"),
        (["collective", "--loss", "2"], "loss probability"),
        (["collective", "--transport", "smoke-signals"], "unknown transport"),
        (["collective", "--oversubscription", "1:4"], "oversubscription"),
        (["collective", "--topology-file", "/nonexistent.yaml"], "cannot read topology file"),
        (["collective", "--routing", "random"], "ecmp or adaptive"),
        (["train", "--gpus", "100"], "multiple"),
        (["train", "--params", "lots", "--gpus", "8"], "--params"),
        (["collective", "--topology", "leaf-spine", "--spines", "99999999999"], "--spines"),
        (["collective", "--topology", "fat-tree", "--nodes", "64", "--tiers", "9"], "--tiers"),
        (["infer", "--gpus-per-node", "0"], "--gpus-per-node"),
        (["compare", "--vary", "transport"], "NAME=V1"),
        (["compare", "--vary", "bogus=1,2"], "--vary bogus: not a parameter"),
        (["compare", "--vary", "nodes=x,y", "--no-plot"], "every combination failed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run, args, match) -> None:
    r = run(*args)
    assert r.exit_code == 2, r.output
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and match in err[0] and "Traceback" not in r.output


def test_train_and_infer(run) -> None:
    r = run(
        "train",
        "--params",
        "70e9",
        "--gpus",
        "256",
        "--tp",
        "8",
        "--pp",
        "4",
        "--gpu-tflops",
        "700",
        "--tokens-per-step",
        "4194304",
        "--json",
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["kind"] == "train" and d["tokens_per_s"] > 0 and 0 < d["comm_share"] < 1
    r = run("train", "--params", "70e9", "--gpus", "256", "--tp", "8", "--pp", "4")
    assert r.exit_code == 0 and "tokens per second" in r.stdout
    r = run(
        "train",
        "--layers",
        "32",
        "--hidden",
        "4096",
        "--gpus",
        "128",
        "--tp",
        "8",
        "--pp",
        "2",
        "--cp",
        "2",
        "--ep",
        "2",
        "--experts",
        "8",
        "--virtual-stages",
        "2",
        "--recompute",
        "full",
        "--no-sequence-parallel",
        "--dp-collective",
        "zero",
        "--system",
        "dgx-h100",
        "--json",
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert set(d["breakdown"]) >= {
        "compute_s",
        "bubble_s",
        "tensor_parallel",
        "pipeline_parallel",
        "data_parallel",
        "expert_parallel",
        "context_parallel",
    }
    for part in ("tensor_parallel", "data_parallel"):
        b = d["breakdown"][part]
        assert b["total_s"] == pytest.approx(b["exposed_s"] + b["overlapped_s"])
    assert d["workload"]["recompute"] == "full" and d["workload"]["sequence_parallel"] is False
    r = run("train", "--gpus", "64", "--recompute", "half")
    assert r.exit_code == 2 and "--recompute" in r.stderr
    r = run("infer", "--params", "8e9", "--tp", "4", "--batch", "8")
    assert r.exit_code == 0, r.output
    assert "tcp_per_request" in r.stdout and "rdma_pooled" in r.stdout
    r = run("infer", "--json")
    assert json.loads(r.stdout)["kind"] == "infer"


def test_compare_table_and_plots(run, tmp_path) -> None:
    png = tmp_path / "c.png"
    r = run(
        "compare",
        "--vary",
        "transport=ib,roce,tcp",
        "--vary",
        "nic-rate=200G,400G",
        "--nodes",
        "4",
        "--plot",
        str(png),
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") >= 7 and "busbw_GBps" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "c.svg"
    r = run(
        "compare",
        "--vary",
        "routing=ecmp,adaptive",
        "--topology",
        "fat-tree",
        "--nodes",
        "64",
        "--size",
        "1M:16M",
        "--plot",
        str(svg),
        "--json",
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["kind"] == "compare" and len(d["rows"]) == 2 and "curve" in d["rows"][0]
    assert svg.read_text().lstrip().startswith("<?xml")
    r = run("compare", "--workload", "train", "--gpus", "64", "--vary", "nic-rate=100G,400G", "--no-plot")
    assert r.exit_code == 0, r.output and "tokens_per_s" in r.stdout


def test_compare_bad_cell_is_reported_in_its_row(run) -> None:
    r = run("compare", "--vary", "topology=star,single-node", "--nodes", "2", "--no-plot")
    assert r.exit_code == 0, r.output
    assert "error: single-node topology has exactly one node" in r.stdout


def test_compare_without_matplotlib(run, monkeypatch, tmp_path) -> None:
    real_import = builtins.__import__

    def no_mpl(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    monkeypatch.chdir(tmp_path)
    r = run("compare", "--vary", "transport=ib,tcp")  # no --plot: no file, nothing to say about matplotlib
    assert r.exit_code == 0 and "matplotlib" not in r.stderr
    assert list(tmp_path.iterdir()) == []
    r = run("compare", "--vary", "transport=ib,tcp", "--plot", str(tmp_path / "x.png"))
    assert r.exit_code == 2 and "matplotlib is not installed" in r.stderr


def test_calibrate_from_history(run, tmp_path, monkeypatch) -> None:
    from fabricscope.bench.results.schema import new_result
    from fabricscope.store import Store

    sizes = [2**k for k in range(16, 26, 2)]
    res = new_result("collective", {"op": "all_reduce", "world_size": 4})
    res.finish({f"size_{s}_time_s": 6 * 30e-6 + 1.5 * s / 0.11e9 for s in sizes})
    db = tmp_path / "h.sqlite3"
    with Store.open(db) as st:
        rid = st.save(res)
    monkeypatch.setenv("FABRICSCOPE_DB", str(db))
    base = [
        "collective",
        "--topology",
        "star",
        "--nodes",
        "4",
        "--gpus-per-node",
        "1",
        "--gpu",
        "none",
        "--nic-rate",
        "1gbit",
        "--transport",
        "tcp",
        "--size",
        "64M",
    ]
    r = run(*base, "--calibrate", str(rid), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    cal = d["calibration"]
    assert cal["run_id"] == rid and cal["max_abs_error_after"] < 0.05
    # 0.11 GB/s of 0.125: efficiency 0.88
    assert cal["applied"]["efficiency"] == pytest.approx(0.88, rel=0.02)
    assert d["busbw_GBps"] == pytest.approx(0.11, rel=0.03)
    r = run(*base, "--calibrate", "12345")
    assert r.exit_code == 2 and "no run with id 12345" in r.stderr
    r = run(
        "train",
        "--gpus",
        "8",
        "--tp",
        "1",
        "--gpus-per-node",
        "2",
        "--transport",
        "tcp",
        "--nic-rate",
        "1gbit",
        "--calibrate",
        str(rid),
        "--json",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["calibration"]["ranks"] == 4


def test_sim_incast_takes_the_ports_gso_frames(run) -> None:
    # The lab's port queues GSO packets of up to 9 frames whole; the same fabric with a frame-by-frame
    # port loses fewer segments per drop (docs/sim.md, incast).
    args = (
        "incast",
        "--transport",
        "tcp",
        "--senders",
        "4",
        "--link-rate",
        "200mbit",
        "--queue",
        "64KiB",
        "--rtt-us",
        "50",
        "--sender-burst",
        "128KiB",
        "--rounds",
        "40",
        "--json",
    )
    whole = json.loads(run(*args, "--port-gso-frames", "9").stdout)
    frames = json.loads(run(*args).stdout)
    assert whole["fabric"]["switch_gso_frames"] == 9 and frames["fabric"]["switch_gso_frames"] == 1
    assert whole["points"][0]["goodput_gbps"] < frames["points"][0]["goodput_gbps"]
    bad = run("incast", "--port-gso-frames", "0")
    assert bad.exit_code == 2 and "port-gso-frames" in bad.output


def test_compare_train_takes_every_plan_option(run) -> None:
    """``sim compare --workload train`` accepts the same plan options as ``sim train`` (issue 23
    item 6), and each row is what ``sim train`` answers for that point."""
    plan = [
        "--gpus",
        "16",
        "--tp",
        "8",
        "--layers",
        "4",
        "--hidden",
        "2048",
        "--heads",
        "16",
        "--seq-len",
        "2048",
        "--tokens-per-step",
        "65536",
        "--recompute",
        "full",
    ]
    r = run("compare", "--workload", "train", *plan, "--vary", "transport=ib,roce", "--no-plot", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    one = run("train", *plan, "--transport", "roce", "--json")
    assert one.exit_code == 0, one.output
    assert rows[1]["metrics"]["step_time_s"] == json.loads(one.stdout)["step_time_s"]


def test_options_come_from_the_scenario_model() -> None:
    """One schema: every Scenario field is an option of ``sim collective``, with the model's help."""
    import typer

    import fabricscope.cli.sim_train  # noqa: F401  (registers sim train)
    from fabricscope.cli.sim import sim_app
    from fabricscope.sim.params import Scenario, TrainPlan

    commands = typer.main.get_command(sim_app).commands  # type: ignore[attr-defined]
    hidden = {"intra_link", "nvswitch", "nvlink_efficiency"}  # set by --system presets and topology files
    for cmd, model, skip in (
        ("collective", Scenario, hidden),
        ("train", TrainPlan, set()),
        ("compare", TrainPlan, set()),
    ):
        params = {p.name: p for p in commands[cmd].params}
        for name in set(model.model_fields) - skip:
            assert name in params, (cmd, name)
            assert model.model_fields[name].description.split(" [")[0] in params[name].help, (cmd, name)
