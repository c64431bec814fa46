"""Network interfaces from /sys/class/net, with their addresses from ``ip -j addr show``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from fabricscope.host.pci import pci_address_of
from fabricscope.host.root import Root
from fabricscope.host.sysfs import MAX_NETDEVS, SysDir, capped, parse_int

NET_CLASS = "sys/class/net"
ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
ARPHRD_LOOPBACK = 772
IP_ADDR = ("ip", "-j", "addr", "show")


@dataclass(frozen=True)
class NetDevice:
    name: str
    mtu_bytes: int | None
    speed_mbps: int | None  # None when unknown or reported as -1 (link down, virtual)
    operstate: str | None  # "up", "down", "unknown", ...
    address: str | None  # MAC or IPoIB hardware address
    type_id: int | None  # ARPHRD_*
    pci_address: str | None  # None for virtual devices
    driver: str | None
    ipv4: tuple[str, ...] = ()
    ipv6: tuple[str, ...] = ()
    ecn_np_enabled: dict[int, bool] = field(default_factory=dict)  # priority -> roce_np enable
    ecn_rp_enabled: dict[int, bool] = field(default_factory=dict)  # priority -> roce_rp enable
    qos_trust: str | None = None  # MLNX_OFED /sys/class/net/<if>/qos/trust

    @property
    def is_up(self) -> bool:
        return self.operstate == "up" or (self.operstate == "unknown" and self.type_id == ARPHRD_LOOPBACK)

    @property
    def is_loopback(self) -> bool:
        return self.type_id == ARPHRD_LOOPBACK or self.name == "lo"

    @property
    def is_physical(self) -> bool:
        return self.pci_address is not None

    @property
    def has_address(self) -> bool:
        return bool(self.ipv4 or [a for a in self.ipv6 if not a.lower().startswith("fe80")])


def parse_ip_addr_json(text: str) -> dict[str, tuple[list[str], list[str]]]:
    """``ip -j addr show`` -> ``{ifname: ([ipv4...], [ipv6...])}``; garbage gives {}."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    result: dict[str, tuple[list[str], list[str]]] = {}
    if not isinstance(data, list):
        return {}
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("ifname"), str):
            continue
        v4, v6 = result.setdefault(entry["ifname"], ([], []))
        for info in entry.get("addr_info") or []:
            if not isinstance(info, dict) or not isinstance(info.get("local"), str):
                continue
            (v4 if info.get("family") == "inet" else v6).append(info["local"])
    return result


def netdev_pci_address(root: Root, name: str) -> str | None:
    """PCI function behind a netdev; None for virtual devices (veth, bridges, lo)."""
    return pci_address_of(root.resolve(f"{NET_CLASS}/{name}/device"))


def physical_netdev_names(root: Root) -> list[str]:
    """Netdevs with a PCI function, from sysfs alone (no command): what ethtool will be asked about."""
    return [name for name in root.listdir(NET_CLASS) if netdev_pci_address(root, name) is not None]


def read_net_device(
    root: Root, name: str, *, identity: bool = True, addresses: tuple[list[str], list[str]] = ([], [])
) -> NetDevice | None:
    """One interface: the one reader for doctor, snapshots and every exporter scrape (which skips
    ``identity``: hardware address, type, PCI function and driver do not change while it runs).
    None (and a problem) when it is gone; ``mtu`` and ``operstate`` absent are problems."""
    base = f"{NET_CLASS}/{name}"
    d = SysDir.open(root, base)
    if d is None:
        root.note(base, "network device absent")
        return None
    speed = d.integer("speed")
    pci = driver = None
    if identity:
        pci = netdev_pci_address(root, name)
        driver_link = root.resolve(f"{base}/device/driver")
        driver = driver_link.rsplit("/", 1)[-1] if driver_link is not None else None
    mtu_text = d.required("mtu")
    mtu = parse_int(mtu_text)
    if mtu_text is not None and mtu is None:
        root.note(f"{base}/mtu", f"not an integer: {mtu_text[:40]!r}")
    qos = d.sub("qos")
    return NetDevice(
        name=name,
        mtu_bytes=mtu,
        speed_mbps=speed if speed is not None and speed > 0 else None,
        operstate=d.required("operstate"),
        address=d.optional("address") if identity else None,
        type_id=d.integer("type") if identity else None,
        pci_address=pci,
        driver=driver,
        ipv4=tuple(addresses[0]),
        ipv6=tuple(addresses[1]),
        ecn_np_enabled=d.priorities("ecn/roce_np/enable"),
        ecn_rp_enabled=d.priorities("ecn/roce_rp/enable"),
        qos_trust=qos.optional("trust") if qos is not None else None,
    )


def read_net_devices(root: Root) -> list[NetDevice]:
    addresses: dict[str, tuple[list[str], list[str]]] = {}
    result = root.run(IP_ADDR)
    if result.ok:
        addresses = parse_ip_addr_json(result.stdout)
        if not addresses and result.stdout.strip():
            root.note("ip -j addr show", "output is not the expected JSON")
    devices = []
    for name in capped(root, "netdevs", NET_CLASS, root.listdir(NET_CLASS), MAX_NETDEVS):
        if not root.is_dir(f"{NET_CLASS}/{name}"):
            continue
        device = read_net_device(root, name, addresses=addresses.get(name, ([], [])))
        if device is not None:
            devices.append(device)
    return devices
