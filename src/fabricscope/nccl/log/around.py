"""Verdicts for the failures around NCCL's core: NVLS and Fabric Manager, CollNet/SHARP, EFA with
aws-ofi-nccl and libfabric, network plugins that differ between hosts, the socket interface NCCL
picked, PyTorch's watchdog, and whether a peer exited or the network failed.

Each message rule names the catalogue entries it fires on (:data:`RULES`: ids and an excerpt of
their format; tests/nccl/test_messages.py holds that they exist) and says what NCCL's own text or
docs say it means and the fix its docs or maintainers give. The cause of a failed job is decided
once, by :func:`first_cause`, so no two findings name different causes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from fabricscope.findings import Finding, Severity
from fabricscope.nccl.log.aggregate import LogAggregator, ProcessState, WarnGroup
from fabricscope.nccl.log.verdicts import MAX_LISTED, names
from fabricscope.nccl.messages import catalogue


@dataclass(frozen=True)
class MessageRule:
    """A finding for a set of catalogued messages (and WARNs printed from ``sources``)."""

    id: str
    messages: tuple[tuple[str, str], ...]  # (catalogue id, excerpt of its format)
    severity: str
    subject: str
    meaning: str
    fix: str
    sources: tuple[str, ...] = ()  # WARN file prefixes ("transport/nvls.cc") that fire it too
    fallback: str | None = None  # what NCCL uses instead, when the rule is about a fallback
    excerpts: tuple[str, ...] = ()  # texts that fire it wherever a line holds them (older or newer wordings)
    warn_prefixes: tuple[str, ...] = ()  # WARN texts starting so (a plugin's own WARNs: "NET/OFI ")
    projects: tuple[
        str, ...
    ] = ()  # any catalogued WARN of these projects fires it (libfabric's efa provider)


RULES: tuple[MessageRule, ...] = (
    MessageRule(
        "nccl_log.nvls",
        (
            ("nccl-76f81c6057", "Failed to bind NVLink SHARP (NVLS) Multicast memory"),
            ("nccl-9b3dd07f27", "Failed to bind NVLink SHARP (NVLS) Multicast memory"),
            ("nccl-1d17acb5f0", 'NCCL_NVLS_ENABLE has been set to "1" and communicator has multiple ranks'),
        ),
        "fail",
        "NVLS (NVLink SHARP)",
        "NCCL could not set up NVLink SHARP multicast memory; in NCCL's words (transport/nvls.cc) 'this is usually "
        "caused by a system or configuration error in the Fabric Manager or NVSwitches' -- not by the CUDA or "
        "NCCL versions",
        "check that nvidia-fabricmanager runs and is healthy on every node and that the NVSwitches and GPUs are in "
        "one fabric partition (`fabricscope doctor`, check gpu.fabric; nvidia-smi -q | grep -A3 Fabric); to run "
        "without it meanwhile, set NCCL_NVLS_ENABLE=0",
        sources=("transport/nvls.cc",),
        excerpts=("NVLink SHARP (NVLS) Multicast", "system not yet initialized", "cuMulticast"),
    ),
    MessageRule(
        "nccl_log.collnet",
        (
            ("nccl-7e5a270061", "Cannot initialize CollNet, using point-to-point network instead"),
            ("nccl-223b9e1de9", "CollNet is not supported or fails to initialize"),
            ("nccl-rdma-sharp-plugins-22a229b0b2", "SHARP coll init error"),
            ("nccl-rdma-sharp-plugins-1c27ea5eec", "SHARP group create failed"),
        ),
        "warn",
        "CollNet / SHARP",
        "CollNet (in-network reduction through SHARP and the nccl-rdma-sharp-plugins) failed to start; NCCL "
        "recovers: it uses the point-to-point network instead, so the job runs, without the offload",
        "if SHARP was meant to be used: check that the SHARP daemon (sharp_am on the subnet manager, "
        "sharpd/HPC-X) runs and that NCCL_COLLNET_ENABLE=1 ranks load the SHARP plugin on every node "
        "(NCCL_DEBUG_SUBSYS=INIT,NET shows 'Plugin Path'); otherwise unset NCCL_COLLNET_ENABLE",
        fallback="the point-to-point network",
        excerpts=("SHARP group create", "SHARP coll init", "Cannot initialize CollNet"),
    ),
    MessageRule(
        "nccl_log.efa",
        (
            ("aws-ofi-nccl-f350a019ab", "OFI fi_getinfo() call failed"),
            ("aws-ofi-nccl-a723790872", "Unable to find a protocol that worked"),
            ("aws-ofi-nccl-02e239b804", "No eligible providers were found"),
            ("aws-ofi-nccl-dd4a62e925", "Couldn't find any optimal provider"),
            ("aws-ofi-nccl-40b313e7b8", "EFA provider requires at least libfabric version"),
        ),
        "fail",
        "EFA (aws-ofi-nccl / libfabric)",
        "aws-ofi-nccl found no usable libfabric provider: libfabric's efa provider did not offer the capabilities "
        "it needs (FI_HMEM for GPU memory, RDMA), usually because the EFA device, its driver or the GPUDirect "
        "path is not visible where the job runs, or libfabric is too old",
        "run `fi_info -p efa -c FI_HMEM` where the job runs (in the container): it must list the EFA devices; if "
        "not, install the EFA software (efa driver, libfabric from the aws-efa-installer), expose the devices to "
        "the container (vpc.amazonaws.com/efa resources), and keep FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 "
        "(p4d/p5); `fabricscope nccl lint` checks these settings",
        excerpts=(
            "optimal provider",
            "Unable to find a protocol that worked",
            "No eligible providers",
            "fi_getinfo",
        ),
        warn_prefixes=("NET/OFI",),
        projects=("libfabric-efa",),
    ),
    MessageRule(
        "nccl_log.shm",
        (
            ("nccl-0f01f0057a", "failed to create shared memory file"),
            ("nccl-bd70f8a285", "failed to create shared memory file"),
        ),
        "fail",
        "shared memory (/dev/shm)",
        "NCCL could not create its shared-memory segment in /dev/shm (the SHM transport and the proxy use it): the "
        "file system is too small -- a container's default is 64 MB -- or not writable",
        "give the container more shared memory (docker run --shm-size=1g or --ipc=host; Kubernetes: an emptyDir "
        "with medium: Memory mounted at /dev/shm) and check free space with df -h /dev/shm; NCCL_SHM_DISABLE=1 "
        "avoids it at a cost in intra-node bandwidth",
        excerpts=(
            "shared memory segment",
            "/dev/shm",
            "Call to shm_open failed",
            "Call to posix_fallocate failed",
        ),
    ),
    MessageRule(
        "nccl_log.socket_address",
        (
            ("nccl-74fd4e5bdb", "is neither AF_INET"),
            ("nccl-e6e3bd1646", "Socket creation failed"),
            ("nccl-7a09cba958", "no socket interface found"),
        ),
        "fail",
        "socket interface",
        "NCCL had no usable address for its sockets: the interface it picked (or NCCL_SOCKET_IFNAME named) has no "
        "address of the family it uses (family 0: no interface matched at all), or that address family is "
        "disabled on the host (IPv6 off)",
        "set NCCL_SOCKET_IFNAME to an interface that is up with an address on every node (`ip -br addr`; "
        "`fabricscope nccl env` picks one) and, where IPv6 is disabled, NCCL_SOCKET_FAMILY=AF_INET",
        excerpts=(
            "is neither AF_INET",
            "Socket creation failed",
            "no socket interface found",
            "Address family not supported",
        ),
    ),
    MessageRule(
        "nccl_log.cuda_driver",
        (),
        "fail",
        "CUDA driver",
        "the CUDA driver on this node is older than the CUDA runtime NCCL (or the framework) was built with",
        "install a driver that supports the image's CUDA version (nvidia-smi shows the highest CUDA it supports), "
        "or use the CUDA forward-compatibility package / an image built for this driver",
        excerpts=("CUDA driver version is insufficient",),
    ),
)
# One pattern for every rule's excerpts: the aggregator counts them on lines the catalogue does not
# place exactly (other releases' wordings) and in WARN texts.
EXCERPT_RE = re.compile(
    "|".join(sorted({re.escape(x) for r in RULES for x in r.excerpts}, key=len, reverse=True))
)
# A word every excerpt holds: a line holding none of them holds no excerpt (checked before the pattern).
EXCERPT_WORDS = frozenset(max(re.findall(r"[A-Za-z_]{3,}", x), key=len) for r in RULES for x in r.excerpts)


@cache
def _ids(rule: MessageRule) -> frozenset[str]:
    """The rule's ids, and every entry of the same project whose format holds one of its excerpts
    (once per process: it walks the whole catalogue)."""
    cat = catalogue()
    found = {mid for mid, _excerpt in rule.messages}
    for mid, excerpt in rule.messages:
        msg = cat.messages.get(mid)
        if msg is not None:
            found |= {m.id for m in cat.find(msg.project, excerpt)}
    return frozenset(found)


def message_findings(agg: LogAggregator) -> list[Finding]:
    findings = []
    for rule in RULES:
        ids = _ids(rule)
        seen = {mid: n for mid, n in agg.messages.items() if mid in ids}
        groups = [g for g in agg.warn_groups.values() if _claims(rule, ids, g)]
        quoted = {x: agg.excerpts[x] for x in rule.excerpts if agg.excerpts.get(x)}
        if not seen and not groups and not quoted:
            continue
        count = sum(seen.values()) or sum(g.count for g in groups) or sum(quoted.values())
        example = next((g.example for g in groups), None) or next(iter(seen), "")
        evidence = {"count": count, "messages": sorted(seen)[:MAX_LISTED], "example": example[:300]}
        if quoted:
            evidence["quoted"] = sorted(quoted)
        severity, meaning = Severity(rule.severity), rule.meaning
        if rule.fallback:
            evidence["instead"] = rule.fallback
        elif rule.id == "nccl_log.efa" and any(_on_sockets(p) for p in agg.processes.values()):
            severity, meaning = Severity.WARN, meaning + "; NCCL went on with its socket transport (slow)"
            evidence["instead"] = "NCCL's socket transport"
        findings.append(
            Finding(rule.id, severity, rule.subject, f"{count} time(s): {meaning}", evidence, rule.fix)
        )
    return findings


def claimed(agg: LogAggregator) -> set[int]:
    """The WARN groups a message rule explains (by id()): their generic finding is left out, so the
    reader gives NCCL's own explanation, not the WARN kind's ("check the CUDA versions")."""
    out: set[int] = set()
    for rule in RULES:
        ids = _ids(rule)
        out |= {id(g) for g in agg.warn_groups.values() if _claims(rule, ids, g)}
    return out


def _claims(rule: MessageRule, ids: frozenset[str], group: WarnGroup) -> bool:
    if (
        group.message_id in ids
        or _from(group, rule.sources)
        or any(x in group.example for x in rule.excerpts)
    ):
        return True
    if rule.warn_prefixes and group.example.startswith(rule.warn_prefixes):
        return True
    return bool(
        rule.projects and group.message_id and catalogue().messages[group.message_id].project in rule.projects
    )


def _on_sockets(proc: ProcessState) -> bool:
    """The process went on with NCCL's socket transport (said so, or listed socket devices and no RDMA)."""
    return (proc.network or "").lower() == "socket" or bool(proc.socket_interfaces and not proc.net_devices)


def _from(group: WarnGroup, sources: tuple[str, ...]) -> bool:
    return bool(sources and group.source and group.source.startswith(sources))


def bootstrap_findings(agg: LogAggregator) -> list[Finding]:
    """An error chain that starts in NCCL's bootstrap or socket code with no WARN naming it: the TCP
    connections between the ranks failed, which NCCL's troubleshooting guide traces to the interface
    picked (NCCL_SOCKET_IFNAME) first, then firewalls."""
    chains = [
        c
        for c in agg.chains.values()
        if c.cause is None
        and c.first_site.startswith(("misc/socket.cc", "bootstrap.cc"))
        and not c.recovered_by
    ]
    if not chains:
        return []
    sites = sorted({c.first_site for c in chains})
    return [
        Finding(
            "nccl_log.bootstrap_error",
            Severity.FAIL,
            "bootstrap",
            f"NCCL's bootstrap sockets failed ({', '.join(sites[:4])} -> {chains[0].code}) on {sum(len(c.ranks) for c in chains)} "
            "rank(s): the ranks could not open or keep their TCP connections to each other",
            {"sites": sites[:MAX_LISTED]},
            "check that NCCL_SOCKET_IFNAME names an interface with an address the other hosts can reach (the same "
            "network on every node, not a docker/virtual or link-local one) and that no firewall blocks the ports "
            "between the hosts",
        )
    ]


def plugin_mismatch(agg: LogAggregator) -> list[Finding]:
    """Hosts whose processes loaded different network plugins: their ranks cannot talk (the job hangs
    in init or fails connecting), as one host's HPC-X 'Plugin Path' vs another's internal IB."""
    by_host: dict[str, set[str]] = {}
    for proc in agg.processes.values():
        if proc.net_plugin and proc.host:
            by_host.setdefault(proc.host, set()).add(_plugin_name(proc.net_plugin))
    kinds = {p for plugins in by_host.values() for p in plugins}
    if len(kinds) < 2:
        return []
    groups: dict[str, list[str]] = {}
    for host, plugins in sorted(by_host.items()):
        groups.setdefault(", ".join(sorted(plugins)), []).append(host)
    where = "; ".join(f"{plugin} on {names(hosts, 4)}" for plugin, hosts in groups.items())
    return [
        Finding(
            "nccl_log.net_plugin_mismatch",
            Severity.FAIL,
            "NET plugin",
            f"hosts load different network plugins: {where}. Ranks using different network modules cannot "
            "connect to each other: the job hangs in init or fails when the first connection is made",
            {"plugins": {k: v[:MAX_LISTED] for k, v in groups.items()}},
            "use the same container image / environment on every host: the same NCCL_NET_PLUGIN (or none) and the "
            "same LD_LIBRARY_PATH, so each host finds the same libnccl-net*.so (HPC-X's nccl_rdma_sharp_plugin, "
            "aws-ofi-nccl) or none",
        )
    ]


def _plugin_name(plugin: str) -> str:
    if plugin == "internal":
        return "NCCL's internal network"
    return "/".join(plugin.rstrip("/").split("/")[-3:])


# Interfaces NCCL's automatic choice does not exclude (it skips only docker*, lo and virbr*, src/misc/socket.cc)
# but that do not reach other hosts the way the job needs.
_VIRTUAL = re.compile(
    r"(veth|cali|cilium|flannel|cni|vxlan|genev|tunl|ip6tnl|ip6gre|gre|sit|tailscale|wg|tun|tap|kube|weave|br-)"
)


def socket_interface_findings(agg: LogAggregator) -> list[Finding]:
    """The interface NCCL picked for its sockets, when it is virtual, a tunnel, or link-local only."""
    bad: dict[str, list[str]] = {}
    for proc in agg.processes.values():
        for name, address in proc.socket_interfaces + proc.bootstrap:
            addr = address.strip("[]").lower()
            if _VIRTUAL.match(name):
                why = "a virtual or tunnel interface"
            elif addr.startswith("fe80"):
                why = "an IPv6 link-local address only (not routable between hosts)"
            else:
                continue
            bad.setdefault(f"{name} {address}: {why}", []).append(proc.host or "?")
    if not bad:
        return []
    listed = [f"{item} ({names(sorted(set(hosts)), 3)})" for item, hosts in sorted(bad.items())]
    return [
        Finding(
            "nccl_log.socket_interface",
            Severity.WARN,
            "socket interface",
            f"NCCL uses {names(listed, 4)} for its sockets. Its automatic choice excludes only docker*, lo and virbr*, "
            "so a container's veth, a CNI bridge or a tunnel such as ip6tnl0 with only a link-local address can be "
            "picked; peers then cannot connect, or traffic takes a slow path",
            {"interfaces": listed[:MAX_LISTED]},
            "set NCCL_SOCKET_IFNAME to the interface that carries the hosts' routable addresses (e.g. =eth0, or "
            "^veth,ip6tnl,lo,docker to exclude), on every node; `fabricscope nccl env` picks one and `nccl lint` "
            "checks the list",
        )
    ]


# ----- the cause, decided once --------------------------------------------------------------
_NETWORK_KINDS = ("completion_error", "verbs_error", "async_event")
# An orderly close by the peer (its process exited); "Connection reset by peer" is left out: a reset
# comes from an exit or from the network, and NCCL's own text for it says either.
_REMOTE_TEXT = re.compile(r"[Cc]onnection closed by (?:remote peer|localRank)")


def first_cause(agg: LogAggregator) -> tuple[str, str]:
    """(kind, said) of what failed first: "network" (an RDMA completion, verbs or async error),
    "remote_exit" (only connections closed by peers: a process exited first), "warn" (another WARN),
    or "unknown". Every finding that names a cause takes it from here."""
    groups = list(agg.warn_groups.values())
    network = [g for g in groups if g.kind in _NETWORK_KINDS]
    if network:
        first = min(network, key=lambda g: g.first_timestamp or "")
        return "network", first.example[:160]
    remote = [g for g in groups if _REMOTE_TEXT.search(g.example)]
    others = [g for g in groups if g not in remote and g.kind not in ("connection", "proxy_error")]
    if remote and not others:
        return "remote_exit", remote[0].example[:160]
    if others:
        return "warn", min(others, key=lambda g: g.first_timestamp or "").example[:160]
    return "unknown", ""


CAUSE_FIX = {
    "network": "the RDMA error above is the cause (see its finding); later errors on other ranks follow from it",
    "remote_exit": "a peer process exited first and these ranks lost their connections to it: find the rank that "
    "exited in its own log (an exception, OOM kill, or signal), not in the network",
    "warn": "the earliest WARN (see the other findings) is the cause; later errors on other ranks follow from it",
    "unknown": "no WARN in these logs says why: read the other ranks' logs (NCCL_DEBUG=WARN at least)",
}


def remote_exit_findings(agg: LogAggregator) -> list[Finding]:
    kind, said = first_cause(agg)
    if kind != "remote_exit":
        return []
    return [
        Finding(
            "nccl_log.remote_exit",
            Severity.FAIL,
            "peer exit",
            f"the errors here are connections closed by peers ({said}) with no RDMA or network error before them: "
            "a peer process exited (or was killed) first; NCCL reports that as ncclRemoteError, 'remote process "
            "exited or there was a network error'",
            {"first": said},
            CAUSE_FIX["remote_exit"],
        )
    ]


def torch_findings(agg: LogAggregator) -> list[Finding]:
    """What PyTorch's ProcessGroupNCCL said: a watchdog timeout, errors the NCCL API returned."""
    torch, findings = agg.torch, []
    if torch["timeouts"]:
        ops = ", ".join(f"{op} x{n}" for op, n in sorted(torch["ops"].items()))
        kind, said = first_cause(agg)
        cause = (
            f"; the first error NCCL printed: {said}"
            if said
            else "; NCCL printed no error in these lines (a hang)"
        )
        findings.append(
            Finding(
                "nccl_log.torch_timeout",
                Severity.FAIL,
                "PyTorch watchdog",
                f"PyTorch's watchdog timed out {torch['timeouts']} collective(s) ({ops}) after "
                f"{torch.get('timeout_ms', 0) / 1000:g} s: they did not complete on every rank{cause}",
                {"timeouts": torch["timeouts"], "ops": torch["ops"], "timeout_ms": torch.get("timeout_ms")},
                CAUSE_FIX[kind]
                if kind != "unknown"
                else "find the rank that did not reach the collective or "
                "stopped (its stack: TORCH_NCCL_TRACE_BUFFER_SIZE, py-spy dump); rerun with NCCL_DEBUG=WARN",
            )
        )
    return findings
