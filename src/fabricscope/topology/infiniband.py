"""An InfiniBand subnet (``ibnetdiscover``) as switches, host NICs and cables.

Names come from NodeDescriptions. A managed NVIDIA switch describes itself as
``MF0;<hostname>:<model>/U1``; the hostname is its name here. A host's adapter describes itself as
``<hostname> <device>`` (``node01 mlx5_0``, ``dgx-04 HCA-6``: what rdma-core and MLNX_OFED set at
boot), so adapters group into hosts by that first word. An adapter still carrying the vendor's
default (``MT4129 ConnectX7 Mellanox Technologies``) cannot be told apart from its siblings: it
becomes a host of its own, named by its GUID, and the discovery says how many there were.
SHARP aggregation nodes are adapters inside switches and are left out.
"""

from __future__ import annotations

import re
from collections import Counter

from fabricscope.host.ibnetdiscover import IbFabric, IbNode
from fabricscope.topology.model import Attachment, Cable, Discovery

_MANAGED_SWITCH = re.compile(r"^MF0;([^:]+):")
_HOST_DEVICE = re.compile(
    r"^(\S+)\s+((?:mlx\d+_\d+|HCA-\d+|hfi\d+_\d+|qib\d+|ibp\S+|bnxt_re\d+|irdma\d+|[a-z]+\d*_\d+))\Z"
)
_VENDOR_DEFAULT = re.compile(
    r"Mellanox Technologies|ConnectX|InfiniHost|NVIDIA Technologies|Intel|QLogic", re.IGNORECASE
)
_AGGREGATION = re.compile(r"Aggregation Node", re.IGNORECASE)


def _bare_guid(guid: str) -> str:
    return guid.split("-", 1)[-1]


def switch_names(fabric: IbFabric) -> dict[str, str]:
    """GUID -> a unique, readable name for every switch."""
    names: dict[str, str] = {}
    for node in fabric.of_kind("switch"):
        match = _MANAGED_SWITCH.match(node.description)
        names[node.guid] = (match.group(1) if match else node.description).strip() or _bare_guid(node.guid)
    counts = Counter(names.values())
    return {g: (n if counts[n] == 1 else f"{n}-{_bare_guid(g)[-4:]}") for g, n in names.items()}


def host_of(node: IbNode) -> tuple[str, str, bool]:
    """An adapter -> (host, device, named): ``"node01 mlx5_0"`` -> ("node01", "mlx5_0", True)."""
    desc = " ".join(node.description.split())
    match = _HOST_DEVICE.match(desc)
    if match:
        return match.group(1), match.group(2), True
    if desc and " " not in desc and not _VENDOR_DEFAULT.search(desc):
        return desc, "", True  # a bare hostname (simulators, hand-set descriptions)
    return _bare_guid(node.guid), "", False


def _rate_warnings(disc: Discovery, kind: str, items: list[tuple[str, float | None, str]]) -> None:
    counts = Counter(r for _, r, _ in items if r)
    if not counts:
        return
    top = max(counts.values())
    usual = max(r for r, c in counts.items() if c == top)  # a tie goes to the faster rate
    slow = [(where, rate, label) for where, rate, label in items if rate and rate < usual]
    for where, rate, label in slow[:20]:
        disc.warnings.append(f"{kind} {where} runs at {label} ({rate:g} Gb/s); most run at {usual:g} Gb/s")
    if len(slow) > 20:
        disc.warnings.append(f"... and {len(slow) - 20} more slow {kind}s")


def from_ibnetdiscover(fabric: IbFabric, name: str = "infiniband") -> Discovery:
    """Attachments and cables of an ``ibnetdiscover`` capture (see module docstring)."""
    sw = switch_names(fabric)
    disc = Discovery(source="ibnetdiscover", name=name, attachments=[])
    unnamed: set[str] = set()
    aggregation: set[str] = set()
    host_links: list[tuple[str, float | None, str]] = []
    switch_links: list[tuple[str, float | None, str]] = []
    ignored: Counter[str] = Counter()
    for link in fabric.links:
        a, b = fabric.nodes.get(link.a.guid), fabric.nodes.get(link.b.guid)
        if a is None or b is None:
            continue
        rate = link.rate_gbps * 1e9 if link.rate_gbps else None
        label = f"{link.width}x{link.speed}" if link.width and link.speed else "unknown speed"
        if a.kind == "switch" and b.kind == "switch":
            disc.cables.append(Cable(sw[a.guid], sw[b.guid], str(link.a.port), str(link.b.port), rate))
            switch_links.append(
                (f"{sw[a.guid]}[{link.a.port}] - {sw[b.guid]}[{link.b.port}]", link.rate_gbps, label)
            )
            continue
        if a.kind == "switch" or b.kind == "switch":
            switch, swport, ca, caport = (
                (a, link.a.port, b, link.b.port) if a.kind == "switch" else (b, link.b.port, a, link.a.port)
            )
            if ca.kind == "router":
                ignored["router port(s)"] += 1
                continue
            if _AGGREGATION.search(ca.description):
                aggregation.add(ca.guid)
                continue
            host, device, named = host_of(ca)
            if not named:
                unnamed.add(ca.guid)
            nic = (
                device
                if device and ca.ports <= 1
                else f"{device or 'port'}/{caport}"
                if device
                else f"port{caport}"
            )
            disc.attachments.append(Attachment(host, nic, sw[switch.guid], str(swport), rate))
            host_links.append((f"{host} {nic} - {sw[switch.guid]}[{swport}]", link.rate_gbps, label))
            continue
        ignored["adapter-to-adapter cable(s)"] += 1
    if aggregation:
        ignored["SHARP aggregation node(s) (adapters inside switches)"] = len(aggregation)
    disc.ignored.update(ignored)
    if unnamed:
        disc.warnings.append(
            f"{len(unnamed)} adapter(s) still carry the vendor's NodeDescription instead of '<host> <device>', "
            "so their host is unknown; each is taken as a host of its own, named by its GUID "
            "(rdma-core sets it at boot from the hostname: /sys/class/infiniband/<dev>/node_desc)"
        )
    _rate_warnings(disc, "switch cable", switch_links)
    _rate_warnings(disc, "host link", host_links)
    disc.warnings.extend(fabric.problems[:20])
    return disc
