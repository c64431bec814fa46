"""`nccl env`: the NCCL settings to use on this node, each with the one-line reason for it.

Decisions come only from the inventory (active ports, GID tables, QoS trust/PFC/ECN, GPU-NIC
PCIe distances, interfaces) plus what the node cannot know and the user tells: NCCL version,
workload, fabric shape (rail-optimised, switch tiers) and the adaptive-routing SL of an
InfiniBand fabric. Ports that would make the job misbehave (no RoCE v2 address, PFC not on the
lossless priority, ECN off there) are left out of NCCL_IB_HCA, and the output says why.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fabricscope.host.inventory import Inventory
from fabricscope.nccl.gid import explain_choice, select_gid
from fabricscope.nccl.node import (
    DEFAULT_GID_POLICY,
    LEVEL_RANK,
    NicPort,
    active_ports,
    best_roce_gid,
    gdr_module_state,
    gpudirect_without_module,
    is_virtual_name,
    main_link_layer,
    nic_ports,
    usable_interface,
)
from fabricscope.nccl.variables import parse_version

SCHEMA = "fabricscope.nccl_env/v1"
FORMATS = ("shell", "json", "slurm", "k8s")
WORKLOADS = ("training", "inference")
AUTO_GID_VERSION = (2, 21)


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str | None  # None: deliberately left unset (NCCL's default is right), see reason
    reason: str


@dataclass
class EnvPlan:
    host: str | None
    fabric: str  # "InfiniBand", "RoCE", "EFA" or "TCP"
    workload: str
    variables: list[EnvVar] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)  # (port or netdev, why)
    notes: list[str] = field(default_factory=list)

    def set(self, name: str, value: str, reason: str) -> None:
        self.variables.append(EnvVar(name, value, reason))

    def unset(self, name: str, reason: str) -> None:
        self.variables.append(EnvVar(name, None, reason))

    @property
    def exports(self) -> list[EnvVar]:
        return [v for v in self.variables if v.value is not None]

    def as_environ(self) -> dict[str, str]:
        return {v.name: v.value for v in self.exports if v.value is not None}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "host": self.host,
            "fabric": self.fabric,
            "workload": self.workload,
            "variables": [{"name": v.name, "value": v.value, "reason": v.reason} for v in self.exports],
            "not_set": [{"name": v.name, "reason": v.reason} for v in self.variables if v.value is None],
            "excluded": [{"device": d, "reason": r} for d, r in self.excluded],
            "notes": self.notes,
        }


# ----- decisions --------------------------------------------------------------------------------
def _socket_ifname(inv: Inventory, plan: EnvPlan) -> None:
    rdma_netdevs = {n for d in inv.rdma_devices for n in d.netdevs} | {
        p.netdev for p in nic_ports(inv) if p.netdev
    }
    usable = [
        d
        for d in inv.net_devices
        if usable_interface(d) and not d.is_loopback and not is_virtual_name(d.name)
    ]
    physical = [d for d in usable if d.is_physical]
    if inv.rdma_devices:
        frontend = [d for d in physical if d.name not in rdma_netdevs]
        chosen = frontend[0] if frontend else (physical[0] if physical else (usable[0] if usable else None))
        role = "bootstrap and NCCL's out-of-band connections"
    else:
        ranked = sorted(physical or usable, key=lambda d: -(d.speed_mbps or 0))
        chosen = ranked[0] if ranked else None
        role = "bootstrap and all inter-node data (TCP sockets)"
    if chosen is None:
        plan.unset(
            "NCCL_SOCKET_IFNAME",
            "no interface is up with an address: NCCL's own choice is as good as any (fix networking first)",
        )
        return
    address = (chosen.ipv4 or chosen.ipv6 or ("?",))[0]
    speed = f", {chosen.speed_mbps // 1000} Gb/s" if chosen.speed_mbps else ""
    plan.set(
        "NCCL_SOCKET_IFNAME",
        f"={chosen.name}",
        f"{role} over {chosen.name} (up, {address}{speed}); '=' makes it an exact name, so no other interface "
        f"starting with {chosen.name} is picked too",
    )


def _gdr_level(inv: Inventory, plan: EnvPlan, nics: set[str]) -> None:
    relevant = [a for a in inv.affinity if a.nic in nics and a.distance] or [
        a for a in inv.affinity if a.distance
    ]
    if not relevant:
        plan.unset("NCCL_NET_GDR_LEVEL", "GPU-NIC PCIe distances unknown here: NCCL measures them itself")
        return
    worst = max(relevant, key=lambda a: LEVEL_RANK.get(a.distance or "SYS", 4))
    dist = worst.distance or "SYS"
    module = gdr_module_state(inv)
    counts = Counter(a.distance for a in relevant)
    summary = ", ".join(f"{n} GPU(s) {d}" for d, n in sorted(counts.items()))
    if module is False:
        dmabuf, advice = gpudirect_without_module(inv)
        if not dmabuf:
            plan.notes.append(f"no nvidia_peermem module is loaded: {advice}")
    rank = LEVEL_RANK.get(dist, 4)
    path = module or (gpudirect_without_module(inv)[0] if module is False else None)
    if rank <= LEVEL_RANK["PXB"] and path:
        plan.unset(
            "NCCL_NET_GDR_LEVEL",
            f"measured GPU-to-nearest-NIC distance: {summary}; NCCL's default (PXB) already uses GPUDirect RDMA for all of them",
        )
    elif rank <= LEVEL_RANK["PXB"] and path is False:
        plan.unset(
            "NCCL_NET_GDR_LEVEL",
            f"measured GPU-to-nearest-NIC distance: {summary}, close enough for GPUDirect RDMA, but no peer-memory path exists (no nvidia-peermem, no DMA-BUF), so NCCL stages through host memory whatever the level",
        )
    elif rank <= LEVEL_RANK["PXB"]:
        plan.unset(
            "NCCL_NET_GDR_LEVEL",
            f"measured GPU-to-nearest-NIC distance: {summary}; NCCL's default (PXB) covers it, and uses GPUDirect RDMA if a peer-memory path exists (nvidia-peermem, or DMA-BUF with kernel >= 5.12: not visible here, a guess)",
        )
    elif rank == LEVEL_RANK["PHB"]:
        plan.set(
            "NCCL_NET_GDR_LEVEL",
            "PHB",
            f"measured GPU-to-nearest-NIC distance: {summary}; GPU and NIC meet at the CPU's host bridge, which the default (PXB) excludes, so PHB keeps GPUDirect RDMA on",
        )
    else:
        plan.unset(
            "NCCL_NET_GDR_LEVEL",
            f"measured GPU-to-nearest-NIC distance: {summary}; GPUDirect RDMA across CPU sockets is usually slower than staging in host memory, so the default (off there) is right",
        )


def _roce(
    inv: Inventory,
    plan: EnvPlan,
    ports: list[NicPort],
    version: tuple[int, ...] | None,
    workload: str,
    tiers: int | None,
) -> list[NicPort]:
    chosen: list[NicPort] = []
    gid_of: dict[str, int] = {}
    for p in ports:
        gid = best_roce_gid(p.raw)
        if gid is None:
            plan.excluded.append((p.label, _no_gid_reason(inv, p)))
            continue
        gid_of[p.label] = gid.index
        chosen.append(p)
    # The lossless priority: the PFC priority most RoCE netdevs agree on (trust dscp).
    qos = {p.netdev: inv.qos.get(p.netdev) for p in chosen if p.netdev}
    votes = Counter(
        q.pfc_priorities[0]
        for q in qos.values()
        if q is not None and q.pfc_enabled and len(q.pfc_priorities) == 1
    )
    target = votes.most_common(1)[0][0] if votes else None
    trust = Counter(q.trust for q in qos.values() if q is not None and q.trust)
    mode = trust.most_common(1)[0][0] if trust else None
    ecn_votes: Counter[bool] = Counter()
    if target is not None:
        chosen = _roce_lossless(inv, plan, chosen, qos, target, mode, ecn_votes)
    chosen = _roce_gid_index(plan, chosen, gid_of, version)
    _roce_traffic_class(inv, plan, chosen, target, mode, ecn_votes)
    _roce_qps(plan, workload, tiers)
    return chosen


def _roce_lossless(
    inv: Inventory,
    plan: EnvPlan,
    chosen: list[NicPort],
    qos: dict,
    target: int,
    mode: str | None,
    ecn_votes: Counter[bool],
) -> list[NicPort]:
    """The ports whose netdev puts RDMA on the lossless priority ``target`` like the others (the
    rest go to ``plan.excluded`` with the reason); ``ecn_votes`` counts ECN on/off among those kept."""
    kept = []
    for p in chosen:
        q = qos.get(p.netdev) if p.netdev else None
        if q is None:
            kept.append(p)
            continue
        reason = _roce_odd_one_out(inv, p, q, chosen, target, mode)
        if reason:
            plan.excluded.append((p.label, reason))
            continue
        kept.append(p)
        dev = inv.netdev(p.netdev)
        if dev is not None and (target in dev.ecn_np_enabled or target in dev.ecn_rp_enabled):
            ecn_votes[
                dev.ecn_np_enabled.get(target) is not False and dev.ecn_rp_enabled.get(target) is not False
            ] += 1
    return kept


def _roce_odd_one_out(
    inv: Inventory, p: NicPort, q, chosen: list[NicPort], target: int, mode: str | None
) -> str | None:
    """Why this port's netdev would not carry RDMA like the others (trust, PFC, ECN), or None."""
    if q.trust and mode and q.trust != mode:
        return f"{p.netdev} trusts {q.trust} while the other RoCE netdevs trust {mode}: its traffic would not land on the lossless priority"
    if q.pfc_enabled is not None and target not in q.pfc_priorities:
        pfc = (
            f"PFC on priority {','.join(map(str, q.pfc_priorities))}"
            if q.pfc_priorities
            else "no PFC priority"
        )
        return f"{p.netdev} has {pfc}, not PFC on {target} like the others: RDMA through it would be lossy"
    dev = inv.netdev(p.netdev)
    if dev is None:
        return None
    on = dev.ecn_np_enabled.get(target) is not False and dev.ecn_rp_enabled.get(target) is not False
    known = target in dev.ecn_np_enabled or target in dev.ecn_rp_enabled
    others_on = any(
        (inv.netdev(o.netdev) is not None and inv.netdev(o.netdev).ecn_rp_enabled.get(target))
        for o in chosen
        if o.netdev and o is not p
    )
    if known and not on and others_on:
        return f"ECN (roce_np/roce_rp) is off for priority {target} on {p.netdev} while the other RoCE netdevs have it: congestion control would not work through it"
    return None


def _roce_gid_index(
    plan: EnvPlan, chosen: list[NicPort], gid_of: dict[str, int], version: tuple[int, ...] | None
) -> list[NicPort]:
    if version is None or version >= AUTO_GID_VERSION:
        indexes = sorted({gid_of[p.label] for p in chosen})
        where = (
            f"index {indexes[0]} on every NIC"
            if len(indexes) == 1
            else f"indexes {indexes} differ between NICs"
        )
        plan.unset(
            "NCCL_IB_GID_INDEX",
            f"NCCL {'.'.join(map(str, version)) if version else '>= 2.21'} picks the RoCE v2 IPv4 GID itself ({where} here) and follows address changes; pass --nccl-version if older",
        )
        return chosen
    counts = Counter(gid_of[p.label] for p in chosen)
    index = counts.most_common(1)[0][0] if counts else None
    if index is None:
        return chosen
    for p in [p for p in chosen if gid_of[p.label] != index]:
        plan.excluded.append(
            (
                p.label,
                f"its RoCE v2 IPv4 GID is at index {gid_of[p.label]}, not {index}: NCCL < 2.21 takes one index for all NICs",
            )
        )
    plan.set(
        "NCCL_IB_GID_INDEX",
        str(index),
        f"NCCL {'.'.join(map(str, version))} does not choose GIDs itself: {index} is the RoCE v2 entry with the IPv4 address on every selected NIC",
    )
    return [p for p in chosen if gid_of[p.label] == index]


def _roce_traffic_class(
    inv: Inventory,
    plan: EnvPlan,
    chosen: list[NicPort],
    target: int | None,
    mode: str | None,
    ecn_votes: Counter[bool],
) -> None:
    """Traffic class (trust dscp) or service level (trust pcp) for the lossless priority."""
    qos_seen = [inv.qos.get(p.netdev) for p in chosen if p.netdev and inv.qos.get(p.netdev) is not None]
    if target is None and not any(q.pfc_enabled is not None for q in qos_seen):
        plan.unset(
            "NCCL_IB_TC",
            "PFC and trust mode are not visible on this node (no QoS data for the RoCE netdevs): "
            "which priority is lossless could not be seen, so no traffic class is exported; ask the network team "
            "which DSCP the fabric treats as lossless (NCCL_IB_TC = DSCP << 2 | ECN)",
        )
    elif target is None:
        plan.unset(
            "NCCL_IB_TC",
            "no RoCE netdev has exactly one PFC priority here, so there is no lossless class to aim at; RoCE runs on ECN/DCQCN alone",
        )
    elif mode == "pcp":
        plan.set(
            "NCCL_IB_SL",
            str(target),
            f"the RoCE netdevs trust pcp: the service level becomes the VLAN priority, and PFC protects priority {target}",
        )
    else:
        dscp = _dscp_for(inv, chosen, target)
        ecn_on = ecn_votes.get(True, 0) > 0 and not ecn_votes.get(False, 0)
        ecn = 2 if ecn_on else 0
        tc = dscp << 2 | ecn
        ecn_text = (
            "ECT(0) because ECN is enabled for that priority"
            if ecn_on
            else "Not-ECT because ECN is not enabled for that priority"
        )
        plan.set(
            "NCCL_IB_TC",
            str(tc),
            f"traffic class = DSCP {dscp} << 2 | {ecn} ({ecn_text}); trust dscp maps DSCP {dscp} to priority {target}, the one with PFC",
        )


def _roce_qps(plan: EnvPlan, workload: str, tiers: int | None) -> None:
    """QPs per connection for ECMP entropy."""
    guess = (
        " (2 switch tiers assumed, a guess: the node cannot see the fabric; pass --switch-tiers N)"
        if tiers is None
        else ""
    )
    tiers = 2 if tiers is None else tiers
    if workload == "training" and tiers >= 2:
        plan.set(
            "NCCL_IB_QPS_PER_CONNECTION",
            "4",
            f"RoCE through {tiers} switch tiers balances by ECMP hashing: 4 QPs give each connection 4 UDP source ports, so large transfers spread over more paths{guess}",
        )
    elif workload == "inference":
        plan.unset(
            "NCCL_IB_QPS_PER_CONNECTION",
            "inference traffic is small latency-bound messages: extra QPs add no bandwidth and slow connection setup",
        )
    else:
        plan.unset("NCCL_IB_QPS_PER_CONNECTION", "a single switch tier has no ECMP choice to spread over")


def _no_gid_reason(inv: Inventory, p: NicPort) -> str:
    """Why NCCL's default GID walk finds no RoCE v2 IPv4 entry on the port, from its GID table;
    "no IPv4 address" only when the netdev really has none."""
    choice = select_gid(p.raw.gids, p.raw.gid_table_len, DEFAULT_GID_POLICY)
    message, _ = explain_choice(p.raw.gids, p.netdev, choice, DEFAULT_GID_POLICY)
    dev = inv.netdev(p.netdev)
    no_ipv4 = f"; {p.netdev} has no IPv4 address" if dev is not None and not dev.ipv4 else ""
    return f"{message}{no_ipv4}: it cannot reach peers over routed RoCE v2"


def _dscp_for(inv: Inventory, ports: list[NicPort], prio: int) -> int:
    """A DSCP that every selected netdev maps to ``prio``: 26 (AF31) for priority 3, else AFx1."""
    tables = [inv.qos[p.netdev] for p in ports if p.netdev and p.netdev in inv.qos]
    preferred = [26] if prio == 3 else []
    preferred += [prio * 8 + 2] + list(range(prio * 8, prio * 8 + 8)) + list(range(64))
    for dscp in preferred:
        if all(t.priority_of_dscp(dscp) == prio for t in tables):
            return dscp
    return prio * 8 + 2


def _infiniband(
    inv: Inventory, plan: EnvPlan, ports: list[NicPort], workload: str, ar_sl: int | None
) -> list[NicPort]:
    rates = [p.rate_gbps for p in ports if p.rate_gbps]
    top = max(rates) if rates else None
    slow = [p for p in ports if p.rate_gbps and top and p.rate_gbps < top]
    if slow:
        plan.notes.append(
            "ports below the node's top rate ("
            + ", ".join(f"{p.label} {p.rate_gbps:g} Gb/s" for p in slow)
            + f" vs {top:g}): they are kept (leaving them out moves their GPUs to a farther NIC) but slow every ring through them; see `fabricscope doctor`"
        )
    if ar_sl is not None:
        plan.set(
            "NCCL_IB_SL",
            str(ar_sl),
            f"service level {ar_sl}: the SL your subnet manager enables adaptive routing on (given with --ar-sl)",
        )
    else:
        plan.unset(
            "NCCL_IB_SL",
            "adaptive routing needs the SL the subnet manager enables it on; pass --ar-sl N if that is not SL 0",
        )
    plan.unset(
        "NCCL_IB_QPS_PER_CONNECTION",
        "InfiniBand with adaptive routing (NCCL's default there) spreads load in the switches; more QPs only cost memory",
    )
    plan.unset("NCCL_IB_GID_INDEX", "InfiniBand ports address peers by LID; the GID index is a RoCE setting")
    plan.unset("NCCL_IB_TC", "the traffic class is a RoCE (IP) setting; InfiniBand uses the service level")
    return ports


def plan_env(
    inv: Inventory,
    workload: str = "training",
    nccl_version: str | None = None,
    rail_optimized: bool = False,
    switch_tiers: int | None = None,  # None: 2 assumed, and the reason says so
    ar_sl: int | None = None,
) -> EnvPlan:
    if workload not in WORKLOADS:
        raise ValueError(f"workload must be one of {', '.join(WORKLOADS)}")
    version = parse_version(nccl_version)
    layer = main_link_layer(inv)
    efa = [d for d in inv.rdma_devices if d.is_efa and any(p.is_active for p in d.ports)]
    fabric = {"IB": "InfiniBand", "RoCE": "RoCE", None: "EFA" if efa else "TCP"}[layer]
    plan = EnvPlan(host=inv.hostname, fabric=fabric, workload=workload)
    for p in nic_ports(inv):
        if not p.active:
            plan.excluded.append(
                (p.label, f"port state {p.state or 'unknown'} (not ACTIVE): NCCL would skip it anyway")
            )
        elif p.link != layer and not (p.link is None and fabric == "EFA"):
            plan.excluded.append(
                (
                    p.label,
                    f"{p.link or 'unknown'} link layer while most ports are {layer}: NCCL cannot connect the two kinds",
                )
            )
    _socket_ifname(inv, plan)
    if layer is None and efa:
        _efa(inv, plan, efa)
    elif layer is None:
        _tcp_only(inv, plan)
    else:
        ports = [p for p in active_ports(inv) if p.link == layer]
        chosen = (
            _roce(inv, plan, ports, version, workload, switch_tiers)
            if layer == "RoCE"
            else _infiniband(inv, plan, ports, workload, ar_sl)
        )
        if chosen:
            value = "=" + ",".join(p.label for p in chosen)
            plan.variables.insert(
                0,
                EnvVar(
                    "NCCL_IB_HCA",
                    value,
                    f"the {len(chosen)} usable {fabric} port(s) as an exact list: '=' stops mlx5_1 from also matching "
                    "mlx5_10.., and naming the port keeps NCCL off ports of another link layer",
                ),
            )
        else:
            plan.notes.append(
                "no RDMA port is usable: NCCL will fall back to TCP sockets; fix the ports first (fabricscope doctor)"
            )
        _gdr_level(inv, plan, {p.device for p in chosen})
        if rail_optimized:
            plan.set(
                "NCCL_CROSS_NIC",
                "0",
                "rail-optimised fabric (--rail-optimized): keep each ring on the same NIC index on every node so traffic stays on one rail switch",
            )
        else:
            plan.unset(
                "NCCL_CROSS_NIC",
                "NCCL's default (2) prefers the same NIC on every node and crosses rails only when faster; pass --rail-optimized to forbid crossing",
            )
    plan.set(
        "NCCL_DEBUG",
        "WARN",
        "production: print errors only (INFO costs log volume at scale; use it when debugging)",
    )
    return plan


def _efa(inv: Inventory, plan: EnvPlan, devices: list) -> None:
    """AWS EFA: NCCL's IB transport skips ports whose link layer is neither InfiniBand nor Ethernet
    (NCCL v2.30.7-1 src/transport/net_ib/init.cc), so RDMA comes only from the aws-ofi-nccl net plugin
    (libnccl-net.so, loaded by default: src/plugin/net.cc) over libfabric's efa provider."""
    names = ", ".join(d.name for d in devices)
    plan.unset(
        "NCCL_NET_PLUGIN",
        f"EFA ({names}): NCCL loads libnccl-net.so, which aws-ofi-nccl installs, by default; 'none' would leave EFA unused and fall back to TCP sockets",
    )
    plan.unset(
        "FI_PROVIDER",
        "aws-ofi-nccl >= 1.6 picks libfabric's efa provider itself; another provider would bypass EFA's RDMA (aws-ofi-nccl doc/efa-env-var.md)",
    )
    plan.unset("NCCL_IB_HCA", "EFA ports are not used by NCCL's IB transport, so the HCA list does not apply")
    _gdr_level(inv, plan, {d.name for d in devices})
    plan.notes.append(
        f"AWS EFA ({names}): inter-node data goes over RDMA through aws-ofi-nccl and libfabric; check the log for 'NET/OFI' (or 'NET/AWS Libfabric') to confirm it loaded"
    )


def _tcp_only(inv: Inventory, plan: EnvPlan) -> None:
    chosen = next((v.value for v in plan.variables if v.name == "NCCL_SOCKET_IFNAME" and v.value), None)
    dev = inv.netdev(chosen.lstrip("=")) if chosen else None
    if dev is not None and dev.driver == "ena":
        plan.unset(
            "NCCL_SOCKET_NTHREADS", "AWS ENA: NCCL already uses 2 threads x 8 sockets per connection there"
        )
    elif dev is not None and dev.driver == "gve":
        plan.unset("NCCL_SOCKET_NTHREADS", "Google gVNIC: NCCL already uses 4 threads per connection there")
    elif dev is not None and dev.speed_mbps and dev.speed_mbps >= 100_000:
        plan.set(
            "NCCL_SOCKET_NTHREADS",
            "4",
            f"{dev.name} runs at {dev.speed_mbps // 1000} Gb/s: one socket thread cannot fill it (NCCL guide: 4 for 100G)",
        )
        plan.set(
            "NCCL_NSOCKS_PERTHREAD",
            "4",
            "4 sockets per thread (16 per connection, within NCCL's limit of 64)",
        )
    else:
        plan.unset(
            "NCCL_SOCKET_NTHREADS",
            "link speed below 100 Gb/s or unknown: NCCL's default of one thread is enough",
        )
    plan.notes.append(
        "no RDMA device: NCCL moves inter-node data over TCP sockets; expect a fraction of RDMA bandwidth"
    )


# ----- rendering -----------------------------------------------------------------------------
def render(plan: EnvPlan, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(plan.to_dict(), indent=2) + "\n"
    if fmt == "k8s":
        return _render_k8s(plan)
    if fmt == "slurm":
        return _render_slurm(plan)
    if fmt == "shell":
        return _render_shell(plan)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}")


def _header(plan: EnvPlan, comment: str = "#") -> list[str]:
    lines = [
        f"{comment} NCCL settings for {plan.host or 'this node'} ({plan.fabric}, {plan.workload}), from `fabricscope nccl env`"
    ]
    for device, why in plan.excluded:
        lines.append(f"{comment} left out {device}: {why}")
    for note in plan.notes:
        lines.append(f"{comment} note: {note}")
    return lines


def _footer(plan: EnvPlan, comment: str = "#") -> list[str]:
    lines = [f"{comment} not set on purpose:"] if any(v.value is None for v in plan.variables) else []
    for v in plan.variables:
        if v.value is None:
            lines.append(f"{comment}   {v.name}: {v.reason}")
    return lines


def _sh(value: str) -> str:
    """Shell-quoted; values with NCCL's list syntax are always quoted so '=' and ',' read as data."""
    quoted = shlex.quote(value)
    return quoted if quoted.startswith("'") or not any(c in value for c in "=,^") else f"'{value}'"


def _render_shell(plan: EnvPlan) -> str:
    lines = _header(plan)
    for v in plan.exports:
        lines.append(f"# {v.reason}")
        lines.append(f"export {v.name}={_sh(v.value or '')}")
    lines += _footer(plan)
    return "\n".join(lines) + "\n"


def _render_slurm(plan: EnvPlan) -> str:
    lines = ["#!/bin/bash", "#SBATCH --export=ALL"]
    lines += _header(plan)
    lines.append(
        "# Values such as NCCL_IB_HCA contain commas, which #SBATCH --export=NAME=value cannot carry:"
    )
    lines.append("# they are exported here and reach every task through --export=ALL.")
    for v in plan.exports:
        lines.append(f"# {v.reason}")
        lines.append(f"export {v.name}={_sh(v.value or '')}")
    lines += _footer(plan)
    lines.append('srun --export=ALL "$@"')
    return "\n".join(lines) + "\n"


def _render_k8s(plan: EnvPlan) -> str:
    lines = _header(plan)
    lines.append("env:")
    for v in plan.exports:
        lines.append(f"  # {v.reason}")
        lines.append(f"  - name: {v.name}")
        lines.append(f"    value: {json.dumps(v.value)}")
    lines += _footer(plan)
    return "\n".join(lines) + "\n"
