"""A topology file read back for people: switch tiers, hosts per leaf, capacity down and up.

Tiers are counted from the hosts: a switch with NICs attached is tier 1 (a leaf), a switch one
hop above the nearest leaf tier 2 (a spine), and so on. Only the explicit-graph form has
cabling to show; family files (``kind: fat-tree``) describe none.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricscope.host.infiniband import natural_key
from fabricscope.topology.model import TopologyError
from fabricscope.units import format_rate, parse_rate

_ATTACH = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*(?:/\s*(\d+))?\s*$")


@dataclass(frozen=True)
class LinkView:
    a: str
    b: str
    rate_bps: float
    count: int = 1


@dataclass
class FabricView:
    name: str
    hosts: list[str]
    nics_per_node: int
    nic_rate_bps: float
    switches: list[str]
    links: list[LinkView]
    nics_of: dict[str, list[tuple[str, int]]]  # switch -> [(host, nic index)]
    node_rate_bps: dict[str, float] = field(
        default_factory=dict
    )  # host -> its NICs' rate, where not nic_rate
    tiers: dict[str, int] = field(default_factory=dict)

    def host_rate(self, host: str) -> float:
        return self.node_rate_bps.get(host, self.nic_rate_bps)

    def by_tier(self) -> dict[int, list[str]]:
        out: dict[int, list[str]] = defaultdict(list)
        for s in self.switches:
            out[self.tiers.get(s, 0)].append(s)
        return dict(sorted(out.items()))


def _tiers(switches: list[str], links: list[LinkView], leaves: set[str]) -> dict[str, int]:
    near: dict[str, set[str]] = defaultdict(set)
    for link in links:
        near[link.a].add(link.b)
        near[link.b].add(link.a)
    tier = {s: 1 for s in leaves}
    frontier = sorted(leaves)
    while frontier:
        nxt = []
        for s in frontier:
            for n in near[s]:
                if n not in tier:
                    tier[n] = tier[s] + 1
                    nxt.append(n)
        frontier = nxt
    return {s: tier.get(s, 0) for s in switches}  # 0: not connected to any host


def _attach_items(entry: Any, nodes: int, nics: int) -> list[tuple[int, int]]:
    match = _ATTACH.match(str(entry))
    if not match:
        raise TopologyError(f"topology file: cannot read attach entry {entry!r}")
    lo = int(match.group(1))
    hi = int(match.group(2)) if match.group(2) else lo
    which = [int(match.group(3))] if match.group(3) else list(range(nics))
    return [(n, k) for n in range(lo, min(hi, nodes - 1) + 1) for k in which]


def view_from_document(doc: dict[str, Any]) -> FabricView:
    """The explicit-graph document (already checked by the simulator's loader) as a view."""
    if "switches" not in doc:
        raise TopologyError(
            f"topology file describes the family {doc.get('kind')!r}, not cabling: nothing to show"
        )
    nodes = int(doc["nodes"])
    nics = int(doc.get("nics_per_node") or doc.get("gpus_per_node") or 8)
    hosts = [str(h) for h in doc.get("hosts") or [f"node{i}" for i in range(nodes)]]
    nic_bps = parse_rate(str(doc.get("nic_rate", "400G")))
    links = []
    for item in doc.get("links") or []:
        if isinstance(item, list):
            item = {"a": item[0], "b": item[1], **({"rate": item[2]} if len(item) > 2 else {})}
        links.append(
            LinkView(
                str(item["a"]),
                str(item["b"]),
                parse_rate(str(item.get("rate", doc.get("nic_rate", "400G")))),
                int(item.get("count", 1)),
            )
        )
    nics_of: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for switch, entries in (doc.get("attach") or {}).items():
        for entry in entries if isinstance(entries, list) else [entries]:
            nics_of[str(switch)] += [(hosts[n], k) for n, k in _attach_items(entry, nodes, nics)]
    rates = {hosts[int(n)]: parse_rate(str(r)) for n, r in (doc.get("node_nic_rate") or {}).items()}
    switches = [str(s) for s in doc["switches"]]
    view = FabricView(
        str(doc.get("name", "custom")), hosts, nics, nic_bps, switches, links, dict(nics_of), rates
    )
    view.tiers = _tiers(switches, links, {s for s in nics_of if nics_of[s]})
    return view


def load_view(path: str | Path) -> FabricView:
    """Read and check a topology file with the simulator's own loader, then view it."""
    from fabricscope.sim.custom import load_document, load_topology

    doc = load_document(path)
    if "switches" in doc or str(doc.get("kind", "custom")).lower() == "custom":
        load_topology(path)  # the same checks `sim --topology-file` applies
    return view_from_document(doc)


@dataclass(frozen=True)
class SwitchLoad:
    switch: str
    tier: int
    hosts: int
    nics: int
    down_bps: float
    up_bps: float
    up_cables: int

    @property
    def ratio(self) -> float | None:
        """Oversubscription down:up (None at the top tier)."""
        return self.down_bps / self.up_bps if self.up_bps else None


def switch_loads(view: FabricView) -> list[SwitchLoad]:
    """Per switch: NICs and capacity towards hosts (down) and towards higher tiers (up)."""
    down: dict[str, float] = defaultdict(float)
    up: dict[str, float] = defaultdict(float)
    cables: dict[str, int] = defaultdict(int)
    for s, items in view.nics_of.items():
        down[s] += sum(view.host_rate(h) for h, _ in items)
    for link in view.links:
        ta, tb = view.tiers.get(link.a, 0), view.tiers.get(link.b, 0)
        if ta == tb:
            continue
        low, high = (link.a, link.b) if ta < tb else (link.b, link.a)
        up[low] += link.rate_bps * link.count
        cables[low] += link.count
        down[high] += link.rate_bps * link.count
    return [
        SwitchLoad(
            s,
            view.tiers.get(s, 0),
            len({h for h, _ in view.nics_of.get(s, [])}),
            len(view.nics_of.get(s, [])),
            down[s],
            up[s],
            cables[s],
        )
        for s in sorted(view.switches, key=lambda s: (view.tiers.get(s, 0), natural_key(s)))
    ]


def uneven_uplinks(view: FabricView) -> list[str]:
    """Switches with fewer uplink cables than most of their tier: a cable missing or down."""
    loads = [load for load in switch_loads(view) if load.up_cables]
    notes = []
    for tier in sorted({load.tier for load in loads}):
        row = [load for load in loads if load.tier == tier]
        counts = Counter(load.up_cables for load in row)
        usual, seen = counts.most_common(1)[0]
        if seen * 2 <= len(row):
            continue  # no majority: a design, not a missing cable
        notes += [
            f"{load.switch} has {load.up_cables} uplink cable(s) where {seen} of the {len(row)} tier-{tier} switches have {usual}"
            for load in row
            if load.up_cables < usual
        ]
    return notes


def _host_list(names: list[str], limit: int = 6) -> str:
    names = sorted(set(names), key=natural_key)
    return ", ".join(names) if len(names) <= limit else f"{', '.join(names[:3])} ... {names[-1]}"


def summary_lines(view: FabricView, *, show_hosts: bool = True) -> list[str]:
    """The tree as text: a header, then one line per switch, tier by tier (top first)."""
    tiers = view.by_tier()
    rates = sorted({view.host_rate(h) for h in view.hosts})
    rate_text = "/".join(format_rate(r) for r in rates)
    lines = [
        f"{view.name}: {len(view.hosts)} host(s) x {view.nics_per_node} NIC(s) at {rate_text}bit/s, "
        f"{len(view.switches)} switch(es) in {len([t for t in tiers if t])} tier(s)"
    ]
    width = max((len(s) for s in view.switches), default=6)
    by_switch = {load.switch: load for load in switch_loads(view)}
    for tier in sorted(tiers, reverse=True):
        label = {0: "not connected to any host", 1: "leaves", 2: "spines", 3: "cores"}.get(tier, "")
        head = f"tier {tier} ({label})" if tier and label else f"tier {tier}" if tier else label
        lines.append(f"{head}: {len(tiers[tier])} switch(es)")
        for s in tiers[tier]:
            load = by_switch[s]
            parts = []
            if load.nics:
                who = f": {_host_list([h for h, _ in view.nics_of[s]])}" if show_hosts else ""
                parts.append(f"{load.nics} NIC(s) of {load.hosts} host(s){who}")
            parts.append(f"down {format_rate(load.down_bps)}" if load.down_bps else "down -")
            if load.up_cables:
                parts.append(f"up {format_rate(load.up_bps)} on {load.up_cables} cable(s)")
                parts.append(f"{load.ratio:.2f}:1" if load.ratio is not None else "")
            lines.append(f"  {s:<{width}}  " + ", ".join(p for p in parts if p))
    lines += [f"note: {n}" for n in uneven_uplinks(view)]
    return lines
