"""``fabricscope ready``: is this allocation ready for this job? One verdict from doctor, the
job's NCCL settings, the pairwise matrix and the job's own collective, each against the model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from fabricscope.cli.common import (
    JSON_OPTION,
    die,
    end_rank,
    print_json,
    read_option,
    scheduler_options,
    validated,
)
from fabricscope.cli.launching import dist_env, launch_options, launch_ranks
from fabricscope.cli.main import app
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.launch import Flag, Flags, child_argv, toggle
from fabricscope.units import parse_sizes, size_token

# How each ReadyParams field reaches a launched rank (jobs/launch.py child_argv).
READY_FLAGS: Flags = {
    "budget_s": "--budget",
    "root": "--root",
    "expect": "--expect",
    "scripts": Flag("--script", repeat=True),
    "env_files": Flag("--env-file", repeat=True),
    "nccl_version": "--nccl-version",
    "topology": "--topology",
    "nic_rate": "--nic-rate",
    "op": "--op",
    "sizes": Flag("--sizes", text=lambda sizes: ",".join(map(size_token, sizes))),
    "dtype": "--dtype",
    "backend": "--backend",
    "rdma": toggle("rdma"),
    "fail_on_warn": Flag("--fail-on", text=lambda warn: "warn" if warn else "fail"),
    "slurm_drain": Flag("--slurm-drain"),
    "k8s_taint": "--k8s-taint",
    "apply": Flag("--apply"),
}


def _absolute(path: str | None) -> str | None:
    return None if path is None else str(Path(path).resolve())


def _read(path: str, option: str) -> tuple[str, str]:
    try:
        return path, Path(path).read_text(errors="replace")
    except OSError as exc:
        die(f"{option} {path}: {exc.strerror or exc}")


def _params(**kw: Any) -> Any:
    from fabricscope.ready.params import ReadyParams

    return validated(ReadyParams, **kw)


def _topology(spec: str | None) -> str | None:
    if spec is None or spec == "discover" or spec.startswith("lab:"):
        return spec
    if not Path(spec).is_file():
        die(f"--topology {spec}: no such file (give a file, lab:NAME or discover)")
    return str(Path(spec).resolve())


def _calibration(choice: str, params: Any, world_size: int) -> Any:
    """The stored collective run the model is calibrated on: ``auto`` the newest of the same
    operation, backend and rank count (none: uncalibrated), ``none``, or a run id."""
    if choice == "none":
        return None
    from fabricscope.store import Store

    try:
        with Store.open(create=False) as store:
            if choice != "auto":
                return store.get(int(choice)).result
            runs = store.list(kind="collective", status="ok", params={"op": params.op, "backend": params.backend,
                                                                      "world_size": world_size}, limit=1)  # fmt: skip
            return runs[0].result if runs else None
    except ValueError:
        die(f"--calibrate {choice!r}: give auto, none or a run id")
    except FabricscopeError as exc:
        if choice == "auto":
            return None  # no history yet: nothing to calibrate on
        die(str(exc))


READY_DRAIN, READY_TAINT, READY_APPLY = scheduler_options(
    "the nodes the verdict blames", drain_note=", as fleet doctor does", rich_help_panel="Scheduler"
)
READY_LAUNCH, READY_MASTER_ADDR = launch_options("Run")


@app.command("ready")
def ready(
    script: list[str] = typer.Option(
        None,
        "--script",
        help="The job's script (Slurm batch file, launcher, manifest): its NCCL settings are linted on every node (repeatable).",
        rich_help_panel="The job",
    ),
    env_file: list[str] = typer.Option(
        None, "--env-file", help="The job's KEY=VALUE settings file (repeatable).", rich_help_panel="The job"
    ),
    expect: str = typer.Option(
        None,
        "--expect",
        help="Expected-hardware manifest (YAML) every node must meet (fleet doctor --expect).",
        rich_help_panel="The nodes",
    ),
    topology: str = typer.Option(
        None,
        "--topology",
        help="The fabric: a topology file, lab:NAME or discover (LLDP). Without it, one non-blocking switch is assumed.",
        rich_help_panel="The fabric",
    ),
    nic_rate: str = typer.Option(
        None,
        "--nic-rate",
        help="Each node's link rate when neither --topology nor doctor says it, e.g. 400G.",
        rich_help_panel="The fabric",
    ),
    op: str = typer.Option(
        "all_reduce",
        "--op",
        help="The job's collective: all_reduce, all_gather, reduce_scatter, alltoall, broadcast, sendrecv.",
        rich_help_panel="The job",
    ),
    sizes: str = typer.Option(
        "64M",
        "--sizes",
        help="The job's message sizes, e.g. 64M or 16M,256M (the largest is judged).",
        rich_help_panel="The job",
    ),
    dtype: str = typer.Option(
        "float", "--dtype", help="Element type of the collective.", rich_help_panel="The job"
    ),
    backend: str = typer.Option(
        "auto", "--backend", help="gloo, nccl or auto (nccl where CUDA GPUs are).", rich_help_panel="The job"
    ),
    rdma: bool = typer.Option(
        True,
        "--rdma/--no-rdma",
        help="Also run the matrix over RDMA where every node has it.",
        rich_help_panel="The fabric",
    ),
    budget: float = typer.Option(
        300.0,
        "--budget",
        min=10,
        max=86400,
        help="Seconds the whole run may take; the steps are sized to fit.",
        rich_help_panel="Run",
    ),
    root: str = typer.Option(
        None,
        "--root",
        help="Read each node from this snapshot or mounted filesystem instead ({host} becomes the node's name).",
        rich_help_panel="The nodes",
    ),
    nccl_version: str = typer.Option(
        None, "--nccl-version", help="NCCL version the job uses (for the lint).", rich_help_panel="The job"
    ),
    calibrate: str = typer.Option(
        "auto",
        "--calibrate",
        help="Stored collective run to calibrate the model on: auto (newest matching), none, or a run id.",
        rich_help_panel="The fabric",
    ),
    fail_on: str = typer.Option(
        "fail",
        "--fail-on",
        help="fail: exit 1 when not ready; warn: also when ready with warnings.",
        rich_help_panel="Output",
    ),
    slurm_drain: bool = READY_DRAIN,
    k8s_taint: str = READY_TAINT,
    apply: bool = READY_APPLY,
    json_out: bool = JSON_OPTION,
    launch: str = READY_LAUNCH,
    master_addr: str = READY_MASTER_ADDR,
    master_port: int = typer.Option(
        None,
        "--master-port",
        min=1,
        max=65532,
        help="Port of rank 0's store (the steps use it and the next three).",
        rich_help_panel="Run",
    ),
) -> None:
    """Is this allocation ready for this job? Run it as the job runs (srun, torchrun, --launch lab:NAME).

    In order, within --budget: fleet doctor on every node, the job's NCCL settings linted on every
    node, the pairwise matrix and the job's own collective, each measured against what the
    simulator predicts for this allocation. Exit 0 ready (or ready with warnings), 1 not ready,
    2 the run could not complete.
    """
    from fabricscope.nccl.job import JobSources
    from fabricscope.ready.params import ReadyError, plan

    if fail_on not in ("fail", "warn"):
        die(f"--fail-on {fail_on!r}: use fail or warn")
    _check_actions(slurm_drain, k8s_taint, apply)
    size_list = read_option("--sizes", parse_sizes, sizes, maximum=8 << 30)
    if expect is not None:
        from fabricscope.fleet.manifest import load_manifest

        load_manifest(Path(expect))  # a bad manifest: one line now, not after the doctor step
    if backend == "auto":
        from fabricscope.cli.collective import auto_backend

        backend = auto_backend()
    params = _params(budget_s=budget, root=root if root is None or Path(root).is_absolute() else str(Path.cwd() / root),
                     expect=_absolute(expect), scripts=[_absolute(s) for s in script or []],
                     env_files=[_absolute(e) for e in env_file or []], nccl_version=nccl_version, topology=_topology(topology),
                     nic_rate=nic_rate, op=op, sizes=size_list, dtype=dtype, backend=backend, rdma=rdma,
                     fail_on_warn=fail_on == "warn", slurm_drain=slurm_drain, k8s_taint=k8s_taint, apply=apply)  # fmt: skip
    sources = JobSources(env_files=[_read(p, "--env-file") for p in params.env_files],
                         scripts=[_read(p, "--script") for p in params.scripts])  # fmt: skip
    if launch:
        try:
            plan(params, 2)
        except ReadyError as exc:
            die(str(exc))
        args = child_argv(["ready"], params, READY_FLAGS, ["--json"] if json_out else [])
        launch_ranks(
            launch, args + ["--calibrate", calibrate], timeout_s=budget + 120, master_port=master_port
        )
    _run(
        params,
        sources if (params.scripts or params.env_files) else None,
        calibrate,
        json_out,
        master_addr,
        master_port,
    )


def _check_actions(slurm_drain: bool, k8s_taint: str | None, apply: bool) -> None:
    """A bad taint or an --apply without an action: one line before anything runs."""
    if apply and not (slurm_drain or k8s_taint):
        die("--apply needs an action: --slurm-drain or --k8s-taint")
    if k8s_taint:
        from fabricscope.fleet.k8s import parse_taint

        try:
            parse_taint(k8s_taint)
        except FabricscopeError as exc:
            die(str(exc))


def _scheduler(run: Any) -> list[dict[str, Any]] | None:
    """Rank 0: the scheduler actions asked for on the verdict's bad nodes (None: none asked for)."""
    p = run.params
    if not (p.slurm_drain or p.k8s_taint):
        return None
    from fabricscope.ready.scheduler import actions

    try:
        return actions(
            run.verdict.drain, run.trusted, slurm_drain=p.slurm_drain, taint=p.k8s_taint, apply=p.apply
        )
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)


def _run(
    params: Any,
    sources: Any,
    calibrate: str,
    json_out: bool,
    master_addr: str | None,
    master_port: int | None,
) -> None:
    from fabricscope.ready.params import ReadyError
    from fabricscope.ready.run import Runner
    from fabricscope.report.ready import prediction_lines, step_lines, summary_lines, to_document, write_lines

    env = dist_env(master_addr, master_port)
    if env.launcher == "single":
        die(
            "run it as the job runs: srun -N 4 fabricscope ready ..., torchrun --nnodes 4 -m fabricscope ready ..., or --launch lab:NAME"
        )
    calibration = _calibration(calibrate, params, env.world_size) if env.rank == 0 else None
    out = sys.stdout
    show = not json_out and env.rank == 0
    try:
        runner = Runner(params, env, sources, calibration=calibration,
                        progress=(lambda step: write_lines(step_lines(step), out)) if show else None)  # fmt: skip
    except ReadyError as exc:
        die(str(exc))
    try:
        run = runner.execute(
            (lambda pred: write_lines(prediction_lines(pred, runner.run.hosts), out)) if show else None
        )
    except FabricscopeError as exc:
        end_rank(str(exc))  # not rank 0: rank 0 reports the step that failed
    if run is None:
        raise typer.Exit(0)  # not rank 0: rank 0 reports
    acted = _scheduler(run)
    if json_out:
        doc = to_document(run)
        if acted is not None:
            doc["actions"] = acted
        print_json(doc)
    else:
        write_lines(summary_lines(run), out)
        if acted is not None:
            from fabricscope.cli.fleet import _show_actions

            _show_actions(acted)
    code = run.verdict.exit_code(params.fail_on_warn)
    if run.error:
        sys.stderr.write(f"fabricscope: error: {run.error}\n")
    sys.stdout.flush()
    raise typer.Exit(code)
