"""Commands that run as a job: `--launch` starts the ranks here, otherwise the rank joins the job
its launcher (srun, torchrun, mpirun) describes. Shared by `bench collective|matrix` and `fleet`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import typer

from fabricscope.cli.common import die
from fabricscope.cli.options import option_group
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.launch import DistEnv, LaunchError, detect, lab_specs, local_specs, parse_launch

LAUNCH_HELP = (
    "Start the job here instead of joining one: local:N (N processes on this machine) or "
    "lab:NAME[:h1,h5,...] (one rank per lab host, in this order). Without it, the job is read from "
    "torchrun, srun or mpirun variables."
)


# The options every job command (bench collective|matrix|incast, fleet) shares, declared once.
def launch_options(panel: str = "Launch") -> tuple[Any, Any]:
    """--launch and --master-addr, in the panel a command lists them in (ready: with its budget)."""
    return (
        typer.Option(None, "--launch", help=LAUNCH_HELP, rich_help_panel=panel),
        typer.Option(
            None,
            "--master-addr",
            help="Host of rank 0 (default MASTER_ADDR; needed under mpirun).",
            rich_help_panel=panel,
        ),
    )


LAUNCH_OPTION, MASTER_ADDR_OPTION = launch_options()


def deadline_option(default: float, what: str, lead: str = "Deadline") -> Any:
    """--timeout of a job the ranks run together: the same range everywhere, ``what`` it bounds."""
    return typer.Option(default, "--timeout", min=1, max=86400, help=f"{lead} in seconds for {what}.")


MASTER_PORT_OPTION = typer.Option(
    None, "--master-port", min=1, max=65535, help="Port of rank 0's store (default MASTER_PORT or 29500).",
    rich_help_panel="Launch",
)  # fmt: skip
SINGLE_RANK_OPTION = typer.Option(
    False, "--single-rank", help="Run as one process on purpose (nothing crosses the network; for trying the command).",
    rich_help_panel="Launch",
)  # fmt: skip
STORE_OPTION = typer.Option(
    True, "--store/--no-store", help="Save the result in the history.", rich_help_panel="Output"
)


@dataclass(frozen=True)
class Ranks:
    """Where a job command's ranks come from: started here (``--launch``), or the job its launcher
    describes, whose rank 0 may be named (``--master-addr``, ``--master-port``)."""

    launch: str | None
    master_addr: str | None
    master_port: int | None


# The three as one parameter of every job command that takes them all (cli/options.option_group).
ranks_options = option_group(
    Ranks, launch=LAUNCH_OPTION, master_addr=MASTER_ADDR_OPTION, master_port=MASTER_PORT_OPTION
)


def output_args(json_out: bool, store: bool) -> list[str]:
    """``--json`` and ``--store/--no-store`` as a launched rank is given them."""
    return (["--json"] if json_out else []) + ["--store" if store else "--no-store"]


def refuse_one_rank(command: str, launch: str | None, world_size: int | None, single_rank: bool) -> None:
    """A job of one rank measures nothing across the network: refuse it (exit 2) with how to
    launch, unless ``--single-rank`` asks for it (issue 26: it used to pass with busbw 0).
    Checked before launching (``--launch local:1``) and in the rank (no launcher around it)."""
    if single_rank:
        return
    if launch is not None:
        try:
            spec = parse_launch(launch)
        except LaunchError as exc:
            die(str(exc))
        world_size = spec.count if spec.kind == "local" else None
    if world_size == 1:
        die(
            f"{command} ran as a single process, which measures nothing across the network: start it with "
            f"--launch local:N or lab:NAME, or under srun, torchrun or mpirun (--single-rank runs one rank on purpose)"
        )


def launch_ranks(launch: str, child_args: list[str], timeout_s: float, master_port: int | None) -> None:
    """Start every rank (each runs this same command without --launch) and exit with the worst status."""
    from fabricscope.lab.procgroup import run_group

    try:
        spec = parse_launch(launch)
        specs = (
            local_specs(spec.count or 1, child_args, port=master_port)
            if spec.kind == "local"
            else lab_specs(spec, child_args, port=master_port)
        )
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    try:
        result = run_group(specs, timeout_s=timeout_s, grace_s=min(30.0, max(5.0, timeout_s / 10)))
    except RuntimeError as exc:
        die(str(exc))
    if result.timed_out:
        die(f"the job did not finish within {timeout_s:g} s; all ranks ended")
    failed = {k: v for k, v in result.codes.items() if v not in (0, 1)}  # 1 = a verdict, reported by rank 0
    if failed:
        first = result.first_failure if result.first_failure in failed else next(iter(failed))
        code = result.codes[first]
        how = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        die(
            f"{len(failed)} of {len(specs)} ranks failed (first: {first}, {how})"
        )  # the run could not complete
    raise typer.Exit(result.worst)


def dist_env(master_addr: str | None, master_port: int | None) -> DistEnv:
    """This rank's place in the job, from its launcher's variables (one line and exit 2 when they are wrong)."""
    try:
        return detect(os.environ, master_addr=master_addr, master_port=master_port)
    except LaunchError as exc:
        die(str(exc))


def absolute_item(item: str) -> str:
    """``SWITCH=FILE`` or ``FILE`` with the file made absolute (ranks may start elsewhere);
    ``lab:NAME`` as is."""
    from pathlib import Path

    if item.startswith("lab:"):
        return item
    name, sep, path = item.partition("=") if "=" in item and not Path(item).exists() else ("", "", item)
    return f"{name}{sep}{Path(path).resolve()}"
