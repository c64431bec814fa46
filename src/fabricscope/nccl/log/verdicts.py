"""Verdicts on what an NCCL job used: network module, transports, devices, GPUDirect RDMA, versions, GIDs.

Each function takes a :class:`~fabricscope.nccl.log.aggregate.LogAggregator` and returns findings
(``nccl_log.<name>``); :func:`fabricscope.nccl.log.report.build_report` gathers them. Severities as
:class:`fabricscope.findings.Severity` is used here: fail = the job is broken or runs on the wrong
transport, warn = slower than it should be or a likely cause, info = facts, pass = what the log
shows is right.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fabricscope.findings import Finding, Severity
from fabricscope.nccl.log.aggregate import LogAggregator, ProcessState, RankState

MAX_LISTED = 8  # ranks/hosts named in one message; evidence carries the count


def names(items: Iterable[str], limit: int = MAX_LISTED) -> str:
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def rank_label(key: tuple[Any, ...], ranks: dict[tuple[Any, ...], RankState]) -> str:
    state = ranks.get(key)
    if state is not None:
        return state.label
    host, pid, dev = key
    if host is None and pid is None:
        return "lines without NCCL's header"  # pasted text: NCCL's words, no host:pid:tid
    return f"{host or '?'}:{pid} dev {dev}"


def rank_sort(state: RankState) -> tuple[Any, ...]:
    return (
        state.rank if state.rank is not None else 1 << 30,
        state.host or "",
        state.pid or 0,
        state.cuda_dev or 0,
    )


def process_of(agg: LogAggregator, state: RankState) -> ProcessState | None:
    return agg.processes.get((state.host, state.pid))


def network_of(proc: ProcessState | None, state: RankState) -> str | None:
    """The net module a rank used: from "Using network X", else from its NET/<X> channel lines."""
    if proc is not None and proc.network:
        return proc.network
    for label in state.transports:
        if label.startswith("NET/"):
            return label.split("/")[1]
    return None


def uses_socket(proc: ProcessState | None, state: RankState) -> bool:
    if state.tclasses.get("net_socket"):
        return True
    return bool(
        proc and proc.network and proc.network.lower() == "socket" and not state.tclasses.get("net_rdma")
    )


def rdma_evidence(agg: LogAggregator) -> list[str]:
    """Why we believe the nodes have RDMA (empty when the log gives no reason to)."""
    reasons = []
    listed = sorted({n for p in agg.processes.values() for n, _port, _ll in p.net_devices.values()})
    if listed:
        reasons.append(f"NCCL listed RDMA devices {names(listed, 6)}")
    if any(s.tclasses.get("net_rdma") for s in agg.ranks.values()):
        reasons.append("other ranks use RDMA channels")
    ipoib = sorted(
        {
            n
            for p in agg.processes.values()
            for n, _a in p.socket_interfaces + p.bootstrap
            if n.startswith("ib")
        }
    )
    if ipoib:
        reasons.append(
            f"its socket interfaces are IPoIB ({names(ipoib, 4)}), so InfiniBand hardware is present"
        )
    if any(p.env.get("NCCL_IB_DISABLE", "0").strip() not in ("0", "") for p in agg.processes.values()):
        reasons.append("NCCL_IB_DISABLE is set, which only matters where RDMA devices exist")
    if agg.expect == "rdma":
        reasons.append("--expect rdma was given")
    return reasons


def socket_cause(procs: list[ProcessState]) -> tuple[str, str]:
    for proc in procs:
        if proc.env.get("NCCL_IB_DISABLE", "0").strip() not in ("0", ""):
            return (
                f"NCCL_IB_DISABLE={proc.env['NCCL_IB_DISABLE']} is set",
                "unset NCCL_IB_DISABLE (it forces TCP sockets); `fabricscope nccl env` prints the settings to use",
            )
        net = proc.env.get("NCCL_NET", "")
        if net.lower() == "socket":
            return (
                "NCCL_NET=Socket is set",
                "unset NCCL_NET (RoCE and InfiniBand both use NCCL's IB module, not Socket)",
            )
    if any(p.no_verbs for p in procs):
        return (
            "NCCL could not load libibverbs (rdma-core is missing, usually from the container image)",
            "install rdma-core (libibverbs1) and the NIC's provider (libmlx5-1) where the job runs, and expose "
            "/dev/infiniband to the container",
        )
    if any("IB" in p.no_device for p in procs):
        return (
            "NCCL found no usable RDMA device (NET/IB : No device found)",
            "make the RDMA devices visible (containers: /dev/infiniband and IPC_LOCK; rdma-core/libibverbs installed), "
            "check the ports are ACTIVE (fabricscope doctor) and that NCCL_IB_HCA matches them",
        )
    return (
        "the log does not say why",
        "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV to see why the IB module was not used",
    )


def network_findings(agg: LogAggregator) -> list[Finding]:
    """Which network module the ranks used (sockets where RDMA was there?), missing devices, disagreement."""
    states = sorted(agg.ranks.values(), key=rank_sort)
    socket_ranks = [s for s in states if uses_socket(process_of(agg, s), s)]
    rdma_ranks = [s for s in states if s.tclasses.get("net_rdma")]
    findings = _transport_choice(agg, socket_ranks, rdma_ranks)
    findings += _no_device(agg, rdma_ranks)
    findings += _no_verbs(agg)
    findings += _loopback(agg)
    findings += _network_mismatch(agg, states)
    return findings


def _hosts(agg: LogAggregator) -> set[str]:
    return {p.host or "?" for p in agg.processes.values()}


def _multi_node(agg: LogAggregator) -> bool:
    return len(_hosts(agg)) > 1 or any((s.nnodes or 0) > 1 for s in agg.ranks.values())


def _socket_processes(agg: LogAggregator, socket_ranks: list[RankState]) -> list[ProcessState]:
    """Processes whose network traffic goes over NET/Socket: by their channels, or -- in a job over
    several hosts -- by "Using network Socket", or because no process listed an RDMA device and some
    said "NET/IB : No device found" (single-node jobs print these too, and never use the network)."""
    procs = {id(p): p for p in (process_of(agg, s) for s in socket_ranks) if p is not None}
    if _multi_node(agg):
        no_rdma = any("IB" in p.no_device for p in agg.processes.values()) and not any(
            p.net_devices for p in agg.processes.values()
        )
        for proc in agg.processes.values():
            network = (proc.network or "").lower()
            idle = no_rdma and network in ("", "socket") and bool(proc.socket_interfaces or proc.no_device)
            if network == "socket" or idle:
                procs.setdefault(id(proc), proc)
    return sorted(procs.values(), key=lambda p: (p.host or "", p.pid or 0))


def _transport_choice(
    agg: LogAggregator, socket_ranks: list[RankState], rdma_ranks: list[RankState]
) -> list[Finding]:
    procs = _socket_processes(agg, socket_ranks)
    if not procs:
        if not rdma_ranks:
            return []
        nets = sorted({network_of(process_of(agg, s), s) or "?" for s in rdma_ranks})
        message = f"{len(rdma_ranks)} ranks use RDMA ({', '.join(nets)}) for their network channels; none use TCP sockets"
        evidence = {"networks": nets, "ranks": len(rdma_ranks)}
        return [Finding("nccl_log.network", Severity.PASS, "transport", message, evidence)]
    hosts = sorted({p.host or "?" for p in procs})
    interfaces = sorted({n for p in procs for n, _a in p.socket_interfaces})
    over = f"NET/Socket over {names(interfaces)}" if interfaces else "NET/Socket"
    who = f"{len(procs)} process(es) on {len(hosts)} host(s)"
    cause, fix = socket_cause(procs)
    ev: dict[Any, Any] = {
        "processes": len(procs),
        "hosts": hosts[:MAX_LISTED],
        "ranks": len(socket_ranks),
        "network_ranks": len({id(s) for s in socket_ranks + rdma_ranks}),
        "interfaces": interfaces,
        "cause": cause,
    }
    evidence = rdma_evidence(agg)
    if evidence and agg.expect != "socket":
        ev["rdma_evidence"] = evidence
        ranks = f" Ranks: {names([s.label for s in socket_ranks])}" if socket_ranks else ""
        message = f"{who} use {over} although the nodes have RDMA ({evidence[0]}); cause: {cause}.{ranks}"
        return [Finding("nccl_log.socket_fallback", Severity.FAIL, "transport", message, ev, fix)]
    if any(p.no_verbs for p in procs):  # rdma-core missing: the node may well have RDMA
        message = (
            f"{who} could not load libibverbs and fell back to {over}: rdma-core is missing (usually from the "
            "container image), so NCCL could not even look for RDMA devices"
        )
        return [Finding("nccl_log.socket_transport", Severity.WARN, "transport", message, ev, fix)]
    if any("IB" in p.no_device for p in procs):
        message = f"{who} found no RDMA device and fell back to {over}"
    else:
        message = f"{who} use {over}; no RDMA device appears in the log"
    message += " (pass --expect rdma if the nodes should use RDMA)"
    return [Finding("nccl_log.socket_transport", Severity.INFO, "transport", message, ev, None)]


def _no_verbs(agg: LogAggregator) -> list[Finding]:
    """``Failed to open libibverbs.so[.1]``: the cause, not a TCP-only node (rdma-core missing)."""
    procs = [p for p in agg.processes.values() if p.no_verbs]
    if not procs:
        return []
    hosts = sorted({p.host or "?" for p in procs})
    return [
        Finding(
            "nccl_log.no_libibverbs",
            Severity.FAIL if agg.expect == "rdma" else Severity.WARN,
            "NET/IB",
            f"{len(procs)} process(es) on {len(hosts)} host(s) ({names(hosts)}) could not load libibverbs: rdma-core "
            "is missing where the job runs (usually the container image), so NCCL could not look for RDMA devices "
            "at all; this says nothing about the node's hardware",
            {"processes": len(procs), "hosts": hosts[:MAX_LISTED]},
            "first see whether the node has RDMA devices at all (`fabricscope doctor`, /sys/class/infiniband): if not, "
            "there is nothing to install and NCCL's sockets are all it has; if it does, install rdma-core (libibverbs1) "
            "and the NIC's provider (libmlx5-1) in the image or on the node and expose /dev/infiniband to the container",
        )
    ]


def _loopback(agg: LogAggregator) -> list[Finding]:
    """Sockets on lo in a job over several hosts: 127.0.0.1 on one host is not the other hosts'."""
    if not _multi_node(agg):
        return []
    found = sorted(
        {
            f"{p.host}: {name} {address}"
            for p in agg.processes.values()
            for name, address in p.socket_interfaces + p.bootstrap
            if name == "lo" or address.startswith("127.") or address in ("::1", "[::1]")
        }
    )
    if not found:
        return []
    return [
        Finding(
            "nccl_log.socket_loopback",
            Severity.FAIL,
            "transport",
            f"NCCL uses the loopback interface for its sockets ({names(found, 4)}) in a job over "
            f"{len(_hosts(agg))} hosts: other hosts cannot reach a loopback address, so connections between "
            "nodes fail or hang",
            {"interfaces": found[:MAX_LISTED], "hosts": len(_hosts(agg))},
            "set NCCL_SOCKET_IFNAME to the interface that carries the hosts' own addresses (NCCL's default, "
            "^lo,docker, never picks lo); lo is for single-node runs only",
        )
    ]


def _no_device(agg: LogAggregator, rdma_ranks: list[RankState]) -> list[Finding]:
    """``NET/IB : No device found.``"""
    findings: list[Finding] = []
    no_dev = [p for p in agg.processes.values() if "IB" in p.no_device]
    if no_dev:
        hosts = sorted({p.host or "?" for p in no_dev})
        expected = (
            agg.expect == "rdma" or bool(rdma_ranks) or any(p.net_devices for p in agg.processes.values())
        )
        findings.append(
            Finding(
                "nccl_log.no_rdma_device",
                Severity.FAIL if expected else Severity.INFO,
                "NET/IB",
                f"NCCL found no RDMA device on {len(no_dev)} process(es) (hosts {names(hosts)})"
                + (
                    "" if expected else "; expected on TCP-only nodes (pass --expect rdma if RDMA was wanted)"
                ),
                {"processes": len(no_dev), "hosts": hosts},
                "check /dev/infiniband inside the container, rdma-core/libibverbs, port state (fabricscope doctor) "
                "and NCCL_IB_HCA"
                if expected
                else None,
            )
        )
    return findings


def _network_mismatch(agg: LogAggregator, states: list[RankState]) -> list[Finding]:
    """Networks disagreeing between processes (IB here, a plugin there)."""
    findings: list[Finding] = []
    nets_by_proc: dict[str, list[str]] = {}
    for s in states:
        net = network_of(process_of(agg, s), s)
        if net:
            nets_by_proc.setdefault(net, []).append(s.label)
    if len(nets_by_proc) > 1:
        parts = [f"{net} on {len(labels)} ranks" for net, labels in sorted(nets_by_proc.items())]
        findings.append(
            Finding(
                "nccl_log.network_mismatch",
                Severity.WARN,
                "transport",
                f"ranks disagree on the network module: {'; '.join(parts)}",
                {net: labels[:MAX_LISTED] for net, labels in nets_by_proc.items()},
                "use the same NCCL build, plugin (NCCL_NET_PLUGIN) and NCCL_NET/NCCL_IB_* settings on every node",
            )
        )
    return findings


def device_findings(agg: LogAggregator) -> list[Finding]:
    findings: list[Finding] = []
    mixed: dict[str, list[str]] = {}
    for proc in agg.processes.values():
        layers = {ll for _n, _p, ll in proc.net_devices.values()}
        if len(layers) > 1:
            mixed.setdefault(proc.host or "?", []).extend(
                f"{n}:{p}/{ll}" for n, p, ll in proc.net_devices.values()
            )
    for host, devices in sorted(mixed.items()):
        devices = sorted(set(devices))
        ib = [d.rsplit("/", 1)[0] for d in devices if d.endswith("/IB")]
        roce = [d.rsplit("/", 1)[0] for d in devices if d.endswith("/RoCE")]
        keep = ib if len(ib) >= len(roce) else roce
        findings.append(
            Finding(
                "nccl_log.mixed_link_layers",
                Severity.WARN,
                host,
                f"NCCL uses devices of both link layers ({len(ib)} InfiniBand, {len(roce)} RoCE): a connection "
                "between an InfiniBand and a RoCE port fails ('Attempted to connect incompatible devices') and "
                "rings may cross the slower fabric",
                {"infiniband": ib, "roce": roce},
                "restrict NCCL to one link layer with an exact list: NCCL_IB_HCA==" + ",".join(keep),
            )
        )
    return findings


def gdr_findings(agg: LogAggregator) -> list[Finding]:
    findings: list[Finding] = []
    net_ranks = [s for s in agg.ranks.values() if s.tclasses.get("net_rdma")]
    with_gdr = [s for s in net_ranks if any(lbl.endswith("/GDRDMA") for lbl in s.transports)]
    with_ids = {id(s) for s in with_gdr}  # identity: comparing RankStates field by field is quadratic
    without = [s for s in net_ranks if id(s) not in with_ids]
    disabled = {}
    for proc in agg.processes.values():
        for hca, (enabled, detail, net) in proc.gdr_hca.items():
            # NCCL's socket transport takes host memory only (ptrSupport = NCCL_PTR_HOST, transport/
            # net_socket.cc:170 at v2.30.7-1): GPUDirect RDMA is never possible there, nothing to load.
            if not enabled and "socket" not in (net or "").lower():
                disabled.setdefault(f"{proc.host}:{hca}", detail)
    no_module = any(d and "no module" in d for d in disabled.values())
    fix = (
        "use DMA-BUF (NCCL >= 2.13 with the open GPU kernel module and kernel >= 5.12: nothing to load), or else "
        "load nvidia-peermem (`modprobe nvidia-peermem`; it needs MLNX_OFED/DOCA's ib_core); `fabricscope doctor` "
        "on the node says which applies, and checks the GPU-NIC PCIe distance and ACS; NCCL_NET_GDR_LEVEL must not be LOC"
    )
    if without and with_gdr:
        findings.append(
            Finding(
                "nccl_log.gdr_partial",
                Severity.WARN,
                "GPUDirect RDMA",
                f"GPUDirect RDMA is off on {len(without)} of {len(net_ranks)} ranks that use RDMA: their transfers are "
                f"staged through host memory. Ranks without it: {names([s.label for s in sorted(without, key=rank_sort)])}",
                {"without": len(without), "with": len(with_gdr)},
                fix,
            )
        )
    elif without:
        findings.append(
            Finding(
                "nccl_log.gdr_off",
                Severity.WARN,
                "GPUDirect RDMA",
                f"no rank uses GPUDirect RDMA ({len(without)} ranks with RDMA channels, none marked /GDRDMA): every "
                "network transfer is staged through host memory, costing bandwidth and CPU",
                {"ranks": len(without)},
                fix,
            )
        )
    elif with_gdr:
        findings.append(
            Finding(
                "nccl_log.gdr",
                Severity.PASS,
                "GPUDirect RDMA",
                f"GPUDirect RDMA used on all {len(with_gdr)} ranks with RDMA channels",
                {"ranks": len(with_gdr)},
            )
        )
    if disabled:
        findings.append(
            Finding(
                "nccl_log.gdr_disabled_hca",
                Severity.WARN,
                "GPUDirect RDMA",
                f"NCCL reports GPUDirect RDMA disabled for {names(sorted(disabled))}"
                + (" (no peer-memory module loaded)" if no_module else ""),
                {"hcas": sorted(disabled)[:32]},
                fix,
            )
        )
    return findings


def transport_findings(agg: LogAggregator) -> list[Finding]:
    """The mix of transports, and SHM where P2P was expected."""
    totals: dict[str, int] = {}
    for s in agg.ranks.values():
        for label, n in s.transports.items():
            totals[label] = totals.get(label, 0) + n
    if not totals:
        return []
    hosts = {s.host for s in agg.ranks.values()}
    mix = ", ".join(f"{label} ({n})" for label, n in sorted(totals.items(), key=lambda kv: -kv[1]))
    findings = [
        Finding(
            "nccl_log.transports",
            Severity.INFO,
            "transport",
            f"{len(agg.ranks)} ranks on {len(hosts)} host(s); channel lines by transport: {mix}",
            {"channels": dict(sorted(totals.items()))},
        )
    ]
    shm = [s for s in agg.ranks.values() if s.tclasses.get("shm")]
    if shm and any(s.tclasses.get("p2p") for s in agg.ranks.values()):
        findings.append(
            Finding(
                "nccl_log.shm_instead_of_p2p",
                Severity.INFO,
                "transport",
                f"{len(shm)} rank(s) reach some same-node GPUs through host shared memory (SHM) while others use P2P: "
                "NCCL does this when P2P is not allowed between a pair (GPUs under different CPUs or PCIe root "
                "complexes, NCCL_P2P_LEVEL, NCCL_P2P_DISABLE); SHM costs bandwidth compared with NVLink/PCIe P2P",
                {"ranks": len(shm)},
                "check the GPU topology (nvidia-smi topo -m); NVLink-connected GPUs should never need SHM",
            )
        )
    return findings


def version_findings(agg: LogAggregator) -> list[Finding]:
    by_version: dict[str, list[str]] = {}
    for proc in agg.processes.values():
        if proc.version:
            by_version.setdefault(proc.version, []).append(f"{proc.host}:{proc.pid}")
    for version in agg.versions:
        by_version.setdefault(version, [])
    if len(by_version) > 1:
        parts = [f"{v} ({len(p)} processes)" for v, p in sorted(by_version.items())]
        return [
            Finding(
                "nccl_log.version_mismatch",
                Severity.FAIL,
                "NCCL version",
                f"processes run different NCCL versions: {', '.join(parts)}; mixed versions can hang or fail at init",
                {v: p[:MAX_LISTED] for v, p in by_version.items()},
                "use one NCCL build everywhere (same container image; check LD_LIBRARY_PATH and the PyTorch wheel)",
            )
        ]
    if by_version:
        version = next(iter(by_version))
        return [
            Finding(
                "nccl_log.version",
                Severity.PASS,
                "NCCL version",
                f"all processes run NCCL {version}",
                {"version": version},
            )
        ]
    return []


def gid_findings(agg: LogAggregator) -> list[Finding]:
    findings = []
    for proc in agg.processes.values():
        for index, gid in sorted(proc.qp_gids.items()):
            if gid is None or not gid.lower().startswith("fe80"):
                continue
            forced = "NCCL_IB_GID_INDEX" in proc.env
            findings.append(
                Finding(
                    "nccl_log.gid_link_local",
                    Severity.FAIL if forced else Severity.WARN,
                    f"{proc.host}:{proc.pid}",
                    f"RoCE queue pairs use GID index {index} = {gid}, a link-local (fe80::) entry"
                    + (f" forced by NCCL_IB_GID_INDEX={proc.env['NCCL_IB_GID_INDEX']}" if forced else "")
                    + ": it does not cross an IP router, so connections between subnets fail (ibv_modify_qp errors, "
                    "status 12 timeouts)",
                    {"gid_index": index, "gid": gid, "forced": forced},
                    "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 selects the RoCE v2 IPv4 entry itself) or set it to the "
                    "RoCE v2 IPv4 entry (`fabricscope nccl env` prints it)",
                )
            )
    return findings
