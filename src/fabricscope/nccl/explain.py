"""What NCCL's numbers and error texts mean, with the usual cause and the fix.

Sources (NVIDIA/nccl at 2.30 unless said): ``src/nccl.h.in`` (ncclResult_t), libibverbs
``enum ibv_wc_status`` (the same numbers NCCL prints as ``status=``/``error``),
``src/misc/ibvwrap.cc`` hints, ``src/transport/net_ib`` and maintainers' answers in NVIDIA/nccl's
GitHub issues (status 12 = ack timeout, status 4 = usually ACS, status 5 = flush).
"""

from __future__ import annotations

NCCL_RESULTS = {
    0: "ncclSuccess",
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
    8: "ncclTimeout",
}

WC_STATUS = {
    0: "IBV_WC_SUCCESS",
    1: "IBV_WC_LOC_LEN_ERR",
    2: "IBV_WC_LOC_QP_OP_ERR",
    3: "IBV_WC_LOC_EEC_OP_ERR",
    4: "IBV_WC_LOC_PROT_ERR",
    5: "IBV_WC_WR_FLUSH_ERR",
    6: "IBV_WC_MW_BIND_ERR",
    7: "IBV_WC_BAD_RESP_ERR",
    8: "IBV_WC_LOC_ACCESS_ERR",
    9: "IBV_WC_REM_INV_REQ_ERR",
    10: "IBV_WC_REM_ACCESS_ERR",
    11: "IBV_WC_REM_OP_ERR",
    12: "IBV_WC_RETRY_EXC_ERR",
    13: "IBV_WC_RNR_RETRY_EXC_ERR",
    14: "IBV_WC_LOC_RDD_VIOL_ERR",
    15: "IBV_WC_REM_INV_RD_REQ_ERR",
    16: "IBV_WC_REM_ABORT_ERR",
    17: "IBV_WC_INV_EECN_ERR",
    18: "IBV_WC_INV_EEC_STATE_ERR",
    19: "IBV_WC_FATAL_ERR",
    20: "IBV_WC_RESP_TIMEOUT_ERR",
    21: "IBV_WC_GENERAL_ERR",
}


def result_name(code: int | None) -> str:
    if code is None:
        return "unknown result"
    return NCCL_RESULTS.get(code, f"ncclResult {code}")


def wc_status_name(status: int | None) -> str:
    if status is None:
        return "unknown status"
    return WC_STATUS.get(status, f"status {status}")


# status -> (severity, meaning, fix)
_WC_EXPLAIN: dict[int, tuple[str, str, str]] = {
    12: (
        "fail",
        "transport retry count exceeded: the peer never acknowledged (ack timeout after "
        "NCCL_IB_TIMEOUT x NCCL_IB_RETRY_CNT). Right at start-up it means the NICs cannot reach each "
        "other over RDMA at all; later in a run it means packets are being lost",
        "check cabling and port state on both ends (fabricscope doctor), then on RoCE the GID index "
        "(leave NCCL_IB_GID_INDEX unset on NCCL >= 2.21), NCCL_IB_TC and the switch PFC/ECN setup for "
        "that priority; raise NCCL_IB_TIMEOUT only on very large fabrics",
    ),
    4: (
        "fail",
        "local protection error: the NIC was refused access to a registered buffer. With GPU buffers "
        "this is usually PCIe ACS redirecting peer-to-peer traffic, or GPUDirect RDMA (nvidia-peermem / "
        "DMA-BUF) not working",
        "disable ACS on the PCIe switches between GPU and NIC (fabricscope doctor shows them); confirm "
        "with NCCL_NET_GDR_LEVEL=LOC (GPUDirect off): if the error goes away, GPUDirect/ACS is the cause",
    ),
    5: (
        "warn",
        "work request flushed: the queue pair was already in error because of an earlier failure; "
        "this is a consequence, not the cause",
        "look for the first completion error or WARN before this one (on this rank or its peer)",
    ),
    13: (
        "fail",
        "receiver-not-ready retries exceeded: the peer had no receive posted in time",
        "usually the peer process stalled or died; look at the peer's log",
    ),
    10: (
        "fail",
        "remote access error: the peer rejected an RDMA write into its memory (bad key or bounds)",
        "often the peer restarted or deregistered memory (a crashed rank); check the peer's log first",
    ),
    11: (
        "fail",
        "remote operation error: the peer's NIC could not complete the operation",
        "check the peer's log and NIC state (fabricscope doctor on that node)",
    ),
    9: (
        "fail",
        "remote invalid request: the peer's NIC rejected the request (MTU or QP attribute mismatch)",
        "make MTU and NCCL versions consistent across nodes",
    ),
    8: (
        "fail",
        "local access error: the memory region does not allow the operation",
        "check GPUDirect RDMA (nvidia-peermem / DMA-BUF) and ACS as for status 4",
    ),
}


def explain_completion(status: int | None) -> tuple[str, str, str]:
    """(severity, meaning, fix) for a work-completion error status."""
    if status in _WC_EXPLAIN:
        return _WC_EXPLAIN[status]
    return (
        "fail",
        f"work completion failed with {wc_status_name(status)}",
        "check port state and counters on both ends (fabricscope doctor) and the peer's log",
    )


# errno text of a failed verbs call -> (meaning, fix)
_VERBS_EXPLAIN: dict[str, tuple[str, str]] = {
    "invalid argument": (
        "the NIC rejected the queue-pair attributes; with RoCE this is nearly always a forced "
        "NCCL_IB_GID_INDEX pointing at an empty, RoCE v1 or wrong-family GID entry (or an MTU/SL/TC out of range)",
        "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the RoCE v2 IPv4 entry itself) or set it to the RoCE v2 "
        "IPv4 index that `fabricscope nccl env` prints for this node",
    ),
    "network is unreachable": (
        "the kernel has no route or neighbour towards the peer's GID address: the GID chosen is on the wrong "
        "interface/subnet (or link-local), or the RoCE interface has no route to the peer",
        "check that the RoCE netdev is up with an address in the peer's subnet (ip route get <peer>), and that "
        "NCCL_IB_GID_INDEX (if set) points at a routable RoCE v2 entry; `fabricscope nccl lint` checks both",
    ),
    "connection timed out": (
        "address resolution towards the peer timed out: the two NICs are not connected to each other "
        "(typical of rail-optimised fabrics when NCCL pairs NICs of different rails)",
        "set NCCL_CROSS_NIC=0 on rail-optimised fabrics, and check cabling/VLANs between the rails",
    ),
    "no route to host": (
        "the peer's address is not reachable from this RoCE interface",
        "check routes and ARP/neighbour entries on the RoCE netdev; check the switch VLAN/VRF",
    ),
    "cannot allocate memory": (
        "the NIC could not register or allocate memory: locked-memory limit (ulimit -l) too low or NIC resources exhausted",
        "run with an unlimited memlock limit (Slurm: PropagateResourceLimits; containers: --ulimit memlock=-1)",
    ),
    # ENODEV from the kernel while moving the queue pair to RTR: the address (GID) it was given has no
    # usable net device behind it (NVIDIA/nccl#799, #925: SR-IOV and containers).
    "no such device": (
        "the queue pair could not be moved to the ready state because the RDMA device or the net device behind "
        "its GID is not there (ENODEV): on RoCE the GID's netdev is down, was removed or renamed, or is not in this "
        "network namespace (containers, SR-IOV virtual functions)",
        "check inside the container that each RoCE HCA's netdev is up with its address (ip addr; `fabricscope "
        "doctor`), that NCCL_IB_HCA lists only ports that are up, and leave NCCL_IB_GID_INDEX unset or point it at "
        "an entry that exists",
    ),
    "operation not permitted": (
        "the process is not allowed to use the RDMA device (container capabilities or device permissions)",
        "expose /dev/infiniband to the container and grant IPC_LOCK",
    ),
}


def explain_verbs(call: str | None, error: str | None) -> tuple[str, str]:
    """(meaning, fix) for ``Call to ibv_xxx failed with error <text>``."""
    text = (error or "").lower()
    for key, value in _VERBS_EXPLAIN.items():
        if key in text:
            return value
    return (
        f"the verbs call {call or 'ibv_*'} failed ({error or 'no error text'})",
        "check the RDMA device with `fabricscope doctor` and the NCCL_IB_* settings with `fabricscope nccl lint`",
    )


WARN_EXPLAIN: dict[str, tuple[str, str, str]] = {
    # kind -> (severity, meaning, fix)
    "timeout": (
        "fail",
        "an operation timed out: a peer stopped answering (crashed, hung, or unreachable)",
        "find the first rank that failed (earliest WARN across the logs); check connectivity between the hosts involved",
    ),
    "connection": (
        "warn",
        "a socket (bootstrap or proxy) connection failed or was closed; when it follows an error elsewhere it is a "
        "consequence: the peer process exited",
        "look at the peer's log for its first error; if this is the first error, check NCCL_SOCKET_IFNAME and "
        "firewalls between the hosts",
    ),
    "cuda_error": (
        "fail",
        "a CUDA call inside NCCL failed",
        "check the GPU (nvidia-smi, dmesg for Xid errors) and the CUDA driver/runtime versions",
    ),
    "proxy_error": (
        "warn",
        "NCCL's proxy thread failed an operation; this reports an error raised in another thread",
        "look at the WARN just before it on the same host for the cause",
    ),
    "async_event": (
        "fail",
        "the RDMA device reported an asynchronous event (port error, device fatal, GID change)",
        "check port state and counters with `fabricscope doctor` and dmesg on that host",
    ),
    "warn": (
        "warn",
        "NCCL printed a warning",
        "read the message; rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET for context",
    ),
}


# Asynchronous events, by the text rdma-core's ibv_event_type_str() gives them (libibverbs/verbs.c),
# which NCCL prints after "Got async event : " (2.3-2.2x) or "Got non-fatal async event: " (2.2x+,
# transport/net_ib/common.cc:167-180 at v2.30.7-1, which names port active, SM change, LID and P_Key
# change, client reregistration and path migration non-fatal, and prints "GID table changed" on its own).
_NOTICE = ": a notice from the port or the subnet manager, not an error"
ASYNC_EVENTS: dict[str, tuple[str, str, str | None]] = {
    "port active": ("info", "the port went (back) to ACTIVE" + _NOTICE, None),
    "SM change": ("info", "the InfiniBand subnet manager changed (failover or restart)" + _NOTICE, None),
    "LID change": ("info", "the port's LID changed (the subnet manager re-swept the fabric)" + _NOTICE, None),
    "P_Key change": ("info", "the port's partition key table changed" + _NOTICE, None),
    "client reregistration": ("info", "the subnet manager asked clients to register again" + _NOTICE, None),
    "path migrated": ("info", "a queue pair moved to its alternate path" + _NOTICE, None),
    "send queue drained": ("info", "a send queue finished draining" + _NOTICE, None),
    "last WQE reached": ("info", "a queue pair reached its last work request" + _NOTICE, None),
    "SRQ limit reached": ("info", "a shared receive queue reached its limit" + _NOTICE, None),
    "GID table change": (
        "warn",
        "the port's GID table changed: an address was added to or removed from the RoCE net device (DHCP renewal, "
        "NetworkManager, an interface going down and up). Connections built on a GID that went away stop working; "
        "NCCL up to 2.30 only reports it (NVIDIA/nccl#1819)",
        "keep the RoCE interfaces' addresses static while jobs run; if the interface flapped, check the port with "
        "`fabricscope doctor`; jobs started before the change may need a restart",
    ),
}
_FATAL_EVENT = (
    "fail",
    "the RDMA device reported a fatal asynchronous event ({event}): connections on it are broken",
    "check the port state, counters and dmesg on that host (`fabricscope doctor`); a port error is a link going "
    "down (cable, transceiver, switch port); catastrophic and work-queue errors point at the NIC or its firmware",
)


def explain_async(event: str | None) -> tuple[str, str, str | None]:
    """(severity, meaning, fix) for an asynchronous event; unknown events count as fatal."""
    text = (event or "").strip()
    for name, value in ASYNC_EVENTS.items():
        if text.lower().startswith(name.lower()):
            return value
    severity, meaning, fix = _FATAL_EVENT
    return severity, meaning.format(event=text or "unknown"), fix


# WARN texts whose meaning is more specific than their kind's: (text, severity, meaning, fix).
WARN_TEXTS: tuple[tuple[str, str, str, str], ...] = (
    (
        # bootstrap.cc:126 at v2.30.7-1: no interface matched NCCL_SOCKET_IFNAME (or none but lo/docker exists).
        "no socket interface found",
        "fail",
        "NCCL found no network interface for its bootstrap connections: NCCL_SOCKET_IFNAME matches no interface "
        "that is up with an address (by default NCCL skips lo and docker*). This is the root cause: init fails here",
        "set NCCL_SOCKET_IFNAME to an interface that exists on every node and has an address (`ip -br addr`; "
        "`fabricscope nccl env` picks one), or unset it",
    ),
    (
        # misc/ibvwrap.cc (ibvsymbols.cc since 2.19): dlopen of libibverbs.so / libibverbs.so.1 failed.
        "Failed to open libibverbs",
        "warn",
        "NCCL could not load libibverbs: rdma-core is not installed where the job runs (usually the container "
        "image), so NCCL cannot see any RDMA device and uses TCP sockets",
        "install rdma-core / libibverbs1 (and the provider, e.g. libmlx5-1) in the image, or mount the host's",
    ),
)


def explain_warn_text(message: str) -> tuple[str, str, str] | None:
    """(severity, meaning, fix) for a WARN whose text says more than its kind, else None."""
    for text, severity, meaning, fix in WARN_TEXTS:
        if text in message:
            return severity, meaning, fix
    return None


def ib_timeout_seconds(exponent: int) -> float | None:
    """Local ACK timeout for NCCL_IB_TIMEOUT (4.096 us x 2^value); None means infinite (0 or >= 32)."""
    if exponent <= 0 or exponent >= 32:
        return None
    return 4.096e-6 * (2**exponent)


def format_seconds(value: float) -> str:
    if value < 1e-3:
        return f"{value * 1e6:.1f} us"
    if value < 1:
        return f"{value * 1e3:.1f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"
