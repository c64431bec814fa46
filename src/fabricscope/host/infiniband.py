"""RDMA devices from /sys/class/infiniband: devices, ports, GID tables, counters."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from fabricscope.host.pci import pci_address_of
from fabricscope.host.root import Root
from fabricscope.host.sysfs import (
    MAX_GIDS,
    MAX_RDMA_DEVICES,
    MAX_RDMA_PORTS,
    Budget,
    SysDir,
    capped,
    read_str,
)

IB_CLASS = "sys/class/infiniband"
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\((\d+)X\s*([A-Z0-9]*)\))?")
_VERSION = re.compile(r"^[0-9][0-9A-Za-z._-]*\Z")
LIFESPAN = "lifespan"  # hw_counters/lifespan: the driver's refresh period in ms, not a counter
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
# What drivers/infiniband/core/sysfs.c link_layer_show() writes: InfiniBand, Ethernet, or "Unknown"
# for IB_LINK_LAYER_UNSPECIFIED, which AWS EFA reports (efa_port_link_layer(); rdma-core PR #884).
LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")
# The kernel driver of AWS Elastic Fabric Adapter devices (drivers/infiniband/hw/efa).
EFA_DRIVER = "efa"
# The names the kernel writes after each code (drivers/infiniband/core/sysfs.c: state_show's
# state_name[] and phys_state_to_str()); a code outside a table is written "UNKNOWN"/"<unknown>".
PORT_STATE_NAMES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATE_NAMES = {
    0: "<unknown>",
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}


def kernel_state_name(code: int) -> str:
    return PORT_STATE_NAMES.get(code, "UNKNOWN")


def kernel_phys_state_name(code: int) -> str:
    return PHYS_STATE_NAMES.get(code, "<unknown>")


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str | None  # "RoCE v2", "IB/RoCE v1" or None (native IB, or unreadable)
    netdev: str | None

    @property
    def roce_version(self) -> int | None:
        if self.type is None:
            return None
        return 2 if "v2" in self.type else 1 if "v1" in self.type else None

    @property
    def address(self) -> ipaddress.IPv6Address | None:
        return parse_gid(self.gid)

    @property
    def ipv4(self) -> str | None:
        """The IPv4 address of an IPv4-mapped GID (``::ffff:a.b.c.d``)."""
        addr = self.address
        if addr is not None and addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return None

    @property
    def is_link_local(self) -> bool:
        addr = self.address
        return addr is not None and addr.is_link_local

    @property
    def is_routable(self) -> bool:
        """An IPv4-mapped or global IPv6 GID: what RoCE v2 needs to cross a router."""
        addr = self.address
        if addr is None or addr.is_unspecified:
            return False
        return addr.ipv4_mapped is not None or not (addr.is_link_local or addr.is_loopback)


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state_id: int | None
    state: str | None
    phys_state_id: int | None
    phys_state: str | None
    rate_gbps: float | None
    width: int | None  # lanes, from "(4X NDR)"
    speed_name: str | None  # "NDR", "HDR", ...
    link_layer: str | None  # "InfiniBand" or "Ethernet"
    lid: int | None
    gids: tuple[Gid, ...] = ()
    sm_lid: int | None = None  # ports/N/sm_lid: the LID of the subnet manager that configured the port (IB)
    counters: dict[str, int] = field(default_factory=dict)
    hw_counters: dict[str, int] = field(default_factory=dict)
    gid_table_len: int | None = None  # entries under gids/, empty ones included (NCCL scans them all)
    hw_lifespan_ms: int | None = None  # hw_counters/lifespan: how long the driver caches hw_counters

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def state_recognised(self) -> bool:
        """The state text is what the kernel writes for its code ("4: ACTIVE")."""
        return self.state_id is not None and self.state == kernel_state_name(self.state_id)

    @property
    def phys_state_recognised(self) -> bool:
        """The physical state text is what the kernel writes for its code ("5: LinkUp")."""
        return self.phys_state_id is not None and self.phys_state == kernel_phys_state_name(
            self.phys_state_id
        )

    @property
    def is_active(self) -> bool:
        return self.state_id == 4

    @property
    def is_link_up(self) -> bool:
        return self.phys_state_id == 5

    @property
    def is_roce(self) -> bool:
        return self.link_layer == "Ethernet"

    @property
    def is_ib(self) -> bool:
        return self.link_layer == "InfiniBand"

    @property
    def is_unspecified(self) -> bool:
        """Neither InfiniBand nor Ethernet: an EFA port. NCCL's own IB transport skips such ports
        (net_ib init.cc); traffic reaches them only through a net plugin (aws-ofi-nccl)."""
        return self.link_layer == "Unknown"

    def roce_v2_gids(self) -> list[Gid]:
        return [g for g in self.gids if g.roce_version == 2 and g.is_routable]


@dataclass(frozen=True)
class RdmaDevice:
    name: str
    node_type: str | None
    fw_ver: str | None
    hca_type: str | None
    board_id: str | None
    node_guid: str | None
    pci_address: str | None
    netdevs: tuple[str, ...]
    ports: tuple[RdmaPort, ...]
    driver: str | None = None  # kernel driver of the PCI function ("mlx5_core", "efa")

    @property
    def model(self) -> str | None:
        """What "the same model" means for sibling comparisons: hca_type, else board_id."""
        return self.hca_type or self.board_id

    @property
    def is_efa(self) -> bool:
        """An AWS Elastic Fabric Adapter: RDMA through libfabric's efa provider and aws-ofi-nccl,
        never through NCCL's built-in IB transport."""
        return self.driver == EFA_DRIVER


def parse_rate(text: str | None) -> tuple[float | None, int | None, str | None]:
    """``"400 Gb/sec (4X NDR)"`` -> ``(400.0, 4, "NDR")``."""
    if text is None:
        return None, None, None
    match = _RATE.match(text)
    if not match:
        return None, None, None
    width = int(match.group(2)) if match.group(2) else None
    return float(match.group(1)), width, (match.group(3) or None)


def parse_gid(text: str | None) -> ipaddress.IPv6Address | None:
    if text is None:
        return None
    try:
        return ipaddress.IPv6Address(text.strip())
    except ValueError:
        return None


def list_rdma_ports(root: Root) -> list[tuple[str, int]]:
    """``(device, port)`` of every RDMA port, devices in natural order (mlx5_2 before mlx5_10);
    at most MAX_RDMA_DEVICES devices and MAX_RDMA_PORTS ports in all."""
    ports: list[tuple[str, int]] = []
    names = capped(
        root, "rdma devices", IB_CLASS, sorted(root.listdir(IB_CLASS), key=natural_key), MAX_RDMA_DEVICES
    )
    for dev in names:
        numbers = [p for p in root.listdir(f"{IB_CLASS}/{dev}/ports") if p.isascii() and p.isdigit()]
        if not numbers:
            root.note(f"{IB_CLASS}/{dev}/ports", "RDMA device without ports")
        ports.extend((dev, int(p)) for p in sorted(numbers, key=int))
    return capped(root, "rdma ports", IB_CLASS, ports, MAX_RDMA_PORTS)


def read_port(
    root: Root, device: str, port: int, *, gids: bool = True, budget: Budget | None = None
) -> RdmaPort | None:
    """One RDMA port: the one reader for doctor, snapshots and every exporter scrape. ``gids``:
    also the GID table (hundreds of files: the inventory's, not a scrape's); ``budget`` caps the
    counter files read over many ports. None (and a problem) when the port is gone; a required
    attribute (state, phys_state, rate, link_layer) absent or garbled is a problem."""
    base = f"{IB_CLASS}/{device}/ports/{port}"
    d = SysDir.open(root, base)
    if d is None:
        root.note(base, "RDMA port absent")
        return None
    state_id, state = d.id_name("state")
    phys_id, phys = d.id_name("phys_state")
    rate_text = d.required("rate")
    rate, width, speed = parse_rate(rate_text)
    if rate_text is not None and rate is None:
        root.note(f"{base}/rate", f"unrecognised rate {rate_text[:40]!r}")
    link_layer = d.required("link_layer")
    if link_layer is not None and link_layer not in LINK_LAYERS:
        root.note(f"{base}/link_layer", f"unknown link layer {link_layer[:40]!r}")
        link_layer = None
    hw = d.counters("hw_counters", budget)
    lifespan = hw.pop(LIFESPAN, None)
    table, table_len = _read_gids(root, base) if gids else ((), None)
    return RdmaPort(
        device=device,
        port=port,
        state_id=state_id,
        state=state,
        phys_state_id=phys_id,
        phys_state=phys,
        rate_gbps=rate,
        width=width,
        speed_name=speed,
        link_layer=link_layer,
        lid=d.integer("lid", base=0),
        sm_lid=d.integer("sm_lid", base=0),
        gids=table,
        counters=d.counters("counters", budget),
        hw_counters=hw,
        gid_table_len=table_len,
        hw_lifespan_ms=lifespan,
    )


def _read_gids(root: Root, base: str) -> tuple[tuple[Gid, ...], int | None]:
    """The port's non-empty GIDs and the length of its table (empty entries included)."""
    gids = []
    entries = [name for name in root.listdir(f"{base}/gids") if (name.isascii() and name.isdigit())]
    entries = capped(root, "GID entries", f"{base}/gids", entries, MAX_GIDS)
    for name in entries:
        gid = read_str(root, f"{base}/gids/{name}")
        if gid is None or gid == ZERO_GID or parse_gid(gid) is None:
            continue
        if gid == "fe80:0000:0000:0000:0000:0000:0000:0000":
            continue
        gids.append(
            Gid(
                index=int(name),
                gid=gid,
                type=read_str(root, f"{base}/gid_attrs/types/{name}"),
                netdev=read_str(root, f"{base}/gid_attrs/ndevs/{name}"),
            )
        )
    gids.sort(key=lambda g: g.index)
    return tuple(gids), (len(entries) if entries else None)


def read_device(root: Root, name: str, ports: list[int] | None = None) -> RdmaDevice:
    base = f"{IB_CLASS}/{name}"
    if ports is None:
        numbers = [p for p in root.listdir(f"{base}/ports") if (p.isascii() and p.isdigit())]
        ports = [int(p) for p in capped(root, "rdma ports", f"{base}/ports", numbers, MAX_RDMA_PORTS)]
    read = tuple(p for n in ports if (p := read_port(root, name, n)) is not None)
    pci = pci_address_of(root.resolve(f"{base}/device"))
    driver = root.resolve(f"{base}/device/driver")
    return RdmaDevice(
        name=name,
        node_type=read_str(root, f"{base}/node_type"),
        fw_ver=_read_version(root, f"{base}/fw_ver"),
        hca_type=read_str(root, f"{base}/hca_type"),
        board_id=read_str(root, f"{base}/board_id"),
        node_guid=read_str(root, f"{base}/node_guid"),
        pci_address=pci,
        netdevs=tuple(root.listdir(f"{base}/device/net")),
        ports=read,
        driver=driver.rsplit("/", 1)[-1] if driver else None,
    )


def _read_version(root: Root, rel: str) -> str | None:
    """A firmware version ("28.39.1002"); anything else is noted and unknown."""
    text = read_str(root, rel)
    if text is not None and not _VERSION.match(text):
        root.note(rel, f"not a version: {text[:40]!r}")
        return None
    return text


def read_rdma_devices(root: Root) -> list[RdmaDevice]:
    """Every RDMA device, in NCCL's natural order (mlx5_2 before mlx5_10)."""
    by_device: dict[str, list[int]] = {}
    for dev, port in list_rdma_ports(root):
        by_device.setdefault(dev, []).append(port)
    return [read_device(root, name, by_device.get(name, [])) for name in _device_names(root)]


def _device_names(root: Root) -> list[str]:
    names = sorted(root.listdir(IB_CLASS), key=natural_key)
    return names[:MAX_RDMA_DEVICES]  # the drop is noted once, by list_rdma_ports


def read_port_counters(root: Root) -> dict[str, dict[str, int]]:
    """Just the counters of every port, keyed ``dev/port``: cheap enough to read twice."""
    result: dict[str, dict[str, int]] = {}
    for dev, port in list_rdma_ports(root):
        d = SysDir.open(root, f"{IB_CLASS}/{dev}/ports/{port}")
        if d is not None:
            result[f"{dev}/{port}"] = {**d.counters("counters"), **d.counters("hw_counters")}
    return result


def natural_key(name: str) -> tuple:
    return tuple(
        int(part) if (part.isascii() and part.isdigit()) else part for part in re.split(r"(\d+)", name)
    )


DEV_INFINIBAND = "dev/infiniband"


def read_char_devices(root: Root) -> tuple[str, ...] | None:
    """Names under /dev/infiniband (uverbsN, rdma_cm, umadN, issmN: the character devices verbs
    and RDMA-CM open); listed, never opened. None when /dev itself is not visible (a snapshot
    taken before /dev was recorded)."""
    if not root.is_dir("dev"):
        return None
    root.listdir("dev")  # recorded, so a snapshot keeps /dev even when /dev/infiniband is absent
    return tuple(root.listdir(DEV_INFINIBAND))
