"""LLDP neighbours as lldpd reports them: which switch, and which of its ports, each NIC is cabled to.

``lldpctl -f json`` (lldpd's JSON writer) nests a neighbour under its local interface name and
its chassis under the chassis' system name::

    {"lldp": {"interface": [{"eth0": {"via": "LLDP", "chassis": {"leaf1": {"id": {...},
      "capability": [...]}}, "port": {"id": {"type": "ifname", "value": "swp3"}, "descr": ...}}}]}}

One interface gives a mapping instead of a list; a chassis without a system name is the bare
``{"id": ...}`` mapping; ``-f json0`` wraps every value in a list. ``lldpctl -f keyvalue`` prints
``lldp.<ifname>.<path>=<value>`` lines, the chassis and port ID under their subtype
(``chassis.mac=``, ``port.ifname=``, ``port.local=``), and continues multi-line values on lines
without the ``lldp.`` prefix. Both are read here; everything else about lldpd stays out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fabricscope.host.root import Root

LLDPCTL = "lldpctl"
SWITCH_CAPABILITIES = ("Bridge", "Router")
_ID_TYPES = ("mac", "ifname", "local", "ip", "ifalias", "unhandled")
_KEYVALUE = re.compile(
    r"^lldp\.(.+?)\.(via|rid|age|chassis|port|vlan|ppvid|pi|lldp-med|unknown-tlvs|custom-tlvs|ttl|lldp)(?:\.(.*))?\Z"
)
_MAU_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(G|Gig|M)?(?=base)", re.IGNORECASE)


@dataclass(frozen=True)
class LldpNeighbor:
    """What one local interface hears: the neighbour's chassis and the port it sends from."""

    interface: str
    chassis_name: str | None
    chassis_id: str | None
    chassis_id_type: str | None  # mac, local, ip, ...
    port_id: str | None
    port_id_type: str | None  # ifname, local, mac, ...
    port_descr: str | None
    capabilities: tuple[str, ...]  # enabled ones: Bridge, Router, Station, ...
    mau: str | None  # the neighbour's port's operational MAU type, e.g. "10GigBaseLR - R fiber ..."
    mgmt_ips: tuple[str, ...] = ()

    @property
    def switch(self) -> str | None:
        """The neighbour's name: its system name, else its chassis ID."""
        return self.chassis_name or self.chassis_id

    @property
    def port(self) -> str | None:
        """The neighbour's port as its operator names it.

        An ``ifname`` port ID is the name; a ``local`` one usually is too, except the bare
        numbers some vendors send (Juniper's SNMP index), where the description holds the name;
        a MAC port ID (Linux lldpd's default) comes with the interface name as description.
        """
        if self.port_id and self.port_id_type in ("ifname", "ifalias"):
            return self.port_id
        if (
            self.port_id
            and self.port_id_type == "local"
            and not (self.port_id.isascii() and self.port_id.isdigit())
        ):
            return self.port_id
        return self.port_descr or self.port_id

    @property
    def is_switch(self) -> bool | None:
        """True when it says it bridges or routes, False when it enables neither, None when it
        announces no enabled capability at all (unknown)."""
        if not self.capabilities:
            return None
        return any(c in SWITCH_CAPABILITIES for c in self.capabilities)

    @property
    def speed_bps(self) -> float | None:
        return mau_speed_bps(self.mau)


def mau_speed_bps(mau: str | None) -> float | None:
    """``"10GigBaseLR - ..."`` -> 1e10, ``"1000BaseTFD - ..."`` -> 1e9, ``"100GbaseCR10"`` -> 1e11."""
    match = _MAU_SPEED.match(mau or "")
    if not match:
        return None
    value = float(match.group(1))
    unit = (match.group(2) or "M").lower()
    return value * (1e9 if unit.startswith("g") else 1e6)


# ----- JSON ---------------------------------------------------------------------------------
def _one(value: Any) -> Any:
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value


def _text(value: Any) -> str | None:
    value = _one(value)
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        return None
    text = str(value).strip()
    return text or None


def _texts(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    return tuple(t for t in (_text(v) for v in items) if t)


def _enabled(flag: Any) -> bool:
    flag = _one(flag)
    return flag is True or str(flag).lower() in ("on", "yes", "true")


def _capabilities(raw: Any) -> tuple[str, ...]:
    items = raw if isinstance(raw, list) else [raw] if isinstance(raw, dict) else []
    return tuple(
        str(c["type"]) for c in items if isinstance(c, dict) and c.get("type") and _enabled(c.get("enabled"))
    )


def _split_chassis(raw: Any) -> tuple[str | None, dict[str, Any]]:
    raw = _one(raw)
    if not isinstance(raw, dict) or not raw:
        return None, {}
    if "id" in raw and isinstance(_one(raw["id"]), dict):  # no system name, or json0 with "name"
        return _text(raw.get("name")), raw
    if len(raw) == 1:
        name, body = next(iter(raw.items()))
        body = _one(body)
        return str(name), body if isinstance(body, dict) else {}
    return None, raw


def _neighbor_from_json(interface: str, entry: dict[str, Any]) -> LldpNeighbor:
    name, chassis = _split_chassis(entry.get("chassis"))
    cid = _one(chassis.get("id"))
    port = _one(entry.get("port"))
    port = port if isinstance(port, dict) else {}
    pid = _one(port.get("id"))
    auto = _one(port.get("auto-negotiation"))
    return LldpNeighbor(
        interface=interface,
        chassis_name=name,
        chassis_id=_text(cid),
        chassis_id_type=str(cid.get("type")) if isinstance(cid, dict) and cid.get("type") else None,
        port_id=_text(pid),
        port_id_type=str(pid.get("type")) if isinstance(pid, dict) and pid.get("type") else None,
        port_descr=_text(port.get("descr")),
        capabilities=_capabilities(chassis.get("capability")),
        mau=_text(auto.get("current")) if isinstance(auto, dict) else None,
        mgmt_ips=_texts(chassis.get("mgmt-ip")),
    )


def _json_entries(interfaces: Any) -> list[tuple[str, dict[str, Any]]]:
    pairs: list[tuple[str, Any]] = []
    if isinstance(interfaces, dict):
        pairs = list(interfaces.items())
    elif isinstance(interfaces, list):
        for item in interfaces:
            if not isinstance(item, dict):
                continue
            if "name" in item and ("chassis" in item or "via" in item):
                pairs.append((_text(item["name"]) or "", item))
            else:
                pairs.extend(item.items())
    out = []
    for name, body in pairs:
        for one in body if isinstance(body, list) else [body]:
            if isinstance(one, dict) and name:
                out.append((str(name), one))
    return out


def parse_lldpctl_json(text: str) -> list[LldpNeighbor] | None:
    """``lldpctl -f json`` (or ``json0``) -> neighbours; None when the text is not that."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "lldp" not in doc:
        return None
    lldp = _one(doc["lldp"])
    if not isinstance(lldp, dict):
        return [] if lldp in ([], None) else None
    return [_neighbor_from_json(i, e) for i, e in _json_entries(lldp.get("interface"))]


# ----- keyvalue -----------------------------------------------------------------------------
def _keyvalue_records(text: str) -> list[tuple[str, dict[str, list[str]]]]:
    records: list[tuple[str, dict[str, list[str]]]] = []
    current: dict[str, dict[str, list[str]]] = {}  # interface -> its open record
    last: tuple[dict[str, list[str]], str] | None = None
    for line in text.splitlines():
        match = _KEYVALUE.match(line.split("=", 1)[0]) if "=" in line else None
        if match is None:
            if last is not None and line.strip() and not line.startswith("lldp."):
                fields, key = last
                fields[key][-1] += "\n" + line  # continuation of a multi-line value
            continue
        interface = match.group(1)
        path = match.group(2) + (f".{match.group(3)}" if match.group(3) else "")
        value = line.split("=", 1)[1]
        record = current.get(interface)
        if record is None or (path == "via" and "via" in record):
            record = current[interface] = {}
            records.append((interface, record))
        record.setdefault(path, []).append(value)
        last = (record, path)
    return records


def _kv_first(fields: dict[str, list[str]], key: str) -> str | None:
    values = fields.get(key)
    return (values[0].strip() or None) if values else None


def _kv_id(fields: dict[str, list[str]], prefix: str) -> tuple[str | None, str | None]:
    for kind in _ID_TYPES:
        if f"{prefix}.{kind}" in fields:
            return fields[f"{prefix}.{kind}"][0].strip() or None, kind
    return None, None


def parse_lldpctl_keyvalue(text: str) -> list[LldpNeighbor] | None:
    """``lldpctl -f keyvalue`` -> neighbours; None when no line has the ``lldp.`` form."""
    records = _keyvalue_records(text)
    if not records and text.strip():
        return None
    out = []
    for interface, fields in records:
        if not any(k.startswith(("chassis.", "port.")) for k in fields):
            continue  # a VLAN-only or empty block is no neighbour
        cid, ctype = _kv_id(fields, "chassis")
        pid, ptype = _kv_id(fields, "port")
        caps = tuple(
            k.split(".")[1]
            for k, v in fields.items()
            if k.startswith("chassis.") and k.endswith(".enabled") and k.count(".") == 2 and _enabled(v[0])
        )
        out.append(
            LldpNeighbor(
                interface=interface,
                chassis_name=_kv_first(fields, "chassis.name"),
                chassis_id=cid,
                chassis_id_type=ctype,
                port_id=pid,
                port_id_type=ptype,
                port_descr=_kv_first(fields, "port.descr"),
                capabilities=caps,
                mau=_kv_first(fields, "port.auto-negotiation.current"),
                mgmt_ips=tuple(v.strip() for v in fields.get("chassis.mgmt-ip", []) if v.strip()),
            )
        )
    return out


def parse_lldpctl(text: str) -> list[LldpNeighbor] | None:
    """Either format, told apart by the first character; None for anything else."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return parse_lldpctl_json(stripped)
    return parse_lldpctl_keyvalue(text)


def lldpctl_argv(socket: str | None = None) -> list[str]:
    return [LLDPCTL, *(["-u", socket] if socket else []), "-f", "json"]


def read_lldp(
    root: Root, socket: str | None = None, *, quiet: bool = False
) -> tuple[LldpNeighbor, ...] | None:
    """This node's LLDP neighbours from its lldpd (``socket``: a non-default control socket);
    None when lldpctl is absent, lldpd is not running, or the output is not understood.
    ``quiet``: a failing lldpctl is no problem worth recording (the inventory of a node that has
    the package but does not run the daemon)."""
    argv = lldpctl_argv(socket)
    result = root.run(argv)
    if not result.available:
        return None  # no lldpd on this node: nothing to say, nothing wrong
    if not result.ok:
        if not quiet:
            root.note(" ".join(argv), result.reason or f"exit status {result.rc} (is lldpd running?)")
        return None
    parsed = parse_lldpctl(result.stdout)
    if parsed is None:
        root.note(" ".join(argv), "output not recognised")
        return None
    return tuple(parsed)
