"""Network interfaces from /sys/class/net, with their addresses from ``ip -j addr show``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from fabricscope.host.pci import pci_address_of
from fabricscope.host.root import Root
from fabricscope.host.sysfs import MAX_NETDEVS, PRIORITIES, capped, read_int, read_str

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


def _read_enable_dir(root: Root, rel: str) -> dict[int, bool]:
    out: dict[int, bool] = {}
    for name in root.listdir(rel):
        if not (name.isascii() and name.isdigit() and int(name) in PRIORITIES):
            continue  # 802.1p has priorities 0-7: a directory with others is not the kernel's
        value = read_int(root, f"{rel}/{name}")
        if value is not None:
            out[int(name)] = value == 1
    return out


def netdev_pci_address(root: Root, name: str) -> str | None:
    """PCI function behind a netdev; None for virtual devices (veth, bridges, lo)."""
    return pci_address_of(root.resolve(f"{NET_CLASS}/{name}/device"))


def physical_netdev_names(root: Root) -> list[str]:
    """Netdevs with a PCI function, from sysfs alone (no command): what ethtool will be asked about."""
    return [name for name in root.listdir(NET_CLASS) if netdev_pci_address(root, name) is not None]


def read_net_devices(root: Root) -> list[NetDevice]:
    addresses: dict[str, tuple[list[str], list[str]]] = {}
    result = root.run(IP_ADDR)
    if result.ok:
        addresses = parse_ip_addr_json(result.stdout)
        if not addresses and result.stdout.strip():
            root.note("ip -j addr show", "output is not the expected JSON")
    devices = []
    for name in capped(root, "netdevs", NET_CLASS, root.listdir(NET_CLASS), MAX_NETDEVS):
        base = f"{NET_CLASS}/{name}"
        if not root.is_dir(base):
            continue
        speed = read_int(root, f"{base}/speed")
        pci = netdev_pci_address(root, name)
        driver = None
        driver_link = root.resolve(f"{base}/device/driver")
        if driver_link is not None:
            driver = driver_link.rsplit("/", 1)[-1]
        v4, v6 = addresses.get(name, ([], []))
        devices.append(
            NetDevice(
                name=name,
                mtu_bytes=read_int(root, f"{base}/mtu"),
                speed_mbps=speed if speed is not None and speed > 0 else None,
                operstate=read_str(root, f"{base}/operstate"),
                address=read_str(root, f"{base}/address"),
                type_id=read_int(root, f"{base}/type"),
                pci_address=pci,
                driver=driver,
                ipv4=tuple(v4),
                ipv6=tuple(v6),
                ecn_np_enabled=_read_enable_dir(root, f"{base}/ecn/roce_np/enable"),
                ecn_rp_enabled=_read_enable_dir(root, f"{base}/ecn/roce_rp/enable"),
                qos_trust=read_str(root, f"{base}/qos/trust"),
            )
        )
    return devices
