"""The InfiniBand subnet as ``ibnetdiscover`` prints it: switches, channel adapters, and every
cabled port pair with its active width and speed.

Format (infiniband-diags ``ibnetdiscover.c``, ``man/common/sec_topology-file.rst``): one block per
node, a node line ``Switch 41 "S-<guid>"  # "<NodeDescription>" enhanced port 0 lid 1 lmc 0``
(``Ca``/``Rt`` for adapters and routers), then one line per connected port::

    [3]   "H-<guid>"[1](<port guid>)   # "<remote description>" lid 22 4xNDR      (switch port)
    [1](<port guid>)  "S-<guid>"[17]   # lid 657 lmc 0 "<remote description>" lid 73 4xNDR   (CA port)

Every cable is printed from both ends; :func:`parse_ibnetdiscover` keeps it once. Rates are the
nominal data rates ``ibstat`` reports (4X NDR = 400 Gb/s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricscope.host.root import Root

DEFAULT_TIMEOUT_S = 300.0  # a sweep of tens of thousands of ports takes minutes

# Gb/s per lane, as ibstat and /sys/class/infiniband/*/ports/*/rate report them
LANE_GBPS = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}
NODE_KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}

_NODE = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR?]-[^"]+)"\s*#\s*"(.*?)"(.*)\Z')
_PORT = re.compile(
    r"^\[(\d+)\](?:\[ext \d+\])?(?:\(([0-9A-Za-z<>x]+)\))?\s*"
    r'"([SHR?]-[^"]+)"\[(\d+)\](?:\[ext \d+\])?(?:\s*\(([0-9A-Za-z<>x]+)\))?\s*#\s*(.*)\Z'
)
_LINK = re.compile(r"\b(\d+)x(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR|\?\?\?)\b")
_LID = re.compile(r"\blid (\d+)\b")
_QUOTED = re.compile(r'"(.*?)"')


@dataclass(frozen=True)
class IbNode:
    """One node of the subnet; ``guid`` is the ``S-``/``H-`` token ibnetdiscover names it by."""

    guid: str
    kind: str  # switch | ca | router
    ports: int
    description: str
    lid: int | None = None


@dataclass(frozen=True)
class IbEnd:
    guid: str
    port: int


@dataclass(frozen=True)
class IbLink:
    """A cable between two ports, with the width and speed both ends agreed on."""

    a: IbEnd
    b: IbEnd
    width: int | None  # lanes: 1, 2, 4, 8, 12
    speed: str | None  # SDR .. XDR
    rate_gbps: float | None

    def other(self, guid: str) -> IbEnd:
        return self.b if self.a.guid == guid else self.a


@dataclass(frozen=True)
class IbFabric:
    nodes: dict[str, IbNode]
    links: tuple[IbLink, ...]
    problems: tuple[str, ...] = field(default=())

    def of_kind(self, kind: str) -> list[IbNode]:
        return [n for n in self.nodes.values() if n.kind == kind]


def link_rate_gbps(width: int | None, speed: str | None) -> float | None:
    """4 lanes of NDR -> 400.0; None when either is unknown."""
    lane = LANE_GBPS.get(speed or "")
    return width * lane if width and lane else None


def _link_fields(comment: str) -> tuple[int | None, str | None]:
    found = list(_LINK.finditer(comment))
    match = found[-1] if found else None  # the last one: a description may itself read "4xHDR"
    if match is None or match.group(2) == "???":
        return (int(match.group(1)) if match else None), None
    return int(match.group(1)), match.group(2)


def _remote_description(comment: str) -> str | None:
    quoted = _QUOTED.findall(comment)
    return quoted[0] if quoted else None


def parse_ibnetdiscover(text: str) -> IbFabric:
    """``ibnetdiscover`` output -> nodes and de-duplicated links; unknown lines become problems."""
    nodes: dict[str, IbNode] = {}
    seen: dict[frozenset[tuple[str, int]], IbLink] = {}
    mentioned: dict[str, tuple[str, str | None]] = {}  # guid -> (kind letter, description) of a peer
    problems: list[str] = []
    current: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or "=" in line.split()[0] or line in ("Non-Chassis Nodes",):
            continue
        if line.startswith(("Chassis ", "Hostname:", "ibwarn:")):
            continue
        node = _NODE.match(line)
        if node:
            kind = NODE_KINDS[node.group(1)]
            lid = _LID.search(node.group(5))
            current = node.group(3)
            nodes[current] = IbNode(
                current, kind, int(node.group(2)), node.group(4), int(lid.group(1)) if lid else None
            )
            continue
        port = _PORT.match(line)
        if port and current is not None:
            local = IbEnd(current, int(port.group(1)))
            remote = IbEnd(port.group(3), int(port.group(4)))
            width, speed = _link_fields(port.group(6))
            key = frozenset(((local.guid, local.port), (remote.guid, remote.port)))
            old = seen.get(key)
            if old is None or (old.rate_gbps is None and speed is not None):
                seen[key] = IbLink(local, remote, width, speed, link_rate_gbps(width, speed))
            elif speed is not None and (width, speed) != (old.width, old.speed):
                # both ends of an active link report the same width and speed; when they do not,
                # the link carries what the slower end says
                slower = min(
                    (old.width, old.speed), (width, speed), key=lambda ws: link_rate_gbps(*ws) or 0.0
                )
                problems.append(
                    f"line {number}: {local.guid}[{local.port}] reports {width}x{speed}, "
                    f"{remote.guid}[{remote.port}] reported {old.width}x{old.speed}; using {slower[0]}x{slower[1]}"
                )
                seen[key] = IbLink(old.a, old.b, slower[0], slower[1], link_rate_gbps(*slower))
            if remote.guid not in mentioned:
                mentioned[remote.guid] = (remote.guid[0], _remote_description(port.group(6)))
            continue
        problems.append(f"line {number}: not understood: {line[:80]}")
    # peers that are named on port lines but have no block of their own (a truncated capture)
    for guid, (letter, desc) in mentioned.items():
        if guid not in nodes:
            kind = {"S": "switch", "H": "ca", "R": "router"}.get(letter, "ca")
            nodes[guid] = IbNode(guid, kind, 0, desc or guid, None)
    return IbFabric(nodes, tuple(seen.values()), tuple(problems))


def read_ibnetdiscover(root: Root, timeout_s: float = DEFAULT_TIMEOUT_S) -> IbFabric | None:
    """Run ``ibnetdiscover`` (or read its captured output); None when it is absent or fails."""
    result = root.run(["ibnetdiscover"], timeout_s=timeout_s)
    if not result.available:
        root.note("ibnetdiscover", result.reason or "not available")
        return None
    if not result.ok:
        root.note("ibnetdiscover", result.reason or f"exit status {result.rc}")
        return None
    fabric = parse_ibnetdiscover(result.stdout)
    if not fabric.nodes:
        root.note("ibnetdiscover", "output lists no nodes")
        return None
    return fabric
