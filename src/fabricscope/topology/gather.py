"""Every node's LLDP neighbours, gathered to rank 0 of a job (srun, torchrun, mpirun, or
``--launch lab:NAME``/``local:N``), the way ``bench matrix`` coordinates: through
torch.distributed's TCPStore on rank 0, with one participant per host.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from fabricscope.bench.launch import DistEnv
from fabricscope.host.lldp import LldpNeighbor, read_lldp
from fabricscope.host.netclass import read_net_devices
from fabricscope.host.root import Root
from fabricscope.topology.lldp import NodeLldp
from fabricscope.topology.model import TopologyError


def local_reading(root: Root, host: str, socket_path: str | None = None) -> NodeLldp:
    """This node's neighbours and the speed of each NIC that has one."""
    neighbors = read_lldp(root, socket_path)
    if neighbors is None:
        why = "; ".join(f"{p.source}: {p.reason}" for p in root.problems[-1:]) or "lldpctl is not installed"
        raise TopologyError(f"{host}: no LLDP reading ({why})")
    wanted = {n.interface for n in neighbors}
    speeds = {
        d.name: d.speed_mbps * 1e6 for d in read_net_devices(root) if d.name in wanted and d.speed_mbps
    }
    return NodeLldp(host, neighbors, speeds)


def to_wire(node: NodeLldp) -> dict[str, Any]:
    return {"host": node.host, "neighbors": [asdict(n) for n in node.neighbors], "speeds": dict(node.nic_speeds_bps)}


def from_wire(doc: dict[str, Any]) -> NodeLldp:
    neighbors = tuple(
        LldpNeighbor(**{**n, "capabilities": tuple(n["capabilities"]), "mgmt_ips": tuple(n["mgmt_ips"])})
        for n in doc["neighbors"]
    )
    return NodeLldp(str(doc["host"]), neighbors, {str(k): float(v) for k, v in doc["speeds"].items()})


def gather(env: DistEnv, reading: NodeLldp | None, timeout_s: float) -> list[NodeLldp] | None:
    """Rank 0 returns every participant's reading (in rank order); the others None.

    ``reading`` is None on ranks that are not their host's participant (local rank > 0)."""
    if env.world_size == 1:
        return [reading] if reading is not None else []
    try:
        from torch.distributed import TCPStore
    except ImportError:
        raise TopologyError("gathering across nodes needs torch (torch.distributed's store): pip install 'fabricscope[torch]'") from None
    wait = timedelta(seconds=timeout_s)
    try:
        store = TCPStore(env.master_addr, env.master_port, env.world_size, env.rank == 0, timeout=wait, wait_for_workers=True)
    except Exception as exc:
        raise TopologyError(f"rank {env.rank}: cannot reach the job's store at {env.master_addr}:{env.master_port}: {exc}") from None
    try:
        store.set(f"lldp/{env.rank}", json.dumps(to_wire(reading) if reading is not None else None))
        if env.rank != 0:
            store.wait(["lldp/done"], wait)
            store.add("lldp/left", 1)
            return None
        keys = [f"lldp/{r}" for r in range(env.world_size)]
        store.wait(keys, wait)
        docs = [json.loads(store.get(k).decode()) for k in keys]
        store.set("lldp/done", "1")
        end = time.monotonic() + 10.0  # rank 0 hosts the store: let the others read "done" first
        while store.add("lldp/left", 0) < env.world_size - 1 and time.monotonic() < end:
            time.sleep(0.05)
    except Exception as exc:  # a store timeout: a peer died or never came
        raise TopologyError(f"rank {env.rank}: gathering LLDP readings failed: {exc} (deadline {timeout_s:g} s)") from None
    return [from_wire(d) for d in docs if d is not None]


def host_label(env: DistEnv) -> str:
    return env.host_label or socket.gethostname()
