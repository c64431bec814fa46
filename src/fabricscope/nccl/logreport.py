"""Verdicts on an aggregated NCCL log: per-rank facts and doctor-shaped findings.

Kept apart from the parser so the exporter can use :mod:`fabricscope.nccl.log` without any of this.
Finding ids are ``nccl_log.<name>``; their severities follow ARCHITECTURE.md (fail = the job is
broken or runs on the wrong transport, warn = slower than it should be or a likely cause, info = facts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fabricscope.findings import Finding, Severity, sort_key, summarize
from fabricscope.nccl.explain import (
    WARN_EXPLAIN,
    explain_completion,
    explain_verbs,
    result_name,
    wc_status_name,
)
from fabricscope.nccl.log import LogAggregator, ProcessState, RankState, WarnGroup

SCHEMA = "fabricscope.nccl_log/v1"
MAX_LISTED = 8  # ranks/hosts named in one message; evidence carries the count


@dataclass
class LogReport:
    files: list[dict[str, Any]]
    ranks: list[dict[str, Any]]
    findings: list[Finding]
    summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "files": self.files,
            "summary": self.summary,
            "ranks": self.ranks,
            "findings": [f.to_dict() for f in self.findings],
            "counts": summarize(self.findings),
        }

    @property
    def nccl_lines(self) -> int:
        return sum(f["nccl_lines"] for f in self.files)


def _names(items: Iterable[str], limit: int = MAX_LISTED) -> str:
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _rank_label(key: tuple, ranks: dict[tuple, RankState]) -> str:
    state = ranks.get(key)
    if state is not None:
        return state.label
    host, pid, dev = key
    return f"{host or '?'}:{pid} dev {dev}"


def _rank_sort(state: RankState) -> tuple:
    return (state.rank if state.rank is not None else 1 << 30, state.host or "", state.pid or 0, state.cuda_dev or 0)


def _process_of(agg: LogAggregator, state: RankState) -> ProcessState | None:
    return agg.processes.get((state.host, state.pid))


def _network_of(proc: ProcessState | None, state: RankState) -> str | None:
    """The net module a rank used: from "Using network X", else from its NET/<X> channel lines."""
    if proc is not None and proc.network:
        return proc.network
    for label in state.transports:
        if label.startswith("NET/"):
            return label.split("/")[1]
    return None


def _uses_socket(proc: ProcessState | None, state: RankState) -> bool:
    if state.tclasses.get("net_socket"):
        return True
    return bool(proc and proc.network and proc.network.lower() == "socket" and not state.tclasses.get("net_rdma"))


def rank_dicts(agg: LogAggregator) -> list[dict[str, Any]]:
    out = []
    for state in sorted(agg.ranks.values(), key=_rank_sort):
        proc = _process_of(agg, state)
        net_channels = sum(n for label, n in state.transports.items() if label.startswith("NET/") and "Socket" not in label)
        gdr_channels = sum(n for label, n in state.transports.items() if label.endswith("/GDRDMA"))
        if state.init_completed:
            init = "complete"
        elif state.init_started:
            init = "started"
        else:
            init = None
        out.append(
            {
                "host": state.host,
                "pid": state.pid,
                "cuda_dev": state.cuda_dev,
                "rank": state.rank,
                "nranks": state.nranks,
                "nnodes": state.nnodes,
                "nccl_version": proc.version if proc else None,
                "network": _network_of(proc, state),
                "net_devices": [
                    {"index": i, "name": n, "port": p, "link_layer": ll}
                    for i, (n, p, ll) in sorted((proc.net_devices if proc else {}).items())
                ],
                "socket_interfaces": [{"name": n, "address": a} for n, a in (proc.socket_interfaces if proc else [])],
                "gdr_hca": {name: enabled for name, (enabled, _d) in (proc.gdr_hca if proc else {}).items()},
                "gpudirect_rdma": (gdr_channels > 0) if net_channels else None,
                "transports": dict(sorted(state.transports.items())),
                "net_devices_used": sorted(state.net_devs),
                "init": init,
                "warnings": dict(state.warns),
                "error": result_name(state.last_result) if state.last_result else None,
                "env": dict(proc.env) if proc else {},
            }
        )
    return out


# ----- verdicts -------------------------------------------------------------------------------
def _rdma_evidence(agg: LogAggregator) -> list[str]:
    """Why we believe the nodes have RDMA (empty when the log gives no reason to)."""
    reasons = []
    listed = sorted({n for p in agg.processes.values() for n, _port, _ll in p.net_devices.values()})
    if listed:
        reasons.append(f"NCCL listed RDMA devices {_names(listed, 6)}")
    if any(s.tclasses.get("net_rdma") for s in agg.ranks.values()):
        reasons.append("other ranks use RDMA channels")
    ipoib = sorted({n for p in agg.processes.values() for n, _a in p.socket_interfaces + p.bootstrap if n.startswith("ib")})
    if ipoib:
        reasons.append(f"its socket interfaces are IPoIB ({_names(ipoib, 4)}), so InfiniBand hardware is present")
    if any(p.env.get("NCCL_IB_DISABLE", "0").strip() not in ("0", "") for p in agg.processes.values()):
        reasons.append("NCCL_IB_DISABLE is set, which only matters where RDMA devices exist")
    if agg.expect == "rdma":
        reasons.append("--expect rdma was given")
    return reasons


def _socket_cause(procs: list[ProcessState]) -> tuple[str, str]:
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


def _network_findings(agg: LogAggregator) -> list[Finding]:
    findings: list[Finding] = []
    states = sorted(agg.ranks.values(), key=_rank_sort)
    socket_ranks = [s for s in states if _uses_socket(_process_of(agg, s), s)]
    rdma_ranks = [s for s in states if s.tclasses.get("net_rdma")]
    net_ranks = len({id(s) for s in socket_ranks + rdma_ranks})
    evidence = _rdma_evidence(agg)
    if socket_ranks:
        procs = [p for p in (_process_of(agg, s) for s in socket_ranks) if p is not None]
        interfaces = sorted({n for p in procs for n, _a in p.socket_interfaces})
        cause, fix = _socket_cause(procs)
        labels = [s.label for s in socket_ranks]
        ev = {"ranks": len(socket_ranks), "network_ranks": net_ranks, "interfaces": interfaces, "cause": cause}
        if evidence and agg.expect != "socket":
            ev["rdma_evidence"] = evidence
            findings.append(
                Finding(
                    "nccl_log.socket_fallback",
                    Severity.FAIL,
                    "transport",
                    f"{len(socket_ranks)} of {net_ranks} ranks with network channels use TCP sockets although the "
                    f"nodes have RDMA ({evidence[0]}); cause: {cause}. Ranks: {_names(labels)}",
                    ev,
                    fix,
                )
            )
        else:
            findings.append(
                Finding(
                    "nccl_log.socket_transport",
                    Severity.INFO,
                    "transport",
                    f"{len(socket_ranks)} of {net_ranks} ranks with network channels use TCP sockets (NET/Socket); "
                    "no RDMA device appears in the log (pass --expect rdma if the nodes should use RDMA)",
                    ev,
                    None,
                )
            )
    elif rdma_ranks:
        nets = sorted({_network_of(_process_of(agg, s), s) or "?" for s in rdma_ranks})
        findings.append(
            Finding(
                "nccl_log.network",
                Severity.PASS,
                "transport",
                f"{len(rdma_ranks)} ranks use RDMA ({', '.join(nets)}) for their network channels; none use TCP sockets",
                {"networks": nets, "ranks": len(rdma_ranks)},
            )
        )
    # NET/IB : No device found.
    no_dev = [p for p in agg.processes.values() if "IB" in p.no_device]
    if no_dev:
        hosts = sorted({p.host or "?" for p in no_dev})
        expected = agg.expect == "rdma" or bool(rdma_ranks) or any(p.net_devices for p in agg.processes.values())
        findings.append(
            Finding(
                "nccl_log.no_rdma_device",
                Severity.FAIL if expected else Severity.INFO,
                "NET/IB",
                f"NCCL found no RDMA device on {len(no_dev)} process(es) (hosts {_names(hosts)})"
                + ("" if expected else "; expected on TCP-only nodes (pass --expect rdma if RDMA was wanted)"),
                {"processes": len(no_dev), "hosts": hosts},
                "check /dev/infiniband inside the container, rdma-core/libibverbs, port state (fabricscope doctor) "
                "and NCCL_IB_HCA" if expected else None,
            )
        )
    # Networks disagreeing between processes (IB here, a plugin there).
    nets_by_proc: dict[str, list[str]] = {}
    for s in states:
        net = _network_of(_process_of(agg, s), s)
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


def _device_findings(agg: LogAggregator) -> list[Finding]:
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


def _gdr_findings(agg: LogAggregator) -> list[Finding]:
    findings: list[Finding] = []
    net_ranks = [s for s in agg.ranks.values() if s.tclasses.get("net_rdma")]
    with_gdr = [s for s in net_ranks if any(lbl.endswith("/GDRDMA") for lbl in s.transports)]
    without = [s for s in net_ranks if s not in with_gdr]
    disabled = {}
    for proc in agg.processes.values():
        for hca, (enabled, detail) in proc.gdr_hca.items():
            if not enabled:
                disabled.setdefault(f"{proc.host}:{hca}", detail)
    no_module = any(d and "no module" in d for d in disabled.values())
    fix = (
        "load nvidia-peermem (`modprobe nvidia-peermem`) or use DMA-BUF (NCCL >= 2.19, kernel >= 5.12, open GPU "
        "driver); check the GPU-NIC PCIe distance and ACS with `fabricscope doctor`; NCCL_NET_GDR_LEVEL must not be LOC"
    )
    if without and with_gdr:
        findings.append(
            Finding(
                "nccl_log.gdr_partial",
                Severity.WARN,
                "GPUDirect RDMA",
                f"GPUDirect RDMA is off on {len(without)} of {len(net_ranks)} ranks that use RDMA: their transfers are "
                f"staged through host memory. Ranks without it: {_names([s.label for s in sorted(without, key=_rank_sort)])}",
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
                f"NCCL reports GPUDirect RDMA disabled for {_names(sorted(disabled))}"
                + (" (no peer-memory module loaded)" if no_module else ""),
                {"hcas": sorted(disabled)[:32]},
                fix,
            )
        )
    return findings


def _transport_findings(agg: LogAggregator) -> list[Finding]:
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


def _version_findings(agg: LogAggregator) -> list[Finding]:
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
        return [Finding("nccl_log.version", Severity.PASS, "NCCL version", f"all processes run NCCL {version}", {"version": version})]
    return []


def _gid_findings(agg: LogAggregator) -> list[Finding]:
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


def _warn_finding(group: WarnGroup, agg: LogAggregator, led_to: list[str]) -> Finding:
    ranks = sorted(_rank_label(k, agg.ranks) for k in group.ranks)
    where = f"{len(group.ranks)} rank(s) on {len(group.hosts)} host(s)" if group.hosts else f"{len(group.ranks)} rank(s)"
    evidence: dict[str, Any] = {"count": group.count, "example": group.example}
    if group.source:
        evidence["source"] = group.source
    if group.first_timestamp:
        evidence["first_seen"] = group.first_timestamp
    evidence["ranks"] = ranks[:MAX_LISTED]
    if led_to:
        evidence["led_to"] = led_to
    if group.kind == "completion_error":
        status = group.data.get("status")
        severity, meaning, fix = explain_completion(status)
        for key in ("vendor_err", "hca", "peer"):
            if group.data.get(key) is not None:
                evidence[key] = group.data[key]
        subject = f"completion status {status} ({wc_status_name(status)})"
        message = f"{group.count} work completion error(s) on {where}: {meaning}"
    elif group.kind == "verbs_error":
        meaning, fix = explain_verbs(group.data.get("call"), group.data.get("error"))
        severity = "fail"
        subject = f"{group.data.get('call')} failed: {group.data.get('error')}"
        message = f"{group.count} time(s) on {where}: {meaning}"
    else:
        severity, meaning, fix = WARN_EXPLAIN.get(group.kind, WARN_EXPLAIN["warn"])
        subject = f"WARN {group.example[:80]}"
        message = f"{group.count} time(s) on {where}: {meaning}"
    if led_to:
        message += f"; this led to {', '.join(led_to)}"
    return Finding(f"nccl_log.{group.kind}", Severity(severity), subject, message, evidence, fix)


def _error_findings(agg: LogAggregator) -> list[Finding]:
    findings = []
    led_to: dict[str, list[str]] = {}
    for chain in agg.chains.values():
        if chain.cause:
            led_to.setdefault(chain.cause, []).append(f"{result_name(chain.code)} ({chain.code}) at {chain.first_site}")
    for group in agg.warn_groups.values():
        findings.append(_warn_finding(group, agg, led_to.get(f"{group.kind}|{group.key}", [])))
    failed = [s for s in agg.ranks.values() if s.last_result]
    if failed:
        by_code: dict[int, list[RankState]] = {}
        for s in failed:
            by_code.setdefault(s.last_result, []).append(s)  # type: ignore[arg-type]
        for code, states in sorted(by_code.items()):
            labels = [s.label for s in sorted(states, key=_rank_sort)]
            had_warn = any(s.warns for s in states)
            findings.append(
                Finding(
                    "nccl_log.error_return",
                    Severity.FAIL,
                    result_name(code),
                    f"NCCL returned {result_name(code)} ({code}) on {len(states)} rank(s): {_names(labels)}"
                    + ("" if had_warn else "; no WARN precedes it in this log (look at the other ranks' logs)"),
                    {"code": code, "ranks": labels[:MAX_LISTED]},
                    "the earliest WARN (see the other findings) is the cause; later errors on other ranks follow from it",
                )
            )
    return findings


def _init_findings(agg: LogAggregator) -> list[Finding]:
    started = [s for s in agg.ranks.values() if s.init_started > s.init_completed]
    if not started:
        return []
    labels = [s.label for s in sorted(started, key=_rank_sort)]
    return [
        Finding(
            "nccl_log.init_incomplete",
            Severity.WARN,
            "initialisation",
            f"{len(started)} rank(s) started communicator init without an 'Init COMPLETE' line: they hung or failed "
            f"during init, or the log was cut: {_names(labels)}",
            {"ranks": labels[:MAX_LISTED], "count": len(started)},
            "if the job hung: compare the last lines of these ranks with the others (bootstrap/connection WARNs, "
            "NCCL_SOCKET_IFNAME); rerun with NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET",
        )
    ]


def _file_findings(agg: LogAggregator) -> list[Finding]:
    findings = []
    for stats in agg.files:
        if stats.lines and not stats.nccl_lines:
            findings.append(
                Finding(
                    "nccl_log.no_nccl_lines",
                    Severity.WARN,
                    stats.name,
                    f"no NCCL log line in {stats.lines} lines" + (" (binary data)" if stats.binary_lines else ""),
                    {"lines": stats.lines, "binary_lines": stats.binary_lines},
                    "run the job with NCCL_DEBUG=INFO (and NCCL_DEBUG_FILE=nccl.%h.%p.log) and pass those files",
                )
            )
            continue
        if stats.binary_lines:
            findings.append(
                Finding(
                    "nccl_log.garbled_lines",
                    Severity.WARN,
                    stats.name,
                    f"{stats.binary_lines} of {stats.lines} lines hold binary or non-UTF-8 data (interleaved writes or "
                    "a corrupt file); they were read as far as possible",
                    {"binary_lines": stats.binary_lines},
                    None,
                )
            )
        if stats.overlong_lines:
            findings.append(
                Finding(
                    "nccl_log.overlong_lines",
                    Severity.INFO,
                    stats.name,
                    f"{stats.overlong_lines} line(s) longer than NCCL ever writes were skipped",
                    {"overlong_lines": stats.overlong_lines},
                )
            )
        if stats.truncated:
            findings.append(
                Finding(
                    "nccl_log.truncated",
                    Severity.INFO,
                    stats.name,
                    "the file ends in the middle of a line (still being written, or cut)",
                    {"bytes": stats.bytes},
                )
            )
    return findings


def build_report(agg: LogAggregator) -> LogReport:
    """Turn what the aggregator saw into per-rank facts and findings."""
    findings: list[Finding] = []
    findings += _version_findings(agg)
    findings += _network_findings(agg)
    findings += _transport_findings(agg)
    findings += _device_findings(agg)
    findings += _gdr_findings(agg)
    findings += _gid_findings(agg)
    findings += _error_findings(agg)
    findings += _init_findings(agg)
    findings += _file_findings(agg)
    findings += _env_findings(agg)
    hosts = sorted({s.host or "?" for s in agg.ranks.values()} | {p.host or "?" for p in agg.processes.values()})
    summary = {
        "lines": sum(f.lines for f in agg.files),
        "nccl_lines": sum(f.nccl_lines for f in agg.files),
        "bytes": sum(f.bytes for f in agg.files),
        "hosts": len(hosts),
        "processes": len(agg.processes),
        "ranks": len(agg.ranks),
        "nccl_versions": sorted(agg.versions),
        "events": agg.event_counts(),
        "warnings": sum(g.count for g in agg.warn_groups.values()),
    }
    files = [
        {
            "name": f.name,
            "bytes": f.bytes,
            "lines": f.lines,
            "nccl_lines": f.nccl_lines,
            "binary_lines": f.binary_lines,
            "truncated": f.truncated,
        }
        for f in agg.files
    ]
    return LogReport(files=files, ranks=rank_dicts(agg), findings=sorted(findings, key=sort_key), summary=summary)


def _env_findings(agg: LogAggregator) -> list[Finding]:
    """Settings the log shows NCCL picked up, checked without a node (debug settings left in, ...)."""
    from fabricscope.nccl.lint import lint_log_env

    return lint_log_env(agg)
