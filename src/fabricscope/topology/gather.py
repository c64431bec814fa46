"""Every node's LLDP neighbours, gathered to rank 0 of a job (srun, torchrun, mpirun, or
``--launch lab:NAME``/``local:N``), through the job's store (:mod:`fabricscope.jobs.rendezvous`,
as ``bench matrix`` and ``fleet doctor`` meet), with one participant per host.
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricscope.errors import one_line
from fabricscope.host.lldp import LldpNeighbor, read_lldp
from fabricscope.host.netclass import read_net_devices
from fabricscope.host.root import Root
from fabricscope.jobs import rendezvous
from fabricscope.jobs.launch import DistEnv
from fabricscope.topology.lldp import NodeLldp
from fabricscope.topology.model import TopologyError

MAX_READING_BYTES = 4 * 1024 * 1024


def local_reading(root: Root, host: str, socket_path: str | None = None) -> NodeLldp:
    """This node's neighbours and the speed of each NIC that has one."""
    neighbors = read_lldp(root, socket_path)
    if neighbors is None:
        why = "; ".join(f"{p.source}: {p.reason}" for p in root.problems[-1:]) or "lldpctl is not installed"
        raise TopologyError(f"{host}: no LLDP reading ({why})")
    wanted = {n.interface for n in neighbors}
    speeds = {d.name: d.speed_mbps * 1e6 for d in read_net_devices(root) if d.name in wanted and d.speed_mbps}
    return NodeLldp(host, neighbors, speeds)


def to_wire(node: NodeLldp) -> dict[str, Any]:
    return {
        "host": node.host,
        "neighbors": [asdict(n) for n in node.neighbors],
        "speeds": dict(node.nic_speeds_bps),
    }


def from_wire(doc: Any) -> NodeLldp:
    """A peer's reading, validated field by field (:class:`TopologyError` if it is not one)."""
    try:
        wire = _Wire.model_validate(doc)
        neighbors = tuple(
            LldpNeighbor(**{**n, "capabilities": tuple(n["capabilities"]), "mgmt_ips": tuple(n["mgmt_ips"])})
            for n in wire.neighbors
        )
    except (ValidationError, TypeError, KeyError) as exc:
        raise TopologyError(f"an LLDP reading that is not one: {one_line(exc)}") from None
    return NodeLldp(wire.host, neighbors, dict(wire.speeds))


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(max_length=255)
    neighbors: list[dict[str, Any]] = Field(max_length=1024)
    speeds: dict[str, float] = Field(max_length=1024)


def gather(env: DistEnv, reading: NodeLldp | None, timeout_s: float) -> list[NodeLldp] | None:
    """Rank 0 returns every participant's reading (in rank order); the others None.

    ``reading`` is None on ranks that are not their host's participant (local rank > 0)."""
    if env.world_size == 1:
        return [reading] if reading is not None else []
    items = {"lldp": json.dumps(to_wire(reading))} if reading is not None else {}
    try:
        meeting = rendezvous.open_store(env, timeout_s, needs="gathering across nodes", node=host_label(env))
        try:
            got = rendezvous.gather(meeting, items, timeout_s)
        finally:
            meeting.close()
    except rendezvous.RendezvousError as exc:
        raise TopologyError(f"gathering LLDP readings failed: {exc}") from None
    if got is None:
        return None
    refused = next((g.error for g in got if g.error), None)
    if refused:
        raise TopologyError(f"gathering LLDP readings: {refused}")
    try:
        return [
            from_wire(rendezvous.parse_json(g.items["lldp"], MAX_READING_BYTES))
            for g in got
            if "lldp" in g.items
        ]
    except ValueError as exc:
        raise TopologyError(f"an LLDP reading that is not JSON: {exc}") from None


def host_label(env: DistEnv) -> str:
    return env.host_label or socket.gethostname()
