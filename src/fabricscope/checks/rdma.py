"""RDMA devices and ports: presence, port state, link rate against siblings, link layers, firmware."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check
from fabricscope.findings import Finding, Severity


@check("rdma.present", "RDMA devices present")
def rdma_present(ctx: CheckContext) -> Iterator[Finding]:
    """A node without any device under /sys/class/infiniband can only use TCP sockets; that is
    expected on cloud VMs but a fault on an RDMA cluster node (driver not loaded, NIC in the wrong
    mode). The TCP checks run either way."""
    inv = ctx.inventory
    if not inv.rdma_devices:
        yield Finding(
            "rdma.present",
            Severity.INFO,
            "node",
            "no RDMA device: TCP-only node (NCCL will use sockets)",
            {"sys/class/infiniband": "empty or absent"},
            "expected on a cloud VM; on an RDMA node load the driver: modprobe mlx5_ib (and check `lspci | grep -i mellanox`)",
        )
        return
    names = [d.name for d in inv.rdma_devices]
    yield Finding("rdma.present", Severity.PASS, "node", f"{len(names)} RDMA device(s): {', '.join(names)}", {"devices": names})


@check("rdma.port_state", "Ports ACTIVE and LinkUp")
def port_state(ctx: CheckContext) -> Iterator[Finding]:
    """Every RDMA port should be ACTIVE (logical) and LinkUp (physical). NCCL silently skips ports
    that are not ACTIVE, so one dead port shrinks a job's bandwidth without an error. INIT with
    LinkUp on InfiniBand means no subnet manager has configured the port."""
    ports = ctx.inventory.ports
    bad = 0
    for port in ports:
        if port.is_active and port.is_link_up:
            continue
        bad += 1
        evidence = {"state": port.state, "phys_state": port.phys_state, "link_layer": port.link_layer}
        if port.state is None or port.phys_state is None:
            yield Finding(
                "rdma.port_state", Severity.WARN, port.name, "port state unknown (unreadable sysfs attribute)", evidence,
                f"read /sys/class/infiniband/{port.device}/ports/{port.port}/state by hand; check the driver",
            )
            continue
        if port.is_link_up and port.is_ib and port.state_id in (2, 3):
            fix = "start or check the subnet manager (opensm / UFM); `sminfo` and `ibstat` show whether one answers"
            message = f"port is {port.state} with the link up: no subnet manager has activated it"
        elif not port.is_link_up:
            fix = (
                f"check cable, transceiver and switch port; `ibstat {port.device} {port.port}`; "
                f"if Disabled: `ip link set <netdev> up` (RoCE) or enable the switch port"
            )
            message = f"port is {port.state}, physical state {port.phys_state}"
        else:
            fix = f"`ibstat {port.device} {port.port}`; bring the netdev up (`ip link set <netdev> up`) and check the switch"
            message = f"port is {port.state} (physical {port.phys_state})"
        yield Finding("rdma.port_state", Severity.FAIL, port.name, message, evidence, fix)
    if ports and not bad:
        yield Finding("rdma.port_state", Severity.PASS, "ports", f"all {len(ports)} port(s) ACTIVE and LinkUp")


@check("rdma.port_rate", "Port rate matches its siblings")
def port_rate(ctx: CheckContext) -> Iterator[Finding]:
    """An active port running below the best rate of its sibling ports of the same model and link
    layer has trained down (a lane failed, a cable or transceiver is bad, or the switch port is
    set lower). One slow rail limits every ring that crosses it."""
    groups: dict[tuple, list] = defaultdict(list)
    for dev in ctx.inventory.rdma_devices:
        for port in dev.ports:
            if port.is_active and port.rate_gbps is not None:
                groups[(dev.model, port.link_layer)].append(port)
    checked = degraded = 0
    for (model, _layer), ports in groups.items():
        best = max(p.rate_gbps for p in ports)
        for port in ports:
            checked += 1
            if port.rate_gbps < best:
                degraded += 1
                yield Finding(
                    "rdma.port_rate",
                    Severity.FAIL,
                    port.name,
                    f"link runs at {port.rate_gbps:g} Gb/s, its {model or ''} siblings at {best:g} Gb/s (degraded link)",
                    {"rate_gbps": port.rate_gbps, "expected_gbps": best, "width": port.width, "speed": port.speed_name},
                    "reseat or replace the cable/transceiver, check the switch port speed and `mlxlink -d <dev> -m` for lane errors",
                )
    if checked and not degraded:
        yield Finding("rdma.port_rate", Severity.PASS, "ports", f"{checked} active port(s) at their siblings' rate")


@check("rdma.link_layer_mix", "One link layer")
def link_layer_mix(ctx: CheckContext) -> Iterator[Finding]:
    """InfiniBand and Ethernet (RoCE) ports on one node: NCCL refuses to connect ports of
    different link layers, so jobs must select one kind with NCCL_IB_HCA."""
    layers: dict[str, list[str]] = defaultdict(list)
    for port in ctx.inventory.ports:
        if port.is_active and port.link_layer:
            layers[port.link_layer].append(port.name)
    if len(layers) > 1:
        ib_ports = [n.replace("/", ":") for n in layers.get("InfiniBand", [])]
        ib = "=" + ",".join(ib_ports) if ib_ports else ""
        yield Finding(
            "rdma.link_layer_mix",
            Severity.WARN,
            "node",
            "active ports of mixed link layers: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(layers.items())),
            {k: v for k, v in layers.items()},
            f"select one kind for NCCL, e.g. NCCL_IB_HCA={ib}" if ib else "select one kind of port with NCCL_IB_HCA",
        )
    elif layers:
        yield Finding("rdma.link_layer_mix", Severity.PASS, "node", f"all active ports are {next(iter(layers))}")


@check("rdma.firmware", "Same firmware across one model")
def firmware(ctx: CheckContext) -> Iterator[Finding]:
    """HCAs of one model should run one firmware version: mixed firmware gives different
    congestion-control and adaptive-routing behaviour between rails and is a common leftover of a
    partial upgrade."""
    by_model: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for dev in ctx.inventory.rdma_devices:
        if dev.model and dev.fw_ver:
            by_model[dev.model][dev.fw_ver].append(dev.name)
    for model, versions in by_model.items():
        if len(versions) > 1:
            common = max(versions, key=lambda v: len(versions[v]))
            odd = sorted(n for v, names in versions.items() if v != common for n in names)
            yield Finding(
                "rdma.firmware",
                Severity.WARN,
                ",".join(odd),
                f"{model} firmware differs: " + "; ".join(f"{v} on {', '.join(n)}" for v, n in sorted(versions.items())),
                {"versions": {v: n for v, n in versions.items()}},
                f"update {', '.join(odd)} to {common} (mlxfwmanager -u), then reboot or mlxfwreset",
            )
        else:
            yield Finding("rdma.firmware", Severity.PASS, model, f"all {model} HCAs run firmware {next(iter(versions))}")
