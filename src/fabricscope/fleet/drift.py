"""Drift: facts that differ between nodes that should be the same.

Each node's facts become observations ``(check, key, value, subject)``; nodes are compared key by
key and the value most nodes hold is the reference. Devices are matched by their role, never by
their names: an RDMA device by its PCI address (its slot), so a node whose mlx5_* names were
enumerated in another order still matches, and a node that lost a NIC still lines up on the
others. A node whose NICs sit at none of the fleet's usual addresses (another board revision) is
matched rail by rail in PCI order instead.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fabricscope.findings import Finding, Severity


@dataclass(frozen=True)
class Rule:
    what: str  # what is compared, as a sentence fragment
    severity: Severity
    fix: str  # template: {subject}, {majority}, {value}


RULES: dict[str, Rule] = {
    "fleet.firmware": Rule(
        "NIC firmware",
        Severity.WARN,
        "update {subject} to firmware {majority} like the rest of the fleet (mlxfwmanager -u), then reset it (mlxfwreset)",
    ),
    "fleet.driver": Rule(
        "driver module version", Severity.WARN, "install the {key} driver {majority} that the other nodes run"
    ),
    "fleet.kernel": Rule("kernel", Severity.WARN, "boot kernel {majority} like the other nodes"),
    "fleet.rdma_core": Rule("rdma-core", Severity.WARN, "install rdma-core {majority} like the other nodes"),
    "fleet.nccl_version": Rule(
        "NCCL",
        Severity.WARN,
        "install NCCL {majority} (libnccl2) like the other nodes, or pin one NCCL in the job's container",
    ),
    "fleet.ports": Rule(
        "RDMA port count",
        Severity.FAIL,
        "find the missing NIC or port: `lspci -d 15b3:`, `dmesg | grep mlx5`; reseat or replace it",
    ),
    "fleet.port_rate": Rule(
        "port rate",
        Severity.FAIL,
        "check {subject}'s cable, transceiver and switch port speed (`mlxlink -d <dev> -m`): the others train at {majority}",
    ),
    "fleet.link_layer": Rule(
        "link layer",
        Severity.FAIL,
        "set {subject}'s link type like the others ({majority}: `mlxconfig -d <dev> set LINK_TYPE_P1=...`, then reboot)",
    ),
    "fleet.mtu": Rule(
        "MTU",
        Severity.WARN,
        "ip link set dev {subject} mtu {majority} (and persist it in the network configuration)",
    ),
    "fleet.pfc": Rule(
        "PFC priorities",
        Severity.FAIL,
        "enable PFC on priority {majority} only, as the fleet and its switches do: mlnx_qos -i {subject} --pfc {flags} "
        "(or `dcb pfc set dev {subject} prio-pfc {majority}:on`)",
    ),
    "fleet.trust": Rule("QoS trust mode", Severity.WARN, "mlnx_qos -i {subject} --trust {majority}"),
    "fleet.ecn": Rule(
        "ECN (DCQCN) priorities",
        Severity.WARN,
        "enable ECN like the others: echo 1 > /sys/class/net/{subject}/ecn/roce_np/enable/<prio> and roce_rp/enable/<prio> "
        "for priorities {majority}",
    ),
    "fleet.gid_index": Rule(
        "RoCE v2 IPv4 GID index",
        Severity.FAIL,
        "a pinned NCCL_IB_GID_INDEX={majority} breaks {subject}: give it its IPv4 address the way the other nodes "
        "do (the GID table follows the order addresses are added), or leave NCCL_IB_GID_INDEX unset (NCCL >= 2.21 finds the RoCE v2 IPv4 GID)",
    ),
    "fleet.pcie": Rule(
        "PCIe link",
        Severity.FAIL,
        "reseat the card or riser and check the slot's BIOS settings; `lspci -vv -s {subject} | grep LnkSta` should say {majority}",
    ),
    "fleet.gpus": Rule(
        "GPUs",
        Severity.FAIL,
        "find the missing or different GPU: `nvidia-smi`, `dmesg | grep -i xid`; the others have {majority}",
    ),
    "fleet.gpudirect": Rule(
        "GPUDirect RDMA module",
        Severity.WARN,
        "modprobe {majority} and list it in /etc/modules-load.d/ like the other nodes",
    ),
    "fleet.sysctl": Rule(
        "sysctl", Severity.WARN, "sysctl -w {key}='{majority}' (persist in /etc/sysctl.d/90-fabricscope.conf)"
    ),
    "fleet.nccl_conf": Rule(
        "/etc/nccl.conf",
        Severity.WARN,
        "make /etc/nccl.conf the same on every node (configuration management); the others have: {majority}",
    ),
}

Observation = tuple[str, str, str, str]  # check, key, value, subject


def _pcie_text(pcie: dict[str, Any] | None) -> str | None:
    if not pcie or pcie.get("width") is None or pcie.get("speed_gts") is None:
        return None
    return f"x{pcie['width']} {pcie['speed_gts']:g} GT/s"


def _prios(values: list[int] | None) -> str | None:
    if values is None:
        return None
    return ",".join(str(v) for v in values) if values else "none"


def _num(value: Any) -> str | None:
    if value is None:
        return None
    return f"{value:g}" if isinstance(value, float) else str(value)


def _port_observations(nic: dict[str, Any], role: str) -> Iterator[Observation]:
    for port in nic.get("ports") or []:
        key = f"{role} port {port.get('port')}"
        where = f"{nic.get('device')}/{port.get('port')}"
        netdev = port.get("netdev") or where
        rate = port.get("rate_gbps")
        yield "fleet.port_rate", key, (f"{rate:g} Gb/s" if isinstance(rate, (int, float)) else None), where
        yield "fleet.link_layer", key, port.get("link_layer"), where
        yield "fleet.mtu", key, _num(port.get("mtu_bytes")), netdev
        yield "fleet.gid_index", key, _num(port.get("roce_v2_ipv4_gid_index")), netdev
        yield "fleet.pfc", key, _prios(port.get("pfc_priorities")), netdev
        yield "fleet.trust", key, port.get("trust"), netdev
        yield "fleet.ecn", key, _prios(port.get("ecn_priorities")), netdev


def _nccl_conf_text(conf: dict[str, Any] | None) -> str:
    if conf is None:
        return "(no /etc/nccl.conf)"
    settings = conf.get("settings") or {}
    return " ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "(no NCCL settings)"


def observe(
    facts: dict[str, Any], roles: dict[str, str], layout: tuple[str, ...] = ()
) -> Iterator[Observation]:
    """Every comparable fact of one node; ``roles`` maps a NIC's PCI address to its fleet role and
    ``layout`` is the fleet's usual NIC roles (to name the ones a node lacks)."""
    yield "fleet.kernel", "kernel", facts.get("kernel"), "kernel"
    for module, version in (facts.get("drivers") or {}).items():
        yield "fleet.driver", module, version, module
    yield "fleet.rdma_core", "rdma-core", facts.get("rdma_core"), "rdma-core"
    yield "fleet.nccl_version", "NCCL", facts.get("nccl_version"), "NCCL"
    gpus = facts.get("gpus") or {}
    yield "fleet.gpus", "GPU count", _num(gpus.get("count")), "GPUs"
    yield "fleet.gpus", "GPU model", gpus.get("model"), "GPUs"
    yield "fleet.gpudirect", "GPUDirect module", gpus.get("gpudirect_module"), "kernel modules"
    for gpu in gpus.get("devices") or []:
        yield "fleet.pcie", f"GPU {gpu.get('pci')}", _pcie_text(gpu.get("pcie")), str(gpu.get("pci"))
    nics = facts.get("nics") or []
    ports = sum(len(n.get("ports") or []) for n in nics)
    missing = [r for r in layout if r not in set(roles.values())]
    yield (
        "fleet.ports",
        "RDMA ports",
        str(ports),
        "RDMA ports" + (f" (no NIC at {', '.join(missing)})" if missing else ""),
    )
    for nic in nics:
        role = roles.get(nic.get("pci") or "", f"NIC {nic.get('device')}")
        yield "fleet.firmware", str(nic.get("model")), nic.get("fw"), str(nic.get("device"))
        yield "fleet.pcie", role, _pcie_text(nic.get("pcie")), str(nic.get("pci"))
        yield from _port_observations(nic, role)
    for nd in facts.get("netdevs") or []:
        yield "fleet.mtu", f"interface at {nd.get('pci')}", _num(nd.get("mtu_bytes")), str(nd.get("name"))
    for name, value in (facts.get("sysctls") or {}).items():
        yield "fleet.sysctl", name, value, name
    yield "fleet.nccl_conf", "/etc/nccl.conf", _nccl_conf_text(facts.get("nccl_conf")), "/etc/nccl.conf"


def nic_roles(all_facts: list[dict[str, Any] | None]) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """Per node: NIC PCI address -> role label ``rail N (address)`` on the fleet's usual layout
    (the addresses more than half of the nodes with NICs have); and that layout's labels."""
    per_node = [
        sorted(n.get("pci") or "" for n in (f.get("nics") or []) if n.get("pci")) if f else []
        for f in all_facts
    ]
    with_nics = [addrs for addrs in per_node if addrs]
    counts = Counter(a for addrs in with_nics for a in addrs)
    layout = sorted(a for a, c in counts.items() if c * 2 > len(with_nics))
    result = []
    for addrs in per_node:
        if addrs and layout and not set(addrs) & set(layout):
            mapped = {
                a: layout[i] if i < len(layout) else a for i, a in enumerate(addrs)
            }  # another board: rail by rail
        else:
            mapped = {a: a for a in addrs}
        result.append({a: _role_label(m, layout) for a, m in mapped.items()})
    return result, tuple(_role_label(a, layout) for a in layout)


def _role_label(address: str, layout: list[str]) -> str:
    return sys.intern(
        f"rail {layout.index(address)} ({address})" if address in layout else f"NIC at {address}"
    )


@dataclass
class DriftItem:
    """One difference across the fleet: the keys it covers, the majority, the nodes that differ."""

    check: str
    keys: list[str]
    majority: str
    majority_nodes: int
    nodes_compared: int
    tie: bool
    differing: list[tuple[str, str, str, str]]  # (node, value, subject, key)

    @property
    def rule(self) -> Rule:
        return RULES[self.check]

    def fix_for(self, subject: str, key: str | None = None) -> str:
        prios = set(self.majority.split(","))
        flags = ",".join("1" if str(p) in prios else "0" for p in range(8))
        return self.rule.fix.format(
            subject=subject, majority=self.majority, key=key or self.keys[0], flags=flags
        )

    def to_dict(self) -> dict[str, Any]:
        _node, _value, subject, key = self.differing[0]
        return {
            "id": self.check,
            "severity": self.rule.severity.value,
            "what": self.rule.what,
            "keys": self.keys,
            "majority": self.majority,
            "majority_nodes": self.majority_nodes,
            "nodes_compared": self.nodes_compared,
            "tie": self.tie,
            "differing": [{"node": n, "value": v, "subject": s, "key": k} for n, v, s, k in self.differing],
            "fix": self.fix_for(subject, key),
        }


def find_drift(
    names: list[str], all_facts: list[dict[str, Any] | None]
) -> tuple[list[DriftItem], list[set[str]]]:
    """Drift items (merged where the same nodes differ the same way on several keys) and, per
    node, the fleet checks it was compared on."""
    roles, layout = nic_roles(all_facts)
    groups: dict[tuple[str, str], dict[str, list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    compared: list[set[str]] = [set() for _ in names]
    for idx, facts in enumerate(all_facts):
        if facts is None:
            continue
        for check, key, value, subject in observe(facts, roles[idx], layout):
            if value is None:
                continue
            groups[(check, key)][sys.intern(str(value))].append((idx, subject))
            compared[idx].add(check)
    merged: dict[tuple, DriftItem] = {}
    for (check, key), by_value in groups.items():
        if len(by_value) < 2:
            continue
        ranked = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        majority, holders = ranked[0]
        differing = sorted((idx, value, subject) for value, members in ranked[1:] for idx, subject in members)
        signature = (check, majority, tuple((i, v) for i, v, _s in differing))
        item = merged.get(signature)
        if item is None:
            # Counted in nodes, not in devices (firmware is compared per NIC of a model).
            holders_n = len({i for i, _s in holders})
            compared_n = len({i for members in by_value.values() for i, _s in members})
            merged[signature] = DriftItem(
                check,
                [key],
                majority,
                holders_n,
                compared_n,
                len(ranked[1][1]) == len(holders),
                [(names[i], v, s, key) for i, v, s in differing],
            )
        else:
            item.keys.append(key)
            item.differing.extend((names[i], v, s, key) for i, v, s in differing)
    items = sorted(merged.values(), key=lambda d: (-d.rule.severity.rank, d.check, d.keys[0]))
    return items, compared


def drift_findings(item: DriftItem) -> Iterator[tuple[str, Finding]]:
    """The per-node findings of one drift item: ``(node, finding)``."""
    rule = item.rule
    majority_text = f"{item.majority} on {item.majority_nodes} of {item.nodes_compared} nodes" + (
        " (a tie: no clear majority)" if item.tie else ""
    )
    for node, value, subject, key in item.differing:
        yield (
            node,
            Finding(
                item.check,
                rule.severity,
                subject,
                f"{rule.what} {value} here ({key}); {majority_text}",
                {
                    "key": key,
                    "value": value,
                    "majority": item.majority,
                    "majority_nodes": item.majority_nodes,
                    "nodes_compared": item.nodes_compared,
                },
                item.fix_for(subject, key),
            ),
        )
