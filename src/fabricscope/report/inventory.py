"""Terminal rendering of the inventory: what the node has, in the order an engineer reads it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.table import Table

from fabricscope.host.inventory import Inventory

GPUDIRECT_STACK = ("ib_core", "mlx5_ib", "mlx5_core", "nvidia_peermem", "nv_peer_mem", "ib_uverbs", "rdma_cm")


def _fmt(value: object) -> str:
    return "?" if value is None else str(value)


def _table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """One titled table of the inventory, left-aligned title like every other."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    return table


def render_inventory(inv: Inventory, out: Console) -> None:
    out.print(f"[bold]{inv.hostname or 'node'}[/bold]  (root {inv.root_label})")
    if inv.rdma_devices:
        out.print(_rdma_ports(inv))
        gid_table = _gid_tables(inv)
        if gid_table.row_count:
            out.print(gid_table)
    else:
        out.print("RDMA: none (TCP-only node)")
    out.print(_net_devices(inv))
    pci_rows = [(f"GPU{g.index}", g.pci_address, g.name) for g in inv.gpus]
    pci_rows += [(d.name, d.pci_address, d.hca_type) for d in inv.rdma_devices if d.pci_address]
    if pci_rows:
        out.print(_pcie_links(inv, pci_rows))
    if inv.affinity:
        out.print(
            _table(
                f"GPU to nearest NIC (GPUs from {inv.gpu_source})",
                ("GPU", "PCI", "nearest NIC", "distance", "GPU NUMA", "NIC NUMA"),
                (
                    (
                        f"GPU{aff.gpu_index}",
                        aff.gpu_pci,
                        _fmt(aff.nic),
                        _fmt(aff.distance),
                        _fmt(aff.gpu_numa),
                        _fmt(aff.nic_numa),
                    )
                    for aff in inv.affinity
                ),
            )
        )
    mods = sorted(m for m in inv.kernel.modules if m in GPUDIRECT_STACK)
    known = "unknown" if not inv.kernel.modules_known else (", ".join(mods) or "none")
    out.print(f"RDMA/GPUDirect modules loaded: {known}")
    if inv.problems:
        out.print(f"[dim]{len(inv.problems)} source(s) unreadable or garbled (see --json 'problems')[/dim]")


def _rdma_ports(inv: Inventory) -> Table:
    """Every RDMA port with its state, rate, netdev, PCIe place, firmware and RoCE v2 GID."""
    rows = []
    for dev in inv.rdma_devices:
        pci = inv.pci.get(dev.pci_address or "")
        for port in dev.ports:
            v2 = port.roce_v2_gids()
            gid = (
                f"{v2[0].index} {v2[0].ipv4 or v2[0].gid}"
                if v2
                else ("-" if port.is_ib or dev.is_efa else "none")
            )
            layer = f"{port.link_layer} (EFA)" if dev.is_efa else port.link_layer
            rows.append(
                (
                    port.name,
                    _fmt(port.state),
                    _fmt(port.phys_state),
                    _fmt(port.rate_gbps and f"{port.rate_gbps:g}"),
                    _fmt(layer),
                    _fmt(inv.port_netdev(port)),
                    _fmt(dev.pci_address),
                    _fmt(pci.numa_node if pci else None),
                    _fmt(dev.fw_ver),
                    gid,
                )
            )
    columns = (
        "port",
        "state",
        "phys",
        "rate Gb/s",
        "link layer",
        "netdev",
        "PCI",
        "NUMA",
        "fw",
        "RoCE v2 GID",
    )
    return _table("RDMA ports", columns, rows)


def _gid_tables(inv: Inventory) -> Table:
    return _table(
        "GID tables",
        ("port", "index", "GID", "IPv4", "type", "netdev"),
        (
            (port.name, str(gid.index), gid.gid, gid.ipv4 or "", _fmt(gid.type), _fmt(gid.netdev))
            for port in inv.ports
            for gid in port.gids
        ),
    )


def _net_devices(inv: Inventory) -> Table:
    return _table(
        "Network interfaces",
        ("netdev", "state", "MTU", "speed Mb/s", "addresses", "PCI", "driver"),
        (
            (
                nd.name,
                _fmt(nd.operstate),
                _fmt(nd.mtu_bytes),
                _fmt(nd.speed_mbps),
                " ".join((*nd.ipv4, *nd.ipv6)) or "-",
                _fmt(nd.pci_address),
                _fmt(nd.driver),
            )
            for nd in inv.net_devices
        ),
    )


def _pcie_links(inv: Inventory, devices: list[tuple[str, str, str | None]]) -> Table:
    """Each GPU's and RDMA NIC's PCIe link as trained against its maximum."""
    rows = []
    for name, addr, model in devices:
        dev = inv.pci.get(addr)
        link = f"x{_fmt(dev.current_link_width)} {_fmt(dev.current_link_speed_gts)} GT/s" if dev else "?"
        best = f"x{_fmt(dev.max_link_width)} {_fmt(dev.max_link_speed_gts)} GT/s" if dev else "?"
        rows.append((name, addr, _fmt(model), link, best, _fmt(dev.numa_node if dev else None)))
    return _table("PCIe links", ("device", "PCI", "model", "link", "max", "NUMA"), rows)
