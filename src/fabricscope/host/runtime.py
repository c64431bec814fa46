"""Run-time state read cheaply and often: what a Prometheus scrape needs every few seconds.

The inventory readers (:mod:`.infiniband`, :mod:`.pci`, :mod:`.netclass`) read everything once:
GID tables (hundreds of files per port), PCI config space, command outputs. That is right for
doctor and wrong for an exporter scraped every 15 s on a node with eight HCAs. The readers here
touch only the attributes that change while the node runs (port state and rate, counters, PCIe
link status, MTU, ECN enables, TCP counters) and, unlike the inventory readers, record a missing
*required* attribute as a problem: a port directory without ``state`` is a broken source, not an
unknown value.

``read_ethtool_stats_result`` runs ``ethtool -S``; it is a command, so callers (the exporter)
must call it from a background thread, never from a scrape.

Speed: a port has fifty counter files, so these readers resolve each directory once through
:class:`_Dir` (:meth:`Root.resolve`, confined to a snapshot) and read the files in it by name
without following symlinks: the same confinement and error policy as :meth:`Root.read`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricscope.host.ethtool import ethtool_commands, parse_stats
from fabricscope.host.infiniband import IB_CLASS, LINK_LAYERS, natural_key, parse_rate
from fabricscope.host.netclass import NET_CLASS
from fabricscope.host.pci import PCI_DEVICES, parse_link_speed
from fabricscope.host.procfs import parse_netstat
from fabricscope.host.root import Root
from fabricscope.host.sysfs import (
    MAX_COUNTER_FILES,
    MAX_RDMA_DEVICES,
    MAX_RDMA_PORTS,
    PRIORITIES,
    Budget,
    capped,
    parse_id_name,
    parse_int,
)

LIFESPAN = "lifespan"  # hw_counters/lifespan: refresh period in ms, not a counter


@dataclass(frozen=True)
class PortStatus:
    """The changing part of an RDMA port: state, rate and every counter file."""

    device: str
    port: int
    state_id: int | None
    state: str | None
    phys_state_id: int | None
    phys_state: str | None
    rate_gbps: float | None
    link_layer: str | None
    counters: dict[str, int] = field(default_factory=dict)  # ports/N/counters/* (raw values)
    hw_counters: dict[str, int] = field(default_factory=dict)  # ports/N/hw_counters/* without lifespan
    hw_lifespan_ms: int | None = None


@dataclass(frozen=True)
class PcieLinkStatus:
    address: str
    current_speed_gts: float | None
    max_speed_gts: float | None
    current_width: int | None
    max_width: int | None


@dataclass(frozen=True)
class NetdevStatus:
    name: str
    mtu_bytes: int | None
    speed_mbps: int | None  # None when unknown (link down, virtual)
    operstate: str | None
    ecn_np_enabled: dict[int, bool] = field(default_factory=dict)  # MLNX_OFED ecn/roce_np/enable/<prio>
    ecn_rp_enabled: dict[int, bool] = field(default_factory=dict)  # MLNX_OFED ecn/roce_rp/enable/<prio>
    qos_trust: str | None = None  # MLNX_OFED qos/trust


@dataclass(frozen=True)
class EthtoolStatsResult:
    """``ethtool -S`` of one netdev. ``stats`` is None when there is nothing to show; ``problem``
    says why when that is a fault (garbled output, command failed), and is None when the source is
    simply not there (not captured in a snapshot)."""

    netdev: str
    stats: dict[str, int] | None
    problem: str | None = None


_MAX_ATTR_BYTES = 64 * 1024


class _Dir:
    """A directory of the root, resolved once; files and subdirectories below it are read by name
    without following symlinks, so nothing read through it can leave the snapshot (and a port's
    fifty counters cost one resolution, not fifty)."""

    def __init__(self, root: Root, rel: str, real: str) -> None:
        self.root = root
        self.rel = rel  # the path readers asked for: named in problems and the recording
        self.real = real  # the same directory, symlinks resolved

    @classmethod
    def open(cls, root: Root, rel: str) -> _Dir | None:
        """The directory at ``rel`` (symlinks resolved and confined by :meth:`Root.resolve`)."""
        resolved = root.resolve(rel)
        if resolved is None or not root.is_dir(resolved):
            return None
        return cls(root, rel, resolved)

    def sub(self, name: str) -> _Dir | None:
        """A subdirectory; a symlink in its place is not followed."""
        real = f"{self.real}/{name}" if self.real else name
        entry = self.root.lstat(real)
        if entry is None or entry.kind != "dir":
            return None
        return _Dir(self.root, f"{self.rel}/{name}", real)

    def names(self) -> list[str]:
        return self.root.listdir(self.real, source=self.rel)  # `fabricscope snapshot` keeps what was listed

    def read(self, name: str, *, required: bool = False) -> str | None:
        """Text of the file (trailing newlines stripped), or None as :meth:`Root.read` would."""
        rel = f"{self.rel}/{name}"
        data = self.root.read_bytes(f"{self.real}/{name}", missing_ok=not required, follow=False,
                                    limit=_MAX_ATTR_BYTES, source=rel)
        return None if data is None else self.root.text_of(rel, data)

    def required(self, name: str) -> str | None:
        """A one-line attribute every such object has: absent or empty is a problem."""
        text = self.read(name, required=True)
        if text is None:
            return None
        text = text.strip()
        if not text:
            self.root.note(f"{self.rel}/{name}", "empty")
            return None
        return text

    def optional(self, name: str) -> str | None:
        text = self.read(name)
        if text is None:
            return None
        return text.strip() or None

    def int(self, name: str) -> int | None:
        text = self.read(name)
        value = parse_int(text)
        if text is not None and value is None and text.strip() and not text.startswith("N/A"):
            self.root.note(f"{self.rel}/{name}", f"not an integer: {text[:40]!r}")
        return value

    def counters(self, name: str, budget: Budget | None = None) -> dict[str, int]:
        """Every integer file of the subdirectory ``name`` (capped, and taken from ``budget``);
        N/A files are left out, garbled ones noted."""
        sub = self.sub(name)
        if sub is None:
            return {}
        values = {}
        names = capped(self.root, "counter files", sub.rel, sub.names(), MAX_COUNTER_FILES)
        for entry in budget.take(names) if budget is not None else names:
            value = sub.int(entry)
            if value is not None:
                values[entry] = value
        return values


def list_rdma_ports(root: Root) -> list[tuple[str, int]]:
    """``(device, port)`` of every RDMA port, devices in natural order (mlx5_2 before mlx5_10)."""
    ports = []
    devices = capped(root, "rdma devices", IB_CLASS, sorted(root.listdir(IB_CLASS), key=natural_key), MAX_RDMA_DEVICES)
    for dev in devices:
        names = root.listdir(f"{IB_CLASS}/{dev}/ports")
        if not names:
            root.note(f"{IB_CLASS}/{dev}/ports", "RDMA device without ports")
        for name in names:
            if (name.isascii() and name.isdigit()):
                ports.append((dev, int(name)))
    return [(d, int(p)) for d, p in (x.split("/") for x in capped(
        root, "rdma ports", IB_CLASS, [f"{d}/{p}" for d, p in ports], MAX_RDMA_PORTS))]


def _id_name(d: _Dir, name: str) -> tuple[int | None, str | None]:
    text = d.required(name)
    parsed = parse_id_name(text)
    if text is not None and parsed[0] is None:
        d.root.note(f"{d.rel}/{name}", f"not '<id>: <name>': {text[:40]!r}")
    return parsed


def read_port_status(root: Root, device: str, port: int, budget: Budget | None = None) -> PortStatus | None:
    """State, rate and counters of one port; None (and a problem) when the port is gone.
    ``budget`` caps the counter files read over many ports (one scrape)."""
    base = f"{IB_CLASS}/{device}/ports/{port}"
    d = _Dir.open(root, base)
    if d is None:
        root.note(base, "RDMA port absent")
        return None
    state_id, state = _id_name(d, "state")
    phys_id, phys = _id_name(d, "phys_state")
    rate_text = d.required("rate")
    rate, _width, _speed = parse_rate(rate_text)
    if rate_text is not None and rate is None:
        root.note(f"{base}/rate", f"unrecognised rate {rate_text[:40]!r}")
    link_layer = d.required("link_layer")
    if link_layer is not None and link_layer not in LINK_LAYERS:
        root.note(f"{base}/link_layer", f"unknown link layer {link_layer[:40]!r}")
        link_layer = None
    hw = d.counters("hw_counters", budget)
    lifespan = hw.pop(LIFESPAN, None)
    return PortStatus(
        device=device,
        port=port,
        state_id=state_id,
        state=state,
        phys_state_id=phys_id,
        phys_state=phys,
        rate_gbps=rate,
        link_layer=link_layer,
        counters=d.counters("counters", budget),
        hw_counters=hw,
        hw_lifespan_ms=lifespan,
    )


def read_pcie_link(root: Root, address: str) -> PcieLinkStatus | None:
    """Link speed and width of a PCI function; None (and a problem) when the device is gone.
    A function without a PCIe link (virtual, or speed "Unknown") gives None fields, no problem."""
    base = f"{PCI_DEVICES}/{address}"
    d = _Dir.open(root, base)
    if d is None:
        root.note(base, "PCI device absent")
        return None
    speeds = []
    for name in ("current_link_speed", "max_link_speed"):
        text = d.optional(name)
        speed = parse_link_speed(text)
        if text is not None and speed is None and not text.lower().startswith("unknown"):
            root.note(f"{base}/{name}", f"unrecognised link speed {text[:40]!r}")
        speeds.append(speed)
    return PcieLinkStatus(
        address=address,
        current_speed_gts=speeds[0],
        max_speed_gts=speeds[1],
        current_width=d.int("current_link_width"),
        max_width=d.int("max_link_width"),
    )


def _enable_dir(d: _Dir, rel: str) -> dict[int, bool]:
    out: dict[int, bool] = {}
    parts = rel.split("/")
    current: _Dir | None = d
    for part in parts:
        current = current.sub(part) if current is not None else None
        if current is None:
            break
    if current is not None:
        for name in current.names():
            if name.isascii() and name.isdigit() and int(name) in PRIORITIES:
                value = current.int(name)
                if value is not None:
                    out[int(name)] = value == 1
    return out


def read_netdev_status(root: Root, name: str) -> NetdevStatus | None:
    """MTU, speed, operstate and the MLNX_OFED ECN/trust files; None (and a problem) when gone."""
    base = f"{NET_CLASS}/{name}"
    d = _Dir.open(root, base)
    if d is None:
        root.note(base, "network device absent")
        return None
    mtu_text = d.required("mtu")
    mtu = parse_int(mtu_text)
    if mtu_text is not None and mtu is None:
        root.note(f"{base}/mtu", f"not an integer: {mtu_text[:40]!r}")
    speed = d.int("speed")
    qos_trust = None
    qos = d.sub("qos")
    if qos is not None:
        qos_trust = qos.optional("trust")
    return NetdevStatus(
        name=name,
        mtu_bytes=mtu,
        speed_mbps=speed if speed is not None and speed > 0 else None,
        operstate=d.required("operstate"),
        ecn_np_enabled=_enable_dir(d, "ecn/roce_np/enable"),
        ecn_rp_enabled=_enable_dir(d, "ecn/roce_rp/enable"),
        qos_trust=qos_trust,
    )


def read_tcp_counters(root: Root) -> dict[str, int]:
    """/proc/net/snmp and /proc/net/netstat as ``{"Tcp.RetransSegs": n, "TcpExt.TCPTimeouts": n}``;
    a missing or garbled file is a problem (every Linux kernel has both)."""
    counters: dict[str, int] = {}
    for rel in ("proc/net/snmp", "proc/net/netstat"):
        text = root.read(rel, missing_ok=False)
        if text is None:
            continue
        parsed = parse_netstat(text)
        if not parsed:
            root.note(rel, "no counters recognised")
        counters.update(parsed)
    return counters


def read_ethtool_stats_result(root: Root, netdev: str, timeout_s: float = 5.0) -> EthtoolStatsResult:
    """``ethtool -S NETDEV`` parsed, with the reason when it failed. Runs a command: background only."""
    result = root.run(ethtool_commands(netdev)[0], timeout_s=timeout_s)
    if not result.available:
        if not root.is_live and result.reason == "not captured in snapshot":
            return EthtoolStatsResult(netdev, None)
        return EthtoolStatsResult(netdev, None, str(result.reason))
    if result.rc != 0:
        return EthtoolStatsResult(netdev, None, f"exit status {result.rc}")
    stats = parse_stats(result.stdout)
    if not stats:
        return EthtoolStatsResult(netdev, None, "no statistics recognised in output")
    return EthtoolStatsResult(netdev, stats)
