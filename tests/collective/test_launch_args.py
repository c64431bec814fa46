"""`--launch`: a launched rank runs exactly the parameters its launcher validated.

Each command builds its ranks' arguments from the validated parameter model in one place
(jobs/launch.child_argv); here every field of each model goes out as options and comes back
through the command's own option parsing, so a new parameter cannot be forgotten.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import typer.main

from fabricscope.bench.collective import CollectiveParams
from fabricscope.bench.matrix import MatrixParams
from fabricscope.cli import collective as cli_collective
from fabricscope.cli import fleet as cli_fleet
from fabricscope.cli import incast as cli_incast
from fabricscope.cli import topology as cli_topology
from fabricscope.cli.main import app
from fabricscope.jobs.launch import Flag, LaunchError, child_argv
from tests.conftest import TESTS

NOT_AN_OPTION = {
    ("MatrixParams", "retest_peers"),
    ("MatrixParams", "retx_floor_pct"),
    ("MatrixParams", "bind"),
}


def options(argv: list[str]) -> dict[str, Any]:
    """The option values the command line ``argv`` gives its command, parsed by the command itself."""
    command = typer.main.get_command(app)
    args = list(argv)
    while hasattr(command, "list_commands"):  # a group: descend to the named command
        name = args.pop(0)
        command = command.get_command(typer.Context(command), name)
        assert command is not None, name
    return command.make_context(name, args).params


def _every_field_changed(params: Any, default: Any) -> None:
    fields = (
        type(params).model_fields
        if hasattr(type(params), "model_fields")
        else {f.name: f for f in dataclasses.fields(params)}
    )
    same = [
        n
        for n in fields
        if getattr(params, n) == getattr(default, n) and (type(params).__name__, n) not in NOT_AN_OPTION
    ]
    assert not same, f"give these a value other than the default, so the round trip tests them: {same}"


def test_collective_parameters_round_trip() -> None:
    params = CollectiveParams(op="alltoall", sizes=[4096, 3 << 20], dtype="half", warmup=3, iters=7, backend="nccl",
                              check=False, root=1, timeout_s=33.5, straggle_rank=2, straggle_s=0.25)  # fmt: skip
    _every_field_changed(params, CollectiveParams())
    argv = child_argv(["bench", "collective"], params, cli_collective.COLLECTIVE_FLAGS)
    o = options(argv)
    again = cli_collective.collective_params(o["op"], o["sizes"], o["dtype"], o["warmup"], o["iters"], o["backend"], o["check"],
                                             o["root"], o["timeout"], o["straggle_rank"], o["straggle_ms"])  # fmt: skip
    assert again == params


def test_matrix_parameters_round_trip() -> None:
    snapshot = str(TESTS / "fixtures" / "hosts" / "roce-healthy")
    params = MatrixParams(duration_s=0.7, warmup_s=0.1, retest=False, rel_margin=0.35, timeout_s=45.0, rdma=False,
                          rdma_test="send_bw", rdma_device="mlx5_3", rdma_port=20000, root=snapshot, topology="discover",
                          lldp_socket="/run/lldpd-{host}.socket", switch_lldp=["lab:x", "leaf1=/tmp/leaf1.json"])  # fmt: skip
    _every_field_changed(params, MatrixParams())
    argv = child_argv(["bench", "matrix"], params, cli_collective.MATRIX_FLAGS)
    o = options(argv)
    again = cli_collective.matrix_params(o["duration"], o["warmup"], o["retest"], o["margin"], o["bind"], o["timeout"], o["rdma"],
                                         o["rdma_test"], o["rdma_device"], o["rdma_port"], o["root"], o["topology"],
                                         o["lldp_socket"], o["switch_lldp"])  # fmt: skip
    assert again == params
    for field, flag in cli_collective.MATRIX_FLAGS.items():  # what no option carries is documented above
        assert (flag is None) == (("MatrixParams", field) in NOT_AN_OPTION), field


@pytest.mark.parametrize("senders", [[2, 3, 8], []], ids=["counts", "every-sender"])
def test_incast_parameters_round_trip(senders: list[int]) -> None:
    from fabricscope.bench.incast import IncastParams

    params = IncastParams(senders=senders, size_bytes=3 << 20, rounds=7, warmup=0, congestion="bbr",
                          round_timeout_s=2.5, join_timeout_s=33.0)  # fmt: skip
    if senders:
        _every_field_changed(params, IncastParams())
    o = options(child_argv(["bench", "incast"], params, cli_incast.INCAST_FLAGS))
    again = cli_incast.incast_params(o["senders"], o["size"], o["rounds"], o["warmup"], o["congestion"],
                                     o["round_timeout"], o["timeout"])  # fmt: skip
    assert again == params


def test_topology_lldp_job_round_trips() -> None:
    job = cli_topology.LldpJob(output="/tmp/fabric.yaml", switch_lldp=("leaf1=/tmp/l1.json", "lab:x"), lldp_socket="/run/{host}.sock",
                               name="pod7", nic_rate="400G", uplink_rate="800G", nics_per_node=4, gpus_per_node=8, gpu="h100",
                               timeout=55.0)  # fmt: skip
    o = options(child_argv(["topology", "discover", "lldp"], job, cli_topology.LLDP_JOB_FLAGS))
    again = cli_topology.LldpJob(o["output"] and str(o["output"]), tuple(o["switch_lldp"]), o["lldp_socket"], o["name"], o["nic_rate"],
                                 o["uplink_rate"], o["nics_per_node"], o["gpus_per_node"], o["gpu"], o["timeout"])  # fmt: skip
    assert again == job and o["source"] == "lldp"


@pytest.mark.parametrize(
    ("command", "job"),
    [
        (["fleet", "doctor"], cli_fleet.DoctorJob("warn", 42.0, "/snap/{host}", "/etc/expect.yaml", "/tmp/f.html", True, True, True,
                                                  "fs=bad:NoSchedule", "fs=bad", True, True)),
        (["fleet", "collect"], cli_fleet.CollectJob("/tmp/docs", 42.0, "/snap/{host}", True, True)),
    ],
    ids=["doctor", "collect"],
)  # fmt: skip
def test_fleet_jobs_round_trip(command: list[str], job: Any) -> None:
    o = options(child_argv(command, job, cli_fleet.JOB_FLAGS))
    o = {
        **o,
        "json_out": o["json_out"],
        "output": o.get("output") and str(o["output"]),
        "html": o.get("html") and str(o["html"]),
    }
    again = type(job)(**{f.name: o[f.name] for f in dataclasses.fields(job)})
    assert again == job


def test_a_field_without_an_option_is_refused() -> None:
    flags = dict(cli_collective.COLLECTIVE_FLAGS)
    del flags["root"]
    with pytest.raises(LaunchError, match="CollectiveParams.root"):
        child_argv(["bench", "collective"], CollectiveParams(), flags)


def test_flags_write_bools_lists_and_absent_values() -> None:
    assert Flag("--x", negative="--no-x").argv(False) == ["--no-x"] and Flag("--x").argv(False) == []
    assert (
        Flag("--s", repeat=True).argv(["a", "b"]) == ["--s", "a", "--s", "b"] and Flag("--n").argv(None) == []
    )
    assert Flag("--p", text=lambda p: str(Path(p).name)).argv("/a/b") == ["--p", "b"]
