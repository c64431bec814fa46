"""The topology of a lab as data: hosts, switches, links and addresses. Pure; no kernel calls.

Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for benchmarking network
devices; they exist only inside the lab's own namespaces (each lab is a closed world, so two
labs may use the same addresses without meeting). Rail ``r`` uses 198.18.r.0/24; star and
leaf-spine use 198.18.0.0/24 (one layer-2 domain; the spine is a bridge).
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricscope.lab.spec import LabSpec, host_name

SUBNET_PREFIXLEN = 24


@dataclass(frozen=True)
class Port:
    """One host NIC and the switch port it is cabled to (a veth pair)."""

    host: str  # h1
    dev: str  # interface name inside the host namespace (eth0, eth1 ...)
    switch: str  # bridge in the fabric namespace (sw, leaf1, rail0 ...)
    port: str  # the veth end in the fabric namespace (h1, h1r0 ...)
    address: str  # 198.18.0.1
    prefixlen: int
    rail: int | None = None


@dataclass(frozen=True)
class Uplink:
    """A leaf-to-spine cable: both ends live in the fabric namespace."""

    leaf: str
    spine: str
    leaf_port: str
    spine_port: str
    rate_bps: int | None


@dataclass(frozen=True)
class HostPlan:
    name: str
    index: int  # 1-based; rank = index - 1
    namespace: str
    ports: tuple[Port, ...]
    leaf: str | None = None

    @property
    def rank(self) -> int:
        return self.index - 1

    @property
    def address(self) -> str:
        """The address other hosts reach this one at (first NIC)."""
        return self.ports[0].address


@dataclass(frozen=True)
class Plan:
    spec: LabSpec
    fabric_namespace: str
    hosts: tuple[HostPlan, ...]
    switches: tuple[str, ...]
    uplinks: tuple[Uplink, ...]

    @property
    def namespaces(self) -> tuple[str, ...]:
        return (self.fabric_namespace, *(h.namespace for h in self.hosts))

    def host(self, name: str) -> HostPlan:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(name)


def address(rail: int, index: int) -> str:
    return f"198.18.{rail}.{index}"


def build_plan(spec: LabSpec) -> Plan:
    """Lay out hosts, switches and cables for ``spec``."""
    fabric = f"{spec.prefix}fab"
    hosts: list[HostPlan] = []
    switches: list[str] = []
    uplinks: list[Uplink] = []
    if spec.topology == "star":
        switches.append("sw")
    elif spec.topology == "leaf-spine":
        switches.extend(f"leaf{i}" for i in range(1, spec.leaves + 1))
        switches.append("spine")
        for i in range(1, spec.leaves + 1):
            uplinks.append(
                Uplink(
                    leaf=f"leaf{i}",
                    spine="spine",
                    leaf_port=f"leaf{i}-up",
                    spine_port=f"spine-l{i}",
                    rate_bps=spec.effective_uplink_bps,
                )
            )
    else:
        switches.extend(f"rail{r}" for r in range(spec.rails))

    for index in range(1, spec.hosts + 1):
        name = host_name(index)
        ns = f"{spec.prefix}{name}"
        leaf = None
        if spec.topology == "star":
            ports = (Port(name, "eth0", "sw", name, address(0, index), SUBNET_PREFIXLEN),)
        elif spec.topology == "leaf-spine":
            assert spec.hosts_per_leaf
            leaf = f"leaf{(index - 1) // spec.hosts_per_leaf + 1}"
            ports = (Port(name, "eth0", leaf, name, address(0, index), SUBNET_PREFIXLEN),)
        else:
            ports = tuple(
                Port(name, f"eth{r}", f"rail{r}", f"{name}r{r}", address(r, index), SUBNET_PREFIXLEN, rail=r)
                for r in range(spec.rails)
            )
        hosts.append(HostPlan(name=name, index=index, namespace=ns, ports=ports, leaf=leaf))
    return Plan(
        spec=spec,
        fabric_namespace=fabric,
        hosts=tuple(hosts),
        switches=tuple(switches),
        uplinks=tuple(uplinks),
    )


ETH_HEADER_BYTES = 14  # tc counts each packet with its Ethernet header
SWITCH_BUCKET_PACKETS = 10


def tbf_args(rate_bps: int, queue_bytes: int | None = None, mtu: int = 1500) -> list[str]:
    """tc tbf parameters for ``rate_bps``.

    The bucket holds at least 2 ms of traffic and never less than 128 KiB: veth hands tbf
    64 KiB GSO packets, and a bucket smaller than a packet makes tbf split every packet
    (CPU) or stall. The queue holds 50 ms at the rate so TCP is not starved by tail drops
    before it can fill the link.

    With ``queue_bytes`` (a switch port's buffer, ``lab set --queue``) the port behaves as a
    switch's: the bucket holds 10 packets, so tbf splits GSO packets and drops packet by packet,
    and at most ``queue_bytes`` wait.
    """
    rate_Bps = rate_bps / 8
    if queue_bytes is not None:
        burst = SWITCH_BUCKET_PACKETS * (mtu + ETH_HEADER_BYTES)
        return ["rate", f"{rate_bps}bit", "burst", str(burst), "limit", str(queue_bytes)]
    burst = max(131072, int(rate_Bps * 0.002))
    limit = max(2 * burst, int(rate_Bps * 0.050) + burst)
    return ["rate", f"{rate_bps}bit", "burst", str(burst), "limit", str(limit)]


def switch_gso_frames(rate_bps: int, mtu: int = 1500) -> int:
    """The largest GSO packet, in frames, a ``--queue`` port takes (or drops) whole.

    tbf splits only a packet larger than its bucket (net/sched/sch_tbf.c tbf_enqueue, max_size),
    so the TCP senders' TSO packets of a few segments pass, or are dropped, as one. tc hands the
    kernel the bucket as whole microseconds at the rate (tc_calc_xmittime), and the kernel turns
    that back into bytes: at 200 Mbit/s the 10-frame bucket (15140 bytes) becomes 15125, so a GSO
    packet of 9 frames passes whole and one of 10 is split.
    """
    burst = SWITCH_BUCKET_PACKETS * (mtu + ETH_HEADER_BYTES)
    max_size = int(burst * 8e6 / rate_bps) * rate_bps / 8e6
    return max(1, int(max_size // (mtu + ETH_HEADER_BYTES)))


def host_bucket_bytes(rate_bps: int) -> int:
    """The bucket of a lab host's own egress: what it may send back to back (see :func:`tbf_args`)."""
    return int(tbf_args(rate_bps)[3])
