"""One command per lab host, with the environment torchrun would give it."""

from __future__ import annotations

from collections.abc import Sequence

from fabricscope.lab.fabric import LabState
from fabricscope.lab.procgroup import ProcSpec
from fabricscope.lab.runner import Attached, Runner
from fabricscope.lab.spec import LabError, host_index

DEFAULT_MASTER_PORT = 29500


def select_hosts(state: LabState, names: Sequence[str] | None) -> list[str]:
    """Hosts in rank order: all of them (h1 .. hN), or the given ones in the given order."""
    if not names:
        return [h.name for h in state.plan.hosts]
    seen: set[str] = set()
    for name in names:
        host_index(name, state.spec.hosts)
        if name in seen:
            raise LabError(f"host {name} is listed twice")
        seen.add(name)
    return list(names)


def rank_env(state: LabState, hosts: Sequence[str], rank: int, master_port: int) -> dict[str, str]:
    """RANK, WORLD_SIZE, LOCAL_RANK ... as torchrun sets them for one process per node.

    Also names the lab interface for gloo and NCCL's socket transport: inside a namespace the
    machine's hostname resolves to an address that is not in the lab.
    """
    plan = state.plan
    host = plan.host(hosts[rank])
    master = plan.host(hosts[0])
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(len(hosts)),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank),
        "NODE_RANK": str(rank),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(len(hosts)),
        "MASTER_ADDR": master.address,
        "MASTER_PORT": str(master_port),
        "GLOO_SOCKET_IFNAME": host.ports[0].dev,
        "NCCL_SOCKET_IFNAME": host.ports[0].dev,
        "FABRICSCOPE_HOST": host.name,
        "FABRICSCOPE_LAB": state.spec.name,
    }


def host_specs(
    state: LabState,
    command: Sequence[str],
    *,
    hosts: Sequence[str] | None = None,
    master_port: int = DEFAULT_MASTER_PORT,
    passthrough_rank0: bool = False,
) -> list[ProcSpec]:
    if not command:
        raise LabError("no command given (put it after --)")
    order = select_hosts(state, hosts)
    specs = []
    for rank, name in enumerate(order):
        ns = state.plan.host(name).namespace
        specs.append(
            ProcSpec(
                label=name,
                argv=("ip", "netns", "exec", ns, *command),
                env=rank_env(state, order, rank, master_port),
                passthrough_stdout=passthrough_rank0 and rank == 0,
            )
        )
    return specs


def exec_on_host(
    state: LabState, host: str, command: Sequence[str], timeout_s: float | None, runner: Runner | None = None
) -> Attached:
    """``lab exec``: one command in one host's namespace, attached to the terminal."""
    if not command:
        raise LabError("no command given (put it after --)")
    host_index(host, state.spec.hosts)
    ns = state.plan.host(host).namespace
    return (runner or Runner()).run_attached(["ip", "netns", "exec", ns, *command], timeout_s)
