"""What libibverbs reports per port (``ibv_devinfo -v``): the active and maximum RDMA MTU.

sysfs has no MTU attribute for an RDMA port; ``ibv_devinfo -v`` (rdma-core's ibverbs-utils) prints
ibv_query_port()'s ``max_mtu`` and ``active_mtu`` as ``4096 (5)``, under ``hca_id:`` and
``port:`` lines (libibverbs/examples/devinfo.c).
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricscope.host.root import Root

IBV_DEVINFO = ("ibv_devinfo", "-v")
IB_MTUS = (4096, 2048, 1024, 512, 256)
# include/rdma/ib_addr.h iboe_get_mtu(): GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4.
IBOE_OVERHEAD_BYTES = 96


def roce_mtu_for(netdev_mtu_bytes: int) -> int | None:
    """The RDMA MTU the kernel gives a RoCE port whose netdev has this MTU (iboe_get_mtu)."""
    room = netdev_mtu_bytes - IBOE_OVERHEAD_BYTES
    return next((m for m in IB_MTUS if room >= m), None)


@dataclass(frozen=True)
class VerbsPort:
    device: str
    port: int
    state: str | None  # "PORT_ACTIVE"
    max_mtu_bytes: int | None
    active_mtu_bytes: int | None
    link_layer: str | None  # "InfiniBand", "Ethernet", "Unspecified"

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


def _mtu(text: str | None) -> int | None:
    """``"4096 (5)"`` -> 4096; ``"invalid MTU (0)"`` -> None."""
    first = (text or "").split(" ", 1)[0]
    return int(first) if (first.isascii() and first.isdigit()) else None


def parse_ibv_devinfo(text: str) -> dict[str, VerbsPort]:
    """``ibv_devinfo [-v]`` -> ``{"mlx5_0/1": VerbsPort}``; anything unrecognised is skipped."""
    ports: dict[str, VerbsPort] = {}
    device: str | None = None
    fields: dict[str, str] = {}
    port: int | None = None

    def flush() -> None:
        if device is not None and port is not None:
            state = fields.get("state", "").split(" ", 1)[0] or None
            ports[f"{device}/{port}"] = VerbsPort(
                device,
                port,
                state,
                _mtu(fields.get("max_mtu")),
                _mtu(fields.get("active_mtu")),
                fields.get("link_layer"),
            )

    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            flush()
            device, port, fields = value or None, None, {}
        elif key == "port" and device is not None:
            flush()
            port, fields = (int(value) if (value.isascii() and value.isdigit()) else None), {}
        elif port is not None:
            fields[key] = value
    flush()
    return ports


def read_verbs_ports(root: Root) -> dict[str, VerbsPort] | None:
    """Ports as libibverbs sees them; None when ``ibv_devinfo`` is not available or fails."""
    result = root.run(list(IBV_DEVINFO))
    if not result.ok:
        return None
    ports = parse_ibv_devinfo(result.stdout)
    if not ports and result.stdout.strip():
        root.note(" ".join(IBV_DEVINFO), "no port recognised in the output")
    return ports
