"""User-described fabrics: a YAML file with either a named family and its parameters, or an
explicit graph of switches, links and where each node's NICs attach.

Example (explicit graph; rates in bits/s as switch vendors write them)::

    name: lab-leaf-spine
    nodes: 8
    gpus_per_node: 1
    gpu: none
    nic_rate: 1gbit
    switches: [leaf1, leaf2, spine]
    links:
      - {a: leaf1, b: spine, rate: 250mbit}
      - {a: leaf2, b: spine, rate: 250mbit, latency_us: 2, count: 1}
    attach:
      leaf1: [0-3]        # nodes 0..3 (all their NICs); "5/1" is NIC 1 of node 5
      leaf2: [4-7]
    node_nic_rate: {3: 250mbit}   # a slow host

Example (family)::

    kind: rail-optimized
    nodes: 64
    gpus_per_node: 8
    nic_rate: 400G
    oversubscription: "2:1"

The explicit graph is routed by shortest paths with per-hop ECMP hashing (each switch hashes
independently, as real switches do) or, under adaptive routing, an even split at every hop
over the next hops that stay on a shortest path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from fabricscope.errors import FabricscopeError
from fabricscope.sim.fabrics import KIND_FABRIC, Fabric, Routes, _access_arrays
from fabricscope.sim.hashing import flow_hash, pick
from fabricscope.sim.params import NETWORK_FIELDS, NODE_FIELDS
from fabricscope.sim.topology import TOPOLOGY_KINDS, NodeSpec, Topology, TopologyOptions, build
from fabricscope.units import parse_rate, parse_ratio

MAX_SWITCHES = 20_000
MAX_LINKS = 500_000


class GraphFabric(Fabric):
    """An arbitrary switch graph. Links are bidirectional pairs of directed links."""

    family = "graph"

    def __init__(
        self,
        *,
        switch_names: list[str],
        edges: list[tuple[int, int, float, float]],
        switch_of_nic: np.ndarray,
        access_Bps: np.ndarray,
        access_latency_s: float,
    ) -> None:
        self.names = switch_names
        self.n_sw = len(switch_names)
        self.n_nics = E = len(switch_of_nic)
        self.switch_of_nic = np.asarray(switch_of_nic, np.int64)
        cap, lat, kind = _access_arrays(access_Bps, access_latency_s)
        src, dst, ecap, elat = [], [], [], []
        for a, b, c, t in edges:
            src += [a, b]
            dst += [b, a]
            ecap += [c, c]
            elat += [t, t]
        self.l_src = np.asarray(src, np.int64)
        self.l_dst = np.asarray(dst, np.int64)
        self.o_sw = 2 * E
        self.cap_Bps = np.concatenate([cap, np.asarray(ecap, np.float64)])
        self.lat_s = np.concatenate([lat, np.asarray(elat, np.float64)])
        self.link_kind = np.concatenate([kind, np.full(len(src), KIND_FABRIC, np.int8)])
        order = np.argsort(self.l_src, kind="stable")
        self.out_links = order  # directed link ids sorted by source switch
        self.out_ptr = np.searchsorted(self.l_src[order], np.arange(self.n_sw + 1))
        self._dist: dict[int, np.ndarray] = {}

    def describe(self) -> dict[str, Any]:
        return {"switches": self.n_sw, "switch_links": len(self.l_src) // 2}

    def distances(self, d: int) -> np.ndarray:
        """Hop distance of every switch to switch ``d`` (BFS; links are symmetric)."""
        if d in self._dist:
            return self._dist[d]
        dist = np.full(self.n_sw, -1, np.int64)
        dist[d] = 0
        frontier = np.array([d])
        level = 0
        while len(frontier):
            level += 1
            starts, ends = self.out_ptr[frontier], self.out_ptr[frontier + 1]
            idx = (
                np.concatenate([self.out_links[s:e] for s, e in zip(starts, ends, strict=False)])
                if len(frontier)
                else np.zeros(0, np.int64)
            )
            nb = np.unique(self.l_dst[idx])
            nb = nb[dist[nb] < 0]
            dist[nb] = level
            frontier = nb
        self._dist[d] = dist
        return dist

    def _next_hops(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """CSR over switches: directed links that move one hop closer to ``d``."""
        dist = self.distances(d)
        good = (dist[self.l_dst] >= 0) & (dist[self.l_dst] == dist[self.l_src] - 1)
        links = np.flatnonzero(good)
        links = links[np.argsort(self.l_src[links], kind="stable")]
        ptr = np.searchsorted(self.l_src[links], np.arange(self.n_sw + 1))
        return links, ptr

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray, adaptive: bool, seed: int) -> Routes:
        n = len(src)
        fid = np.arange(n, dtype=np.int64)
        parts = [Routes.unit(fid, src, 0), Routes.unit(fid, self.n_nics + dst, 200)]
        ss, ds = self.switch_of_nic[src], self.switch_of_nic[dst]
        h = flow_hash(src, dst, key, seed=seed)
        for d in np.unique(ds):
            sel = fid[(ds == d) & (ss != d)]
            if not len(sel):
                continue
            dist = self.distances(int(d))
            if np.any(dist[ss[sel]] < 0):
                bad = int(ss[sel][dist[ss[sel]] < 0][0])
                raise FabricscopeError(f"no path from switch {self.names[bad]} to {self.names[int(d)]}")
            links, ptr = self._next_hops(int(d))
            if adaptive:
                parts.append(self._spray(sel, ss[sel], int(d), links, ptr))
            else:
                cur, f, hh = ss[sel].copy(), sel.copy(), h[sel]
                hop = 0
                while len(f):
                    hop += 1
                    cnt = ptr[cur + 1] - ptr[cur]
                    choice = links[ptr[cur] + pick(hh, cnt, salt=hop * 7919 + 1)]
                    parts.append(Routes.unit(f, self.o_sw + choice, hop))
                    cur = self.l_dst[choice]
                    more = cur != d
                    f, cur, hh = f[more], cur[more], hh[more]
        return Routes.concat(parts)

    def _spray(
        self, flows: np.ndarray, start: np.ndarray, d: int, links: np.ndarray, ptr: np.ndarray
    ) -> Routes:
        f, node, mass = flows.copy(), start.copy(), np.ones(len(flows))
        out = []
        hop = 0
        while len(f):
            hop += 1
            cnt = ptr[node + 1] - ptr[node]
            rf = np.repeat(f, cnt)
            rm = np.repeat(mass / cnt, cnt)
            offs = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            lk = links[np.repeat(ptr[node], cnt) + offs]
            # merge duplicate (flow, link) entries
            keyv = rf * len(self.l_src) + lk
            u, inv = np.unique(keyv, return_inverse=True)
            m = np.bincount(inv, weights=rm)
            uf, ul = u // len(self.l_src), u % len(self.l_src)
            out.append(Routes.unit(uf, self.o_sw + ul, hop, m))
            nxt = self.l_dst[ul]
            keep = nxt != d
            keyn = uf[keep] * self.n_sw + nxt[keep]
            u2, inv2 = np.unique(keyn, return_inverse=True)
            mass = np.bincount(inv2, weights=m[keep])
            f, node = u2 // self.n_sw, u2 % self.n_sw
        return Routes.concat(out)

    def _access_switch(self, nic: int) -> str:
        return str(self.names[self.switch_of_nic[nic]])

    def _core_link_name(self, i: int) -> str:
        j = i - self.o_sw
        return f"{self.names[self.l_src[j]]}->{self.names[self.l_dst[j]]}"


_FAMILY_KEYS = {"name", "kind", *NODE_FIELDS, *NETWORK_FIELDS}
_GRAPH_KEYS = {
    "name",
    "kind",
    *NODE_FIELDS,
    "switches",
    "links",
    "attach",
    "node_nic_rate",
    "link_latency_us",
    "hosts",
}


def _int(doc: dict[str, Any], key: str, default: int | None, lo: int = 1) -> int | None:
    v = doc.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise FabricscopeError(f"topology file: {key} must be an integer >= {lo}, got {v!r}")
    return v


def _float(doc: dict[str, Any], key: str, default: float | None) -> float | None:
    v = doc.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise FabricscopeError(f"topology file: {key} must be a non-negative number, got {v!r}")
    return float(v)


def _node_rates(doc: dict[str, Any]) -> dict[int, float]:
    raw = doc.get("node_nic_rate") or {}
    if not isinstance(raw, dict):
        raise FabricscopeError("topology file: node_nic_rate must map node index to a rate")
    out = {}
    for k, v in raw.items():
        try:
            node = int(k)
        except ValueError:
            raise FabricscopeError(f"topology file: node_nic_rate key {k!r} is not a node index") from None
        out[node] = parse_rate(str(v))
    return out


def load_document(path: str | Path) -> dict[str, Any]:
    try:
        import yaml

        from fabricscope.untrusted import yaml_load
    except ImportError:  # pragma: no cover - the sim extra brings pyyaml
        raise FabricscopeError(
            "reading topology files needs pyyaml: pip install 'fabricscope[sim]'"
        ) from None
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise FabricscopeError(f"cannot read topology file {path}: {exc.strerror or exc}") from None
    if len(text) > 5_000_000:
        raise FabricscopeError(f"topology file {path} is larger than 5 MB")
    try:
        doc = yaml_load(text)  # no anchors or aliases (fabricscope.untrusted)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        raise FabricscopeError(
            f"topology file {path} is not valid YAML{where}{': ' + problem if problem else ''}"
        ) from None
    if not isinstance(doc, dict):
        raise FabricscopeError(f"topology file {path} must be a YAML mapping")
    return doc


def load_topology(path: str | Path, overrides: dict[str, Any] | None = None) -> Topology:
    """Build the topology a YAML file describes (see module docstring)."""
    doc = load_document(path)
    doc.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return topology_from_document(doc)


def topology_from_document(doc: dict[str, Any]) -> Topology:
    """Build the topology a document in the file's format describes (one already in memory:
    ``topology discover``'s, a lab's plan as ``fabricscope ready`` models it)."""
    kind = str(doc.get("kind", "custom")).lower()
    if kind == "custom" or "switches" in doc:
        return _graph_topology(doc)
    if kind not in TOPOLOGY_KINDS:
        raise FabricscopeError(
            f"topology file: unknown kind {kind!r} (custom or {', '.join(TOPOLOGY_KINDS)})"
        )
    unknown = set(doc) - _FAMILY_KEYS
    if unknown:
        raise FabricscopeError(f"topology file: unknown key(s) {', '.join(sorted(unknown))}")
    opts = TopologyOptions(
        kind=kind,
        nodes=_int(doc, "nodes", 2) or 2,
        gpus_per_node=_int(doc, "gpus_per_node", 8) or 8,
        nics_per_node=_int(doc, "nics_per_node", None),
        nic_rate_bps=parse_rate(str(doc.get("nic_rate", "400G"))),
        gpu=str(doc.get("gpu", "h100")),
        nvlink_GBps=_float(doc, "nvlink_GBps", None),
        pcie_GBps=_float(doc, "pcie_GBps", None),
        oversubscription=parse_ratio(str(doc.get("oversubscription", "1:1"))),
        hosts_per_leaf=_int(doc, "hosts_per_leaf", None),
        spines=_int(doc, "spines", None),
        uplink_rate_bps=parse_rate(str(doc["uplink_rate"])) if doc.get("uplink_rate") else None,
        radix=_int(doc, "radix", None, lo=4),
        tiers=_int(doc, "tiers", None),
        hosts_per_router=_int(doc, "hosts_per_router", None),
        routers_per_group=_int(doc, "routers_per_group", None),
        global_links_per_router=_int(doc, "global_links_per_router", None),
        global_rate_bps=parse_rate(str(doc["global_rate"])) if doc.get("global_rate") else None,
        link_latency_s=(_float(doc, "link_latency_us", 0.25) or 0.0) * 1e-6,
        node_nic_rate_bps=_node_rates(doc),
    )
    topo = build(opts)
    if doc.get("name"):
        topo.params["name"] = str(doc["name"])
    return topo


_ATTACH_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*(?:/\s*(\d+))?\s*$")


def _graph_topology(doc: dict[str, Any]) -> Topology:
    unknown = set(doc) - _GRAPH_KEYS
    if unknown:
        raise FabricscopeError(f"topology file: unknown key(s) {', '.join(sorted(unknown))}")
    nodes = _int(doc, "nodes", None)
    if nodes is None:
        raise FabricscopeError("topology file: nodes is required")
    G = _int(doc, "gpus_per_node", 8) or 8
    node = NodeSpec.preset(
        str(doc.get("gpu", "h100")),
        G,
        _int(doc, "nics_per_node", None),
        nvlink_GBps=_float(doc, "nvlink_GBps", None),
        pcie_GBps=_float(doc, "pcie_GBps", None),
    )
    N = node.nics_per_node
    nic_bps = parse_rate(str(doc.get("nic_rate", "400G")))
    lat_s = (_float(doc, "link_latency_us", 0.25) or 0.0) * 1e-6
    switches = doc.get("switches")
    if not isinstance(switches, list) or not switches or not all(isinstance(s, str) and s for s in switches):
        raise FabricscopeError("topology file: switches must be a non-empty list of names")
    if len(set(switches)) != len(switches):
        raise FabricscopeError("topology file: switch names must be unique")
    if len(switches) > MAX_SWITCHES:
        raise FabricscopeError(f"topology file: more than {MAX_SWITCHES} switches")
    index = {s: i for i, s in enumerate(switches)}
    edges: list[tuple[int, int, float, float]] = []
    links = doc.get("links") or []
    if not isinstance(links, list):
        raise FabricscopeError("topology file: links must be a list")
    for i, item in enumerate(links):
        if isinstance(item, list) and len(item) in (2, 3):
            item = {"a": item[0], "b": item[1], **({"rate": item[2]} if len(item) == 3 else {})}
        if not isinstance(item, dict) or "a" not in item or "b" not in item:
            raise FabricscopeError(f"topology file: links[{i}] needs a and b (switch names)")
        a, b = item["a"], item["b"]
        if a not in index or b not in index or a == b:
            raise FabricscopeError(
                f"topology file: links[{i}] joins unknown or identical switches ({a!r}, {b!r})"
            )
        rate = parse_rate(str(item.get("rate", doc.get("nic_rate", "400G")))) / 8
        lat = _float(item, "latency_us", lat_s * 1e6) or 0.0
        count = _int(item, "count", 1) or 1
        for _ in range(count):
            edges.append((index[a], index[b], rate, lat * 1e-6))
    if len(edges) > MAX_LINKS:
        raise FabricscopeError(f"topology file: more than {MAX_LINKS} links")
    sw_of_nic = _attachments(doc.get("attach"), index, nodes, N)
    missing = np.flatnonzero(sw_of_nic < 0)
    if len(missing) and nodes > 1:
        e = int(missing[0])
        raise FabricscopeError(f"topology file: NIC {e % N} of node {e // N} is not attached to any switch")
    access = np.full(nodes * N, nic_bps / 8)
    for n_, r in _node_rates(doc).items():
        if not 0 <= n_ < nodes:
            raise FabricscopeError(
                f"topology file: node_nic_rate names node {n_}, but nodes are 0..{nodes - 1}"
            )
        access[n_ * N : (n_ + 1) * N] = r / 8
    fabric = GraphFabric(
        switch_names=list(switches),
        edges=edges,
        switch_of_nic=sw_of_nic,
        access_Bps=access,
        access_latency_s=lat_s,
    )
    params: dict[str, Any] = {"name": str(doc.get("name", "custom"))}
    hosts = _host_names(doc, nodes)
    if hosts:
        params["hosts"] = hosts
    return Topology("custom", nodes, node, fabric, nic_bps / 8, params)


def _attachments(attach: Any, index: dict[str, int], nodes: int, N: int) -> np.ndarray:
    """``attach: {switch: [3, 0-7, 5/1]}`` -> the switch index of every NIC (-1: not attached)."""
    if not isinstance(attach, dict) or not attach:
        raise FabricscopeError("topology file: attach must map switch names to lists of nodes (or node/nic)")
    sw_of_nic = np.full(nodes * N, -1, np.int64)
    for sw, items in attach.items():
        if sw not in index:
            raise FabricscopeError(f"topology file: attach names unknown switch {sw!r}")
        if not isinstance(items, list):
            items = [items]
        for it in items:
            m = _ATTACH_RE.match(str(it))
            if not m:
                raise FabricscopeError(f"topology file: cannot read attach entry {it!r} (use 3, 0-7 or 5/1)")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            if hi < lo or hi >= nodes:
                raise FabricscopeError(f"topology file: attach entry {it!r} is outside nodes 0..{nodes - 1}")
            nics = [int(m.group(3))] if m.group(3) else list(range(N))
            for n_ in range(lo, hi + 1):
                for j in nics:
                    if j >= N:
                        raise FabricscopeError(f"topology file: attach entry {it!r}: node has {N} NIC(s)")
                    e = n_ * N + j
                    if sw_of_nic[e] >= 0:
                        raise FabricscopeError(f"topology file: NIC {j} of node {n_} is attached twice")
                    sw_of_nic[e] = index[sw]
    return sw_of_nic


def _host_names(doc: dict[str, Any], nodes: int) -> list[str] | None:
    """Optional ``hosts: [name0, name1, ...]``: the name of node i (discovered topologies carry it)."""
    hosts = doc.get("hosts")
    if hosts is None:
        return None
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise FabricscopeError("topology file: hosts must be a list of host names, one per node")
    if len(hosts) != nodes or len(set(hosts)) != len(hosts):
        raise FabricscopeError(
            f"topology file: hosts must name each of the {nodes} node(s) once, got {len(hosts)} name(s)"
        )
    return list(hosts)
