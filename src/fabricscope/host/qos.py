"""PFC, trust mode and DSCP->priority mapping, from mlnx_qos or iproute2's dcb."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from fabricscope.host.root import Root

_TRUST = re.compile(r"Priority trust state:\s*(\w+)")
_PRIO_DSCP = re.compile(r"prio:\s*(\d)\s+dscp:\s*([\d,\s]+)")


@dataclass(frozen=True)
class QosConfig:
    """QoS of one netdev; fields are None when the source did not say."""

    source: str  # "mlnx_qos" or "dcb"
    trust: str | None  # "pcp" or "dscp"
    pfc_enabled: tuple[bool, ...] | None  # index = priority 0..7
    dscp_to_prio: dict[int, int] = field(default_factory=dict)

    @property
    def pfc_priorities(self) -> list[int]:
        return [p for p, on in enumerate(self.pfc_enabled or ()) if on]

    def priority_of_dscp(self, dscp: int) -> int | None:
        """Priority a DSCP value lands on under trust dscp (mlx5 default table: dscp >> 3)."""
        if dscp in self.dscp_to_prio:
            return self.dscp_to_prio[dscp]
        return dscp >> 3 if 0 <= dscp < 64 else None


def parse_mlnx_qos(text: str) -> QosConfig | None:
    trust_match = _TRUST.search(text)
    pfc = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("priority") and i + 1 < len(lines):
            head = line.split()
            row = lines[i + 1].split()
            if row and row[0] == "enabled" and head[1:] == [str(p) for p in range(8)] and len(row) >= 9:
                try:
                    pfc = tuple(int(v) == 1 for v in row[1:9])
                except ValueError:
                    pfc = None
                break
    dscp_map: dict[int, int] = {}
    for match in _PRIO_DSCP.finditer(text):
        prio = int(match.group(1))
        for value in match.group(2).replace(" ", "").split(","):
            if value.isascii() and value.isdigit():
                dscp_map[int(value)] = prio
    if trust_match is None and pfc is None:
        return None
    return QosConfig(
        source="mlnx_qos",
        trust=trust_match.group(1).lower() if trust_match else None,
        pfc_enabled=pfc,
        dscp_to_prio=dscp_map,
    )


def parse_dcb_pfc(text: str) -> tuple[bool, ...] | None:
    """``dcb -j pfc show dev IF``: ``{"prio_pfc": {"0": false, ...}}`` (or a list of pairs)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    prio = data.get("prio_pfc") if isinstance(data, dict) else None
    enabled = [False] * 8
    if isinstance(prio, dict):
        items = prio.items()
    elif isinstance(prio, list):
        items = [(e.get("prio"), e.get("enabled")) for e in prio if isinstance(e, dict)]
    else:
        return None
    for key, value in items:
        try:
            index = int(key)
        except (TypeError, ValueError):
            continue
        if 0 <= index < 8:
            enabled[index] = value is True or value == "on"
    return tuple(enabled)


def parse_dcb_app(text: str) -> dict[int, int] | None:
    """``dcb -j app show dev IF``: ``{"dscp_prio": [[26, 3], ...]}``."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    mapping: dict[int, int] = {}
    for pair in data.get("dscp_prio") or []:
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) for v in pair):
            mapping[pair[0]] = pair[1]
        elif (
            isinstance(pair, dict) and isinstance(pair.get("dscp"), int) and isinstance(pair.get("prio"), int)
        ):
            mapping[pair["dscp"]] = pair["prio"]
    return mapping


def qos_commands(netdev: str) -> list[list[str]]:
    """What :func:`read_qos` may run for one netdev, in the order it asks."""
    return [
        ["mlnx_qos", "-i", netdev],
        ["dcb", "-j", "pfc", "show", "dev", netdev],
        ["dcb", "-j", "app", "show", "dev", netdev],
    ]


def read_qos(root: Root, netdev: str) -> QosConfig | None:
    """mlnx_qos first (it reports trust directly), then iproute2 dcb."""
    mlnx_cmd, pfc_cmd, app_cmd = qos_commands(netdev)
    result = root.run(mlnx_cmd)
    if result.ok:
        parsed = parse_mlnx_qos(result.stdout)
        if parsed is not None:
            return parsed
        root.note(" ".join(mlnx_cmd), "output not recognised")
    pfc_result = root.run(pfc_cmd)
    if not pfc_result.ok:
        return None
    pfc = parse_dcb_pfc(pfc_result.stdout)
    if pfc is None:
        root.note(" ".join(pfc_cmd), "output not recognised")
    app_result = root.run(app_cmd)
    dscp = parse_dcb_app(app_result.stdout) if app_result.ok else None
    # On mlx5 the first DSCP app entry switches trust to dscp; none means pcp.
    trust = None if dscp is None else ("dscp" if dscp else "pcp")
    return QosConfig(source="dcb", trust=trust, pfc_enabled=pfc, dscp_to_prio=dscp or {})
