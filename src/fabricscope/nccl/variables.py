"""The catalogue of NCCL environment variables: type, range, default, and what replaced the old ones.

From the NCCL user guide's "Environment Variables" page (NVIDIA/nccl
``docs/userguide/source/env.rst``, 2.30) plus parameters that exist in the source but are not
documented there (marked ``documented=False``). ``debug=True`` marks the page's "Debugging"
section: settings the guide says should not stay in production scripts.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class VarSpec:
    name: str
    kind: str  # int, bool, enum, list, level, string, path, size, float
    lo: int | None = None
    hi: int | None = None
    choices: tuple[str, ...] = ()
    default: str | None = None
    since: str | None = None
    debug: bool = False
    documented: bool = True
    note: str | None = None


def _v(name: str, kind: str, **kw) -> VarSpec:
    return VarSpec(name, kind, **kw)


LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
LEGACY_LEVELS = {0: "LOC", 1: "PIX", 2: "PXB", 3: "PHB", 4: "SYS"}

_SPECS = [
    # ---- system configuration ----
    _v("NCCL_SOCKET_IFNAME", "list"),
    _v("NCCL_SOCKET_FAMILY", "enum", choices=("AF_INET", "AF_INET6")),
    _v("NCCL_SOCKET_MAGIC", "string"),
    _v("NCCL_SOCKET_RETRY_CNT", "int", lo=1, default="34", since="2.24"),
    _v("NCCL_SOCKET_RETRY_SLEEP_MSEC", "int", lo=1, default="100", since="2.24"),
    _v("NCCL_SOCKET_POLL_TIMEOUT_MSEC", "int", lo=0, default="0", since="2.28"),
    _v("NCCL_PSK", "string"),
    _v("NCCL_SOCKET_NTHREADS", "int", lo=1, hi=16, since="2.4.8"),
    _v("NCCL_NSOCKS_PERTHREAD", "int", lo=1, since="2.4.8"),
    _v("NCCL_CROSS_NIC", "int", lo=0, hi=2, default="2"),
    _v("NCCL_IB_HCA", "list"),
    _v("NCCL_IB_RAIL_POLICY", "string", since="2.30.5"),
    _v("NCCL_IB_TIMEOUT", "int", lo=0, hi=31, default="20"),
    _v("NCCL_IB_RETRY_CNT", "int", lo=0, hi=7, default="7", since="2.1.15"),
    _v("NCCL_IB_GID_INDEX", "int", lo=-1, hi=255, default="-1", since="2.1.4"),
    _v("NCCL_IB_ADDR_FAMILY", "enum", choices=("AF_INET", "AF_INET6"), default="AF_INET", since="2.21"),
    _v("NCCL_IB_ADDR_RANGE", "string", since="2.21"),
    _v("NCCL_IB_ROCE_VERSION_NUM", "int", lo=1, hi=2, default="2", since="2.21"),
    _v("NCCL_IB_PKEY", "int", lo=0, default="0", since="2.1.4"),
    _v("NCCL_IB_PKEY_VALUE", "string", since="2.31"),
    _v("NCCL_IB_SL", "int", lo=0, hi=15, default="0", since="2.1.4"),
    _v("NCCL_IB_TC", "int", lo=0, hi=255, default="0", since="2.1.15"),
    _v("NCCL_IB_FIFO_TC", "int", lo=0, hi=255, since="2.22.3"),
    _v("NCCL_IB_RETURN_ASYNC_EVENTS", "bool", default="1", since="2.23"),
    _v("NCCL_IB_EVENT_BASED_LB", "bool", default="0", since="2.31"),
    _v("NCCL_OOB_NET_ENABLE", "bool", since="2.23"),
    _v("NCCL_OOB_NET_IFNAME", "list", since="2.23"),
    _v("NCCL_UID_STAGGER_THRESHOLD", "int", lo=1, default="256", since="2.23"),
    _v("NCCL_UID_STAGGER_RATE", "int", lo=1, default="7000", since="2.23"),
    _v("NCCL_NET", "string", since="2.10"),
    _v("NCCL_NET_PLUGIN", "string", since="2.11"),
    _v("NCCL_GIN_PLUGIN", "string", since="2.29.3"),
    _v("NCCL_RMA_PLUGIN", "string", since="2.30.7"),
    _v("NCCL_TUNER_PLUGIN", "string"),
    _v("NCCL_PROFILER_PLUGIN", "string"),
    _v("NCCL_ENV_PLUGIN", "string", since="2.28"),
    _v("NCCL_IGNORE_CPU_AFFINITY", "bool", default="0", since="2.4.6"),
    _v("NCCL_CONF_FILE", "path", since="2.23"),
    _v("NCCL_DEBUG", "enum", choices=("VERSION", "WARN", "ATTN", "INFO", "TRACE")),
    _v("NCCL_DEBUG_LEVELS", "string", since="2.32"),
    _v("NCCL_DEBUG_FILE", "path", since="2.2.12"),
    _v("NCCL_DEBUG_SUBSYS", "string", default="INIT,BOOTSTRAP,ENV", since="2.3.4"),
    _v("NCCL_DEBUG_TIMESTAMP_FORMAT", "string", since="2.26"),
    _v("NCCL_DEBUG_TIMESTAMP_LEVELS", "string", since="2.26"),
    _v("NCCL_COLLNET_ENABLE", "bool", default="0", since="2.6"),
    _v("NCCL_COLLNET_NODE_THRESHOLD", "int", lo=0, default="2", since="2.9.9"),
    _v("NCCL_CTA_POLICY", "string", since="2.27"),
    _v("NCCL_NETDEVS_POLICY", "string", since="2.28"),
    _v("NCCL_MULTI_RANK_GPU_ENABLE", "bool", default="0", since="2.30"),
    _v("NCCL_TOPO_FILE", "path", since="2.6"),
    _v("NCCL_TOPO_DUMP_FILE", "path", since="2.6"),
    _v("NCCL_SET_THREAD_NAME", "bool", default="0", since="2.12"),
    # ---- debugging section ----
    _v("NCCL_P2P_DISABLE", "bool", debug=True),
    _v("NCCL_P2P_LEVEL", "level", debug=True, since="2.3.4"),
    _v("NCCL_P2P_DIRECT_DISABLE", "bool", debug=True),
    _v("NCCL_SHM_DISABLE", "bool", debug=True),
    _v("NCCL_BUFFSIZE", "size", lo=1, default="4194304", debug=True),
    _v("NCCL_NTHREADS", "enum", choices=("64", "128", "256", "512"), debug=True),
    _v("NCCL_MAX_NCHANNELS", "int", lo=1, debug=True, since="2.5.0"),
    _v("NCCL_MIN_NCHANNELS", "int", lo=0, hi=32, debug=True, since="2.5.0"),
    _v("NCCL_CHECK_MODE", "enum", choices=("DEFAULT", "DEBUG_LOCAL", "DEBUG_GLOBAL"), debug=True, since="2.29.7"),
    _v("NCCL_LAUNCH_MODE", "enum", choices=("PARALLEL", "GROUP"), debug=True, since="2.1.0"),
    _v("NCCL_IB_DISABLE", "bool", debug=True),
    _v("NCCL_IB_AR_THRESHOLD", "size", lo=0, default="8192", debug=True, since="2.6"),
    _v("NCCL_IB_OOO_RQ", "bool", default="0", debug=True, since="2.30"),
    _v("NCCL_IB_QPS_PER_CONNECTION", "int", lo=1, hi=128, default="1", debug=True, since="2.10"),
    _v("NCCL_IB_SPLIT_DATA_ON_QPS", "bool", default="0", debug=True, since="2.18"),
    _v("NCCL_IB_PCI_RELAXED_ORDERING", "int", lo=0, hi=2, default="2", debug=True, since="2.12"),
    _v("NCCL_IB_ADAPTIVE_ROUTING", "bool", debug=True, since="2.16"),
    _v("NCCL_IB_ECE_ENABLE", "bool", default="1", debug=True, since="2.23"),
    _v("NCCL_MEM_SYNC_DOMAIN", "int", lo=0, hi=1, default="1", debug=True, since="2.16"),
    _v("NCCL_CUMEM_ENABLE", "bool", debug=True, since="2.18"),
    _v("NCCL_CUMEM_HOST_ENABLE", "bool", debug=True, since="2.23"),
    _v("NCCL_NET_GDR_LEVEL", "level", debug=True, since="2.4.0"),
    _v("NCCL_NET_GDR_C2C", "bool", debug=True, since="2.26"),
    _v("NCCL_NET_GDR_READ", "bool", debug=True),
    _v("NCCL_GDRCOPY_ENABLE", "bool", default="0", debug=True),
    _v("NCCL_GDRCOPY_FIFO_ENABLE", "bool", default="1", debug=True),
    _v("NCCL_GDRCOPY_SYNC_ENABLE", "bool", default="1", debug=True),
    _v("NCCL_GDRCOPY_FLUSH_ENABLE", "bool", default="0", debug=True),
    _v("NCCL_NET_SHARED_BUFFERS", "bool", default="1", debug=True, since="2.8"),
    _v("NCCL_NET_SHARED_COMMS", "bool", default="1", debug=True, since="2.12"),
    _v("NCCL_IGNORE_NET_MISMATCH", "bool", default="1", debug=True, since="2.30"),
    _v("NCCL_IGNORE_COLLNET_MISMATCH", "bool", default="0", debug=True, since="2.30"),
    _v("NCCL_ALGO", "string", debug=True, since="2.5"),
    _v("NCCL_PROTO", "string", debug=True, since="2.5"),
    _v("NCCL_NVB_DISABLE", "bool", default="0", debug=True, since="2.11"),
    _v("NCCL_PXN_DISABLE", "bool", default="0", debug=True, since="2.12"),
    _v("NCCL_P2P_PXN_LEVEL", "int", lo=0, hi=2, default="2", debug=True, since="2.12"),
    _v("NCCL_PXN_C2C", "bool", debug=True, since="2.27"),
    _v("NCCL_RUNTIME_CONNECT", "bool", default="1", debug=True, since="2.22"),
    _v("NCCL_GRAPH_REGISTER", "bool", default="1", debug=True, since="2.11"),
    _v("NCCL_LOCAL_REGISTER", "bool", default="1", debug=True, since="2.19"),
    _v("NCCL_LEGACY_CUDA_REGISTER", "bool", default="0", debug=True, since="2.24"),
    _v("NCCL_WIN_ENABLE", "bool", default="1", debug=True, since="2.27"),
    _v("NCCL_SET_STACK_SIZE", "bool", default="0", debug=True, since="2.9"),
    _v("NCCL_GRAPH_MIXING_SUPPORT", "bool", default="1", debug=True, since="2.13"),
    _v("NCCL_GRAPH_STREAM_ORDERING", "bool", default="1", debug=True, since="2.30"),
    _v("NCCL_RMA_EAGER_INIT", "bool", default="0", debug=True, since="2.31"),
    _v("NCCL_DMABUF_ENABLE", "bool", default="1", debug=True, since="2.13"),
    _v("NCCL_P2P_NET_CHUNKSIZE", "size", lo=1, default="131072", debug=True, since="2.14"),
    _v("NCCL_P2P_LL_THRESHOLD", "size", lo=0, default="16384", debug=True, since="2.14"),
    _v("NCCL_ALLOC_P2P_NET_LL_BUFFERS", "bool", default="0", debug=True, since="2.14"),
    _v("NCCL_COMM_BLOCKING", "bool", debug=True, since="2.14"),
    _v("NCCL_CGA_CLUSTER_SIZE", "int", lo=0, hi=8, debug=True, since="2.16"),
    _v("NCCL_MAX_CTAS", "int", lo=1, hi=64, debug=True, since="2.17"),
    _v("NCCL_MIN_CTAS", "int", lo=1, hi=64, debug=True, since="2.17"),
    _v("NCCL_NVLS_ENABLE", "int", lo=0, hi=2, default="2", debug=True, since="2.17"),
    _v("NCCL_IB_MERGE_NICS", "bool", default="1", debug=True, since="2.20"),
    _v("NCCL_NET_MERGE_POLICY", "enum", choices=("ALL", "RAIL"), debug=True, since="2.30.5"),
    _v("NCCL_MNNVL_ENABLE", "int", lo=0, hi=2, debug=True, since="2.21"),
    _v("NCCL_MNNVL_UUID", "string", debug=True, since="2.25"),
    _v("NCCL_MNNVL_CLIQUE_ID", "int", debug=True, since="2.25"),
    _v("NCCL_RAS_ENABLE", "bool", default="1", debug=True, since="2.24"),
    _v("NCCL_RAS_ADDR", "string", debug=True, since="2.24"),
    _v("NCCL_RAS_TIMEOUT_FACTOR", "float", debug=True, since="2.24"),
    _v("NCCL_LAUNCH_ORDER_IMPLICIT", "bool", default="0", debug=True, since="2.26"),
    _v("NCCL_LAUNCH_RACE_FATAL", "bool", default="1", debug=True, since="2.26"),
    _v("NCCL_IPC_USE_ABSTRACT_SOCKET", "bool", default="1", debug=True, since="2.29"),
    _v("NCCL_SYM_GIN_KERNELS_ENABLE", "bool", default="1", debug=True, since="2.29"),
    # ---- in the source, not on the page ----
    _v("NCCL_COMM_ID", "string", documented=False),
    _v("NCCL_HOSTID", "string", documented=False),
    _v("NCCL_IB_ROUTABLE_FLID_GID_INDEX", "int", lo=0, hi=255, default="1", documented=False),
    _v("NCCL_IB_DEVICE_PCI_ORDER", "bool", default="1", documented=False),
    _v("NCCL_IB_USE_INLINE", "bool", documented=False),
    _v("NCCL_IB_MERGE_VFS", "bool", documented=False),
    _v("NCCL_NET_MERGE_LEVEL", "level", documented=False),
    _v("NCCL_NET_FORCE_FLUSH", "bool", documented=False),
    _v("NCCL_NET_DISABLE_INTRA", "bool", documented=False),
    _v("NCCL_NET_OVERHEAD", "int", documented=False),
    _v("NCCL_GDR_FLUSH_DISABLE", "bool", documented=False),
    _v("NCCL_LL_BUFFSIZE", "size", documented=False),
    _v("NCCL_LL128_BUFFSIZE", "size", documented=False),
    _v("NCCL_LL128_NTHREADS", "int", documented=False),
    _v("NCCL_NCHANNELS_PER_NET_PEER", "int", lo=1, documented=False),
    _v("NCCL_NCHANNELS_PER_PEER", "int", lo=1, documented=False),
    _v("NCCL_NVLS_NCHANNELS", "int", lo=1, documented=False),
    _v("NCCL_NVLS_CHUNKSIZE", "size", documented=False),
    _v("NCCL_P2P_NVL_CHUNKSIZE", "size", documented=False),
    _v("NCCL_P2P_PCI_CHUNKSIZE", "size", documented=False),
    _v("NCCL_P2P_READ_ENABLE", "bool", documented=False),
    _v("NCCL_P2P_USE_CUDA_MEMCPY", "bool", documented=False),
    _v("NCCL_SHM_USE_CUDA_MEMCPY", "bool", documented=False),
    _v("NCCL_SHM_MEMCPY_MODE", "int", documented=False),
    _v("NCCL_WORK_FIFO_DEPTH", "int", documented=False),
    _v("NCCL_WORK_FIFO_BYTES", "size", documented=False),
    _v("NCCL_PROXY_APPEND_BATCH_SIZE", "int", documented=False),
    _v("NCCL_PROGRESS_APPENDOP_FREQ", "int", documented=False),
    _v("NCCL_CREATE_THREAD_CONTEXT", "bool", documented=False),
    _v("NCCL_IGNORE_DISABLED_P2P", "bool", documented=False),
    _v("NCCL_ALGO_THRESHOLD", "string", documented=False),
    _v("NCCL_PROXY_PROFILE", "path", documented=False),
    _v("NCCL_NET_PLUGIN_REF_COUNT", "int", documented=False),
    _v("NCCL_IB_SOCKET_FAMILY", "enum", choices=("AF_INET", "AF_INET6"), documented=False),
    _v("NCCL_CUDA_PATH", "path", documented=False),
]

SPECS: dict[str, VarSpec] = {s.name: s for s in _SPECS}

# Old name -> (what to use instead, severity, why)
RENAMED: dict[str, tuple[str | None, str, str]] = {
    "NCCL_IB_GDR_LEVEL": ("NCCL_NET_GDR_LEVEL", "warn", "renamed in NCCL 2.4.0; newer NCCL ignores the old name"),
    "NCCL_IB_CUDA_SUPPORT": ("NCCL_NET_GDR_LEVEL", "warn", "removed in NCCL 2.4.0: it has no effect"),
    "NCCL_MIN_NRINGS": ("NCCL_MIN_CTAS", "warn", "NCCL 2.4 name; ignored when NCCL_MIN_NCHANNELS is set, and both are deprecated since 2.17"),
    "NCCL_MAX_NRINGS": ("NCCL_MAX_CTAS", "warn", "NCCL 2.4 name; ignored when NCCL_MAX_NCHANNELS is set, and both are deprecated since 2.17"),
    "NCCL_MIN_NCHANNELS": ("NCCL_MIN_CTAS", "info", "deprecated since NCCL 2.17 (still read; the more restrictive of the two wins)"),
    "NCCL_MAX_NCHANNELS": ("NCCL_MAX_CTAS", "info", "deprecated since NCCL 2.17 (still read; the more restrictive of the two wins)"),
    "NCCL_LL_THRESHOLD": (None, "warn", "removed in NCCL 2.5: it has no effect (use NCCL_PROTO only to debug)"),
    "NCCL_TREE_THRESHOLD": (None, "warn", "removed in NCCL 2.5: it has no effect (use NCCL_ALGO only to debug)"),
    "NCCL_SINGLE_RING_THRESHOLD": (None, "warn", "removed in NCCL 2.3: it has no effect"),
    "NCCL_CHECKS_DISABLE": (None, "warn", "deprecated in NCCL 2.2.12: it has no effect"),
    "NCCL_CHECK_POINTERS": ("NCCL_CHECK_MODE", "info", "deprecated in NCCL 2.29.7 (NCCL_CHECK_MODE=DEBUG_LOCAL replaces it)"),
    # PyTorch's own variables that carry an NCCL_ prefix
    "NCCL_ASYNC_ERROR_HANDLING": ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "info", "a PyTorch variable, renamed TORCH_NCCL_ASYNC_ERROR_HANDLING in PyTorch 2.2"),
    "NCCL_BLOCKING_WAIT": ("TORCH_NCCL_BLOCKING_WAIT", "info", "a PyTorch variable, renamed TORCH_NCCL_BLOCKING_WAIT in PyTorch 2.2"),
    "NCCL_DESYNC_DEBUG": ("TORCH_NCCL_DESYNC_DEBUG", "info", "a PyTorch variable, renamed TORCH_NCCL_DESYNC_DEBUG in PyTorch 2.2"),
}


def suggest(name: str) -> str | None:
    """The nearest real variable name for a misspelt one (None when nothing is close)."""
    candidates = list(SPECS) + list(RENAMED)
    best = difflib.get_close_matches(name.upper(), candidates, n=1, cutoff=0.8)
    return best[0] if best else None


def parse_level(value: str) -> str | None:
    """``"PXB"`` or a legacy integer (``"2"``) -> the level name; None when not a level."""
    text = value.strip().upper()
    if text in LEVELS or text in ("NVB", "C2C", "P2C", "PXN", "NODE"):
        return text
    try:
        number = int(text)
    except ValueError:
        return None
    if number < 0:
        return None
    return LEGACY_LEVELS.get(number, "SYS")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = []
    for piece in text.strip().lstrip("v").split("+")[0].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts) if parts else None
