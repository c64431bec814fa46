"""A scenario (sim/params.py's models, validated) turned into a topology and a Simulator, and
the ``sim collective`` document.

A --system preset fills what the user did not give; the values such as ``400G``, ``4:1`` or
``0.1%`` are read here by fabricscope.units, so every command reads them the same way, and a bad
value always gives one clear error line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.sim.engine import SCHEMA, Simulator
from fabricscope.sim.params import DEFAULTS, WORKLOAD_KEYS, InferPlan, Scenario, TrainPlan, validate
from fabricscope.sim.topology import Topology, TopologyOptions, build
from fabricscope.sim.transport import make_transport
from fabricscope.units import (
    format_rate,
    format_size,
    parse_probability,
    parse_rate,
    parse_ratio,
    parse_sizes,
)

__all__ = ["DEFAULTS", "InferPlan", "Scenario", "TrainPlan"]

MAX_SIZES = 40  # sizes in one sweep: each is a full solve of the model


def normalise(params: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in (a --system's preset first), keys with dashes accepted, values typed by
    ``Scenario``; workload keys pass through to their own model; unknown keys rejected."""
    given = {k.replace("-", "_"): v for k, v in params.items()}
    unknown = [k for k in given if k not in DEFAULTS and k not in WORKLOAD_KEYS]
    if unknown:
        raise FabricscopeError(f"unknown parameter {unknown[0]!r}")
    base: dict[str, Any] = {}
    system = given.get("system")
    if system:  # a preset fills what the user did not give
        from fabricscope.sim.systems import system_params

        domain = given.get("nvlink_domain")
        try:
            domain = None if domain is None else int(domain)
        except (TypeError, ValueError):
            raise FabricscopeError(f"--nvlink-domain must be an integer, got {domain!r}") from None
        base.update(system_params(str(system), domain))
    elif given.get("nvlink_domain") is not None:
        raise FabricscopeError("--nvlink-domain needs --system gb200-nvl72 (a multi-node NVLink domain)")
    fabric = {**base, **{k: v for k, v in given.items() if k in DEFAULTS and v is not None}}
    if system and base.get("nvlink_domain_gpus"):
        fabric = fold_trays(fabric, base["nvlink_domain_gpus"], given.get("nics_per_node"))
    fabric.pop("nvlink_domain_gpus", None)
    out = validate(Scenario, fabric).model_dump()
    out.update({k: v for k, v in given.items() if k in WORKLOAD_KEYS and v is not None})
    return out


def fold_trays(p: dict[str, Any], domain: int, tray_nics: Any = None) -> dict[str, Any]:
    """A multi-node NVLink domain described as it is cabled (``--system gb200-nvl72 --nodes 18
    --gpus-per-node 4``: 18 trays of 4) is ONE NVLink domain of 72 GPUs, not 18 nodes over the
    network: the model's node is the NVLink domain (issue 23 item 7). Trays fill whole domains."""
    gpn = int(p.get("gpus_per_node", domain))
    if gpn == domain or p.get("topology_file"):
        return p
    total = int(p.get("nodes", 1)) * gpn
    if total < domain:  # a partly filled rack: one smaller domain
        domain = total
    if total % domain:
        raise FabricscopeError(
            f"{total} GPUs in trays of {gpn} do not fill whole NVLink domains of {domain} GPUs "
            f"(--nvlink-domain N partitions the rack into smaller domains)"
        )
    per_gpu_nics = int(tray_nics) / gpn if tray_nics else int(p.get("nics_per_node") or domain) / domain
    out = {
        **p,
        "nodes": total // domain,
        "gpus_per_node": domain,
        "nics_per_node": max(1, round(per_gpu_nics * domain)),
    }
    if out["nodes"] == 1 and out.get("topology") not in (None, "single-node"):
        out["topology"] = "single-node"
    return out


def _opt_int(p: dict[str, Any], key: str) -> int | None:
    v = p.get(key)
    return None if v is None else int(v)


def _node_rates(items: Any) -> dict[int, float]:
    out: dict[int, float] = {}
    if isinstance(items, dict):
        items = [f"{k}={v}" for k, v in items.items()]
    for item in items or ():
        if "=" not in str(item):
            raise FabricscopeError(f"--node-nic-rate takes NODE=RATE (e.g. 3=250mbit), got {item!r}")
        n, r = str(item).split("=", 1)
        try:
            node = int(n)
        except ValueError:
            raise FabricscopeError(f"--node-nic-rate: {n!r} is not a node index") from None
        out[node] = parse_rate(r)
    return out


def build_topology(p: dict[str, Any]) -> Topology:
    if p.get("topology_file"):
        from fabricscope.sim.custom import load_topology

        return load_topology(p["topology_file"])
    opts = TopologyOptions(
        kind=str(p["topology"]),
        nodes=int(p["nodes"]),
        gpus_per_node=int(p["gpus_per_node"]),
        nics_per_node=_opt_int(p, "nics_per_node"),
        nic_rate_bps=parse_rate(p["nic_rate"]),
        gpu=str(p["gpu"]),
        nvlink_GBps=p.get("nvlink_GBps"),
        pcie_GBps=p.get("pcie_GBps"),
        oversubscription=parse_ratio(p["oversubscription"]),
        hosts_per_leaf=_opt_int(p, "hosts_per_leaf"),
        spines=_opt_int(p, "spines"),
        uplink_rate_bps=parse_rate(p["uplink_rate"]) if p.get("uplink_rate") else None,
        radix=_opt_int(p, "radix"),
        tiers=_opt_int(p, "tiers"),
        hosts_per_router=_opt_int(p, "hosts_per_router"),
        routers_per_group=_opt_int(p, "routers_per_group"),
        global_links_per_router=_opt_int(p, "global_links_per_router"),
        global_rate_bps=parse_rate(p["global_rate"]) if p.get("global_rate") else None,
        link_latency_s=float(p["link_latency_us"]) * 1e-6,
        node_nic_rate_bps=_node_rates(p.get("node_nic_rate")),
        intra_link=str(p["intra_link"]),
        nvswitch=bool(p["nvswitch"]),
    )
    for key in (
        "hosts_per_leaf",
        "spines",
        "radix",
        "tiers",
        "hosts_per_router",
        "routers_per_group",
        "global_links_per_router",
    ):
        v = getattr(opts, key)
        if v is not None and v < 1:
            raise FabricscopeError(f"--{key.replace('_', '-')} must be >= 1")
    topo = build(opts)
    if p.get("system"):
        from fabricscope.sim.systems import describe

        topo.params.update(describe(str(p["system"]).lower()))
    return topo


def build_simulator(p: dict[str, Any], topo: Topology | None = None) -> Simulator:
    topo = topo or build_topology(p)
    rto = p.get("rto_ms")
    alpha = p.get("alpha_us")
    transport = make_transport(
        str(p["transport"]),
        loss=parse_probability(p["loss"]),
        mtu_bytes=_opt_int(p, "mtu"),
        ecn=bool(p["ecn"]),
        per_core_gbps=p.get("per_core_gbps"),
        rto_s=None if rto is None else float(rto) * 1e-3,
        alpha_s=None if alpha is None else float(alpha) * 1e-6,
        efficiency=p.get("efficiency"),
        framing=str(p["framing"]),
        nsocks_perthread=_opt_int(p, "nsocks_perthread"),
        socket_nthreads=_opt_int(p, "socket_nthreads"),
        host_mem_GBps=p.get("host_mem_GBps"),
        qps_per_connection=_opt_int(p, "qps_per_connection"),
    )
    return Simulator(
        topo,
        transport,
        routing=p.get("routing"),
        seed=int(p["seed"]),
        nvlink_efficiency=float(p["nvlink_efficiency"]),
    )


def parse_node_order(text: str | None, nodes: int) -> list[int] | None:
    """``"h1,h5,h2"`` (lab host names, 1-based) or ``"0,4,1"`` (node indexes) -> node indexes.

    The ring visits nodes in this order (a launcher's rank order); a subset makes a smaller
    communicator on the same fabric."""
    if text is None or str(text).strip() == "":
        return None
    out = []
    for item in str(text).split(","):
        item = item.strip()
        try:
            idx = int(item[1:]) - 1 if item[:1].lower() == "h" else int(item)
        except ValueError:
            raise FabricscopeError(
                f"--node-order: {item!r} is neither a node index nor a host name like h3"
            ) from None
        if not 0 <= idx < nodes:
            raise FabricscopeError(f"--node-order: {item!r} is outside the {nodes} node(s)")
        out.append(idx)
    if len(set(out)) != len(out):
        raise FabricscopeError("--node-order lists a node twice")
    if len(out) < 2:
        raise FabricscopeError("--node-order needs at least two nodes")
    return out


def communicator(topo: Topology, node_order: str | None) -> Any:
    """GPU ids of the communicator: every GPU in node order (default), or the nodes given."""
    order = parse_node_order(node_order, topo.nodes)
    if order is None:
        return None
    import numpy as np

    G = topo.node.gpus_per_node
    return (np.asarray(order, np.int64)[:, None] * G + np.arange(G)[None, :]).reshape(1, -1)


def run_collective(
    params: dict[str, Any], sim: Simulator | None = None, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The ``fabricscope.sim/v1`` document of ``sim collective``: one result per size; the
    top-level time/algbw/busbw/bottlenecks are those of the largest size. ``progress`` gets one
    line as each size of a sweep is done."""
    p = normalise(params)
    sizes = parse_sizes(str(p["size"]), max_count=MAX_SIZES)
    sim = sim or build_simulator(p)
    groups = communicator(sim.topo, p.get("node_order"))
    from fabricscope.sim import select

    results = []
    for k, s in enumerate(sizes):
        results.append(
            select.collective(
                sim,
                p["op"],
                s,
                groups,
                algo=p.get("algo"),
                proto=p.get("proto"),
                channels=_opt_int(p, "channels"),
                sharp=bool(p["sharp"]),
                explain=bool(p["explain"]),
                pxn=bool(p["pxn"]),
            )
        )
        if progress and len(sizes) > 1:  # a sweep: one line as each size is done
            progress(f"sim collective {k + 1}/{len(sizes)} done: {p['op']} of {format_size(s)}")
    last = results[-1].to_dict()
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": "collective",
        "op": last["op"],
        "algo": last["algo"],
        "proto": last["proto"],
        "ranks": last["ranks"],
        "size_bytes": last["size_bytes"],
        "time_s": last["time_s"],
        "algbw_GBps": last["algbw_GBps"],
        "busbw_GBps": last["busbw_GBps"],
        "limited_by": last["limited_by"],
        "bottlenecks": last["bottlenecks"],
        "results": [r.to_dict() for r in results],
        "model": sim.describe(),
    }
    from fabricscope.sim.assumptions import collect

    given = {k.replace("-", "_"): v for k, v in params.items() if v is not None}
    doc["assumptions"] = collect(sim, given, doc["results"])
    return doc


def summary_line(sim: Simulator) -> str:
    t = sim.topo
    d = t.describe()
    extra = ""
    if d.get("oversubscription") and d["oversubscription"] > 1.0001:
        extra = f", {d['oversubscription']:g}:1 oversubscribed"
    return (
        f"{t.kind}: {t.nodes} node(s) x {t.node.gpus_per_node} GPU(s), {t.node.nics_per_node} NIC(s)/node at "
        f"{format_rate(t.nic_rate_Bps * 8)}b/s{extra}; transport {sim.transport.name} "
        f"(efficiency {sim.transport.efficiency:.3f}, alpha {sim.transport.alpha_s * 1e6:g} us), routing {sim.routing}"
    )
