"""The report in one line: the class of the root cause, whether it stopped the job, the transport.

Read off the findings in a fixed order of precedence (the first class whose finding is present
wins), so it says what the findings say and nothing they do not. The classes are those of
tests/data/nccl_cases/vocabulary.yaml, the corpus the reader is measured on.
"""

from __future__ import annotations

from typing import Any

from fabricscope.findings import Finding, Severity
from fabricscope.nccl.log.aggregate import LogAggregator
from fabricscope.nccl.log.errors import INTERNAL_ERROR

# (finding ids, class), in precedence order.
CAUSES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"nccl_log.nvls"}), "nvls_fabric_manager"),
    (frozenset({"nccl_log.efa"}), "efa_libfabric"),
    (frozenset({"nccl_log.net_plugin_mismatch"}), "plugin_mismatch"),
    (frozenset({"nccl_log.shm"}), "shm_exhausted"),
    (frozenset({"nccl_log.cuda_driver", "nccl_log.version_mismatch"}), "version_mismatch"),
    (
        frozenset(
            {
                "nccl_log.socket_address",
                "nccl_log.socket_interface",
                "nccl_log.socket_loopback",
                "nccl_log.bootstrap_error",
            }
        ),
        "socket_ifname_wrong",
    ),
    (
        frozenset({"nccl_log.completion_error", "nccl_log.verbs_error", "nccl_log.async_event"}),
        "ib_link_error",
    ),
    (frozenset({"nccl_log.remote_exit"}), "remote_process_exit"),
    (frozenset({"nccl_log.collnet"}), "collnet_fallback_nonfatal"),
    (
        frozenset(
            {
                "nccl_log.socket_fallback",
                "nccl_log.socket_transport",
                "nccl_log.no_libibverbs",
                "nccl_log.no_rdma_device",
            }
        ),
        "socket_fallback",
    ),
    (frozenset({"nccl_log.torch_timeout"}), "timeout_watchdog"),
    (frozenset({"nccl_log.cuda_error"}), "cuda_error"),
)
# Findings that mean the job stopped (an error reached the application, or it hung).
STOPPED = frozenset(
    {"nccl_log.error_return", "nccl_log.api_error", "nccl_log.torch_timeout", "nccl_log.remote_exit"}
)
# Findings of an error that reached the API; with ncclInternalError (3) and no cause above, NCCL's
# own word for it ("internal error - please report this issue to the NCCL developers") is a defect.
_RETURNED = frozenset({"nccl_log.error_return", "nccl_log.api_error"})
_NOT_PROBLEMS = frozenset(
    {"nccl_log.unrecognised_lines", "nccl_log.recovered_error", "nccl_log.net_plugin_skipped"}
)


# Info findings that still name what happened (NCCL found no RDMA device and used its sockets).
_TELLING_INFO = frozenset({"nccl_log.socket_transport", "nccl_log.no_rdma_device"})
# Causes NCCL works around: the job goes on (slower) unless an error says it stopped.
_WENT_ON = frozenset({"socket_fallback", "collnet_fallback_nonfatal"})


def cause_of(findings: list[Finding]) -> str:
    ids = {f.id for f in findings if f.severity.rank >= Severity.WARN.rank or f.id in _TELLING_INFO}
    memlock = any(
        f.id == "nccl_log.verbs_error" and "memlock" in (f.message + (f.fix or "")) for f in findings
    )
    if memlock:
        return "memlock_limit"
    for finding_ids, cause in CAUSES:
        if ids & finding_ids:
            return cause
    if any(f.id in _RETURNED and f.evidence.get("code") == INTERNAL_ERROR for f in findings):
        return "nccl_bug"
    if not ids - _NOT_PROBLEMS - _TELLING_INFO:
        return "no_problem"
    return "unknown"


def stopped(findings: list[Finding]) -> bool | None:
    """True when an error reached the application or a rank hung; False when something failed and
    NCCL went on (a fallback); None when nothing failed."""
    problems = [f for f in findings if f.severity.rank >= Severity.WARN.rank and f.id not in _NOT_PROBLEMS]
    if any(f.id in STOPPED for f in problems):
        return True
    if cause_of(findings) in _WENT_ON:
        return False
    if not problems:
        return None
    return any(
        f.severity is Severity.FAIL and f.id not in ("nccl_log.socket_fallback", "nccl_log.env")
        for f in problems
    )


def transport_of(agg: LogAggregator) -> str | None:
    """The inter-node transport the log shows, or the intra-node one when there is no network."""
    link = {ll for p in agg.processes.values() for _n, _port, ll in p.net_devices.values()}
    networks = {(p.network or "").lower() for p in agg.processes.values()} | {
        (p.net_name or "").lower() for p in agg.processes.values()
    }
    classes: dict[str, int] = {}
    for rank in agg.ranks.values():
        for tclass, n in rank.tclasses.items():
            classes[tclass] = classes.get(tclass, 0) + n
    if any("ofi" in n or "libfabric" in n for n in networks):
        return "EFA"
    if classes.get("net_rdma") or "ib" in networks:
        return "RoCE" if link == {"RoCE"} else "IB"
    if classes.get("net_socket") or "socket" in networks:
        return "Socket"
    for tclass, name in (("p2p", "P2P"), ("shm", "SHM")):
        if classes.get(tclass):
            return name
    return None


def summary_verdict(findings: list[Finding], agg: LogAggregator) -> dict[str, Any]:
    return {"root_cause": cause_of(findings), "fatal": stopped(findings), "transport": transport_of(agg)}
