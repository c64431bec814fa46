"""`nccl lint` rules that need the node: forced sockets, NCCL_IB_HCA and NCCL_SOCKET_IFNAME against
the ports and interfaces, the GPUDirect level against the PCIe distances, QPs per connection."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.findings import Finding
from fabricscope.host.inventory import Inventory
from fabricscope.host.netclass import NetDevice
from fabricscope.nccl.lint.codes import LintContext, finding
from fabricscope.nccl.lint.codes import names as _names
from fabricscope.nccl.match import DeviceList, parse_list, prefix_trap
from fabricscope.nccl.node import (
    LEVEL_RANK,
    NicPort,
    active_ports,
    c2c_gpus,
    gdr_module_state,
    gpudirect_without_module,
    has_working_rdma,
    is_virtual_name,
    nic_ports,
    usable_interface,
)
from fabricscope.nccl.settings import Setting, uses_expansion
from fabricscope.nccl.variables import parse_level


def check_forced_sockets(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    st = ctx.settings
    rdma = inv is not None and has_working_rdma(inv)
    s = st.effective.get("NCCL_IB_DISABLE")
    if s is not None and s.value.strip() not in ("", "0"):
        if rdma:
            ports = _names([p.label for p in active_ports(inv)])
            yield finding(
                "NCCL060",
                "fail",
                s,
                "NCCL_IB_DISABLE",
                f"NCCL_IB_DISABLE={s.value} forces NCCL onto TCP sockets although this node has active RDMA ports ({ports})",
                "remove NCCL_IB_DISABLE",
            )
        elif inv is None:
            yield finding(
                "NCCL060",
                "warn",
                s,
                "NCCL_IB_DISABLE",
                f"NCCL_IB_DISABLE={s.value} forces TCP sockets; wrong on any node with InfiniBand or RoCE (lint with --root to check this node)",
                "remove NCCL_IB_DISABLE unless the nodes have no RDMA",
            )
    s = st.effective.get("NCCL_NET")
    if s is not None and s.value.strip().lower() == "socket":
        if rdma:
            yield finding(
                "NCCL061",
                "fail",
                s,
                "NCCL_NET",
                "NCCL_NET=Socket forces TCP sockets although this node has active RDMA ports; RoCE also uses NCCL's IB module",
                "remove NCCL_NET (or set NCCL_NET=IB)",
            )
        elif inv is None:
            yield finding(
                "NCCL061",
                "warn",
                s,
                "NCCL_NET",
                "NCCL_NET=Socket forces TCP sockets; wrong on any node with InfiniBand or RoCE",
                "remove NCCL_NET unless the nodes have no RDMA",
            )


def check_ib_hca(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if inv is None:
        return
    s = ctx.settings.effective.get("NCCL_IB_HCA")
    ports = nic_ports(inv)
    if s is None:
        yield from _ib_hca_unset_mixed(inv)
        return
    if uses_expansion(s.value) or not ports and not inv.rdma_devices:
        return  # (no port at all: NCCL072, check_rdma_on_tcp_node)
    parsed = parse_list(s.value)
    if not parsed.tokens:
        return
    names = sorted({p.device for p in ports})
    selected = [p for p in ports if parsed.matches(p.device, p.port)]
    if not parsed.exclude:
        yield from _ib_hca_entries(s, parsed, ports, names, selected)
    if not selected:
        if parsed.exclude:
            yield finding(
                "NCCL010",
                "fail",
                s,
                "NCCL_IB_HCA",
                f"the exclude list {s.value} leaves no RDMA port for NCCL",
                "exclude fewer devices",
                devices=names,
            )
        return
    yield from _ib_hca_selection(s, selected)


def _ib_hca_unset_mixed(inv: Inventory) -> Iterator[Finding]:
    """NCCL015: no NCCL_IB_HCA on a node whose active ports mix InfiniBand and RoCE."""
    layers = {p.link for p in active_ports(inv)}
    if len(layers) > 1:
        yield finding(
            "NCCL015",
            "warn",
            None,
            "NCCL_IB_HCA",
            "NCCL_IB_HCA is unset and this node has active InfiniBand and RoCE ports: NCCL uses all of them and "
            "connections between the two kinds fail",
            "set NCCL_IB_HCA to an exact list of one link layer (`fabricscope nccl env` prints it)",
            ports=[f"{p.label}/{p.link}" for p in active_ports(inv)],
        )


def _ib_hca_entries(
    s: Setting, parsed: DeviceList, ports: list[NicPort], names: list[str], selected: list[NicPort]
) -> Iterator[Finding]:
    """Each entry of an include list on its own: one that matches nothing (NCCL010/NCCL014), a prefix
    that selects more than it names (NCCL012)."""
    candidates = [(p.device, p.port) for p in ports]
    # NCCL selects every device matching any entry (matchIfList, src/misc/utils.cc) and fails only when
    # none matches: an entry that matches nothing here is info, a fail only when nothing is left.
    miss = "info" if selected else "fail"
    left = (
        f"; NCCL uses the others ({_names([p.label for p in selected], 4)})"
        if selected
        else "; nothing else matches either"
    )
    for token in (t for t in parsed.tokens if t not in parsed.spaced):  # NCCL016 covers those
        hits = parsed.matched_by(token, candidates)
        if not hits:
            device_exists = any(n == token.name for n in names) or (
                not parsed.exact and any(n.startswith(token.name) for n in names)
            )
            if device_exists and token.port is not None:
                yield finding(
                    "NCCL014",
                    miss,
                    s,
                    "NCCL_IB_HCA",
                    f"{token.raw}: {token.name} has no port {token.port}{left}",
                    "port numbers start at 1 (most NICs have one port per device)",
                    token=token.raw,
                )
            else:
                yield finding(
                    "NCCL010",
                    miss,
                    s,
                    "NCCL_IB_HCA",
                    f"{token.raw} matches no RDMA device on this node (devices: {_names(names)}){left}",
                    "use the names from `ls /sys/class/infiniband` (`fabricscope nccl env` prints the right list)",
                    token=token.raw,
                    devices=names,
                )
        if not parsed.exact:
            trapped = prefix_trap(token, names)
            if trapped:
                yield finding(
                    "NCCL012",
                    "warn",
                    s,
                    "NCCL_IB_HCA",
                    f"{token.raw} is a prefix: it also selects {_names(trapped)}",
                    f"prefix the list with = for exact names: NCCL_IB_HCA={'^' if parsed.exclude else ''}={','.join(t.raw for t in parsed.tokens)}",
                    token=token.raw,
                    also_matches=trapped,
                )


def _ib_hca_selection(s: Setting, selected: list[NicPort]) -> Iterator[Finding]:
    """What the list selects: ports that are not ACTIVE (NCCL011), both link layers at once (NCCL013)."""
    down = [p for p in selected if not p.active]
    if down:
        everything = len(down) == len(selected)
        down_text = _names([f"{p.label} ({p.state or 'unknown'})" for p in down])
        yield finding(
            "NCCL011",
            "fail" if everything else "warn",
            s,
            "NCCL_IB_HCA",
            f"selects port(s) that are not ACTIVE: {down_text}; NCCL skips them"
            + (
                ", leaving no RDMA port"
                if everything
                else ", so this node runs with fewer NICs than its peers"
            ),
            "fix the link (fabricscope doctor) or leave the port out of NCCL_IB_HCA on every node",
            ports=[p.label for p in down],
        )
    layers = sorted({p.link for p in selected if p.active and p.link})
    if len(layers) > 1:
        yield finding(
            "NCCL013",
            "warn",
            s,
            "NCCL_IB_HCA",
            f"selects both InfiniBand and RoCE ports ({_names([f'{p.label}/{p.link}' for p in selected if p.active])}): connections between the two kinds fail",
            "list ports of one link layer only",
        )


_LO_LEFT = (
    "the exclude list {value} does not exclude lo: a list replaces NCCL's own choice (which skips docker*, lo "
    "and virbr*), and lo comes first among the interfaces, so NCCL can put its sockets on the loopback "
    "interface, which other nodes cannot reach"
)


def check_socket_ifname(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    s = ctx.settings.effective.get("NCCL_SOCKET_IFNAME")
    if s is None or uses_expansion(s.value):
        return
    parsed = parse_list(s.value)
    if not parsed.tokens:
        return
    if parsed.exclude and not parsed.matches("lo"):
        pass  # lo is excluded: fine
    elif parsed.exclude and (inv is None or any(d.name == "lo" for d in inv.net_devices)):
        yield finding(
            "NCCL023",
            "warn",
            s,
            "NCCL_SOCKET_IFNAME",
            _LO_LEFT.format(value=s.value),
            f"add lo (and docker, virbr) to the list: NCCL_SOCKET_IFNAME={s.value},lo",
            interfaces=["lo"],
        )
    if inv is None:
        return
    devices = {d.name: d for d in inv.net_devices}
    selected = [devices[n] for n in sorted(devices) if parsed.matches(n)]
    if not parsed.exclude:
        yield from _ifname_entries(s, parsed, devices, selected)
    if not selected:
        if parsed.exclude:
            yield finding(
                "NCCL020",
                "fail",
                s,
                "NCCL_SOCKET_IFNAME",
                f"the exclude list {s.value} leaves no interface",
                "exclude fewer interfaces",
            )
        return
    yield from _ifname_selection(s, parsed, selected)


def _ifname_entries(
    s: Setting, parsed: DeviceList, devices: dict[str, NetDevice], selected: list[NetDevice]
) -> Iterator[Finding]:
    """Each entry of an include list on its own: one that matches no interface (NCCL020, info while
    another entry matches), a prefix that selects more than the interface it names (NCCL022)."""
    names = sorted(devices)
    for token in (t for t in parsed.tokens if t not in parsed.spaced):  # NCCL016 covers those
        hits = [n for n in names if parsed.token_matches(token, n)]
        if not hits and selected:  # NCCL uses every interface matching any entry (matchIfList)
            yield finding(
                "NCCL020",
                "info",
                s,
                "NCCL_SOCKET_IFNAME",
                f"{token.raw} matches no interface on this node; NCCL uses the interfaces the other entries match ({_names([d.name for d in selected], 4)})",
                None,
                token=token.raw,
                interfaces=names,
            )
        elif not hits:
            usable = [n for n in names if usable_interface(devices[n]) and not is_virtual_name(n)]
            yield finding(
                "NCCL020",
                "fail",
                s,
                "NCCL_SOCKET_IFNAME",
                f"{token.raw} matches no interface on this node (usable: {_names(usable) or 'none'}){', and no other entry matches either' if len(parsed.tokens) > 1 else ''}: NCCL fails at init with 'no socket interface found'",
                "name an interface that exists here; `fabricscope nccl env` picks one that is up with an address",
                token=token.raw,
                interfaces=names,
            )
        elif not parsed.exact and len(hits) > 1 and token.name in names:
            others = [n for n in hits if n != token.name]
            yield finding(
                "NCCL022",
                "warn",
                s,
                "NCCL_SOCKET_IFNAME",
                f"{token.raw} is a prefix: it also selects {_names(others)}",
                f"use ={token.name} for this interface only",
                token=token.raw,
                also_matches=others,
            )


def _ifname_selection(s: Setting, parsed: DeviceList, selected: list[NetDevice]) -> Iterator[Finding]:
    """What the list selects: interfaces NCCL cannot use (NCCL021), loopback or virtual ones (NCCL023)."""
    bad = [d for d in selected if not usable_interface(d) and not d.is_loopback]
    good = [d for d in selected if usable_interface(d) and not d.is_loopback]
    if bad:
        why = [f"{d.name} ({'down' if not d.is_up else 'no address'})" for d in bad]
        yield finding(
            "NCCL021",
            "fail" if not good else "warn",
            s,
            "NCCL_SOCKET_IFNAME",
            f"selects interface(s) NCCL cannot use: {_names(why)}" + ("" if good else "; none left"),
            "NCCL only uses interfaces that are up and have an address; pick one that does",
            interfaces=[d.name for d in bad],
        )
    virtual = [d.name for d in selected if d.is_loopback or is_virtual_name(d.name)]
    if virtual and not parsed.exclude:  # (an exclude list leaving lo in: the finding above)
        yield finding(
            "NCCL023",
            "warn",
            s,
            "NCCL_SOCKET_IFNAME",
            f"selects {_names(virtual)}: loopback or container/virtual interfaces do not reach other nodes",
            "name the host's physical interface",
            interfaces=virtual,
        )


def check_gdr_level(ctx: LintContext) -> Iterator[Finding]:
    s = ctx.settings.effective.get("NCCL_NET_GDR_LEVEL")
    if s is None:
        return
    level = parse_level(s.value)
    if level is None:
        return
    yield from _gdr_level_number(ctx, s, level)
    yield from _gdr_level_on_c2c(ctx, s, level)
    inv = ctx.inventory
    if level == "LOC":
        yield finding(
            "NCCL051",
            "warn",
            s,
            "NCCL_NET_GDR_LEVEL",
            "NCCL_NET_GDR_LEVEL=LOC turns GPUDirect RDMA off: every network transfer is staged through host memory",
            "remove it unless you are isolating a GPUDirect/ACS problem",
        )
        return
    if inv is None or not inv.affinity or not has_working_rdma(inv):
        return
    rank = LEVEL_RANK.get(level, 2)
    excluded = [
        f"GPU{a.gpu_index}->{a.nic} ({a.distance})"
        for a in inv.affinity
        if a.distance
        and LEVEL_RANK.get(a.distance, 4) > rank
        and LEVEL_RANK.get(a.distance, 4) <= LEVEL_RANK["PXB"]
    ]
    if excluded:
        yield finding(
            "NCCL051",
            "warn",
            s,
            "NCCL_NET_GDR_LEVEL",
            f"NCCL_NET_GDR_LEVEL={level} is closer than the measured GPU-NIC distance of {_names(excluded, 4)}: GPUDirect RDMA is off for them although NCCL's default would use it",
            "remove NCCL_NET_GDR_LEVEL",
            gpus=excluded,
        )
    far = [
        f"GPU{a.gpu_index}->{a.nic} ({a.distance})"
        for a in inv.affinity
        if a.distance and LEVEL_RANK.get(a.distance, 4) == 4 and rank >= 4
    ]
    if far:
        yield finding(
            "NCCL051",
            "warn",
            s,
            "NCCL_NET_GDR_LEVEL",
            f"NCCL_NET_GDR_LEVEL={level} forces GPUDirect RDMA across CPU sockets for {_names(far, 4)}: usually slower than staging through host memory",
            "use PHB at most; measure with nccl-tests before keeping SYS",
            gpus=far,
        )
    if gdr_module_state(inv) is False:
        dmabuf, advice = gpudirect_without_module(inv)
        if dmabuf is None:
            yield finding(
                "NCCL052",
                "info",
                s,
                "NCCL_NET_GDR_LEVEL",
                "no peer-memory module (nvidia_peermem) is loaded: GPUDirect RDMA works only through DMA-BUF (NCCL >= 2.13, kernel >= 5.12, open GPU kernel module)",
                advice,
            )
        elif not dmabuf:
            yield finding(
                "NCCL052",
                "info",
                s,
                "NCCL_NET_GDR_LEVEL",
                f"no peer-memory module (nvidia_peermem) is loaded and {advice.split(':')[0]}: GPUDirect RDMA is off, so this level changes nothing",
                advice,
            )


# Since NCCL 2.27, NCCL_NET_GDR_C2C=1 (default) gives GPUDirect RDMA to NICs a Grace GPU reaches
# through the CPU over C2C (path P2C); 2.27-2.28 treat that path as C2C whatever the level, and
# from 2.29 the default level itself is P2C ("netGdrLevel = ncclParamNetGdrC2c() ? PATH_P2C :
# PATH_PXB", NCCL v2.30.7-1 src/graph/paths.cc), so an explicit level below P2C turns it off.
C2C_DEFAULT = (2, 27)
C2C_LEVEL_DEFAULT = (2, 29)
_BELOW_P2C = ("NVL", "NVB", "C2C", "PIX", "PXB")


def _gdr_level_number(ctx: LintContext, s, level: str) -> Iterator[Finding]:
    """NCCL050: a legacy number explained; "the default" only where PXB is NCCL's default."""
    text = s.value.strip()
    if not (text[:1].isascii() and text[:1].isdigit()):  # a legacy number (ncclGetLevel, src/graph/paths.cc)
        return
    meaning = {
        "LOC": "never use GPUDirect RDMA",
        "PIX": "GPU and NIC on the same PCIe switch",
        "PXB": "through PCIe switches, not the CPU: NCCL's default on PCIe systems",
        "PHB": "also through the CPU's host bridge",
        "SYS": "always, even across CPU sockets",
    }
    c2c = c2c_gpus(ctx.inventory) if ctx.inventory is not None else []
    if level != "PXB":
        extra = ""
    elif c2c:
        extra = f" - on this Grace/C2C node ({_names(c2c, 2)}) NCCL's default is P2C, not PXB (NCCL_NET_GDR_C2C, since 2.27)"
    elif ctx.inventory is not None:
        extra = " - 2 is the default on this PCIe system, so this line changes nothing"
    else:
        extra = " - the default on PCIe systems; on Grace/C2C systems NCCL 2.27+ defaults to P2C, which 2 undercuts"
    yield finding(
        "NCCL050",
        "info",
        s,
        "NCCL_NET_GDR_LEVEL",
        f"NCCL_NET_GDR_LEVEL={text} is the legacy number for {level} ({meaning.get(level, level)}); it is a maximum GPU-NIC distance, not an on/off switch{extra}",
        f"write the name (NCCL_NET_GDR_LEVEL={level}) or drop it",
        level=level,
    )


def _gdr_level_on_c2c(ctx: LintContext, s, level: str) -> Iterator[Finding]:
    """NCCL051 on Grace/C2C nodes: a level below P2C switches off GPUDirect RDMA (NCCL 2.29+)."""
    inv = ctx.inventory
    version = ctx.nccl_version
    c2c = c2c_gpus(inv) if inv is not None else []
    if not c2c or level not in _BELOW_P2C or (version is not None and version < C2C_LEVEL_DEFAULT):
        return
    if (ctx.settings.get("NCCL_NET_GDR_C2C") or "").strip() == "0":
        return  # C2C GPUDirect switched off on purpose: PXB is the default again
    which = ".".join(map(str, version)) if version else "2.29 and later (pass --nccl-version if older)"
    yield finding(
        "NCCL051",
        "warn",
        s,
        "NCCL_NET_GDR_LEVEL",
        f"NCCL_NET_GDR_LEVEL={s.value} ({level}) on a Grace/C2C node ({_names(c2c, 2)}): NCCL {which} defaults to P2C, "
        f"so {level} switches GPUDirect RDMA off for every NIC the GPU reaches through the CPU over C2C",
        "remove NCCL_NET_GDR_LEVEL (or set P2C)",
        gpus=c2c,
    )


def check_qps(ctx: LintContext) -> Iterator[Finding]:
    s = ctx.settings.effective.get("NCCL_IB_QPS_PER_CONNECTION")
    inv = ctx.inventory
    if s is None or inv is None:
        return
    try:
        qps = int(s.value.strip())
    except ValueError:
        return
    ports = active_ports(inv)
    if not ports:
        return
    # NCCL marks InfiniBand ports for adaptive routing by default, never RoCE ones ("ar = link_layer
    # == IBV_LINK_LAYER_INFINIBAND", NCCL v2.30.7-1 src/transport/net_ib/init.cc); the switches route
    # adaptively only on the service levels the subnet manager enables AR for.
    if all(p.link == "IB" for p in ports) and qps > 1:
        ar = ctx.settings.get("NCCL_IB_ADAPTIVE_ROUTING")
        sl = ctx.settings.get("NCCL_IB_SL") or "0"
        if ar is None or ar.strip() != "0":
            yield finding(
                "NCCL071",
                "info",
                s,
                "NCCL_IB_QPS_PER_CONNECTION",
                f"{qps} queue pairs per connection on InfiniBand: where the subnet manager enables adaptive routing on the job's service level (NCCL_IB_SL={sl}), the switches already spread the load and the extra QPs mostly cost memory and connection time at scale; where it does not, they spread a connection over more static routes",
                "keep it only if measured to help; check that your subnet manager enables adaptive routing on that SL (`fabricscope nccl env --ar-sl N`)",
            )
    elif all(p.link == "RoCE" for p in ports) and qps > 1:
        yield finding(
            "NCCL071",
            "pass",
            s,
            "NCCL_IB_QPS_PER_CONNECTION",
            f"{qps} queue pairs per connection on RoCE (no adaptive routing there: NCCL uses it on InfiniBand only): more UDP source ports, so ECMP spreads each connection over more paths in a multi-tier fabric",
            None,
        )


def check_rdma_on_tcp_node(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if inv is None:
        return
    hca = ctx.settings.effective.get("NCCL_IB_HCA")
    if hca is not None and not nic_ports(inv) and (uses_expansion(hca.value) or not inv.rdma_devices):
        yield finding(
            "NCCL072",
            "info",
            hca,
            "NCCL_IB_HCA",
            "NCCL_IB_HCA is set but this node has no RDMA device; NCCL will use TCP sockets",
            None,
        )
    if inv.rdma_devices:
        return
    for name in (
        "NCCL_IB_GID_INDEX",
        "NCCL_IB_TC",
        "NCCL_IB_SL",
        "NCCL_IB_TIMEOUT",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_NET_GDR_LEVEL",
    ):
        s = ctx.settings.effective.get(name)
        if s is not None:
            yield finding(
                "NCCL072",
                "info",
                s,
                name,
                f"{name} only affects RDMA (InfiniBand/RoCE) transfers and this node has no RDMA device: it is ignored here",
                None,
            )
