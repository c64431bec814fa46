"""`nccl lint` rules for RoCE: the GID NCCL will use on each selected port, and the traffic class
against the node's QoS (trust mode, PFC, ECN)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fabricscope.findings import Finding
from fabricscope.nccl.gid import GidPolicy, explain_choice, select_gid
from fabricscope.nccl.lint.codes import LintContext, finding
from fabricscope.nccl.lint.codes import names as _names
from fabricscope.nccl.match import parse_list
from fabricscope.nccl.node import NicPort, best_roce_gid, gid_at, nic_ports
from fabricscope.nccl.settings import Setting, uses_expansion

AUTO_GID_VERSION = (2, 21)


def _roce_selected(ctx: LintContext) -> list[NicPort]:
    inv = ctx.inventory
    assert inv is not None
    ports = [p for p in nic_ports(inv) if p.link == "RoCE"]
    hca = ctx.settings.get("NCCL_IB_HCA")
    if hca and not uses_expansion(hca):
        parsed = parse_list(hca)
        if parsed.tokens:
            ports = [p for p in ports if parsed.matches(p.device, p.port)]
    return [p for p in ports if p.active] or ports


def check_gid_index(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    s = ctx.settings.effective.get("NCCL_IB_GID_INDEX")
    if inv is None or s is None:
        return
    try:
        index = int(s.value.strip())
    except ValueError:
        return
    if index < 0:
        return  # -1: automatic
    all_ports = nic_ports(inv)
    if not any(p.link == "RoCE" for p in all_ports):
        if all_ports:
            yield finding(
                "NCCL030",
                "info",
                s,
                "NCCL_IB_GID_INDEX",
                "this node has no RoCE port: InfiniBand ports ignore NCCL_IB_GID_INDEX (they address by LID)",
                "drop it from InfiniBand job scripts",
            )
        return
    sort = _gid_sort(_roce_selected(ctx), index)
    yield from _gid_wrong_entries(s, index, sort)
    distinct = sorted({v for v in sort.right.values() if v is not None})
    if len(distinct) > 1:
        detail = ", ".join(f"{k}={v}" for k, v in sort.right.items())
        yield finding(
            "NCCL034",
            "fail",
            s,
            "NCCL_IB_GID_INDEX",
            f"the RoCE v2 IPv4 entry is at different indexes on different NICs ({detail}): no single NCCL_IB_GID_INDEX is right for all",
            "unset NCCL_IB_GID_INDEX and let NCCL (>= 2.21) choose per NIC",
            right_index=sort.right,
        )
    if not sort.empty and not sort.v1 and not sort.local and len(distinct) <= 1:
        version = ctx.nccl_version
        if version is None or version >= AUTO_GID_VERSION:
            when = "" if version else " (assuming NCCL >= 2.21; pass --nccl-version if older)"
            yield finding(
                "NCCL035",
                "info",
                s,
                "NCCL_IB_GID_INDEX",
                f"GID index {index} is the RoCE v2 IPv4 entry on every selected NIC, so it works; NCCL 2.21+ chooses it itself and copes when an extra address shifts the table{when}",
                "remove NCCL_IB_GID_INDEX",
                right_index=distinct[0] if distinct else None,
            )


@dataclass
class _GidSort:
    """The selected RoCE ports sorted by what sits at the forced GID index, and the index of the
    RoCE v2 IPv4 entry (the one NCCL should use) on each."""

    empty: list[str] = field(default_factory=list)
    v1: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    right: dict[str, int | None] = field(default_factory=dict)


def _gid_sort(ports: list[NicPort], index: int) -> _GidSort:
    out = _GidSort()
    for p in ports:
        best = best_roce_gid(p.raw)
        out.right[p.label] = best.index if best else None
        gid = gid_at(p.raw, index)
        if gid is None:
            out.empty.append(p.label)
        elif gid.roce_version == 1:
            out.v1.append(f"{p.label} ({gid.gid})")
        elif gid.is_link_local:
            out.local.append(f"{p.label} ({gid.gid})")
    return out


def _gid_wrong_entries(s: Setting, index: int, sort: _GidSort) -> Iterator[Finding]:
    """NCCL031-033: the forced index is empty, RoCE v1 or link-local on some ports; one fix for all."""
    fix = "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the RoCE v2 IPv4 entry itself) or set the index of that entry"
    for code, ports, what in (
        ("NCCL031", sort.empty, "empty on {}: queue pairs fail to connect (ibv_modify_qp: Invalid argument)"),
        (
            "NCCL032",
            sort.v1,
            "a RoCE v1 entry on {}: RoCE v1 is not routable and does not match RoCE v2 peers",
        ),
        ("NCCL033", sort.local, "a link-local fe80:: entry on {}: it does not cross an IP router"),
    ):
        if ports:
            yield finding(
                code,
                "fail",
                s,
                "NCCL_IB_GID_INDEX",
                f"GID index {index} is " + what.format(_names(ports)),
                fix,
                ports=ports,
            )


def check_gid_before_2_21(ctx: LintContext) -> Iterator[Finding]:
    """Before 2.21 NCCL takes NCCL_IB_GID_INDEX as given, default 0 (NCCL v2.20.5-1
    src/transport/net_ib.cc: NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0)); 2.21 made -1 (choose) the
    default. Index 0 is the link-local RoCE v1 entry in the kernel's table layout."""
    inv, version = ctx.inventory, ctx.nccl_version
    if (
        inv is None
        or version is None
        or version >= AUTO_GID_VERSION
        or "NCCL_IB_GID_INDEX" in ctx.settings.effective
    ):
        return
    ports = [p for p in _roce_selected(ctx) if p.active]
    if not ports:
        return
    right = {p.label: (best.index if (best := best_roce_gid(p.raw)) is not None else None) for p in ports}
    zero = gid_at(ports[0].raw, 0)
    at0 = f"{zero.gid}, RoCE v{zero.roce_version}" if zero is not None else "empty"
    indexes = sorted({v for v in right.values() if v is not None})
    if len(indexes) == 1 and None not in right.values():
        fix = f"set NCCL_IB_GID_INDEX={indexes[0]}: the RoCE v2 IPv4 entry on every selected NIC (or use NCCL >= 2.21, which picks it)"
    elif indexes:
        fix = f"the RoCE v2 IPv4 entry is not at one index on every NIC ({', '.join(f'{k}={v}' for k, v in right.items())}): select NICs that agree in NCCL_IB_HCA, or use NCCL >= 2.21"
    else:
        fix = "give the RoCE netdevs IPv4 addresses, then set NCCL_IB_GID_INDEX to their RoCE v2 entry (or use NCCL >= 2.21)"
    yield finding(
        "NCCL037",
        "warn",
        None,
        "NCCL_IB_GID_INDEX",
        f"NCCL {'.'.join(map(str, version))} does not choose a GID: with NCCL_IB_GID_INDEX unset it uses index 0 ({ports[0].label}: {at0}), "
        "which is not a routable RoCE v2 entry",
        fix,
        right_index=right,
    )


GID_POLICY_VARIABLES = ("NCCL_IB_ADDR_FAMILY", "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ADDR_RANGE")


def check_gid_selection(ctx: LintContext) -> Iterator[Finding]:
    """NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM and NCCL_IB_ADDR_RANGE against each selected
    RoCE port's GID table, walked as ncclIbGetGidIndex does (NCCL v2.30.7-1
    src/transport/net_ib/connect.cc, via fabricscope.nccl.gid); a forced NCCL_IB_GID_INDEX is
    NCCL031-035's to judge. These variables exist since 2.21."""
    inv = ctx.inventory
    given = [ctx.settings.effective[n] for n in GID_POLICY_VARIABLES if n in ctx.settings.effective]
    if inv is None or not given or any(uses_expansion(s.value) for s in given):
        return
    if ctx.nccl_version is not None and ctx.nccl_version < AUTO_GID_VERSION:
        return
    policy = GidPolicy.from_env(ctx.settings.values())
    if policy.gid_index >= 0 or not any(p.link == "RoCE" for p in nic_ports(inv)):
        return
    subject = given[0]
    bad, good = [], []
    for p in _roce_selected(ctx):
        choice = select_gid(p.raw.gids, p.raw.gid_table_len, policy)
        if choice.fits(policy):
            good.append(f"{p.label} index {choice.index}")
        else:
            bad.append((p, choice))
    notes = "; ".join(policy.notes)
    if bad:
        message, fix = explain_choice(bad[0][0].raw.gids, bad[0][0].netdev, bad[0][1], policy)
        where = _names([p.label for p, _ in bad])
        yield finding(
            "NCCL036",
            "fail",
            subject,
            subject.name,
            f"{len(bad)} selected RoCE port(s) have no GID NCCL may use under these settings ({where}); {bad[0][0].label}: {message}"
            + (f" ({notes})" if notes else ""),
            fix,
            ports=[p.label for p, _ in bad],
            policy=policy.describe(),
        )
    elif good:
        yield finding(
            "NCCL036",
            "pass",
            subject,
            subject.name,
            f"under {policy.describe()} NCCL finds a usable GID on every selected RoCE port ({_names(good, 4)})",
            None,
            policy=policy.describe(),
        )


def _tc_decode(value: int) -> tuple[int, int]:
    return value >> 2, value & 0x3


_ECN_NAMES = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}


@dataclass
class _TcSort:
    """The selected RoCE netdevs sorted by what NCCL_IB_TC does on each."""

    no_pfc: list[str] = field(default_factory=list)
    pcp: list[str] = field(default_factory=list)
    ecn_off: list[str] = field(default_factory=list)
    ce: list[str] = field(default_factory=list)
    fine: list[str] = field(default_factory=list)


def check_traffic_class(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if inv is None:
        return
    s = ctx.settings.effective.get("NCCL_IB_TC")
    all_ports = nic_ports(inv)
    if not any(p.link == "RoCE" for p in all_ports):
        if s is not None and all_ports:
            yield finding(
                "NCCL040",
                "info",
                s,
                "NCCL_IB_TC",
                "this node has no RoCE port: NCCL_IB_TC only sets the IP traffic class of RoCE packets and is ignored on InfiniBand (use NCCL_IB_SL there)",
                "drop it from InfiniBand job scripts",
            )
        return
    netdevs = sorted({p.netdev for p in _roce_selected(ctx) if p.netdev})
    qos = {n: inv.qos.get(n) for n in netdevs}
    lossless = {
        n: (q.pfc_priorities if q is not None and q.pfc_enabled is not None else None) for n, q in qos.items()
    }
    any_pfc = any(v for v in lossless.values())
    if s is None:
        if any_pfc:
            prios = sorted({p for v in lossless.values() if v for p in v})
            yield finding(
                "NCCL045",
                "warn",
                None,
                "NCCL_IB_TC",
                f"NCCL_IB_TC is unset: RoCE traffic carries DSCP 0 (priority 0) while PFC protects priority {_names([str(p) for p in prios])} on this node, so RDMA runs lossy unless the NIC's default traffic class is set by the admin",
                "set NCCL_IB_TC to DSCP<<2|ECN for the lossless priority (`fabricscope nccl env` computes it)",
                pfc_priorities=prios,
            )
        return
    try:
        tc = int(s.value.strip(), 0)
    except ValueError:
        return
    if not 0 <= tc <= 255:
        return
    dscp, ecn = _tc_decode(tc)
    sort = _tc_sort(inv, netdevs, qos, lossless, any_pfc, dscp, ecn)
    yield from _tc_findings(
        s, tc, sort, any_pfc=any_pfc, visible=bool(netdevs) and any(q is not None for q in qos.values())
    )


def _tc_sort(
    inv, netdevs: list[str], qos: dict[Any, Any], lossless: dict[Any, Any], any_pfc: bool, dscp: int, ecn: int
) -> _TcSort:
    """Where the DSCP of NCCL_IB_TC lands on each netdev: without PFC, under trust pcp, with ECN
    off, with CE marked, or fine."""
    out = _TcSort()
    for netdev in netdevs:
        q = qos.get(netdev)
        if q is None:
            continue
        if q.trust == "pcp":
            out.pcp.append(netdev)
            continue
        prio = q.priority_of_dscp(dscp)
        pfc = lossless.get(netdev)
        if pfc is not None and prio is not None and pfc and prio not in pfc:
            out.no_pfc.append(f"priority {prio} (PFC on {','.join(map(str, pfc))}): {netdev}")
        elif pfc is not None and not pfc and any_pfc:
            out.no_pfc.append(f"no PFC at all (other RoCE netdevs have it): {netdev}")
        else:
            out.fine.append(f"{netdev}: priority {prio}")
        dev = inv.netdev(netdev)
        if dev is not None and prio is not None and ecn in (1, 2):
            if dev.ecn_np_enabled.get(prio) is False or dev.ecn_rp_enabled.get(prio) is False:
                out.ecn_off.append(f"{netdev} priority {prio}")
        if ecn == 3:
            out.ce.append(netdev)
    return out


def _tc_findings(s, tc: int, sort: _TcSort, any_pfc: bool, visible: bool) -> Iterator[Finding]:
    dscp, ecn = _tc_decode(tc)
    decoded = f"NCCL_IB_TC={tc} = DSCP {dscp} << 2 | {_ECN_NAMES[ecn]} ({ecn})"
    if sort.no_pfc:
        groups: dict[str, list[str]] = {}
        for item in sort.no_pfc:
            key, _, netdev = item.rpartition(": ")
            groups.setdefault(key, []).append(netdev)
        where = "; ".join(f"{key} on {_names(devs, 3)}" for key, devs in groups.items())
        yield finding(
            "NCCL041",
            "fail",
            s,
            "NCCL_IB_TC",
            f"{decoded}, which lands on a priority without PFC: {where}: RDMA traffic runs lossy, drops turn into retransmits and status-12 timeouts",
            "pick the DSCP that maps to the PFC priority (`fabricscope nccl env` computes it), or fix PFC on the listed netdevs",
            netdevs=sort.no_pfc,
        )
    if sort.pcp:
        yield finding(
            "NCCL042",
            "warn",
            s,
            "NCCL_IB_TC",
            f"{_names(sort.pcp)} trust pcp: the priority comes from the VLAN PCP, so the DSCP in NCCL_IB_TC does not choose it",
            "set trust dscp on every RoCE netdev (mlnx_qos -i <if> --trust dscp) or use NCCL_IB_SL for the priority",
            netdevs=sort.pcp,
        )
    if sort.ce:
        yield finding(
            "NCCL043",
            "fail",
            s,
            "NCCL_IB_TC",
            f"{decoded}: the ECN field is CE (congestion experienced) on every packet, so receivers see constant congestion and throttle the senders",
            f"use NCCL_IB_TC={dscp << 2 | 2} (ECT(0))",
        )
    if sort.ecn_off:
        yield finding(
            "NCCL043",
            "warn",
            s,
            "NCCL_IB_TC",
            f"{decoded} marks packets ECN-capable but ECN (roce_np/roce_rp) is off for {_names(sort.ecn_off, 4)}: congestion marks go unanswered",
            "enable ECN for that priority (/sys/class/net/<if>/ecn/roce_{np,rp}/enable/<prio>) or fix the node's QoS",
            netdevs=sort.ecn_off,
        )
    if not any_pfc and visible:
        yield finding(
            "NCCL044",
            "info",
            s,
            "NCCL_IB_TC",
            f"{decoded}; no RoCE netdev here has PFC on any priority, so RoCE runs lossy and relies on ECN/DCQCN",
            None,
        )
        return
    if not (sort.no_pfc or sort.pcp or sort.ce or sort.ecn_off) and sort.fine:
        prio_text = _names(sorted({f.split(": ")[1] for f in sort.fine}))
        yield finding(
            "NCCL044",
            "pass",
            s,
            "NCCL_IB_TC",
            f"{decoded} -> {prio_text} with PFC on every selected RoCE netdev",
            None,
        )
