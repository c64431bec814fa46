"""An Ethernet fabric from LLDP: each host says which switch port each of its NICs hears, and the
switches' own neighbour tables (where given) say how they are cabled to each other.

LLDP is link-local (IEEE 802.1AB; 802.1D bridges never forward 01:80:c2:00:00:0e), so a host
learns its own switch only. Switch-to-switch cables come from the switches' LLDP tables: SONiC and
Cumulus run lldpd (``lldpctl -f json`` there), the lab runs one lldpd per switch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fabricscope.host.lldp import LldpNeighbor
from fabricscope.topology.model import Attachment, Cable, Discovery


@dataclass(frozen=True)
class NodeLldp:
    """What one host heard, and the speed of each of its NICs (sysfs), where known."""

    host: str
    neighbors: tuple[LldpNeighbor, ...]
    nic_speeds_bps: Mapping[str, float] = field(default_factory=dict)


def _switch_neighbors(neighbors: Sequence[LldpNeighbor], hosts: set[str]) -> dict[str, list[LldpNeighbor]]:
    """Neighbours that are switches (not one of our hosts, not a station), per local interface."""
    out: dict[str, list[LldpNeighbor]] = defaultdict(list)
    for n in neighbors:
        if n.switch and n.switch not in hosts and n.is_switch is not False:
            out[n.interface].append(n)
    return out


def _attachments(nodes: Sequence[NodeLldp], disc: Discovery) -> list[Attachment]:
    hosts = {n.host for n in nodes}
    out = []
    for node in nodes:
        if not node.neighbors:
            disc.warnings.append(
                f"{node.host}: no LLDP neighbour (is lldpd running there, and on its switches?)"
            )
        for interface, heard in sorted(_switch_neighbors(node.neighbors, hosts).items()):
            if len(heard) > 1:
                disc.warnings.append(
                    f"{node.host} {interface} hears {len(heard)} switches ({', '.join(sorted(str(n.switch) for n in heard))}): "
                    f"taking {heard[0].switch}; a switch between them that forwards LLDP would do this"
                )
            n = heard[0]
            rate = node.nic_speeds_bps.get(interface) or n.speed_bps
            out.append(Attachment(node.host, interface, str(n.switch), n.port, rate))
        others = [n for n in node.neighbors if n.switch in hosts]
        if others:
            disc.ignored["host-to-host cable(s)"] = disc.ignored.get("host-to-host cable(s)", 0) + len(others)
    return out


def _cables(
    tables: Mapping[str, Sequence[LldpNeighbor]], switches: set[str], hosts: set[str], disc: Discovery
) -> list[Cable]:
    """Each switch pair's cables, from whichever of its two ends lists more of them (each cable is
    listed by both ends when both tables were read)."""
    sides: dict[tuple[str, str], list[tuple[str, str | None, float | None]]] = defaultdict(list)
    outside = 0
    for switch, neighbors in tables.items():
        for n in neighbors:
            if n.switch in switches and n.switch != switch and n.is_switch is not False:
                sides[(switch, str(n.switch))].append((n.interface, n.port, n.speed_bps))
            elif n.switch not in switches and n.switch not in hosts:
                outside += 1
    if outside:
        disc.ignored["switch port(s) facing hosts outside the job"] = outside
    cables = []
    for a, b in sorted({tuple(sorted(pair)) for pair in sides}):
        ab, ba = sides.get((a, b), []), sides.get((b, a), [])
        if len(ab) >= len(ba):
            cables += [Cable(a, b, local, remote, rate) for local, remote, rate in ab]
        else:
            cables += [Cable(a, b, remote, local, rate) for local, remote, rate in ba]
    return cables


def from_lldp(
    nodes: Sequence[NodeLldp],
    switch_tables: Mapping[str, Sequence[LldpNeighbor]] | None = None,
    name: str = "lldp",
) -> Discovery:
    """Attachments from the hosts' neighbours; cables from the switch tables."""
    disc = Discovery(source="lldp", name=name, attachments=[])
    disc.attachments = _attachments(nodes, disc)
    tables = dict(switch_tables or {})
    switches = {a.switch for a in disc.attachments} | set(tables)
    unknown = set(tables) - {a.switch for a in disc.attachments}
    for switch in sorted(unknown):
        if not any(n.switch in switches for n in tables[switch]):
            disc.warnings.append(f"switch table {switch}: no neighbour in this fabric")
    disc.cables = _cables(tables, switches, {n.host for n in nodes}, disc)
    return disc
