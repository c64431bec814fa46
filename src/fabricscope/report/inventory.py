"""Terminal rendering of the inventory: what the node has, in the order an engineer reads it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fabricscope.host.inventory import Inventory


def _fmt(value: object) -> str:
    return "?" if value is None else str(value)


def render_inventory(inv: Inventory, out: Console) -> None:
    out.print(f"[bold]{inv.hostname or 'node'}[/bold]  (root {inv.root_label})")
    if inv.rdma_devices:
        table = Table(title="RDMA ports", title_justify="left")
        for col in (
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
        ):
            table.add_column(col)
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
                table.add_row(
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
        out.print(table)
        gid_table = Table(title="GID tables", title_justify="left")
        for col in ("port", "index", "GID", "IPv4", "type", "netdev"):
            gid_table.add_column(col)
        for port in inv.ports:
            for gid in port.gids:
                gid_table.add_row(
                    port.name, str(gid.index), gid.gid, gid.ipv4 or "", _fmt(gid.type), _fmt(gid.netdev)
                )
        if gid_table.row_count:
            out.print(gid_table)
    else:
        out.print("RDMA: none (TCP-only node)")
    table = Table(title="Network interfaces", title_justify="left")
    for col in ("netdev", "state", "MTU", "speed Mb/s", "addresses", "PCI", "driver"):
        table.add_column(col)
    for nd in inv.net_devices:
        table.add_row(
            nd.name,
            _fmt(nd.operstate),
            _fmt(nd.mtu_bytes),
            _fmt(nd.speed_mbps),
            " ".join((*nd.ipv4, *nd.ipv6)) or "-",
            _fmt(nd.pci_address),
            _fmt(nd.driver),
        )
    out.print(table)
    pci_rows = [(f"GPU{g.index}", g.pci_address, g.name) for g in inv.gpus]
    pci_rows += [(d.name, d.pci_address, d.hca_type) for d in inv.rdma_devices if d.pci_address]
    if pci_rows:
        table = Table(title="PCIe links", title_justify="left")
        for col in ("device", "PCI", "model", "link", "max", "NUMA"):
            table.add_column(col)
        for name, addr, model in pci_rows:
            dev = inv.pci.get(addr)
            link = f"x{_fmt(dev.current_link_width)} {_fmt(dev.current_link_speed_gts)} GT/s" if dev else "?"
            best = f"x{_fmt(dev.max_link_width)} {_fmt(dev.max_link_speed_gts)} GT/s" if dev else "?"
            table.add_row(name, addr, _fmt(model), link, best, _fmt(dev.numa_node if dev else None))
        out.print(table)
    if inv.affinity:
        table = Table(title=f"GPU to nearest NIC (GPUs from {inv.gpu_source})", title_justify="left")
        for col in ("GPU", "PCI", "nearest NIC", "distance", "GPU NUMA", "NIC NUMA"):
            table.add_column(col)
        for aff in inv.affinity:
            table.add_row(
                f"GPU{aff.gpu_index}",
                aff.gpu_pci,
                _fmt(aff.nic),
                _fmt(aff.distance),
                _fmt(aff.gpu_numa),
                _fmt(aff.nic_numa),
            )
        out.print(table)
    mods = sorted(
        m
        for m in inv.kernel.modules
        if m in ("ib_core", "mlx5_ib", "mlx5_core", "nvidia_peermem", "nv_peer_mem", "ib_uverbs", "rdma_cm")
    )
    known = "unknown" if not inv.kernel.modules_known else (", ".join(mods) or "none")
    out.print(f"RDMA/GPUDirect modules loaded: {known}")
    if inv.problems:
        out.print(f"[dim]{len(inv.problems)} source(s) unreadable or garbled (see --json 'problems')[/dim]")
