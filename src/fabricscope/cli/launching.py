"""Commands that run as a job: `--launch` starts the ranks here, otherwise the rank joins the job
its launcher (srun, torchrun, mpirun) describes. Shared by `bench collective|matrix` and `fleet`."""

from __future__ import annotations

import os

import typer

from fabricscope.cli.common import die
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.launch import DistEnv, LaunchError, detect, lab_specs, local_specs, parse_launch

LAUNCH_HELP = (
    "Start the job here instead of joining one: local:N (N processes on this machine) or "
    "lab:NAME[:h1,h5,...] (one rank per lab host, in this order). Without it, the job is read from "
    "torchrun, srun or mpirun variables."
)


def launch_ranks(launch: str, child_args: list[str], timeout_s: float, master_port: int | None) -> None:
    """Start every rank (each runs this same command without --launch) and exit with the worst status."""
    from fabricscope.lab.procgroup import run_group

    try:
        spec = parse_launch(launch)
        specs = local_specs(spec.count or 1, child_args, port=master_port) if spec.kind == "local" else lab_specs(spec, child_args, port=master_port)
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
        die(f"{len(failed)} of {len(specs)} ranks failed (first: {first}, {how})")  # the run could not complete
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
