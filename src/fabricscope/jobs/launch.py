"""Who am I in the job? Launcher environments (torchrun, Slurm, Open MPI, MPICH/PMI) and spawning.

A benchmark process either joins a job from its environment (:func:`detect`) or is asked to
start the job itself: ``local:N`` starts N processes here, ``lab:NAME`` one per lab host
(through :mod:`fabricscope.lab`, which sits beside bench in the domain layer and knows
nothing of benchmarks).
"""

from __future__ import annotations

import dataclasses
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from fabricscope.errors import FabricscopeError
from fabricscope.jobs.nodelist import NODELIST_ENV, NodeListError, expand_hostlist
from fabricscope.jobs.secret import launcher_environment
from fabricscope.lab.procgroup import ProcSpec

DEFAULT_PORT = 29500


class LaunchError(FabricscopeError):
    """The job's environment is incomplete or contradictory."""


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str  # torchrun | slurm | openmpi | mpich | single
    host_label: str | None = None  # FABRICSCOPE_HOST (lab) or None (use the hostname)

    def env(self) -> dict[str, str]:
        return {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


def _int(environ: Mapping[str, str], key: str) -> int | None:
    value = environ.get(key)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise LaunchError(f"{key}={value!r} is not an integer") from None


def first_slurm_host(nodelist: str) -> str:
    """First host of a Slurm hostlist: ``gpu[03-05,9],cpu1`` -> ``gpu03``."""
    try:
        return expand_hostlist(nodelist)[0]
    except NodeListError as exc:
        raise LaunchError(str(exc)) from None


def detect(
    environ: Mapping[str, str],
    *,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> DistEnv:
    """The job this process belongs to, from the variables its launcher set.

    Order: torchrun-style (RANK/WORLD_SIZE), Open MPI, MPICH/Hydra (PMI_*), Slurm; none of them
    means a single process. MPI launchers do not say where rank 0 runs: pass MASTER_ADDR.
    """
    label = environ.get("FABRICSCOPE_HOST") or None
    started_by = environ.get("FABRICSCOPE_LAUNCHER") or None  # set by --launch local:N / lab:NAME
    addr = master_addr or environ.get("MASTER_ADDR") or None
    port = master_port or _int(environ, "MASTER_PORT")
    for launcher, rank_key, size_key, local_keys in (
        ("torchrun", "RANK", "WORLD_SIZE", ("LOCAL_RANK",)),
        ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_RANK",)),
        ("mpich", "PMI_RANK", "PMI_SIZE", ("MPI_LOCALRANKID", "PMI_LOCAL_RANK")),
        ("slurm", "SLURM_PROCID", "SLURM_NTASKS", ("SLURM_LOCALID",)),
    ):
        rank = _int(environ, rank_key)
        size = _int(environ, size_key)
        if rank is None and size is None:
            continue
        if rank is None or size is None:
            raise LaunchError(f"{launcher}: {rank_key} and {size_key} must both be set")
        if size < 1 or not 0 <= rank < size:
            raise LaunchError(f"{launcher}: rank {rank} is outside a job of {size}")
        local = next((v for v in (_int(environ, k) for k in local_keys) if v is not None), 0)
        if launcher == "slurm":
            if addr is None:
                nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
                if not nodelist:
                    raise LaunchError("slurm: SLURM_JOB_NODELIST is not set; pass --master-addr")
                addr = first_slurm_host(nodelist)
            if port is None:
                job = _int(environ, "SLURM_JOB_ID") or 0
                port = 20000 + job % 20000  # one port per job: concurrent jobs on a node do not collide
        if addr is None:
            if size == 1:
                addr = "127.0.0.1"
            else:
                raise LaunchError(
                    f"{launcher}: MASTER_ADDR is not set; pass --master-addr (the host of rank 0)"
                )
        return DistEnv(rank, size, local, addr, port or DEFAULT_PORT, started_by or launcher, label)
    return DistEnv(0, 1, 0, addr or "127.0.0.1", port or DEFAULT_PORT, "single", label)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class LaunchSpec:
    kind: str  # local | lab
    count: int | None = None  # local:N
    lab: str | None = None
    hosts: tuple[str, ...] = ()  # lab:NAME:h1,h5,...


def parse_launch(text: str) -> LaunchSpec:
    """``local:4`` or ``lab:NAME`` or ``lab:NAME:h1,h5,h2,h6`` (hosts in rank order)."""
    kind, _, rest = text.partition(":")
    if kind == "local":
        try:
            count = int(rest)
        except ValueError:
            raise LaunchError(f"--launch {text!r}: write local:N, e.g. local:4") from None
        if not 1 <= count <= 256:
            raise LaunchError(f"--launch {text!r}: N must be 1..256")
        return LaunchSpec("local", count=count)
    if kind == "lab":
        name, _, hosts = rest.partition(":")
        if not name:
            raise LaunchError(f"--launch {text!r}: write lab:NAME")
        return LaunchSpec("lab", lab=name, hosts=tuple(h.strip() for h in hosts.split(",") if h.strip()))
    raise LaunchError(f"--launch {text!r}: use local:N or lab:NAME")


@dataclass(frozen=True)
class Flag:
    """How one parameter travels to a launched rank: its option and the value as the option reads it.

    A bool with ``negative`` becomes ``option`` or ``negative``; a bool without one is given only
    when true. ``repeat`` gives a list as the option once per item. None is never passed (the
    rank's default is None too).
    """

    option: str
    text: Callable[[Any], str] = str
    negative: str | None = None
    repeat: bool = False

    def argv(self, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, bool):
            return [self.option] if value else ([self.negative] if self.negative else [])
        if self.repeat:
            return [arg for item in value for arg in (self.option, self.text(item))]
        return [self.option, self.text(value)]


def toggle(name: str) -> Flag:
    """``--name/--no-name``."""
    return Flag(f"--{name}", negative=f"--no-{name}")


Flags = Mapping[
    str, "Flag | str | None"
]  # field -> Flag, an option taking str(value), or None: not an option


def child_argv(command: Sequence[str], params: Any, flags: Flags, extra: Sequence[str] = ()) -> list[str]:
    """The arguments of a launched rank: ``command``, every field of ``params`` as its option, ``extra``.

    ``params`` is the validated parameter model (pydantic, or a dataclass): the ranks rebuild it
    from these options, so they run exactly what the launcher checked. Every field must have an
    entry in ``flags`` (None for a field no option sets, which the rank then leaves at its
    default): a new parameter without one raises here instead of being silently dropped.
    """
    values = _fields(params)
    missing = sorted(set(values) - set(flags))
    if missing:
        raise LaunchError(
            f"no launch option for {type(params).__name__}.{', '.join(missing)} (jobs/launch.py child_argv)"
        )
    argv = list(command)
    for name, value in values.items():
        flag = flags[name]
        if flag is not None:
            argv += (Flag(flag) if isinstance(flag, str) else flag).argv(value)
    return argv + list(extra)


def _fields(params: Any) -> dict[str, Any]:
    if isinstance(params, BaseModel):
        return {name: getattr(params, name) for name in type(params).model_fields}
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    raise TypeError(f"child_argv takes a pydantic model or a dataclass, not {type(params).__name__}")


def self_command(args: Sequence[str]) -> list[str]:
    """This fabricscope, run again with ``args`` (the launched ranks run the same program)."""
    return [sys.executable, "-m", "fabricscope", *args]


def local_specs(count: int, args: Sequence[str], *, port: int | None = None) -> list[ProcSpec]:
    port = port or free_port()
    job = {**launcher_environment(), NODELIST_ENV: ",".join(f"local{rank}" for rank in range(count))}
    specs = []
    for rank in range(count):
        env = {
            **job,
            "RANK": str(rank),
            "WORLD_SIZE": str(count),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(count),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "GLOO_SOCKET_IFNAME": "lo",
            "FABRICSCOPE_HOST": f"local{rank}",
            "FABRICSCOPE_LAUNCHER": f"local:{count}",
        }
        specs.append(ProcSpec(f"rank {rank}", tuple(self_command(args)), env, passthrough_stdout=rank == 0))
    return specs


def lab_specs(spec: LaunchSpec, args: Sequence[str], *, port: int | None = None) -> list[ProcSpec]:
    from fabricscope.lab.fabric import Labs, require_root
    from fabricscope.lab.run import DEFAULT_MASTER_PORT, host_specs

    require_root()
    state = Labs().load(spec.lab or "")
    if state.status != "up":
        raise LaunchError(f"lab {spec.lab} is not up")
    specs = host_specs(
        state,
        self_command(args),
        hosts=spec.hosts or None,
        master_port=port or DEFAULT_MASTER_PORT,
        passthrough_rank0=True,
    )
    job = {**launcher_environment(), NODELIST_ENV: ",".join(s.env.get("FABRICSCOPE_HOST", "") for s in specs)}
    return [
        ProcSpec(
            s.label, s.argv, {**s.env, **job, "FABRICSCOPE_LAUNCHER": f"lab:{spec.lab}"}, s.passthrough_stdout
        )
        for s in specs
    ]
