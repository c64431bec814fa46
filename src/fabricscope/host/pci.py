"""PCI devices from /sys/bus/pci/devices: link speed/width, NUMA node, the PCIe tree and ACS."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from fabricscope.host.aer import AerStats, read_aer
from fabricscope.host.iommu import group_of
from fabricscope.host.root import Root
from fabricscope.host.sysfs import MAX_PCI_DEVICES, SysDir, capped

PCI_DEVICES = "sys/bus/pci/devices"
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")
PCI_CAP_EXP = 0x10
PCI_EXT_CAP_ACS = 0x000D
# PCIe "device/port type" values from the PCI Express capability register.
PORT_TYPE_ROOT = 4
PORT_TYPE_UPSTREAM = 5
PORT_TYPE_DOWNSTREAM = 6
# Without CAP_SYS_ADMIN the kernel returns only the first 64 bytes of config (128 for CardBus:
# drivers/pci/pci-sysfs.c pci_read_config); the capability lists start at 0x40 and 0x100, so a
# shorter read leaves the PCIe port type and ACS unknown, not absent.
FULL_CONFIG_MIN_BYTES = 256

# Distance classes as nvidia-smi topo -m prints them, nearest first.
DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True)
class AcsControl:
    """The ACS control bits that matter for peer-to-peer (GPUDirect) traffic."""

    source_validation: bool
    request_redirect: bool
    completion_redirect: bool
    upstream_forwarding: bool
    egress_control: bool

    @property
    def redirects_p2p(self) -> bool:
        """Request/completion redirect send peer-to-peer traffic up to the root complex."""
        return self.request_redirect or self.completion_redirect


@dataclass(frozen=True)
class PciDevice:
    address: str  # "0000:17:00.0"
    vendor_id: int | None
    device_id: int | None
    class_id: int | None  # 24-bit class code, e.g. 0x020000
    current_link_speed_gts: float | None
    max_link_speed_gts: float | None
    current_link_width: int | None
    max_link_width: int | None
    numa_node: int | None  # None when unknown (-1)
    root_complex: str | None  # "pci0000:00"
    upstream: tuple[str, ...]  # bridges from the root port down to the parent of this device
    port_type: int | None
    acs: AcsControl | None
    config_bytes: int | None = None  # bytes of config space read; None when unreadable
    iommu_group: int | None = None  # /sys/bus/pci/devices/<bdf>/iommu_group -> group number
    aer: AerStats | None = None  # None: no aer_dev_* files (not AER capable, or AER stats off)

    @property
    def capabilities_known(self) -> bool:
        """Config space was read whole, so a missing PCIe/ACS capability is really missing."""
        return self.config_bytes is not None and self.config_bytes >= FULL_CONFIG_MIN_BYTES

    @property
    def config_truncated(self) -> bool:
        """Only the header was readable: the reader lacked CAP_SYS_ADMIN (or the snapshot did)."""
        return self.config_bytes is not None and 0 < self.config_bytes < FULL_CONFIG_MIN_BYTES

    @property
    def is_nvidia_gpu(self) -> bool:
        return (
            self.vendor_id == 0x10DE
            and self.class_id is not None
            and (self.class_id >> 8) in (0x0300, 0x0302)
        )

    @property
    def link_degraded(self) -> bool:
        speed = (
            self.current_link_speed_gts is not None
            and self.max_link_speed_gts is not None
            and self.current_link_speed_gts < self.max_link_speed_gts
        )
        width = (
            self.current_link_width is not None
            and self.max_link_width is not None
            and 0 < self.current_link_width < self.max_link_width
        )
        return speed or width


def parse_link_speed(text: str | None) -> float | None:
    """``"32.0 GT/s PCIe"`` -> 32.0; "Unknown" -> None."""
    if text is None:
        return None
    match = _SPEED.match(text)
    return float(match.group(1)) if match else None


def capabilities(data: bytes) -> Iterator[tuple[int, int]]:
    """(capability ID, offset) of each entry of the standard capability list (from 0x34; PCI
    Local Bus spec 6.7, include/uapi/linux/pci_regs.h), stopping on a loop or a short read."""
    if len(data) < 0x40 or not data[0x06] & 0x10:  # status: capabilities list present
        return
    offset = data[0x34] & 0xFC
    seen = set()
    while 0x40 <= offset < min(len(data), 256) - 4 and offset not in seen:
        seen.add(offset)
        yield data[offset], offset
        offset = data[offset + 1] & 0xFC


def extended_capabilities(data: bytes) -> Iterator[tuple[int, int]]:
    """(extended capability ID, offset) of each entry of the PCIe extended capability list: from
    0x100, each header is ID (bits 15:0), version (19:16), next offset (31:20) (PCIe base spec
    7.6.3; PCI_EXT_CAP_* in include/uapi/linux/pci_regs.h)."""
    offset = 0x100
    seen = set()
    while 0x100 <= offset <= len(data) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(data[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return
        yield header & 0xFFFF, offset
        offset = (header >> 20) & 0xFFC


def parse_config_space(data: bytes) -> tuple[int | None, AcsControl | None]:
    """Port type from the PCIe capability and ACS control from the extended capability list."""
    port_type = None
    acs = None
    for cap_id, offset in capabilities(data):
        if cap_id == PCI_CAP_EXP:
            port_type = (int.from_bytes(data[offset + 2 : offset + 4], "little") >> 4) & 0xF
            break
    for cap_id, offset in extended_capabilities(data):
        if cap_id == PCI_EXT_CAP_ACS:
            ctrl = int.from_bytes(data[offset + 6 : offset + 8], "little")
            acs = AcsControl(
                source_validation=bool(ctrl & 0x01),
                request_redirect=bool(ctrl & 0x04),
                completion_redirect=bool(ctrl & 0x08),
                upstream_forwarding=bool(ctrl & 0x10),
                egress_control=bool(ctrl & 0x20),
            )
            break
    return port_type, acs


def _path_parts(resolved: str | None) -> tuple[str | None, tuple[str, ...]]:
    """``sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0`` -> ("pci0000:00", (bridges...))."""
    if resolved is None:
        return None, ()
    parts = resolved.split("/")
    root_complex = next((p for p in parts if p.startswith("pci")), None)
    bdfs = [p for p in parts if _BDF.match(p)]
    return root_complex, tuple(bdfs[:-1])


def pci_address_of(resolved: str | None) -> str | None:
    """The PCI function a resolved sysfs path belongs to (the last BDF in the path)."""
    if resolved is None or "/pci" not in resolved:
        return None
    bdfs = [p for p in resolved.split("/") if _BDF.match(p)]
    return bdfs[-1] if bdfs else None


def read_pci_device(root: Root, address: str, *, link_only: bool = False) -> PciDevice | None:
    """One PCI function: the one reader for doctor, snapshots and every exporter scrape (which
    asks for the four link files only: ``link_only``). None (and a problem) when it is gone; a
    link speed that is not "<n> GT/s" (nor "Unknown", a function without a PCIe link) is a problem."""
    base = f"{PCI_DEVICES}/{address}"
    d = SysDir.open(root, base)
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
    width, max_width = d.integer("current_link_width"), d.integer("max_link_width")
    if link_only:
        return PciDevice(
            address=address,
            vendor_id=None,
            device_id=None,
            class_id=None,
            numa_node=None,
            root_complex=None,
            upstream=(),
            port_type=None,
            acs=None,
            current_link_speed_gts=speeds[0],
            max_link_speed_gts=speeds[1],
            current_link_width=width,
            max_link_width=max_width,
        )
    root_complex, upstream = _path_parts(d.real)
    numa = d.integer("numa_node")
    config = root.read_bytes(f"{base}/config")
    port_type, acs = parse_config_space(config) if config else (None, None)
    return PciDevice(
        address=address,
        vendor_id=d.integer("vendor", base=16),
        device_id=d.integer("device", base=16),
        class_id=d.integer("class", base=16),
        numa_node=numa if numa is not None and numa >= 0 else None,
        root_complex=root_complex,
        upstream=upstream,
        port_type=port_type,
        acs=acs,
        config_bytes=len(config) if config is not None else None,
        iommu_group=group_of(root.resolve(f"{base}/iommu_group")),
        aer=read_aer(root, base),
        current_link_speed_gts=speeds[0],
        max_link_speed_gts=speeds[1],
        current_link_width=width,
        max_link_width=max_width,
    )


def read_pci_devices(root: Root) -> dict[str, PciDevice]:
    addresses = [addr for addr in root.listdir(PCI_DEVICES) if _BDF.match(addr)]
    read = (
        read_pci_device(root, addr)
        for addr in capped(root, "pci devices", PCI_DEVICES, addresses, MAX_PCI_DEVICES)
    )
    return {device.address: device for device in read if device is not None}


def _switch_ids(chain: tuple[str, ...], devices: dict[str, PciDevice]) -> list[int]:
    """Group a bridge chain (root port first) into PCIe switches: an upstream port and the
    downstream ports below it are one switch. Without port types, bridges pair up after the
    root port (upstream, downstream, upstream, ...), which is how switches appear in sysfs."""
    ids = []
    switch = 0
    for i, bdf in enumerate(chain):
        kind = devices[bdf].port_type if bdf in devices else None
        if i == 0:
            ids.append(0)  # the root port belongs to the host bridge
            continue
        if kind == PORT_TYPE_UPSTREAM or (kind is None and i % 2 == 1):
            switch += 1
        ids.append(switch)
    return ids


def switch_upstream_ports(chain: tuple[str, ...], devices: dict[str, PciDevice]) -> list[str]:
    """The upstream port of each PCIe switch on a bridge chain (the first bridge of each switch)."""
    ids = _switch_ids(chain, devices)
    return [bdf for i, bdf in enumerate(chain) if ids[i] > 0 and (i == 0 or ids[i - 1] != ids[i])]


def pcie_distance(a: PciDevice, b: PciDevice, devices: dict[str, PciDevice]) -> str:
    """The nvidia-smi topo class of the path between two devices: PIX, PXB, PHB, NODE or SYS."""
    if a.root_complex is None or b.root_complex is None or a.root_complex != b.root_complex:
        if a.numa_node is not None and a.numa_node == b.numa_node:
            return "NODE"
        return "SYS"
    common = 0
    for x, y in zip(a.upstream, b.upstream):
        if x != y:
            break
        common += 1
    if common == 0:
        return "PHB"  # only the host bridge is shared
    ids_a, ids_b = _switch_ids(a.upstream, devices), _switch_ids(b.upstream, devices)
    shared_switch = ids_a[common - 1]
    if shared_switch == 0:
        return "PHB"  # paths meet at the root port: through the host bridge
    switches = set(ids_a[common - 1 :]) | set(ids_b[common - 1 :])
    return "PIX" if len(switches) == 1 else "PXB"


def bridges_between(a: PciDevice, b: PciDevice) -> list[str]:
    """Bridges on the path from a to b (below their common ancestor, plus the ancestor)."""
    common = 0
    for x, y in zip(a.upstream, b.upstream):
        if x != y:
            break
        common += 1
    start = max(common - 1, 0)
    seen = []
    for bdf in (*a.upstream[start:], *b.upstream[start:]):
        if bdf not in seen:
            seen.append(bdf)
    return seen
