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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricscope.host.ethtool import parse_stats
from fabricscope.host.infiniband import IB_CLASS, natural_key, parse_rate
from fabricscope.host.netclass import NET_CLASS
from fabricscope.host.pci import PCI_DEVICES, parse_link_speed
from fabricscope.host.procfs import parse_netstat
from fabricscope.host.root import Root
from fabricscope.host.sysfs import parse_id_name, parse_int, read_counters, read_int, read_str

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


def list_rdma_ports(root: Root) -> list[tuple[str, int]]:
    """``(device, port)`` of every RDMA port, devices in natural order (mlx5_2 before mlx5_10)."""
    ports = []
    for dev in sorted(root.listdir(IB_CLASS), key=natural_key):
        names = root.listdir(f"{IB_CLASS}/{dev}/ports")
        if not names:
            root.note(f"{IB_CLASS}/{dev}/ports", "RDMA device without ports")
        for name in names:
            if name.isdigit():
                ports.append((dev, int(name)))
    return ports


def _required(root: Root, rel: str) -> str | None:
    """A one-line attribute every such object has; absent or empty is recorded as a problem."""
    text = root.read(rel, missing_ok=False)
    if text is None:
        return None
    text = text.strip()
    if not text:
        root.note(rel, "empty")
        return None
    return text


def read_port_status(root: Root, device: str, port: int) -> PortStatus:
    base = f"{IB_CLASS}/{device}/ports/{port}"
    state_text = _required(root, f"{base}/state")
    state_id, state = parse_id_name(state_text)
    if state_text is not None and state_id is None:
        root.note(f"{base}/state", f"not '<id>: <name>': {state_text[:40]!r}")
    phys_text = _required(root, f"{base}/phys_state")
    phys_id, phys = parse_id_name(phys_text)
    if phys_text is not None and phys_id is None:
        root.note(f"{base}/phys_state", f"not '<id>: <name>': {phys_text[:40]!r}")
    rate_text = _required(root, f"{base}/rate")
    rate, _width, _speed = parse_rate(rate_text)
    if rate_text is not None and rate is None:
        root.note(f"{base}/rate", f"unrecognised rate {rate_text[:40]!r}")
    link_layer = _required(root, f"{base}/link_layer")
    if link_layer not in (None, "InfiniBand", "Ethernet"):
        root.note(f"{base}/link_layer", f"unknown link layer {link_layer[:40]!r}")
        link_layer = None
    hw = read_counters(root, f"{base}/hw_counters")
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
        counters=read_counters(root, f"{base}/counters"),
        hw_counters=hw,
        hw_lifespan_ms=lifespan,
    )


def read_pcie_link(root: Root, address: str) -> PcieLinkStatus | None:
    """Link speed and width of a PCI function; None (and a problem) when the device is gone.
    A function without a PCIe link (virtual, or speed "Unknown") gives None fields, no problem."""
    base = f"{PCI_DEVICES}/{address}"
    if not root.exists(base):
        root.note(base, "PCI device absent")
        return None
    speed_text = read_str(root, f"{base}/current_link_speed")
    max_text = read_str(root, f"{base}/max_link_speed")
    for rel, text in ((f"{base}/current_link_speed", speed_text), (f"{base}/max_link_speed", max_text)):
        if text is not None and parse_link_speed(text) is None and not text.lower().startswith("unknown"):
            root.note(rel, f"unrecognised link speed {text[:40]!r}")
    return PcieLinkStatus(
        address=address,
        current_speed_gts=parse_link_speed(speed_text),
        max_speed_gts=parse_link_speed(max_text),
        current_width=read_int(root, f"{base}/current_link_width"),
        max_width=read_int(root, f"{base}/max_link_width"),
    )


def _enable_dir(root: Root, rel: str) -> dict[int, bool]:
    out: dict[int, bool] = {}
    for name in root.listdir(rel):
        if not name.isdigit():
            continue
        value = read_int(root, f"{rel}/{name}")
        if value is not None:
            out[int(name)] = value == 1
    return out


def read_netdev_status(root: Root, name: str) -> NetdevStatus | None:
    """MTU, speed, operstate and the MLNX_OFED ECN/trust files; None (and a problem) when gone."""
    base = f"{NET_CLASS}/{name}"
    if not root.exists(base):
        root.note(base, "network device absent")
        return None
    mtu_text = _required(root, f"{base}/mtu")
    mtu = parse_int(mtu_text)
    if mtu_text is not None and mtu is None:
        root.note(f"{base}/mtu", f"not an integer: {mtu_text[:40]!r}")
    speed = read_int(root, f"{base}/speed")
    return NetdevStatus(
        name=name,
        mtu_bytes=mtu,
        speed_mbps=speed if speed is not None and speed > 0 else None,
        operstate=_required(root, f"{base}/operstate"),
        ecn_np_enabled=_enable_dir(root, f"{base}/ecn/roce_np/enable"),
        ecn_rp_enabled=_enable_dir(root, f"{base}/ecn/roce_rp/enable"),
        qos_trust=read_str(root, f"{base}/qos/trust"),
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
    result = root.run(["ethtool", "-S", netdev], timeout_s=timeout_s)
    if not result.available:
        if not root.is_live and result.reason == "not captured in snapshot":
            return EthtoolStatsResult(netdev, None)
        return EthtoolStatsResult(netdev, None, f"ethtool -S {netdev}: {result.reason}")
    if result.rc != 0:
        return EthtoolStatsResult(netdev, None, f"ethtool -S {netdev}: exit status {result.rc}")
    stats = parse_stats(result.stdout)
    if not stats:
        return EthtoolStatsResult(netdev, None, f"ethtool -S {netdev}: no statistics recognised in output")
    return EthtoolStatsResult(netdev, stats)
