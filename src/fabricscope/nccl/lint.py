"""`nccl lint`: the NCCL settings a job uses, checked against the node it runs on.

Every finding carries a stable code (``NCCL0xx``, listed in :data:`CODES` and docs/nccl.md),
a severity, the variable as subject, the value and where it was set as evidence, and a fix.
Rules that need the node are skipped (and say so) when no inventory is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fabricscope.findings import Finding, Severity, sort_key
from fabricscope.host.inventory import Inventory
from fabricscope.nccl.explain import format_seconds, ib_timeout_seconds
from fabricscope.nccl.match import parse_list, prefix_trap
from fabricscope.nccl.node import (
    LEVEL_RANK,
    NicPort,
    active_ports,
    best_roce_gid,
    gdr_module_state,
    gid_at,
    has_working_rdma,
    is_virtual_name,
    nic_ports,
    usable_interface,
)
from fabricscope.nccl.settings import Setting, SettingSet, uses_expansion
from fabricscope.nccl.variables import RENAMED, SPECS, parse_level, parse_version, suggest

SCHEMA = "fabricscope.nccl_lint/v1"
AUTO_GID_VERSION = (2, 21)

CODES: dict[str, str] = {
    "NCCL001": "unknown variable (with the nearest real name when one is close)",
    "NCCL002": "deprecated, renamed or removed variable",
    "NCCL003": "value of the wrong type or out of range",
    "NCCL004": "value uses shell expansion and was not checked",
    "NCCL005": "a setting hidden by another source (environment over NCCL_CONF_FILE over /etc/nccl.conf)",
    "NCCL006": "a line of an env or conf file that is not NAME=VALUE",
    "NCCL007": "NCCL_CONF_FILE names a file that does not exist on the node",
    "NCCL010": "NCCL_IB_HCA matches no RDMA device on the node",
    "NCCL011": "NCCL_IB_HCA selects a port that is not ACTIVE",
    "NCCL012": "prefix trap: an NCCL_IB_HCA token also matches longer device names (mlx5_1 -> mlx5_10..)",
    "NCCL013": "the selected RDMA ports mix InfiniBand and RoCE",
    "NCCL014": "NCCL_IB_HCA names a port the device does not have",
    "NCCL015": "NCCL_IB_HCA unset on a node whose active ports mix link layers",
    "NCCL020": "NCCL_SOCKET_IFNAME matches no interface",
    "NCCL021": "NCCL_SOCKET_IFNAME selects an interface that is down or has no address",
    "NCCL022": "prefix trap: an NCCL_SOCKET_IFNAME token also matches other interfaces",
    "NCCL023": "NCCL_SOCKET_IFNAME selects loopback or a container/virtual interface",
    "NCCL030": "NCCL_IB_GID_INDEX on a node without RoCE ports (ignored)",
    "NCCL031": "NCCL_IB_GID_INDEX points at an empty GID slot",
    "NCCL032": "NCCL_IB_GID_INDEX points at a RoCE v1 entry",
    "NCCL033": "NCCL_IB_GID_INDEX points at a link-local (fe80::) entry",
    "NCCL034": "the right GID index differs between NICs",
    "NCCL035": "NCCL_IB_GID_INDEX set where NCCL's automatic choice (2.21+) is the better default",
    "NCCL040": "NCCL_IB_TC on a node without RoCE ports (ignored)",
    "NCCL041": "NCCL_IB_TC's DSCP maps to a priority without PFC",
    "NCCL042": "trust mode pcp: the DSCP in NCCL_IB_TC does not choose the priority",
    "NCCL043": "ECN bits of NCCL_IB_TC disagree with the ECN setup",
    "NCCL044": "NCCL_IB_TC decoded (DSCP, ECN, priority)",
    "NCCL045": "NCCL_IB_TC unset on RoCE with PFC: RDMA traffic goes to priority 0",
    "NCCL050": "NCCL_NET_GDR_LEVEL numeric value explained",
    "NCCL051": "NCCL_NET_GDR_LEVEL that the PCIe topology makes useless or harmful",
    "NCCL052": "GPUDirect RDMA needs nvidia-peermem or DMA-BUF",
    "NCCL060": "NCCL_IB_DISABLE=1 on a node with working RDMA: forces TCP sockets",
    "NCCL061": "NCCL_NET=Socket on a node with working RDMA: forces TCP sockets",
    "NCCL062": "P2P or SHM transport disabled (a debugging setting left in)",
    "NCCL063": "forced NCCL_ALGO or NCCL_PROTO (a debugging setting left in)",
    "NCCL064": "NCCL_DEBUG=INFO or TRACE",
    "NCCL065": "another setting from the guide's Debugging section",
    "NCCL070": "NCCL_IB_TIMEOUT in seconds, with its retry count",
    "NCCL071": "NCCL_IB_QPS_PER_CONNECTION against the fabric (ECMP entropy vs adaptive routing)",
    "NCCL072": "RDMA settings on a node without RDMA devices (ignored)",
}


@dataclass
class LintContext:
    settings: SettingSet
    inventory: Inventory | None = None
    nccl_version: tuple[int, ...] | None = None  # None: assume a current NCCL
    production: bool = True


def _f(code: str, severity: str, setting: Setting | None, subject: str, message: str, fix: str | None = None, **evidence: Any) -> Finding:
    ev: dict[str, Any] = {}
    if setting is not None:
        ev["value"] = setting.value
        ev["source"] = setting.where
    ev.update({k: v for k, v in evidence.items() if v is not None})
    return Finding(code, Severity(severity), subject, message, ev, fix)


def _names(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# ----- node-independent rules -------------------------------------------------------------------
def check_names_and_values(ctx: LintContext) -> Iterator[Finding]:
    for name, s in sorted(ctx.settings.effective.items()):
        if uses_expansion(s.value):
            yield _f("NCCL004", "info", s, name, f"{name}={s.value} uses shell expansion; its value is only known at run time", "lint the expanded environment with --from-environ inside the job")
            continue
        if name in RENAMED:
            new, severity, why = RENAMED[name]
            fix = f"use {new}" if new else f"remove {name}"
            yield _f("NCCL002", severity, s, name, f"{name} is {why}", fix, replacement=new)
            continue
        spec = SPECS.get(name)
        if spec is None:
            near = suggest(name)
            if near:
                yield _f("NCCL001", "warn", s, name, f"{name} is not an NCCL variable; did you mean {near}? NCCL silently ignores unknown names", f"rename it to {near}", suggestion=near)
            else:
                yield _f("NCCL001", "info", s, name, f"{name} is not a documented NCCL variable (plugins and launchers define their own); NCCL ignores names it does not know", None)
            continue
        problem = _value_problem(spec.kind, spec, s.value)
        if problem:
            yield _f("NCCL003", "warn", s, name, f"{name}={s.value!r}: {problem}; NCCL falls back to its default or misreads it", _range_fix(spec))


def _range_fix(spec) -> str:
    if spec.choices:
        return f"use one of {', '.join(spec.choices)}"
    if spec.kind == "bool":
        return "use 0 or 1"
    if spec.kind == "level":
        return "use LOC, PIX, PXB, PHB or SYS"
    if spec.lo is not None and spec.hi is not None:
        return f"use an integer from {spec.lo} to {spec.hi}"
    if spec.lo is not None:
        return f"use an integer >= {spec.lo}"
    return "check the value against the NCCL user guide"


def _value_problem(kind: str, spec, value: str) -> str | None:
    text = value.strip()
    if text == "" and kind not in ("string", "path"):
        return "empty value"
    if kind in ("int", "size"):
        try:
            number = int(text, 0)
        except ValueError:
            return "not an integer"
        if spec.lo is not None and number < spec.lo:
            return f"below the minimum {spec.lo}"
        if spec.hi is not None and number > spec.hi:
            return f"above the maximum {spec.hi}"
        if kind == "size" and number > 0 and number & (number - 1) and spec.name == "NCCL_BUFFSIZE":
            return "not a power of two (the guide recommends powers of two)"
    elif kind == "bool":
        if text not in ("0", "1"):
            return "not 0 or 1"
    elif kind == "enum":
        if text.upper() not in {c.upper() for c in spec.choices}:
            return f"not one of {', '.join(spec.choices)}"
    elif kind == "level":
        if parse_level(text) is None:
            return "not a path level (LOC, NVL, PIX, PXB, PHB, SYS) or legacy integer"
    elif kind == "float":
        try:
            float(text)
        except ValueError:
            return "not a number"
    elif kind == "list":
        parsed = parse_list(text)
        if parsed.problems:
            return f"entries not of the form name[:port]: {', '.join(parsed.problems)}"
        if not parsed.tokens:
            return "no names in the list"
    return None


def check_shadowed(ctx: LintContext) -> Iterator[Finding]:
    for lost, winner in ctx.settings.shadowed:
        yield _f(
            "NCCL005", "info", winner, winner.name,
            f"{winner.name}={winner.value} ({winner.where}) hides {winner.name}={lost.value} from {lost.where}",
            None, hidden_value=lost.value, hidden_source=lost.where,
        )
    for path, line, text in ctx.settings.unparsed:
        yield Finding("NCCL006", Severity.WARN, f"{path}:{line}", f"line not understood (expected NAME=VALUE): {text!r}", {"source": f"{path}:{line}"}, "fix or comment out the line; NCCL skips it too")


def check_debug_settings(ctx: LintContext) -> Iterator[Finding]:
    st = ctx.settings
    for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"):
        s = st.effective.get(name)
        if s is not None and s.value.strip() == "1":
            what = "GPU peer-to-peer (NVLink/PCIe)" if name == "NCCL_P2P_DISABLE" else "shared-memory"
            yield _f("NCCL062", "warn", s, name, f"{name}=1 disables the {what} transport: same-node traffic falls back to a slower path (SHM or the network)", f"remove {name} once the problem it worked around is fixed")
    s = st.effective.get("NCCL_P2P_LEVEL")
    if s is not None:
        level = parse_level(s.value)
        if level == "LOC":
            yield _f("NCCL062", "warn", s, "NCCL_P2P_LEVEL", "NCCL_P2P_LEVEL=LOC disables P2P between GPUs entirely", "remove NCCL_P2P_LEVEL")
        elif level is not None:
            yield _f("NCCL065", "info", s, "NCCL_P2P_LEVEL", f"NCCL_P2P_LEVEL={s.value} ({level}) overrides NCCL's choice of when GPUs talk directly", "keep only if measured to help")
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        s = st.effective.get(name)
        if s is not None and s.value.strip():
            extra = " (forcing LL128 where unsupported can corrupt data)" if name == "NCCL_PROTO" and "LL128" in s.value.upper() and not s.value.strip().startswith("^") else ""
            yield _f("NCCL063", "warn", s, name, f"{name}={s.value} forces NCCL's choice of {'algorithm' if name == 'NCCL_ALGO' else 'protocol'} for every size and topology{extra}", f"remove {name} for production; use it only to test a suspected NCCL bug")
    s = st.effective.get("NCCL_DEBUG")
    if s is not None and s.value.strip().upper() in ("INFO", "TRACE"):
        severity = "warn" if ctx.production else "info"
        yield _f("NCCL064", severity, s, "NCCL_DEBUG", f"NCCL_DEBUG={s.value} logs every init step of every rank (large logs at scale; TRACE also slows every call)", "use NCCL_DEBUG=WARN in production; INFO with NCCL_DEBUG_SUBSYS=INIT,NET when debugging")
    skip = {"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_P2P_LEVEL", "NCCL_ALGO", "NCCL_PROTO", "NCCL_IB_DISABLE",
            "NCCL_NET_GDR_LEVEL", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_TC"}
    for name, s in sorted(st.effective.items()):
        spec = SPECS.get(name)
        if spec is not None and spec.debug and name not in skip and not (spec.default is not None and s.value.strip() == spec.default):
            yield _f("NCCL065", "info", s, name, f"{name} is in the NCCL guide's Debugging section: fine for experiments, not meant to stay in production settings", None)


def check_timeout(ctx: LintContext) -> Iterator[Finding]:
    s = ctx.settings.effective.get("NCCL_IB_TIMEOUT")
    if s is None:
        return
    try:
        value = int(s.value.strip())
    except ValueError:
        return
    if ctx.inventory is not None and not ctx.inventory.rdma_devices:
        return  # NCCL072 says it is ignored here
    retries_text = ctx.settings.get("NCCL_IB_RETRY_CNT") or "7"
    try:
        retries = int(retries_text)
    except ValueError:
        retries = 7
    per = ib_timeout_seconds(value)
    if per is None:
        yield _f("NCCL070", "warn", s, "NCCL_IB_TIMEOUT", f"NCCL_IB_TIMEOUT={value} means an infinite ack timeout: a lost peer hangs the job instead of failing it", "remove it (default 20: 4.3 s x 7 retries, about 30 s) or set 18-22")
        return
    total = per * max(retries, 1)
    default_note = "the default since NCCL 2.23" if value == 20 else "default is 20 (4.3 s) since NCCL 2.23"
    severity = "info"
    extra = ""
    if value < 14:
        severity = "warn"
        extra = "; this short a timeout gives spurious status-12 errors under congestion on any real fabric"
    elif value >= 25:
        extra = "; a dead link takes this long to turn into an error"
    yield _f(
        "NCCL070", severity, s, "NCCL_IB_TIMEOUT",
        f"NCCL_IB_TIMEOUT={value}: ack timeout 4.096 us x 2^{value} = {format_seconds(per)}, x {retries} retries "
        f"(NCCL_IB_RETRY_CNT) = {format_seconds(total)} before NCCL reports an error ({default_note}){extra}",
        None if severity == "info" else "raise it to 18-22 (or remove it to get the default 20)",
        per_try_s=round(per, 6), total_s=round(total, 3), retries=retries,
    )


# ----- rules that need the node -----------------------------------------------------------------
def check_forced_sockets(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    st = ctx.settings
    rdma = inv is not None and has_working_rdma(inv)
    s = st.effective.get("NCCL_IB_DISABLE")
    if s is not None and s.value.strip() not in ("", "0"):
        if rdma:
            ports = _names([p.label for p in active_ports(inv)])
            yield _f("NCCL060", "fail", s, "NCCL_IB_DISABLE", f"NCCL_IB_DISABLE={s.value} forces NCCL onto TCP sockets although this node has active RDMA ports ({ports})", "remove NCCL_IB_DISABLE")
        elif inv is None:
            yield _f("NCCL060", "warn", s, "NCCL_IB_DISABLE", f"NCCL_IB_DISABLE={s.value} forces TCP sockets; wrong on any node with InfiniBand or RoCE (lint with --root to check this node)", "remove NCCL_IB_DISABLE unless the nodes have no RDMA")
    s = st.effective.get("NCCL_NET")
    if s is not None and s.value.strip().lower() == "socket":
        if rdma:
            yield _f("NCCL061", "fail", s, "NCCL_NET", "NCCL_NET=Socket forces TCP sockets although this node has active RDMA ports; RoCE also uses NCCL's IB module", "remove NCCL_NET (or set NCCL_NET=IB)")
        elif inv is None:
            yield _f("NCCL061", "warn", s, "NCCL_NET", "NCCL_NET=Socket forces TCP sockets; wrong on any node with InfiniBand or RoCE", "remove NCCL_NET unless the nodes have no RDMA")


def check_ib_hca(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if inv is None:
        return
    s = ctx.settings.effective.get("NCCL_IB_HCA")
    ports = nic_ports(inv)
    if s is None:
        layers = {p.link for p in active_ports(inv)}
        if len(layers) > 1:
            yield Finding(
                "NCCL015", Severity.WARN, "NCCL_IB_HCA",
                "NCCL_IB_HCA is unset and this node has active InfiniBand and RoCE ports: NCCL uses all of them and "
                "connections between the two kinds fail", {"ports": [f"{p.label}/{p.link}" for p in active_ports(inv)]},
                "set NCCL_IB_HCA to an exact list of one link layer (`fabricscope nccl env` prints it)",
            )
        return
    if uses_expansion(s.value) or not ports and not inv.rdma_devices:
        if not ports:
            yield _f("NCCL072", "info", s, "NCCL_IB_HCA", "NCCL_IB_HCA is set but this node has no RDMA device; NCCL will use TCP sockets", None)
        return
    parsed = parse_list(s.value)
    if not parsed.tokens:
        return
    names = sorted({p.device for p in ports})
    candidates = [(p.device, p.port) for p in ports]
    selected = [p for p in ports if parsed.matches(p.device, p.port)]
    if not parsed.exclude:
        for token in parsed.tokens:
            hits = parsed.matched_by(token, candidates)
            if not hits:
                device_exists = any(n == token.name for n in names) or (not parsed.exact and any(n.startswith(token.name) for n in names))
                if device_exists and token.port is not None:
                    yield _f("NCCL014", "fail", s, "NCCL_IB_HCA", f"{token.raw}: {token.name} has no port {token.port}", "port numbers start at 1 (most NICs have one port per device)", token=token.raw)
                else:
                    yield _f("NCCL010", "fail", s, "NCCL_IB_HCA", f"{token.raw} matches no RDMA device on this node (devices: {_names(names)})", "use the names from `ls /sys/class/infiniband` (`fabricscope nccl env` prints the right list)", token=token.raw, devices=names)
            if not parsed.exact:
                trapped = prefix_trap(token, names)
                if trapped:
                    yield _f("NCCL012", "warn", s, "NCCL_IB_HCA", f"{token.raw} is a prefix: it also selects {_names(trapped)}", f"prefix the list with = for exact names: NCCL_IB_HCA={'^' if parsed.exclude else ''}={','.join(t.raw for t in parsed.tokens)}", token=token.raw, also_matches=trapped)
    if not selected:
        if parsed.exclude:
            yield _f("NCCL010", "fail", s, "NCCL_IB_HCA", f"the exclude list {s.value} leaves no RDMA port for NCCL", "exclude fewer devices", devices=names)
        return
    down = [p for p in selected if not p.active]
    if down:
        everything = len(down) == len(selected)
        down_text = _names([f"{p.label} ({p.state or 'unknown'})" for p in down])
        yield _f(
            "NCCL011", "fail" if everything else "warn", s, "NCCL_IB_HCA",
            f"selects port(s) that are not ACTIVE: {down_text}; NCCL skips them"
            + (", leaving no RDMA port" if everything else ", so this node runs with fewer NICs than its peers"),
            "fix the link (fabricscope doctor) or leave the port out of NCCL_IB_HCA on every node",
            ports=[p.label for p in down],
        )
    layers = sorted({p.link for p in selected if p.active and p.link})
    if len(layers) > 1:
        yield _f("NCCL013", "warn", s, "NCCL_IB_HCA", f"selects both InfiniBand and RoCE ports ({_names([f'{p.label}/{p.link}' for p in selected if p.active])}): connections between the two kinds fail", "list ports of one link layer only")


def check_socket_ifname(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    s = ctx.settings.effective.get("NCCL_SOCKET_IFNAME")
    if inv is None or s is None or uses_expansion(s.value):
        return
    parsed = parse_list(s.value)
    if not parsed.tokens:
        return
    devices = {d.name: d for d in inv.net_devices}
    names = sorted(devices)
    selected = [devices[n] for n in names if parsed.matches(n)]
    if not parsed.exclude:
        for token in parsed.tokens:
            hits = [n for n in names if parsed.token_matches(token, n)]
            if not hits:
                usable = [n for n in names if usable_interface(devices[n]) and not is_virtual_name(n)]
                yield _f("NCCL020", "fail", s, "NCCL_SOCKET_IFNAME", f"{token.raw} matches no interface on this node (usable: {_names(usable) or 'none'}); NCCL fails at init with 'no socket interface found'", "name an interface that exists here; `fabricscope nccl env` picks one that is up with an address", token=token.raw, interfaces=names)
            elif not parsed.exact and len(hits) > 1 and token.name in names:
                others = [n for n in hits if n != token.name]
                yield _f("NCCL022", "warn", s, "NCCL_SOCKET_IFNAME", f"{token.raw} is a prefix: it also selects {_names(others)}", f"use ={token.name} for this interface only", token=token.raw, also_matches=others)
    if not selected:
        if parsed.exclude:
            yield _f("NCCL020", "fail", s, "NCCL_SOCKET_IFNAME", f"the exclude list {s.value} leaves no interface", "exclude fewer interfaces")
        return
    bad = [d for d in selected if not usable_interface(d) and not d.is_loopback]
    good = [d for d in selected if usable_interface(d) and not d.is_loopback]
    if bad:
        why = [f"{d.name} ({'down' if not d.is_up else 'no address'})" for d in bad]
        yield _f("NCCL021", "fail" if not good else "warn", s, "NCCL_SOCKET_IFNAME", f"selects interface(s) NCCL cannot use: {_names(why)}" + ("" if good else "; none left"), "NCCL only uses interfaces that are up and have an address; pick one that does", interfaces=[d.name for d in bad])
    virtual = [d.name for d in selected if d.is_loopback or is_virtual_name(d.name)]
    if virtual and not parsed.exclude:
        yield _f("NCCL023", "warn", s, "NCCL_SOCKET_IFNAME", f"selects {_names(virtual)}: loopback or container/virtual interfaces do not reach other nodes", "name the host's physical interface", interfaces=virtual)


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
            yield _f("NCCL030", "info", s, "NCCL_IB_GID_INDEX", "this node has no RoCE port: InfiniBand ports ignore NCCL_IB_GID_INDEX (they address by LID)", "drop it from InfiniBand job scripts")
        return
    ports = _roce_selected(ctx)
    empty, v1, local, ok = [], [], [], []
    right: dict[str, int | None] = {}
    for p in ports:
        best = best_roce_gid(p.raw)
        right[p.label] = best.index if best else None
        gid = gid_at(p.raw, index)
        if gid is None:
            empty.append(p.label)
        elif gid.roce_version == 1:
            v1.append(f"{p.label} ({gid.gid})")
        elif gid.is_link_local:
            local.append(f"{p.label} ({gid.gid})")
        else:
            ok.append(p.label)
    fix = "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the RoCE v2 IPv4 entry itself) or set the index of that entry"
    if empty:
        yield _f("NCCL031", "fail", s, "NCCL_IB_GID_INDEX", f"GID index {index} is empty on {_names(empty)}: queue pairs fail to connect (ibv_modify_qp: Invalid argument)", fix, ports=empty)
    if v1:
        yield _f("NCCL032", "fail", s, "NCCL_IB_GID_INDEX", f"GID index {index} is a RoCE v1 entry on {_names(v1)}: RoCE v1 is not routable and does not match RoCE v2 peers", fix, ports=v1)
    if local:
        yield _f("NCCL033", "fail", s, "NCCL_IB_GID_INDEX", f"GID index {index} is a link-local fe80:: entry on {_names(local)}: it does not cross an IP router", fix, ports=local)
    distinct = sorted({v for v in right.values() if v is not None})
    if len(distinct) > 1:
        detail = ", ".join(f"{k}={v}" for k, v in right.items())
        yield _f("NCCL034", "fail", s, "NCCL_IB_GID_INDEX", f"the RoCE v2 IPv4 entry is at different indexes on different NICs ({detail}): no single NCCL_IB_GID_INDEX is right for all", "unset NCCL_IB_GID_INDEX and let NCCL (>= 2.21) choose per NIC", right_index=right)
    if not empty and not v1 and not local and len(distinct) <= 1:
        version = ctx.nccl_version
        if version is None or version >= AUTO_GID_VERSION:
            when = "" if version else " (assuming NCCL >= 2.21; pass --nccl-version if older)"
            yield _f("NCCL035", "info", s, "NCCL_IB_GID_INDEX", f"GID index {index} is the RoCE v2 IPv4 entry on every selected NIC, so it works; NCCL 2.21+ chooses it itself and copes when an extra address shifts the table{when}", "remove NCCL_IB_GID_INDEX", right_index=distinct[0] if distinct else None)


def _tc_decode(value: int) -> tuple[int, int]:
    return value >> 2, value & 0x3


_ECN_NAMES = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}


def check_traffic_class(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if inv is None:
        return
    s = ctx.settings.effective.get("NCCL_IB_TC")
    all_ports = nic_ports(inv)
    has_roce = any(p.link == "RoCE" for p in all_ports)
    if s is not None and not has_roce:
        if all_ports:
            yield _f("NCCL040", "info", s, "NCCL_IB_TC", "this node has no RoCE port: NCCL_IB_TC only sets the IP traffic class of RoCE packets and is ignored on InfiniBand (use NCCL_IB_SL there)", "drop it from InfiniBand job scripts")
        return
    if not has_roce:
        return
    ports = _roce_selected(ctx)
    netdevs = sorted({p.netdev for p in ports if p.netdev})
    qos = {n: inv.qos.get(n) for n in netdevs}
    lossless = {n: (q.pfc_priorities if q is not None and q.pfc_enabled is not None else None) for n, q in qos.items()}
    any_pfc = any(v for v in lossless.values())
    if s is None:
        if any_pfc:
            prios = sorted({p for v in lossless.values() if v for p in v})
            yield Finding(
                "NCCL045", Severity.WARN, "NCCL_IB_TC",
                f"NCCL_IB_TC is unset: RoCE traffic carries DSCP 0 (priority 0) while PFC protects priority {_names([str(p) for p in prios])} on this node, so RDMA runs lossy unless the NIC's default traffic class is set by the admin",
                {"pfc_priorities": prios},
                "set NCCL_IB_TC to DSCP<<2|ECN for the lossless priority (`fabricscope nccl env` computes it)",
            )
        return
    try:
        tc = int(s.value.strip(), 0)
    except ValueError:
        return
    if not 0 <= tc <= 255:
        return
    dscp, ecn = _tc_decode(tc)
    no_pfc, pcp, ecn_off, ce, fine = [], [], [], [], []
    for netdev in netdevs:
        q = qos.get(netdev)
        dev = inv.netdev(netdev)
        if q is None:
            continue
        if q.trust == "pcp":
            pcp.append(netdev)
            continue
        prio = q.priority_of_dscp(dscp)
        pfc = lossless.get(netdev)
        if pfc is not None and prio is not None and pfc and prio not in pfc:
            no_pfc.append(f"priority {prio} (PFC on {','.join(map(str, pfc))}): {netdev}")
        elif pfc is not None and not pfc and any_pfc:
            no_pfc.append(f"no PFC at all (other RoCE netdevs have it): {netdev}")
        else:
            fine.append(f"{netdev}: priority {prio}")
        if dev is not None and prio is not None:
            np_on = dev.ecn_np_enabled.get(prio)
            rp_on = dev.ecn_rp_enabled.get(prio)
            if ecn in (1, 2) and (np_on is False or rp_on is False):
                ecn_off.append(f"{netdev} priority {prio}")
        if ecn == 3:
            ce.append(netdev)
    decoded = f"NCCL_IB_TC={tc} = DSCP {dscp} << 2 | {_ECN_NAMES[ecn]} ({ecn})"
    if no_pfc:
        groups: dict[str, list[str]] = {}
        for item in no_pfc:
            key, _, netdev = item.rpartition(": ")
            groups.setdefault(key, []).append(netdev)
        where = "; ".join(f"{key} on {_names(devs, 3)}" for key, devs in groups.items())
        yield _f("NCCL041", "fail", s, "NCCL_IB_TC", f"{decoded}, which lands on a priority without PFC: {where}: RDMA traffic runs lossy, drops turn into retransmits and status-12 timeouts", "pick the DSCP that maps to the PFC priority (`fabricscope nccl env` computes it), or fix PFC on the listed netdevs", netdevs=no_pfc)
    if pcp:
        yield _f("NCCL042", "warn", s, "NCCL_IB_TC", f"{_names(pcp)} trust pcp: the priority comes from the VLAN PCP, so the DSCP in NCCL_IB_TC does not choose it", "set trust dscp on every RoCE netdev (mlnx_qos -i <if> --trust dscp) or use NCCL_IB_SL for the priority", netdevs=pcp)
    if ce:
        yield _f("NCCL043", "fail", s, "NCCL_IB_TC", f"{decoded}: the ECN field is CE (congestion experienced) on every packet, so receivers see constant congestion and throttle the senders", f"use NCCL_IB_TC={dscp << 2 | 2} (ECT(0))")
    if ecn_off:
        yield _f("NCCL043", "warn", s, "NCCL_IB_TC", f"{decoded} marks packets ECN-capable but ECN (roce_np/roce_rp) is off for {_names(ecn_off, 4)}: congestion marks go unanswered", "enable ECN for that priority (/sys/class/net/<if>/ecn/roce_{np,rp}/enable/<prio>) or fix the node's QoS", netdevs=ecn_off)
    if not any_pfc and netdevs and any(q is not None for q in qos.values()):
        yield _f("NCCL044", "info", s, "NCCL_IB_TC", f"{decoded}; no RoCE netdev here has PFC on any priority, so RoCE runs lossy and relies on ECN/DCQCN", None)
        return
    if not (no_pfc or pcp or ce or ecn_off) and fine:
        prio_text = _names(sorted({f.split(': ')[1] for f in fine}))
        yield _f("NCCL044", "pass", s, "NCCL_IB_TC", f"{decoded} -> {prio_text} with PFC on every selected RoCE netdev", None)


def check_gdr_level(ctx: LintContext) -> Iterator[Finding]:
    s = ctx.settings.effective.get("NCCL_NET_GDR_LEVEL")
    if s is None:
        return
    level = parse_level(s.value)
    if level is None:
        return
    text = s.value.strip()
    if text.lstrip("-").isdigit():
        meaning = {"LOC": "never use GPUDirect RDMA", "PIX": "GPU and NIC on the same PCIe switch", "PXB": "through PCIe switches, not the CPU: NCCL's default", "PHB": "also through the CPU's host bridge", "SYS": "always, even across CPU sockets"}
        yield _f("NCCL050", "info", s, "NCCL_NET_GDR_LEVEL", f"NCCL_NET_GDR_LEVEL={text} is the legacy number for {level} ({meaning.get(level, level)}); it is a maximum GPU-NIC distance, not an on/off switch" + (" - 2 is the default, so this line changes nothing" if level == "PXB" else ""), f"write the name (NCCL_NET_GDR_LEVEL={level}) or drop it if {level} is the default", level=level)
    inv = ctx.inventory
    if level == "LOC":
        yield _f("NCCL051", "warn", s, "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_LEVEL=LOC turns GPUDirect RDMA off: every network transfer is staged through host memory", "remove it unless you are isolating a GPUDirect/ACS problem")
        return
    if inv is None or not inv.affinity or not has_working_rdma(inv):
        return
    rank = LEVEL_RANK.get(level, 2)
    excluded = [f"GPU{a.gpu_index}->{a.nic} ({a.distance})" for a in inv.affinity if a.distance and LEVEL_RANK.get(a.distance, 4) > rank and LEVEL_RANK.get(a.distance, 4) <= LEVEL_RANK["PXB"]]
    if excluded:
        yield _f("NCCL051", "warn", s, "NCCL_NET_GDR_LEVEL", f"NCCL_NET_GDR_LEVEL={level} is closer than the measured GPU-NIC distance of {_names(excluded, 4)}: GPUDirect RDMA is off for them although NCCL's default would use it", "remove NCCL_NET_GDR_LEVEL", gpus=excluded)
    far = [f"GPU{a.gpu_index}->{a.nic} ({a.distance})" for a in inv.affinity if a.distance and LEVEL_RANK.get(a.distance, 4) == 4 and rank >= 4]
    if far:
        yield _f("NCCL051", "warn", s, "NCCL_NET_GDR_LEVEL", f"NCCL_NET_GDR_LEVEL={level} forces GPUDirect RDMA across CPU sockets for {_names(far, 4)}: usually slower than staging through host memory", "use PHB at most; measure with nccl-tests before keeping SYS", gpus=far)
    if gdr_module_state(inv) is False:
        yield _f("NCCL052", "info", s, "NCCL_NET_GDR_LEVEL", "no peer-memory module (nvidia_peermem) is loaded: GPUDirect RDMA works only through DMA-BUF (NCCL >= 2.19, kernel >= 5.12, open GPU driver)", "modprobe nvidia-peermem if DMA-BUF is not available")


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
    if all(p.link == "IB" for p in ports) and qps > 1:
        ar = ctx.settings.get("NCCL_IB_ADAPTIVE_ROUTING")
        if ar is None or ar.strip() != "0":
            yield _f("NCCL071", "info", s, "NCCL_IB_QPS_PER_CONNECTION", f"{qps} queue pairs per connection on InfiniBand, where NCCL enables adaptive routing by default: the switches already spread the load, so the extra QPs mostly cost memory and connection time at scale", "leave it at 1 on InfiniBand with adaptive routing (keep it only if measured to help)")
    elif all(p.link == "RoCE" for p in ports) and qps > 1:
        yield _f("NCCL071", "pass", s, "NCCL_IB_QPS_PER_CONNECTION", f"{qps} queue pairs per connection on RoCE: more UDP source ports, so ECMP spreads each connection over more paths in a multi-tier fabric", None)


def check_rdma_on_tcp_node(ctx: LintContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if inv is None or inv.rdma_devices:
        return
    for name in ("NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_IB_TIMEOUT", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_NET_GDR_LEVEL"):
        s = ctx.settings.effective.get(name)
        if s is not None:
            yield _f("NCCL072", "info", s, name, f"{name} only affects RDMA (InfiniBand/RoCE) transfers and this node has no RDMA device: it is ignored here", None)


RULES = (
    check_names_and_values,
    check_shadowed,
    check_debug_settings,
    check_timeout,
    check_forced_sockets,
    check_ib_hca,
    check_socket_ifname,
    check_gid_index,
    check_traffic_class,
    check_gdr_level,
    check_qps,
    check_rdma_on_tcp_node,
)


def lint(settings: SettingSet, inventory: Inventory | None = None, nccl_version: str | None = None, production: bool = True) -> list[Finding]:
    ctx = LintContext(settings=settings, inventory=inventory, nccl_version=parse_version(nccl_version), production=production)
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(ctx))
    return sorted(findings, key=_order)


def _order(f: Finding) -> tuple:
    source = f.evidence.get("source", "")
    return (str(source), -f.severity.rank, f.id, f.subject)


def lint_log_env(agg) -> list[Finding]:
    """Settings a log shows NCCL picked up ("X set by environment to Y"), checked without a node."""
    from fabricscope.nccl.settings import Setting as _Setting
    from fabricscope.nccl.settings import merge

    seen: dict[tuple[str, str], set[str]] = {}
    for proc in agg.processes.values():
        for name, value in proc.env.items():
            seen.setdefault((name, value), set()).add(proc.host or "?")
    findings: list[Finding] = []
    for (name, value), hosts in sorted(seen.items()):
        where = f"log ({_names(sorted(hosts), 3)})"
        st = merge([[_Setting(name, value, "environ", where)]])
        for f in lint(st, None):
            if f.id in ("NCCL001", "NCCL004", "NCCL005"):
                continue
            evidence = dict(f.evidence)
            evidence["code"] = f.id
            findings.append(Finding("nccl_log.env", f.severity, f.subject, f"{f.id}: {f.message}", evidence, f.fix))
    return sorted(findings, key=sort_key)
