"""Which parts of a fabric a flow between two hosts may cross, and which it must cross.

Routing is the simulator's for an explicit graph (``sim/custom.py``): shortest switch paths,
ECMP over every next hop that stays on one. A flow whose hash is unknown *may* cross any link
of any shortest path and *must* cross only those on all of them. Paths are counted, not listed
(they multiply in a fat tree): with ``n_s(u)`` shortest paths from the source's switches to
``u`` and ``n_t(v)`` from ``v`` to the destination's, the link ``u-v`` carries
``n_s(u) x n_t(v)`` of the ``N`` paths; it is on all of them when that is ``N``.

An *element* is what localization can blame: a host (its NIC cable, or the host itself; the
matrix cannot tell them apart), the cables between two switches (parallel cables are one
bundle: a flow's hash picks one), or a switch.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from fabricscope.host.infiniband import natural_key
from fabricscope.topology.model import TopologyError
from fabricscope.topology.view import FabricView

Element = tuple[str, ...]  # ("host", h) | ("link", a, b) with a before b | ("switch", s)


def host_element(host: str) -> Element:
    return ("host", host)


def link_element(a: str, b: str) -> Element:
    x, y = sorted((a, b), key=natural_key)
    return ("link", x, y)


def switch_element(switch: str) -> Element:
    return ("switch", switch)


def element_label(e: Element) -> str:
    """``h3``, ``leaf2 - spine``, ``switch spine``."""
    if e[0] == "link":
        return f"{e[1]} - {e[2]}"
    if e[0] == "switch":
        return f"switch {e[1]}"
    return e[1]


def parse_element_label(label: str) -> Element:
    """The inverse of :func:`element_label` (a suspect's ``alternatives`` are stored as labels)."""
    if label.startswith("switch "):
        return ("switch", label.removeprefix("switch "))
    a, sep, b = label.partition(" - ")
    return ("link", a, b) if sep else ("host", label)


@dataclass(frozen=True)
class Crossing:
    """The elements a flow must cross (on every path) and may cross (on some path)."""

    must: frozenset[Element]
    may: frozenset[Element]
    paths: int


class FabricPaths:
    """Shortest paths between the hosts of a :class:`FabricView`, as element sets."""

    def __init__(self, view: FabricView) -> None:
        self.view = view
        self.near: dict[str, set[str]] = defaultdict(set)
        for link in view.links:
            if link.a != link.b:
                self.near[link.a].add(link.b)
                self.near[link.b].add(link.a)
        self.switches_of: dict[str, set[str]] = defaultdict(set)
        for switch, items in view.nics_of.items():
            for host, _ in items:
                self.switches_of[host].add(switch)
        self._bfs: dict[frozenset[str], tuple[dict[str, int], dict[str, int]]] = {}
        self._between: dict[tuple[frozenset[str], frozenset[str]], Crossing] = {}

    def _counts(self, starts: frozenset[str]) -> tuple[dict[str, int], dict[str, int]]:
        """Hop distance and number of shortest paths from any of ``starts`` to every switch."""
        if starts not in self._bfs:
            dist = {s: 0 for s in starts}
            count = {s: 1 for s in starts}
            queue = deque(sorted(starts, key=natural_key))
            while queue:
                u = queue.popleft()
                for v in self.near[u]:
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        count[v] = 0
                        queue.append(v)
                    if dist[v] == dist[u] + 1:
                        count[v] += count[u]
            self._bfs[starts] = (dist, count)
        return self._bfs[starts]

    def crossing(self, a: str, b: str) -> Crossing:
        """What a flow from host ``a`` to host ``b`` crosses (cables are judged both ways)."""
        src, dst = frozenset(self.switches_of.get(a, ())), frozenset(self.switches_of.get(b, ()))
        if not src or not dst:
            raise TopologyError(f"host {a if not src else b} has no NIC attached to any switch")
        if (src, dst) not in self._between:  # hosts on the same switches share their paths
            self._between[(src, dst)] = self._switch_paths(src, dst, a, b)
        fabric = self._between[(src, dst)]
        ends = {host_element(a), host_element(b)}
        return Crossing(fabric.must | ends, fabric.may | ends, fabric.paths)

    def _switch_paths(self, src: frozenset[str], dst: frozenset[str], a: str, b: str) -> Crossing:
        ds, ns = self._counts(src)
        dt, nt = self._counts(dst)
        reach = [s for s in dst if s in ds]
        if not reach:
            raise TopologyError(f"no path between {a} and {b} in the topology")
        hops = min(ds[s] for s in reach)
        total = sum(ns[s] for s in reach if ds[s] == hops)
        must: set[Element] = set()
        may: set[Element] = set()
        for u in ds:
            if u in dt and ds[u] + dt[u] == hops:
                through = ns[u] * nt[u]
                may.add(switch_element(u))
                if through == total:
                    must.add(switch_element(u))
                for v in self.near[u]:
                    if v in dt and ds[u] + 1 + dt[v] == hops:
                        e = link_element(u, v)
                        may.add(e)
                        if ns[u] * nt[v] == total:
                            must.add(e)
        return Crossing(frozenset(must), frozenset(may), total)


def match_hosts(names: Iterable[str], view: FabricView, where: str) -> dict[str, str]:
    """Each matrix host -> its host in the topology: the same name, else the same short name
    (``node01`` for ``node01.cluster``, either way). One line naming what is missing."""
    known = set(view.hosts)
    short: dict[str, list[str]] = defaultdict(list)
    for h in view.hosts:
        short[h.split(".")[0]].append(h)
    out, missing = {}, []
    for name in names:
        base = name.split("/r")[0]  # bench matrix labels two ranks of one host h/r0, h/r1
        if base in known:
            out[name] = base
        elif len(short.get(base.split(".")[0], [])) == 1:
            out[name] = short[base.split(".")[0]][0]
        else:
            missing.append(name)
    if missing:
        listed = ", ".join(sorted(view.hosts, key=natural_key)[:8]) + (" ..." if len(view.hosts) > 8 else "")
        raise TopologyError(
            f"host(s) {', '.join(missing)} of the matrix are not in the topology {where} (it has {listed})"
        )
    return out
