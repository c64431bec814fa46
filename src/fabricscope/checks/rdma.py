"""RDMA devices and ports: presence, port state, link rate against siblings, link layers, firmware."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated, not_evaluated_on
from fabricscope.findings import Finding, Severity
from fabricscope.host.infiniband import RdmaPort, kernel_phys_state_name, kernel_state_name
from fabricscope.host.inventory import Inventory
from fabricscope.host.verbs import VerbsPort, roce_mtu_for


@check("rdma.present", "RDMA devices present")
def rdma_present(ctx: CheckContext) -> Iterator[Finding]:
    """A node without any device under /sys/class/infiniband can only use TCP sockets; that is
    expected on cloud VMs but a fault on an RDMA cluster node (driver not loaded, NIC in the wrong
    mode). The TCP checks run either way. AWS EFA devices (driver efa, link layer "Unknown") are
    RDMA devices too: NCCL uses them through aws-ofi-nccl over libfabric."""
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
    efa = [d.name for d in inv.rdma_devices if d.is_efa]
    if efa:
        yield Finding(
            "rdma.present",
            Severity.PASS,
            "node",
            f"{len(names)} RDMA device(s), {len(efa)} of them AWS EFA: {', '.join(names)}; NCCL reaches EFA through the "
            "aws-ofi-nccl net plugin (libfabric's efa provider), not its built-in IB transport",
            {"devices": names, "efa": efa},
        )
        return
    yield Finding(
        "rdma.present",
        Severity.PASS,
        "node",
        f"{len(names)} RDMA device(s): {', '.join(names)}",
        {"devices": names},
    )


@check("rdma.port_state", "Ports ACTIVE and LinkUp")
def port_state(ctx: CheckContext) -> Iterator[Finding]:
    """Every RDMA port should be ACTIVE (logical) and LinkUp (physical). NCCL silently skips ports
    that are not ACTIVE, so one dead port shrinks a job's bandwidth without an error. INIT with
    LinkUp on InfiniBand means no subnet manager has configured the port. A state text the kernel
    never writes for its code (drivers/infiniband/core/sysfs.c) is reported as unrecognised, with
    what the code would mean, instead of being read as up or down. A Disabled port of a NIC whose
    other port is ACTIVE is a spare (info): it does not outrank the causes of lost bandwidth."""
    ports = ctx.inventory.ports
    bad = 0
    active_devices = {p.device for p in ports if p.is_active}
    for port in ports:
        if port.is_active and port.is_link_up and port.state_recognised and port.phys_state_recognised:
            continue
        bad += 1
        if (port.phys_state or "").lower() == "disabled" and port.device in active_devices:
            # A disabled second port of a NIC whose other port runs: a spare, not lost bandwidth (issue 22).
            yield Finding(
                "rdma.port_state",
                Severity.INFO,
                port.name,
                f"spare port disabled (physical state {port.phys_state}) while another port of {port.device} is ACTIVE: "
                "NCCL skips it; it costs bandwidth only if it is meant to carry a rail",
                {"state": port.state, "phys_state": port.phys_state, "link_layer": port.link_layer},
                f"if it should carry traffic: enable it (`ip link set <netdev> up` on RoCE, or the switch port) and check `ibstat {port.device} {port.port}`",
            )
            continue
        yield _port_state_finding(port)
    if ports and not bad:
        yield Finding(
            "rdma.port_state", Severity.PASS, "ports", f"all {len(ports)} port(s) ACTIVE and LinkUp"
        )


def _unrecognised(port: RdmaPort) -> list[str]:
    out = []
    if port.state_id is not None and not port.state_recognised:
        out.append(
            f"unrecognised port state {port.state!r} (code {port.state_id} would be {kernel_state_name(port.state_id)})"
        )
    if port.phys_state_id is not None and not port.phys_state_recognised:
        out.append(
            f"unrecognised physical state {port.phys_state!r} (code {port.phys_state_id} would be "
            f"{kernel_phys_state_name(port.phys_state_id)})"
        )
    return out


def _port_state_finding(port: RdmaPort) -> Finding:
    evidence = {"state": port.state, "phys_state": port.phys_state, "link_layer": port.link_layer}
    sysfs = f"/sys/class/infiniband/{port.device}/ports/{port.port}"
    if port.state is None or port.phys_state is None:
        return Finding(
            "rdma.port_state",
            Severity.WARN,
            port.name,
            "port state unknown (unreadable sysfs attribute)",
            evidence,
            f"read {sysfs}/state by hand; check the driver",
        )
    odd = _unrecognised(port)
    if odd:
        evidence["state_id"], evidence["phys_state_id"] = port.state_id, port.phys_state_id
        fix = (
            f"compare with `ibstat {port.device} {port.port}`: the kernel never writes this text, so the driver is "
            "out of tree or the snapshot was edited"
        )
        if port.state_recognised and not port.is_active:
            # The logical state alone says NCCL will skip the port.
            return Finding(
                "rdma.port_state",
                Severity.FAIL,
                port.name,
                f"port is {port.state}; " + "; ".join(odd),
                evidence,
                fix,
            )
        # ACTIVE (or an unreadable logical state): whether the link is really up cannot be told.
        lead = "port is ACTIVE but " if port.state_recognised else ""
        return Finding("rdma.port_state", Severity.WARN, port.name, lead + "; ".join(odd), evidence, fix)
    if port.is_link_up and port.is_ib and port.state_id in (2, 3):
        fix = (
            "start or check the subnet manager (opensm / UFM); `sminfo` and `ibstat` show whether one answers"
        )
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
    return Finding("rdma.port_state", Severity.FAIL, port.name, message, evidence, fix)


@check("rdma.port_rate", "Port rate matches its siblings")
def port_rate(ctx: CheckContext) -> Iterator[Finding]:
    """An active port running below the best rate of its sibling ports of the same model and link
    layer has trained down (a lane failed, a cable or transceiver is bad, or the switch port is
    set lower). One slow rail limits every ring that crosses it."""
    groups: dict[tuple, list] = defaultdict(list)
    unknown = []
    for dev in ctx.inventory.rdma_devices:
        for port in dev.ports:
            if port.is_active and port.rate_gbps is not None:
                groups[(dev.model, port.link_layer)].append(port)
            elif port.is_active:
                unknown.append(port.name)
    if unknown:
        yield not_evaluated_on(
            "rdma.port_rate",
            "link rate unreadable on active port(s)",
            unknown,
            "ports",
            "read /sys/class/infiniband/<dev>/ports/<n>/rate by hand; `ibstat` shows the rate too",
        )
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
                    {
                        "rate_gbps": port.rate_gbps,
                        "expected_gbps": best,
                        "width": port.width,
                        "speed": port.speed_name,
                    },
                    "reseat or replace the cable/transceiver, check the switch port speed and `mlxlink -d <dev> -m` for lane errors",
                )
    if checked and not degraded:
        yield Finding(
            "rdma.port_rate", Severity.PASS, "ports", f"{checked} active port(s) at their siblings' rate"
        )


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
            "active ports of mixed link layers: "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(layers.items())),
            {k: v for k, v in layers.items()},
            f"select one kind for NCCL, e.g. NCCL_IB_HCA={ib}"
            if ib
            else "select one kind of port with NCCL_IB_HCA",
        )
    elif layers:
        yield Finding(
            "rdma.link_layer_mix", Severity.PASS, "node", f"all active ports are {next(iter(layers))}"
        )


@check("rdma.firmware", "Same firmware across one model")
def firmware(ctx: CheckContext) -> Iterator[Finding]:
    """HCAs of one model should run one firmware version: mixed firmware gives different
    congestion-control and adaptive-routing behaviour between rails and is a common leftover of a
    partial upgrade. EFA devices are left out: AWS manages their firmware (sysfs shows 0.0.0.0)."""
    by_model: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    unknown = []
    for dev in ctx.inventory.rdma_devices:
        if dev.is_efa:
            continue
        if dev.model and dev.fw_ver:
            by_model[dev.model][dev.fw_ver].append(dev.name)
        else:
            unknown.append(dev.name)
    if unknown:
        yield not_evaluated_on(
            "rdma.firmware",
            "model or firmware version unreadable for",
            unknown,
            "devices",
            "`ibv_devinfo` prints fw_ver and the board id",
        )
    for model, versions in by_model.items():
        if len(versions) > 1:
            common = max(versions, key=lambda v: len(versions[v]))
            odd = sorted(n for v, names in versions.items() if v != common for n in names)
            yield Finding(
                "rdma.firmware",
                Severity.WARN,
                ",".join(odd),
                f"{model} firmware differs: "
                + "; ".join(f"{v} on {', '.join(n)}" for v, n in sorted(versions.items())),
                {"versions": {v: n for v, n in versions.items()}},
                f"update {', '.join(odd)} to {common} (mlxfwmanager -u), then reboot or mlxfwreset",
            )
        else:
            yield Finding(
                "rdma.firmware", Severity.PASS, model, f"all {model} HCAs run firmware {next(iter(versions))}"
            )


EXPECTED_MTU = 4096


@check("rdma.mtu", "Active RDMA MTU 4096")
def active_mtu(ctx: CheckContext) -> Iterator[Finding]:
    """The RDMA MTU a port runs at (`ibv_devinfo -v`: active_mtu) sets the packet size of every
    RDMA transfer; below 4096 large messages pay more per-packet overhead. On RoCE it follows the
    netdev MTU (the kernel's iboe_get_mtu: 4096 needs a netdev MTU of at least 4192), which
    roce.mtu reports; on InfiniBand the subnet manager's partition MTU and the switch ports cap it.
    An active MTU below what the netdev allows points at a mismatch the driver did not resolve."""
    inv = ctx.inventory
    active = [p for p in inv.ports if p.is_active]
    if not active:
        return
    if inv.verbs is None:
        yield not_evaluated(
            "rdma.mtu",
            "ports",
            "`ibv_devinfo -v` not available, so the active RDMA MTU is unknown",
            fix="install rdma-core's ibverbs-utils (Debian/Ubuntu: apt-get install ibverbs-utils)",
        )
        return
    good, unknown = 0, []
    for port in active:
        verbs = inv.verbs.get(port.name)
        if verbs is None or verbs.active_mtu_bytes is None:
            unknown.append(port.name)
            continue
        mtu = verbs.active_mtu_bytes
        if mtu >= EXPECTED_MTU:
            good += 1
            continue
        yield _mtu_finding(inv, port, verbs)
    if unknown:
        yield not_evaluated_on("rdma.mtu", "no active_mtu in `ibv_devinfo -v` for", unknown, "ports")
    if good and good == len(active):
        yield Finding(
            "rdma.mtu", Severity.PASS, "ports", f"all {good} active port(s) at RDMA MTU {EXPECTED_MTU}"
        )


def _mtu_finding(inv: Inventory, port: RdmaPort, verbs: VerbsPort) -> Finding:
    mtu, cap = verbs.active_mtu_bytes, verbs.max_mtu_bytes
    evidence = {"active_mtu": mtu, "max_mtu": cap, "expected": EXPECTED_MTU}
    if cap is not None and cap < EXPECTED_MTU:
        return Finding(
            "rdma.mtu",
            Severity.WARN,
            port.name,
            f"active RDMA MTU {mtu}: the device supports at most {cap}",
            evidence,
            "check the HCA model and firmware (`ibv_devinfo -v`: max_mtu); a VF or older adapter may cap it",
        )
    if port.is_roce:
        netdev_name = inv.port_netdev(port)
        netdev = inv.netdev(netdev_name)
        netdev_mtu = netdev.mtu_bytes if netdev else None
        evidence.update({"netdev": netdev_name, "netdev_mtu": netdev_mtu})
        if netdev_mtu is not None and (allowed := roce_mtu_for(netdev_mtu)) is not None and allowed <= mtu:
            return Finding(
                "rdma.mtu",
                Severity.INFO,
                port.name,
                f"active RDMA MTU {mtu} follows from {netdev_name}'s MTU {netdev_mtu} (roce.mtu reports it)",
                evidence,
            )
        return Finding(
            "rdma.mtu",
            Severity.WARN,
            port.name,
            f"active RDMA MTU {mtu} although {netdev_name or 'the netdev'}'s MTU {netdev_mtu} allows {EXPECTED_MTU}",
            evidence,
            f"set the netdev MTU again (`ip link set {netdev_name or '<netdev>'} mtu 9000`) so the driver recomputes it; check bonds and VFs for a smaller MTU",
        )
    return Finding(
        "rdma.mtu",
        Severity.WARN,
        port.name,
        f"active RDMA MTU {mtu} (the port supports {cap or '?'}): the subnet manager's partition MTU or a switch port caps it",
        evidence,
        "set the partition MTU to 4096 (opensm partitions.conf: `Default=0x7fff, ipoib, mtu=5 : ALL=full;`, or UFM) and check the switch ports' MTU cap; `ibportstate` shows the neighbour's",
    )


# operstate values that mean "not passing traffic" (Documentation/networking/operstates.rst).
DOWN_OPERSTATES = ("down", "lowerlayerdown", "dormant", "notpresent")


@check("rdma.netdev_up", "Port netdevs up when the port is ACTIVE")
def netdev_up(ctx: CheckContext) -> Iterator[Finding]:
    """An ACTIVE port whose IPoIB or RoCE netdev is down: on InfiniBand the IPoIB interface was
    left administratively down (`ip link set <if> up` was never run), so RDMA-CM, IP-based
    bootstrap (NCCL_SOCKET_IFNAME=ib0) and storage over IPoIB fail while the port itself is fine;
    on RoCE the addresses, hence the RoCE v2 GIDs, go with it."""
    inv = ctx.inventory
    checked = flagged = 0
    for port in inv.ports:
        if not port.is_active:
            continue
        name = inv.port_netdev(port)
        netdev = inv.netdev(name)
        if netdev is None or netdev.operstate is None:
            continue
        checked += 1
        if netdev.operstate in DOWN_OPERSTATES:
            flagged += 1
            kind = "IPoIB" if port.is_ib else "RoCE" if port.is_roce else "port"
            yield Finding(
                "rdma.netdev_up",
                Severity.WARN,
                port.name,
                f"port is ACTIVE but its {kind} netdev {name} is {netdev.operstate}",
                {"netdev": name, "operstate": netdev.operstate, "state": port.state},
                f"ip link set {name} up (and make it persistent in the network configuration: netplan/NetworkManager/ifcfg-{name})",
            )
    if checked and not flagged:
        yield Finding(
            "rdma.netdev_up", Severity.PASS, "ports", f"the netdevs of {checked} active port(s) are up"
        )
