"""A run that tested nothing is not a pass (issue 26 item 2).

Every benchmark with a threshold is walked through its "nothing was tested" paths: a skipped
run (no RDMA device or perftest), a UDP sender that did not offer the load a loss threshold is
about, a collective or matrix job of one rank, a collective whose every size was skipped. Each
ends with one line and exit 2 (no verdict) and still prints (and stores) what it has; none
exits 0. The walk is held to the command tree: a new threshold option on a benchmark that this
file does not walk fails ``test_every_threshold_is_walked``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer.main

from fabricscope.bench.results.schema import BenchResult, Status, new_result
from fabricscope.bench.results.thresholds import Threshold, apply_thresholds, untested_reason
from fabricscope.cli.main import _register, app
from tests.bench.conftest import run_cli

# command -> (module of its runner, runner name, the threshold options it takes with a value)
SOCKET_RUNNERS = {
    "tcp": ("fabricscope.bench.sockets.tcp", "run_tcp", {"--min-gbps": "10"}),
    "udp": ("fabricscope.bench.sockets.udp", "run_udp", {"--min-gbps": "1", "--max-loss-pct": "0.1"}),
    "latency": ("fabricscope.bench.sockets.latency", "run_latency", {"--max-p99-us": "100"}),
    "connect": ("fabricscope.bench.sockets.connect", "run_connect", {"--min-connect-per-s": "1000"}),
}
# Walked below by real runs (rdma: this machine's own skip; collective, matrix: one rank).
REAL_WALKS = {"rdma": {"--min-gbps", "--max-lat-us"}, "collective": {"--min-busbw"}}


def _threshold_options() -> dict[str, set[str]]:
    _register(["bench"])
    bench = typer.main.get_command(app).commands["bench"]  # type: ignore[attr-defined]
    found: dict[str, set[str]] = {}
    for name, cmd in bench.commands.items():
        for param in cmd.params:
            if getattr(param, "rich_help_panel", None) == "Verdict":
                found.setdefault(name, set()).update(o for o in param.opts if o.startswith("--"))
    return found


def test_every_threshold_is_walked() -> None:
    walked = {name: set(opts) for name, (_, _, opts) in SOCKET_RUNNERS.items()} | REAL_WALKS
    assert _threshold_options() == walked


@pytest.mark.parametrize("command", sorted(SOCKET_RUNNERS))
def test_a_skipped_socket_run_with_a_threshold_exits_2(command: str, monkeypatch, capsys) -> None:
    """The generic path: whatever makes a run skip, a threshold turns the skip into exit 2."""
    import importlib

    module, runner, options = SOCKET_RUNNERS[command]

    def skipped(params, **_kw) -> BenchResult:
        return new_result(command, params).skip("no such path here (test)")

    monkeypatch.setattr(importlib.import_module(module), runner, skipped)
    _register(["bench"])  # the command modules add themselves; this test may run first in its process
    root = typer.main.get_command(app)
    for option, value in options.items():
        argv = ["bench", command, "--peer", "127.0.0.1:9", option, value, "--json", "--no-store"]
        with pytest.raises(SystemExit) as exc:
            root.main(args=argv, prog_name="fabricscope")
        out, err = capsys.readouterr()
        assert exc.value.code == 2, (argv, err)
        assert json.loads(out)["status"] == "skipped"  # what it has is still printed
        assert (
            err.count("\n") == 1 and "nothing was tested (no such path here (test))" in err and option in err
        ), err
        # and without the threshold a skip is still a clean exit 0
    with pytest.raises(SystemExit) as exc:
        root.main(args=["bench", command, "--peer", "127.0.0.1:9", "--no-store"], prog_name="fabricscope")
    assert exc.value.code == 0


def test_rdma_without_a_device_is_no_pass(tmp_path: Path, isolated_db) -> None:
    """The reported case: `bench rdma --min-gbps 360` on a node without RDMA (or perftest)."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    for option in REAL_WALKS["rdma"]:
        proc = run_cli(
            "bench", "rdma", "--peer", "192.0.2.1", option, "360", "--json", env={"PATH": str(empty)}
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "nothing was tested" in proc.stderr and option in proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["status"] == "skipped" and doc["thresholds"]["passed"] is False
        assert doc["thresholds"]["checks"][0]["untested"].startswith("nothing was tested")


def test_udp_that_did_not_offer_the_load_cannot_pass_a_loss_threshold(peer: str) -> None:
    """One Python sender on loopback cannot offer 90 Gb/s; 20 Mb/s it can (the control)."""
    short = run_cli(
        "bench",
        "udp",
        "--peer",
        peer,
        "--rate",
        "90G",
        "-t",
        "0.5",
        "--max-loss-pct",
        "50",
        "--json",
        "--no-store",
    )
    assert short.returncode == 2, short.stderr
    assert "the sender reached" in short.stderr and "--max-loss-pct cannot pass" in short.stderr
    doc = json.loads(short.stdout)
    assert doc["metrics"]["sent_gbps"] < 0.9 * doc["metrics"]["offered_gbps"]
    met = run_cli(
        "bench",
        "udp",
        "--peer",
        peer,
        "--rate",
        "20M",
        "-t",
        "0.5",
        "--max-loss-pct",
        "50",
        "--json",
        "--no-store",
    )
    assert met.returncode == 0, met.stderr
    assert json.loads(met.stdout)["thresholds"]["passed"] is True


@pytest.mark.parametrize("command", ["collective", "matrix"])
def test_a_one_rank_job_is_refused_with_how_to_launch(command: str, tmp_path: Path) -> None:
    env = {k: "" for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "PMI_RANK", "PMI_SIZE")}  # fmt: skip
    for extra in ([], ["--launch", "local:1"]):
        proc = run_cli("bench", command, *extra, "--no-store", env=env)
        assert proc.returncode == 2, proc.stderr
        assert (
            proc.stderr.count("\n") == 1
            and "single process" in proc.stderr
            and "--launch local:N" in proc.stderr
        )
        assert "--single-rank" in proc.stderr


def test_a_collective_that_measured_no_size_is_no_verdict() -> None:
    """--min-busbw on a run whose every size was skipped (too large for the memory) is exit 2,
    judged by the same threshold the command uses."""
    from fabricscope.cli.collective import _measured

    result = new_result("collective", {}).finish({"busbw_avg_GBps": 0.0})
    result.entries = []
    thresholds = [Threshold("busbw_avg_GBps", ">=", 1.0, "--min-busbw", needs=_measured)]
    assert apply_thresholds(result, thresholds) == []  # not a threshold failure (exit 1)...
    assert "no message size was measured" in (
        untested_reason(result, thresholds) or ""
    )  # ...no verdict (exit 2)
    assert result.thresholds["passed"] is False and result.status == Status.OK
