"""What every discovery source produces (cables, as seen) and how that becomes the simulator's
explicit-graph YAML (``docs/sim.md``, "YAML topology files").

A source reports *attachments* (a host NIC cabled to a switch port) and *cables* (switch to
switch). The simulator wants every node to have the same number of NICs, nodes numbered 0..N-1,
and parallel cables counted; :func:`build_document` does that and says what it had to leave out.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.host.infiniband import natural_key
from fabricscope.units import format_rate

SCHEMA = "fabricscope.topology/v1"
ASSUMED_CORE = "assumed-core"


class TopologyError(FabricscopeError):
    """Discovery found nothing usable, or a topology file cannot be used; the message says which."""


@dataclass(frozen=True)
class Attachment:
    """One host NIC and the switch port its cable ends in."""

    host: str
    nic: str  # mlx5_0, HCA-1, eth0 ...
    switch: str
    switch_port: str | None = None
    rate_bps: float | None = None


@dataclass(frozen=True)
class Cable:
    """A switch-to-switch cable."""

    a: str
    b: str
    a_port: str | None = None
    b_port: str | None = None
    rate_bps: float | None = None


@dataclass
class Discovery:
    """Everything one source saw, before it is shaped for the simulator."""

    source: str  # "ibnetdiscover", "lldp", "lab:NAME"
    name: str
    attachments: list[Attachment]
    cables: list[Cable] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)  # what was left out, and how many

    def switches(self) -> list[str]:
        names = {a.switch for a in self.attachments} | {c.a for c in self.cables} | {c.b for c in self.cables}
        return sorted(names, key=natural_key)


@dataclass(frozen=True)
class BuildOptions:
    gpus_per_node: int | None = None  # default: one GPU per NIC
    gpu: str = "none"
    nics_per_node: int | None = None  # default: the most common count
    nic_rate_bps: float | None = None  # overrides what was discovered
    uplink_rate_bps: float | None = None  # of the assumed core, when no switch cable was seen


def _most_common(values: Iterable[Any]) -> Any:
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return None
    best = max(counts.values())
    return max(v for v, c in counts.items() if c == best)  # a tie goes to the larger value


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _attach_entries(pairs: set[tuple[int, int]], nics: int) -> list[int | str]:
    """{(node, nic)} of one switch -> the sim's compact list: "0-3" (all NICs), "4-7/1" (NIC 1)."""
    by_node: dict[int, set[int]] = defaultdict(set)
    for node, nic in pairs:
        by_node[node].add(nic)
    whole = [n for n, s in by_node.items() if len(s) == nics]
    entries: list[int | str] = [f"{a}-{b}" if a != b else a for a, b in _ranges(whole)]
    by_nic: dict[int, list[int]] = defaultdict(list)
    for node, nic_set in by_node.items():
        if len(nic_set) != nics:
            for nic in nic_set:
                by_nic[nic].append(node)
    for nic in sorted(by_nic):
        entries += [f"{a}-{b}/{nic}" if a != b else f"{a}/{nic}" for a, b in _ranges(by_nic[nic])]
    return entries


def _components(switches: list[str], cables: list[Cable]) -> list[set[str]]:
    parent = {s: s for s in switches}

    def find(s: str) -> str:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for c in cables:
        parent[find(c.a)] = find(c.b)
    groups: dict[str, set[str]] = defaultdict(set)
    for s in switches:
        groups[find(s)].add(s)
    return list(groups.values())


def _select_hosts(disc: Discovery, opts: BuildOptions) -> tuple[list[str], dict[str, list[Attachment]], int]:
    by_host: dict[str, list[Attachment]] = defaultdict(list)
    for a in disc.attachments:
        by_host[a.host].append(a)
    if not by_host:
        raise TopologyError(f"{disc.source}: no host is cabled to a switch; nothing to build")
    for nics in by_host.values():
        nics.sort(key=lambda a: natural_key(a.nic))
    count = opts.nics_per_node or _most_common(len(v) for v in by_host.values())
    kept = sorted((h for h, v in by_host.items() if len(v) == count), key=natural_key)
    left = sorted((h for h, v in by_host.items() if len(v) != count), key=natural_key)
    if left:
        shown = ", ".join(f"{h} ({len(by_host[h])})" for h in left[:8]) + (" ..." if len(left) > 8 else "")
        disc.warnings.append(
            f"{len(left)} host(s) with other than {count} cabled NIC(s) left out (the simulator gives every "
            f"node the same NIC count; a NIC that is down or not cabled shows here): {shown}"
        )
    if not kept:
        raise TopologyError(f"{disc.source}: no host has {count} cabled NIC(s)")
    return kept, by_host, count


def _rail_only(pieces: list[set[str]], reach: dict[str, set[str]], disc: Discovery, nics: int) -> bool:
    """Unconnected pieces are a design, not a gap, when every host has a NIC in every piece (a
    rail-only network: NIC i of a node reaches NIC i of the others, and nothing else)."""
    if len(pieces) < 2 or len(pieces) > nics or not all(all(r & p for p in pieces) for r in reach.values()):
        return False
    disc.warnings.append(
        f"{len(pieces)} separate rails, no cable between them: a NIC reaches only the same rail of other hosts"
    )
    return True


def _core_cables(
    disc: Discovery,
    hosts: list[str],
    by_host: dict[str, list[Attachment]],
    opts: BuildOptions,
    nic_bps: float,
) -> list[Cable]:
    """No switch-to-switch cable seen (LLDP from hosts only): join the leaves by one core switch,
    non-blocking unless told otherwise, and say so."""
    down: dict[str, float] = defaultdict(float)
    for h in hosts:
        for a in by_host[h]:
            down[a.switch] += a.rate_bps or nic_bps
    rate = opts.uplink_rate_bps
    disc.warnings.append(
        f"no switch-to-switch cable was seen: the {len(down)} leaves are joined by one switch named "
        f"{ASSUMED_CORE!r}, {'at ' + format_rate(rate) + 'bit/s per leaf' if rate else 'non-blocking'} "
        "(give the switches' own LLDP tables with --switch-lldp to see the real uplinks)"
    )
    return [Cable(leaf, ASSUMED_CORE, None, None, rate or bps) for leaf, bps in sorted(down.items())]


def _switches(
    disc: Discovery,
    hosts: list[str],
    by_host: dict[str, list[Attachment]],
    nics: int,
    opts: BuildOptions,
    nic_bps: float,
) -> tuple[list[str], list[Cable]]:
    """The switches and cables to write: the kept hosts' leaves and what joins them (the core
    cables, or a core made up when none were seen); refuses a fabric in unconnected pieces."""
    leaves = {a.switch for h in hosts for a in by_host[h]}
    orphans = {a.switch for a in disc.attachments} - leaves  # leaves whose hosts were all left out
    if orphans:
        disc.warnings.append(
            f"{len(orphans)} leaf switch(es) whose hosts were all left out are not written (they carry no "
            f"traffic between the hosts that are): {', '.join(sorted(orphans, key=natural_key)[:8])}"
        )
    cables = [c for c in disc.cables if c.a not in orphans and c.b not in orphans]
    reach = {h: {a.switch for a in by_host[h]} for h in hosts}
    rails = not cables and _rail_only([{leaf} for leaf in leaves], reach, disc, nics)
    if not cables and len(leaves) > 1 and not rails:
        cables = _core_cables(disc, hosts, by_host, opts, nic_bps)
    switches = sorted(leaves | {c.a for c in cables} | {c.b for c in cables}, key=natural_key)
    pieces = [p for p in _components(switches, cables) if p & leaves]
    if len(pieces) > 1 and not rails and not _rail_only(pieces, reach, disc, nics):
        names = "; ".join(", ".join(sorted(p, key=natural_key)[:4]) for p in pieces[:4])
        raise TopologyError(
            f"{disc.source}: the discovered fabric is in {len(pieces)} unconnected pieces ({names}); "
            "the switch-to-switch cables between them were not seen"
        )
    reachable = set().union(*pieces)
    return [s for s in switches if s in reachable], [c for c in cables if c.a in reachable]


def _attachments(
    disc: Discovery,
    hosts: list[str],
    by_host: dict[str, list[Attachment]],
    opts: BuildOptions,
    nic_bps: float,
) -> tuple[dict[str, set[tuple[int, int]]], dict[int, str]]:
    """(node, NIC) pairs per switch, and the NIC rate of each node slower than ``nic_bps`` (its
    slowest NIC: the simulator gives a node one rate)."""
    attach: dict[str, set[tuple[int, int]]] = defaultdict(set)
    node_rate: dict[int, str] = {}
    for index, host in enumerate(hosts):
        for nic, a in enumerate(by_host[host]):
            attach[a.switch].add((index, nic))
        slowest = min((a.rate_bps or nic_bps) for a in by_host[host])
        if not opts.nic_rate_bps and not math.isclose(slowest, nic_bps):
            node_rate[index] = format_rate(slowest)
            if len({a.rate_bps for a in by_host[host]}) > 1:
                disc.warnings.append(
                    f"{host}: NICs at different rates; the simulator gives the node its slowest, {node_rate[index]}"
                )
    return attach, node_rate


def build_document(disc: Discovery, opts: BuildOptions | None = None) -> dict[str, Any]:
    """The simulator's explicit-graph document for what was discovered (see module docstring)."""
    opts = opts or BuildOptions()
    hosts, by_host, nics = _select_hosts(disc, opts)
    rates = [a.rate_bps for h in hosts for a in by_host[h]]
    nic_bps = opts.nic_rate_bps or _most_common(rates)
    if nic_bps is None:
        raise TopologyError(f"{disc.source}: no NIC rate was discovered; give one with --nic-rate")
    switches, cables = _switches(disc, hosts, by_host, nics, opts, nic_bps)
    attach, node_rate = _attachments(disc, hosts, by_host, opts, nic_bps)
    links = Counter((*sorted((c.a, c.b), key=natural_key), c.rate_bps or nic_bps) for c in cables)
    doc: dict[str, Any] = {
        "name": disc.name,
        "nodes": len(hosts),
        "gpus_per_node": opts.gpus_per_node or nics,
        "nics_per_node": nics,
        "gpu": opts.gpu,
        "nic_rate": format_rate(nic_bps),
        "hosts": hosts,
        "switches": switches,
        "links": [
            {"a": a, "b": b, "rate": format_rate(rate), **({"count": n} if n > 1 else {})}
            for (a, b, rate), n in sorted(
                links.items(), key=lambda kv: (natural_key(kv[0][0]), natural_key(kv[0][1]), kv[0][2])
            )
        ],
        "attach": {s: _attach_entries(attach[s], nics) for s in switches if s in attach},
    }
    if node_rate:
        doc["node_nic_rate"] = node_rate
    return doc


def _flow(value: Any) -> str:
    """One value in YAML flow style on one line: ``[0-3, 4/1]``, ``{a: leaf1, b: spine}``, ``leaf1``."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=1_000_000, sort_keys=False).strip()
    return text.removesuffix("...").strip()


def to_yaml(doc: dict[str, Any], disc: Discovery) -> str:
    """The document as YAML, with a header that says where it came from and what was left out."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# discovered by fabricscope topology discover from {disc.source}, {when}",
        f"# {doc['nodes']} node(s), {len(doc['switches'])} switch(es); hosts[i] is node i",
    ]
    lines += [f"# note: {w}" for w in disc.warnings]
    lines += [f"# left out: {n} {what}" for what, n in sorted(disc.ignored.items())]
    for key, value in doc.items():
        if key == "links":
            lines.append("links:" if value else "links: []")
            lines += [f"  - {_flow(v)}" for v in value]
        elif key == "attach":
            lines.append("attach:")
            lines += [f"  {_flow(s)}: {_flow(v)}" for s, v in value.items()]
        else:
            lines.append(f"{key}: {_flow(value)}")
    return "\n".join(lines) + "\n"


def _gbps(item: dict[str, Any]) -> dict[str, Any]:
    rate = item.pop("rate_bps")
    return {**item, "rate_gbps": rate / 1e9 if rate else None}


def report(doc: dict[str, Any], disc: Discovery) -> dict[str, Any]:
    """The ``fabricscope.topology/v1`` document ``discover --json`` prints: the sim document plus
    the cabling as seen (every NIC's switch port, every switch cable's ports)."""
    return {
        "schema": SCHEMA,
        "source": disc.source,
        "topology": doc,
        "attachments": [_gbps(asdict(a)) for a in disc.attachments],
        "cables": [_gbps(asdict(c)) for c in disc.cables],
        "warnings": list(disc.warnings),
        "ignored": dict(disc.ignored),
    }
