"""RoCE v2 configuration: GIDs, MTU, PFC, trust mode, ECN and congestion control."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated
from fabricscope.findings import Finding, Severity
from fabricscope.host.infiniband import RdmaPort
from fabricscope.host.inventory import Inventory
from fabricscope.host.verbs import IBOE_OVERHEAD_BYTES, roce_mtu_for
from fabricscope.nccl.gid import GidPolicy, explain_choice, gid_table_empty, select_gid
from fabricscope.nccl.settings import parse_conf_file

# RDMA MTU 4096 needs the netdev MTU to hold 4096 bytes of payload plus RoCE v2 headers.
MIN_NETDEV_MTU_FOR_4K = 4096 + IBOE_OVERHEAD_BYTES


def roce_ports(inv: Inventory) -> list[tuple[RdmaPort, str | None]]:
    return [(p, inv.port_netdev(p)) for p in inv.ports if p.is_roce]


def roce_netdevs(inv: Inventory) -> list[str]:
    seen: list[str] = []
    for _port, netdev in roce_ports(inv):
        if netdev and netdev not in seen:
            seen.append(netdev)
    return seen


def lossless_priorities(inv: Inventory, netdev: str) -> list[int] | None:
    qos = inv.qos.get(netdev)
    if qos is None or qos.pfc_enabled is None:
        return None
    return qos.pfc_priorities


@check("roce.gid", "NCCL picks a RoCE v2 GID with an IP address")
def roce_gid(ctx: CheckContext) -> Iterator[Finding]:
    """RoCE v2 (routable, UDP-encapsulated) needs a GID table entry of type "RoCE v2" holding a
    routable address. NCCL 2.21+ chooses the entry itself (ncclIbGetGidIndex): it wants the family
    NCCL_IB_ADDR_FAMILY (AF_INET unless set), RoCE version NCCL_IB_ROCE_VERSION_NUM (2) and an
    address inside NCCL_IB_ADDR_RANGE, and falls back to index 0 (link-local, RoCE v1) when no
    entry qualifies. This check walks each port's table the same way (fabricscope.nccl.gid, with
    the values of /etc/nccl.conf) and warns when the entry NCCL would use is not a routable RoCE
    v2 one, e.g. a port whose only RoCE v2 addresses are IPv6 while NCCL looks for IPv4. A port whose
    table holds no GID at all (a pod that sees the RDMA device but not its netdev) fails: RoCE cannot
    address any peer, and the fix is the pod's network attachment, not an address."""
    inv = ctx.inventory
    policy = GidPolicy.from_env(_conf_env(inv.nccl_conf))
    for port, netdev in roce_ports(inv):
        choice = select_gid(port.gids, port.gid_table_len, policy)
        evidence = {
            "gid_index": choice.index,
            "gid": choice.gid,
            "roce_version": choice.roce_version,
            "policy": policy.describe(),
            "gids": [f"{g.index}:{g.gid}:{g.type}" for g in port.gids],
            "netdev": netdev,
        }
        if policy.notes:
            evidence["nccl_reads"] = list(policy.notes)
        if choice.routable_v2:
            shown = next((g.ipv4 for g in port.gids if g.index == choice.index and g.ipv4), choice.gid)
            yield Finding(
                "roce.gid",
                Severity.PASS,
                port.name,
                f"NCCL (2.21+) uses GID index {choice.index} ({shown}, RoCE v2) on {netdev or 'its netdev'}",
                evidence,
            )
            continue
        message, fix = explain_choice(port.gids, netdev, choice, policy, where="/etc/nccl.conf")
        severity = (
            Severity.FAIL if gid_table_empty(port.gids) else Severity.WARN
        )  # no GID at all: RoCE unusable
        yield Finding("roce.gid", severity, port.name, message, evidence, fix)


def _conf_env(text: str | None) -> dict[str, str]:
    """The NCCL_* values of /etc/nccl.conf (NCCL reads it for whatever the environment leaves unset)."""
    if text is None:
        return {}
    settings, _skipped, _misread = parse_conf_file(text, "/etc/nccl.conf", origin="/etc/nccl.conf")
    return {s.name: s.value for s in settings}


@check("roce.mtu", "Netdev MTU allows RDMA MTU 4096")
def roce_mtu(ctx: CheckContext) -> Iterator[Finding]:
    """The RoCE path MTU is derived from the netdev MTU: below about 4200 bytes the RDMA MTU
    drops to 2048 or 1024 and large transfers lose bandwidth to per-packet overhead."""
    for netdev_name in roce_netdevs(ctx.inventory):
        netdev = ctx.inventory.netdev(netdev_name)
        if netdev is None or netdev.mtu_bytes is None:
            yield not_evaluated(
                "roce.mtu", netdev_name, f"MTU of {netdev_name} unreadable", fix=f"ip link show {netdev_name}"
            )
            continue
        if netdev.mtu_bytes < MIN_NETDEV_MTU_FOR_4K:
            rdma_mtu = roce_mtu_for(netdev.mtu_bytes)
            yield Finding(
                "roce.mtu",
                Severity.WARN,
                netdev_name,
                f"MTU {netdev.mtu_bytes} limits the RDMA MTU to {rdma_mtu} (4096 needs >= {MIN_NETDEV_MTU_FOR_4K})",
                {"mtu_bytes": netdev.mtu_bytes},
                f"ip link set {netdev_name} mtu 9000 (and the same MTU on the switch ports)",
            )
        else:
            yield Finding(
                "roce.mtu",
                Severity.PASS,
                netdev_name,
                f"MTU {netdev.mtu_bytes}",
                {"mtu_bytes": netdev.mtu_bytes},
            )


def _ecn_enabled(inv: Inventory, netdev_name: str, priority: int) -> bool | None:
    netdev = inv.netdev(netdev_name)
    if netdev is None or not netdev.ecn_np_enabled or not netdev.ecn_rp_enabled:
        return None
    np_on, rp_on = netdev.ecn_np_enabled.get(priority), netdev.ecn_rp_enabled.get(priority)
    if np_on is None or rp_on is None:
        return None
    return np_on and rp_on


def _ecn_any(inv: Inventory, netdev_name: str) -> bool | None:
    netdev = inv.netdev(netdev_name)
    if netdev is None or not netdev.ecn_np_enabled or not netdev.ecn_rp_enabled:
        return None
    return any(netdev.ecn_np_enabled.values()) and any(netdev.ecn_rp_enabled.values())


@check("roce.pfc", "RoCE traffic protected by PFC and/or ECN")
def roce_pfc(ctx: CheckContext) -> Iterator[Finding]:
    """RoCE's go-back-N recovery collapses under packet loss, so RoCE traffic needs a lossless
    priority (PFC) and congestion control (ECN/DCQCN). PFC on no priority with ECN off leaves RoCE
    unprotected (fail); only one of the two is a warning."""
    inv = ctx.inventory
    for netdev in roce_netdevs(inv):
        qos = inv.qos.get(netdev)
        if qos is None or qos.pfc_enabled is None:
            yield Finding(
                "roce.pfc",
                Severity.INFO,
                netdev,
                "PFC configuration not visible (no mlnx_qos or dcb output)",
                {},
                "install iproute2's dcb (or MLNX_OFED mlnx_qos) so PFC can be checked: `dcb pfc show dev "
                + netdev
                + "`",
            )
            continue
        prios = qos.pfc_priorities
        if prios:
            yield Finding(
                "roce.pfc",
                Severity.PASS,
                netdev,
                f"PFC enabled on priority {','.join(map(str, prios))}",
                {"pfc_priorities": prios},
            )
            continue
        ecn = _ecn_any(inv, netdev)
        evidence = {"pfc_priorities": [], "ecn_enabled": ecn, "source": qos.source}
        fix = f"mlnx_qos -i {netdev} --pfc 0,0,0,1,0,0,0,0 (or `dcb pfc set dev {netdev} prio-pfc 3:on`) and the matching switch config"
        if ecn:
            yield Finding(
                "roce.pfc",
                Severity.WARN,
                netdev,
                "PFC is off on every priority: RoCE relies on ECN alone (lossy RoCE)",
                evidence,
                fix,
            )
        elif ecn is None:
            yield Finding(
                "roce.pfc",
                Severity.WARN,
                netdev,
                "PFC is off on every priority and ECN state is not visible",
                evidence,
                fix,
            )
        else:
            yield Finding(
                "roce.pfc",
                Severity.FAIL,
                netdev,
                "neither PFC nor ECN protects RoCE traffic: loss will collapse RDMA throughput",
                evidence,
                fix
                + f"; enable ECN: echo 1 > /sys/class/net/{netdev}/ecn/roce_np/enable/3 and roce_rp/enable/3",
            )


@check("roce.trust", "Trust mode matches DSCP marking")
def roce_trust(ctx: CheckContext) -> Iterator[Finding]:
    """RoCE v2 is routed and usually untagged, so the NIC must classify it by DSCP. With trust
    pcp, untagged DSCP-marked traffic lands on priority 0 and a lossless priority such as 3 never
    engages."""
    inv = ctx.inventory
    for netdev in roce_netdevs(inv):
        qos = inv.qos.get(netdev)
        trust = (qos.trust if qos else None) or (inv.netdev(netdev).qos_trust if inv.netdev(netdev) else None)
        if trust is None:
            yield not_evaluated(
                "roce.trust",
                netdev,
                "trust mode not visible (no mlnx_qos, dcb or /sys/class/net/<if>/qos/trust)",
                fix=f"install iproute2's dcb or MLNX_OFED's mlnx_qos: `mlnx_qos -i {netdev}` shows the trust mode",
            )
            continue
        prios = qos.pfc_priorities if qos else []
        dscp_marked = any(p != 0 for p in prios) or "NCCL_IB_TC" in (inv.nccl_conf or "")
        if trust == "pcp" and dscp_marked:
            yield Finding(
                "roce.trust",
                Severity.WARN,
                netdev,
                f"trust mode is pcp while the lossless priority is {','.join(map(str, prios)) or '?'}: DSCP-marked RoCE v2 traffic will not reach it",
                {"trust": trust, "pfc_priorities": prios},
                f"mlnx_qos -i {netdev} --trust dscp (or `dcb app add dev {netdev} dscp-prio 26:3`)",
            )
        else:
            yield Finding("roce.trust", Severity.PASS, netdev, f"trust {trust}", {"trust": trust})


@check("roce.ecn", "ECN enabled on the lossless priority")
def roce_ecn(ctx: CheckContext) -> Iterator[Finding]:
    """DCQCN congestion control needs ECN enabled both as notification point (roce_np: send CNPs
    on CE-marked packets) and as reaction point (roce_rp: slow down on CNPs) on the priority RoCE
    uses; without it PFC pauses spread congestion across the fabric."""
    inv = ctx.inventory
    for netdev in roce_netdevs(inv):
        prios = lossless_priorities(inv, netdev)
        if not prios:
            continue  # no lossless priority: roce.pfc reports it
        nd = inv.netdev(netdev)
        if nd is None or not nd.ecn_np_enabled or not nd.ecn_rp_enabled:
            yield Finding(
                "roce.ecn",
                Severity.INFO,
                netdev,
                "ECN/DCQCN state not visible (no /sys/class/net/<if>/ecn; upstream drivers keep it in debugfs)",
                {},
                "check with `cat /sys/kernel/debug/mlx5/<pci>/cc_params/*` or the NIC vendor tools",
            )
            continue
        off = [p for p in prios if not _ecn_enabled(inv, netdev, p)]
        if off:
            yield Finding(
                "roce.ecn",
                Severity.WARN,
                netdev,
                f"ECN (DCQCN) disabled on lossless priority {','.join(map(str, off))}",
                {
                    "roce_np": {p: nd.ecn_np_enabled.get(p) for p in off},
                    "roce_rp": {p: nd.ecn_rp_enabled.get(p) for p in off},
                },
                "; ".join(
                    f"echo 1 > /sys/class/net/{netdev}/ecn/roce_np/enable/{p}; echo 1 > /sys/class/net/{netdev}/ecn/roce_rp/enable/{p}"
                    for p in off
                ),
            )
        else:
            yield Finding("roce.ecn", Severity.PASS, netdev, f"ECN on priority {','.join(map(str, prios))}")


@check("roce.cnp_ignored", "CNPs are acted on")
def cnp_ignored(ctx: CheckContext) -> Iterator[Finding]:
    """rp_cnp_ignored counts congestion notifications the NIC received but did not act on: the
    switch is marking and the receiver answering, but this sender's congestion control is off for
    that priority. It should stay at zero."""
    for port, _netdev in roce_ports(ctx.inventory):
        total = port.hw_counters.get("rp_cnp_ignored")
        if total is None:
            yield not_evaluated(
                "roce.cnp_ignored",
                port.name,
                "no rp_cnp_ignored counter in hw_counters (the driver does not expose it)",
                fix=f"`rdma statistic show link {port.device}/{port.port}` lists the counters this driver has",
            )
            continue
        rising = None
        if ctx.rates is not None:
            rising = ctx.rates.ports.get(port.name, {}).get("rp_cnp_ignored")
        if rising:
            yield Finding(
                "roce.cnp_ignored",
                Severity.WARN,
                port.name,
                f"CNPs ignored at {ctx.rates.per_second(rising):.1f}/s: congestion control is off for the traffic's priority",
                {"rp_cnp_ignored_delta": rising, "interval_s": ctx.rates.interval_s, "rp_cnp_ignored": total},
                "enable DCQCN (roce_rp) on the priority RoCE uses: echo 1 > /sys/class/net/<netdev>/ecn/roce_rp/enable/<prio>",
            )
        elif total and rising is None:
            yield Finding(
                "roce.cnp_ignored",
                Severity.WARN,
                port.name,
                f"{total:,} CNPs ignored since the counters were reset: congestion control was off for some traffic",
                {"rp_cnp_ignored": total},
                "enable DCQCN (roce_rp) on the priority RoCE uses; run `fabricscope doctor --interval 10` to see whether it is still rising",
            )
        else:
            yield Finding(
                "roce.cnp_ignored",
                Severity.PASS,
                port.name,
                "no CNPs ignored" if not total else "CNPs ignored earlier, not rising now",
                {"rp_cnp_ignored": total},
            )
