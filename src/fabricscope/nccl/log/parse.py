"""Line reader of NCCL_DEBUG output (NCCL 2.3 to current formats).

Three layers, each usable on its own:

* :func:`parse_line` turns one line into a :class:`LogEvent` (or ``None`` for lines that are not
  NCCL's). Pure and stateless, so a tailer (the exporter follows live logs with it) can count
  events line by line without keeping anything.
* :class:`fabricscope.nccl.log.aggregate.LogAggregator` is fed lines and keeps only per-process,
  per-rank and per-kind state, so memory stays flat whatever the size of the log;
  :mod:`fabricscope.nccl.log.read` streams files into it (over several cores if asked) and
  :func:`fabricscope.nccl.log.report.build_report` turns that state into per-rank facts and
  doctor-shaped findings.

A line looks like ``[prefix ][timestamp ]host:pid:tid [cudaDev] [file:line ]NCCL LEVEL message``:
launcher prefixes (``[0] ``, ``0: ``, ``[1,0]<stdout>:``, ``[default0]:``) and timestamps (NCCL's own
``[%F %T] `` on WARN lines since 2.26, or a collector's) are recognised and kept apart; ``file:line``
appears on WARN lines. NCCL 2.3-2.5 print ``NCCL version X`` on a line of its own.

Event kinds (``LogEvent.kind``) and their ``data`` keys:

====================  ======================================================================
``version``           ``version`` ("2.19.3"), ``build`` ("+cuda12.3")
``network``           ``name``: the network module NCCL chose ("IB", "Socket", "IBext_v8", ...)
``net_devices``       ``net``, ``devices`` [(index, name, port, link layer "IB"/"RoCE")],
                      ``relaxed_ordering``, ``oob`` (interface) -- "NET/IB : Using [0]mlx5_0:1/IB ..."
``socket_devices``    ``interfaces`` [(name, address)] -- "NET/Socket : Using [0]eth0:10.0.0.1<0>"
``no_device``         ``net`` -- "NET/IB : No device found."
``no_verbs``          (no data) -- "Failed to open libibverbs.so[.1]": rdma-core is missing
``gdr``               ``net``, ``enabled``, ``hca_index``, ``hca``, ``gpu``, ``detail``
``channel``           ``channel``, ``src``, ``dst``, ``direction`` (send/receive/None), ``via``,
                      ``transport`` (label such as "NET/IB/GDRDMA", "P2P/IPC", "SHM"), ``tclass``
                      ("net_rdma", "net_socket", "p2p", "shm", "other"), ``net``, ``net_dev``,
                      ``gdr``, ``local_rank`` (the rank that printed the line)
``comm``              ``rank``, ``nranks``, ``nnodes``, ``phase`` ("start", "complete",
                      "destroy", "abort" or None), ``comm``
``connected``         ``pxn``, ``gdr`` -- "Connected all rings, use ring PXN 0 GDR 1"
``env``               ``name``, ``value`` -- "NCCL_IB_HCA set by environment to mlx5"
``bootstrap``         ``interfaces`` [(name, address)]
``qp``                ``dev``, ``ib_dev``, ``port``, ``qpn``, ``mtu``, ``gid_index``, ``gid``
                      (RoCE per-QP line, NET subsystem)
``net_plugin``        ``plugin`` (name, path or "internal"), ``message_id``, ``next`` -- "NET/Plugin: ..."
``retcode``           ``site`` ("transport/net_ib.cc:579"), ``code`` (ncclResult_t), ``thread``
``completion_error``  WARN: ``status`` (ibv_wc_status), ``vendor_err``, ``opcode``, ``peer``, ``hca``
``verbs_error``       WARN: ``call`` ("ibv_modify_qp"), ``error`` ("Network is unreachable")
``async_event``       WARN: ``event``
``timeout``           WARN mentioning a timeout
``connection``        WARN about a socket/bootstrap connection (closed, refused, reset)
``cuda_error``        WARN from a CUDA call
``proxy_error``       WARN from the proxy thread ("Failed to execute operation ...")
``warn``              any other WARN
``info``              any other INFO/TRACE line (``data`` is empty)
====================  ======================================================================

WARN-level events always have ``level == "WARN"``; :data:`WARN_KINDS` lists their kinds.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

LEVELS = frozenset({"INFO", "WARN", "TRACE", "CALL", "ABORT", "ERROR"})
WARN_KINDS = (
    "completion_error",
    "verbs_error",
    "async_event",
    "timeout",
    "connection",
    "cuda_error",
    "proxy_error",
    "warn",
)
# Lines longer than this are not NCCL's (its buffer is 1 KiB in most versions, 2 KiB in newer).
MAX_LINE_CHARS = 16384


@dataclass(slots=True)
class LogEvent:
    """One NCCL log line, classified. ``data`` holds the kind-specific fields (module docstring)."""

    kind: str
    level: str | None  # INFO, WARN, TRACE, CALL, ABORT; None for a bare "NCCL version" line
    host: str | None
    pid: int | None
    tid: int | None
    cuda_dev: int | None
    message: str
    source: str | None = None  # "misc/ibvwrap.cc:187" on WARN lines
    timestamp: str | None = None
    prefix: str | None = None  # launcher prefix, e.g. "[0]" or "[1,0]<stdout>:"
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def is_warn(self) -> bool:
        return self.level == "WARN"


# ----- regular expressions ----------------------------------------------------------------
_HEADER = re.compile(r"([\w.\-]*):(\d+):(\d+)(?: \[(\d+)\])?(?: ([^\s:]+:\d+))?$")
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
)
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(\S*)")
_BARE_VERSION = re.compile(r"^(.{0,80}?)\bNCCL version (\d+\.\d+\.\d+)(\S*)\s*$")
_CHANNEL = re.compile(
    r"(?:Channel|Ring) (\d+)(?:/(\d+))? : (\d+)(?:\[(\w+)\])? -> (\d+)(?:\[(\w+)\])?(?: \[(send|receive)\])? via (.+)$"
)
_NET_USING = re.compile(r"NET/(\S+?) ?: Using (.*)$")
_IB_DEV = re.compile(r"\[(\d+)\]([^\s:\[\]]+):(\d+)(?::-?\d*)*/(IB|RoCE)")
_IB_DEV_LINE = re.compile(r"NET/(\w+) ?: \[(\d+)\] ?([^\s:]+):(?:[^\s:/]+:)?(\d+)/(IB|RoCE)")
_SOCK_DEV = re.compile(r"(?:\[\d+\])?([^\s:\[\]]+):(\S+?)<\d+>")
_OOB = re.compile(r"OOB ([^\s:]+):")
_GDR = re.compile(
    r"NET/(\S+?) ?: GPU Direct RDMA (Enabled|Disabled) for (?:GPU (\w+) / )?HCA (\d+)(?: '([^']*)')?(.*)$"
)
_GDR_TOPO = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for GPU (\w+) / HCA (\d+)(.*)$")
_COMM = re.compile(r"comm (0x[0-9a-fA-F]+|\(nil\)) rank (\d+) n[Rr]anks (\d+)(?: nNodes (\d+))?")
_OLD_RANK = re.compile(r"rank (\d+) nranks (\d+)$")
_ENV = re.compile(r"(NCCL_\w+) set (?:by environment )?to (.*)$")
_QP = re.compile(
    r"NET/IB: (?:\w+: )?NCCL (?:Merged)?Dev (\d+) IbDev (\d+) Port (\d+) (?:qpn|qp_num) (\d+) mtu (\d+)"
    r".*? GID (\d+) \(([0-9A-Fa-f]+)/([0-9A-Fa-f]+)\)"
)
_CONNECTED = re.compile(r"Connected all rings(?:, use ring PXN (\d+) GDR (\d+))?")
_RETCODE = re.compile(r"([^\s:]+:\d+) -> (\d+)(?: \[([^\]]*)\])?\s*$")
_WC_STATUS = re.compile(r"(?:with error |status=)(?:IBV_WC_\w+\()?(\d+)")
_WC_VENDOR = re.compile(r"vendor[ _]err(?:=| )(\d+)")
_WC_OPCODE = re.compile(r"opcode(?:=| )(?:IBV_WC_\w+\()?(\d+)")
_WC_PEER = re.compile(r"from peer (\S+?)(?:<\d+>)? with")
_WC_HCA = re.compile(r"\bhca (\S+)")
_VERBS = re.compile(r"Call to (ibv_\w+) failed(?: with(?: error)? (.*?))?\s*$")
_CUDA_ERROR = re.compile(r"\bcuda\w* ?(?:failure|error|failed)|cudaError|unhandled cuda", re.IGNORECASE)
_ASYNC = re.compile(r"async (?:fatal )?event(?: on \S+)? ?:? ?(.*)$", re.IGNORECASE)


class Header(NamedTuple):
    """What precedes ``NCCL LEVEL`` on a line: ``[prefix ][timestamp ]host:pid:tid [cudaDev] [file:line]``."""

    prefix: str | None  # launcher prefix, e.g. "[0]" or "[1,0]<stdout>:"
    timestamp: str | None
    host: str | None
    pid: int
    tid: int
    cuda_dev: int | None
    source: str | None  # "misc/ibvwrap.cc:187" on WARN lines


# Small caches: headers and channel transports repeat millions of times in big logs.
_CACHE_LIMIT = 65536
_header_cache: dict[str, Header | None] = {}
_via_cache: dict[str, tuple] = {}


def parse_header(header: str) -> Header | None:
    """The :class:`Header` of the text before `` NCCL ``, or None when it is not an NCCL header."""
    cached = _header_cache.get(header)
    if cached is not None or header in _header_cache:
        return cached
    match = _HEADER.search(header)
    result: Header | None = None
    if match is not None:
        before = header[: match.start()].strip()
        timestamp = None
        prefix = None
        if before:
            ts = _TIMESTAMP.search(before)
            if ts is not None:
                timestamp = ts.group(0)
                before = (before[: ts.start()] + before[ts.end() :]).replace("[]", "").strip()
            prefix = before or None
        dev = match.group(4)
        result = Header(
            prefix,
            timestamp,
            match.group(1) or None,
            int(match.group(2)),
            int(match.group(3)),
            int(dev) if dev is not None else None,
            match.group(5),
        )
    if len(_header_cache) >= _CACHE_LIMIT:
        _header_cache.clear()
    _header_cache[header] = result
    return result


def classify_transport(via: str) -> tuple[str, str, str | None, int | None, bool]:
    """``"NET/IB/5/GDRDMA"`` -> ``("NET/IB/GDRDMA", "net_rdma", "IB", 5, True)``.

    Returns (label, class, network name, network device index, GPUDirect RDMA)."""
    cached = _via_cache.get(via)
    if cached is not None:
        return cached
    parts = via.strip().split("/")
    head = parts[0]
    result: tuple[str, str, str | None, int | None, bool]
    if head == "NET" and len(parts) >= 2:
        net = parts[1]
        dev = None
        if len(parts) >= 3:
            digits = re.match(r"(\d+)", parts[2])
            dev = int(digits.group(1)) if digits else None
        gdr = any(p.startswith("GDRDMA") for p in parts[3:])
        label = f"NET/{net}" + ("/GDRDMA" if gdr else "")
        tclass = "net_socket" if net.lower() == "socket" else "net_rdma"
        result = (label, tclass, net, dev, gdr)
    elif head == "P2P":
        kind = parts[1] if len(parts) >= 2 else "?"
        result = (f"P2P/{kind}", "p2p", None, None, False)
    elif head == "SHM" or via.startswith("direct shared memory"):
        result = ("SHM", "shm", None, None, False)
    elif head.upper().startswith("COLLNET"):
        result = ("CollNet", "other", None, None, False)
    else:
        result = (head, "other", None, None, False)
    if len(_via_cache) >= _CACHE_LIMIT:
        _via_cache.clear()
    _via_cache[via] = result
    return result


def decode_gid(prefix_hex: str, iid_hex: str) -> str | None:
    """The GID NCCL prints as two little-endian 64-bit words (``80FE/1A8A41FEFF21A75E``)."""
    try:
        raw = int(prefix_hex, 16).to_bytes(8, "little") + int(iid_hex, 16).to_bytes(8, "little")
    except (ValueError, OverflowError):
        return None
    address = ipaddress.IPv6Address(raw)
    mapped = address.ipv4_mapped
    return f"::ffff:{mapped}" if mapped is not None else str(address)


def classify_warn(msg: str) -> tuple[str, dict[str, Any]]:
    if "Got completion" in msg:
        status = _WC_STATUS.search(msg)
        vendor = _WC_VENDOR.search(msg)
        opcode = _WC_OPCODE.search(msg)
        peer = _WC_PEER.search(msg)
        hca = _WC_HCA.search(msg)
        return "completion_error", {
            "status": int(status.group(1)) if status else None,
            "vendor_err": int(vendor.group(1)) if vendor else None,
            "opcode": int(opcode.group(1)) if opcode else None,
            "peer": peer.group(1) if peer else None,
            "hca": hca.group(1) if hca else None,
        }
    if "GID table changed" in msg:  # transport/net_ib/common.cc:153 at v2.30.7-1, printed on its own
        return "async_event", {"event": "GID table change"}
    verbs = _VERBS.search(msg)
    if verbs is not None:
        return "verbs_error", {"call": verbs.group(1), "error": (verbs.group(2) or "").strip() or None}
    lower = msg.lower()
    if "async" in lower and "event" in lower:
        match = _ASYNC.search(msg)
        return "async_event", {"event": match.group(1).strip() if match else None}
    if "timeout" in lower or "timed out" in lower:
        return "timeout", {}
    if _CUDA_ERROR.search(msg) is not None:
        return "cuda_error", {}
    if "failed to execute operation" in lower or lower.startswith("proxy") or "[proxy" in lower:
        return "proxy_error", {}
    if "connection" in lower or "socket" in lower or "bootstrap" in lower or "connect " in lower:
        return "connection", {}
    return "warn", {}


InfoResult = tuple[str, dict[str, Any] | None]
_INFO: InfoResult = ("info", None)


def _channel(msg: str) -> InfoResult:
    match = _CHANNEL.match(msg)
    if match is None:
        return _INFO
    via = match.group(8)
    label, tclass, net, net_dev, gdr = classify_transport(via)
    src, dst = int(match.group(3)), int(match.group(5))
    direction = match.group(7)
    return "channel", {
        "channel": int(match.group(1)),
        "src": src,
        "dst": dst,
        "direction": direction,
        "via": via,
        "transport": label,
        "tclass": tclass,
        "net": net,
        "net_dev": net_dev,
        "gdr": gdr,
        "local_rank": dst if direction == "receive" else src,
    }


def _connected(msg: str) -> InfoResult:
    match = _CONNECTED.match(msg)
    if match is not None and match.group(1) is not None:
        return "connected", {"pxn": int(match.group(1)), "gdr": int(match.group(2))}
    return "connected", {"pxn": None, "gdr": None}


def _gdr_data(
    net: str | None, enabled: str, gpu: str | None, hca_index: str, hca: str | None, detail: str
) -> InfoResult:
    data = {"net": net, "enabled": enabled == "Enabled", "gpu": gpu, "hca_index": int(hca_index), "hca": hca}
    data["detail"] = detail.strip() or None
    return "gdr", data


def _net_gdr(msg: str) -> InfoResult | None:
    match = _GDR.match(msg)
    return None if match is None else _gdr_data(*match.groups())


def _net_using(msg: str) -> InfoResult | None:
    match = _NET_USING.match(msg)
    if match is None or match.group(1) == "Plugin":
        return None
    net, rest = match.group(1), match.group(2)
    if net == "Socket":
        return "socket_devices", {"interfaces": _SOCK_DEV.findall(rest)}
    devices = [(int(i), n, int(p), ll) for i, n, p, ll in _IB_DEV.findall(rest)]
    if not devices:
        return None
    oob = _OOB.search(rest)
    return "net_devices", {
        "net": net,
        "devices": devices,
        "relaxed_ordering": "[RO]" in rest,
        "oob": oob.group(1) if oob else None,
    }


def _net_device_line(msg: str) -> InfoResult | None:
    """One device per line (NCCL 2.3, and 2.2x plugins): ``NET/IB : [0] mlx5_0:1/IB``."""
    match = _IB_DEV_LINE.match(msg)
    if match is None:
        return None
    device = (int(match.group(2)), match.group(3), int(match.group(4)), match.group(5))
    return "net_devices", {
        "net": match.group(1),
        "devices": [device],
        "relaxed_ordering": False,
        "oob": None,
        "partial": True,
    }


def _net_qp(msg: str) -> InfoResult | None:
    match = _QP.match(msg) if " GID " in msg else None
    if match is None:
        return None
    return "qp", {
        "dev": int(match.group(1)),
        "ib_dev": int(match.group(2)),
        "port": int(match.group(3)),
        "qpn": int(match.group(4)),
        "mtu": int(match.group(5)),
        "gid_index": int(match.group(6)),
        "gid": decode_gid(match.group(7), match.group(8)),
    }


def _net(msg: str) -> InfoResult:
    if "GPU Direct RDMA" in msg:
        found = _net_gdr(msg)
        if found is not None:
            return found
    if "No device found" in msg:
        return "no_device", {"net": msg[4:].split(" ", 1)[0].rstrip(":") or "IB"}
    if msg.startswith("NET/Plugin"):
        return _net_plugin(msg)
    return _net_using(msg) or _net_device_line(msg) or _net_qp(msg) or _INFO


_LOADED_PLUGIN = re.compile(r"Loaded net plugin (\S+)")


def _net_plugin(msg: str) -> InfoResult:
    """Which network plugin NCCL loaded, or that it fell back to its internal one: every NET/Plugin
    message saying so is ``falls_back`` in the catalogue ("using internal implementation", "Using
    internal network plugin"; tests/nccl/test_messages.py holds that), so the text decides here
    without loading the catalogue on the fast path."""
    loaded = _LOADED_PLUGIN.search(msg)
    if loaded is not None:
        return "net_plugin", {"plugin": loaded.group(1), "message_id": None, "next": "goes_on"}
    if "internal" in msg:
        return "net_plugin", {"plugin": "internal", "message_id": None, "next": "falls_back"}
    return _INFO


def _plugin_path(msg: str) -> InfoResult:
    """nccl-rdma-sharp-plugins' "Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib"."""
    return "net_plugin", {"plugin": msg.partition(":")[2].strip() or None, "message_id": None, "next": None}


def _using(msg: str) -> InfoResult:
    if msg.startswith("Using network "):
        return "network", {"name": msg[14:].strip()}
    if msg.startswith("Using internal Network "):  # NCCL 2.3
        return "network", {"name": msg[23:].strip()}
    return _INFO


def _nccl_word(msg: str) -> InfoResult:
    """``NCCL_X set by environment to Y`` or ``NCCL version X``."""
    match = _ENV.match(msg)
    if match is not None:
        value = match.group(2).strip()
        if value.endswith(".") and "set by environment" in msg:
            value = value[:-1]
        return "env", {"name": match.group(1), "value": value}
    match = _VERSION.match(msg)
    if match is not None:
        return "version", {"version": match.group(1), "build": match.group(2) or None}
    return _INFO


def _gdr_topo(msg: str) -> InfoResult:
    match = _GDR_TOPO.match(msg)
    if match is None:
        return _INFO
    enabled, gpu, hca_index, detail = match.groups()
    return _gdr_data(None, enabled, gpu, hca_index, None, detail)


_PHASES = (
    ("Init START", "start"),
    ("Init COMPLETE", "complete"),
    ("Destroy COMPLETE", "destroy"),
    ("Abort COMPLETE", "abort"),
)


def _comm_data(comm: str | None, rank: str, nranks: str, nnodes: str | None, phase: str | None) -> InfoResult:
    count = int(nnodes) if nnodes is not None else None
    return "comm", {"comm": comm, "rank": int(rank), "nranks": int(nranks), "nnodes": count, "phase": phase}


def _comm(msg: str) -> InfoResult:
    match = _COMM.search(msg) if "rank" in msg else None
    if match is None:
        return _INFO
    phase = next((name for text, name in _PHASES if text in msg), None)
    return _comm_data(*match.groups(), phase)


def _old_rank(msg: str) -> InfoResult:
    match = _OLD_RANK.match(msg)
    return _INFO if match is None else _comm_data(None, *match.groups(), None, None)


def _no_verbs(msg: str) -> InfoResult:
    """``Failed to open libibverbs.so[.1]`` (INFO since 2.1x; a WARN before): rdma-core is missing."""
    return "no_verbs", {}


def _bootstrap(msg: str) -> InfoResult:
    if "Using" not in msg:
        return _INFO
    return "bootstrap", {"interfaces": _SOCK_DEV.findall(msg.partition("Using")[2])}


# Message prefix -> handler, for every INFO/TRACE message that is more than a plain line. A message
# with none of these prefixes is plain "info" unless it is a ``file:line -> N`` return code.
INFO_HANDLERS: dict[str, Callable[[str], InfoResult]] = {
    "Channel ": _channel,
    "Ring ": _channel,
    "Connected all rings": _connected,
    "NET": _net,
    "Using ": _using,
    "NCCL": _nccl_word,
    "comm ": _comm,
    "ncclComm": _comm,
    "[Rank": _comm,
    "rank ": _old_rank,
    "Bootstrap": _bootstrap,
    "GPU Direct": _gdr_topo,
    "Failed to open libibverbs": _no_verbs,
    "Plugin Path": _plugin_path,
}
# The prefixes as one tuple: ``str.startswith(INFO_PREFIXES, start)`` runs in C (the batch fast path).
INFO_PREFIXES = tuple(INFO_HANDLERS)
_BY_FIRST3: dict[str, list[tuple[str, Callable[[str], InfoResult]]]] = {}
for _prefix, _handler in INFO_HANDLERS.items():
    _BY_FIRST3.setdefault(_prefix[:3], []).append((_prefix, _handler))


def _retcode(msg: str) -> InfoResult:
    if " -> " in msg and (msg[-1:].isdigit() or msg[-1:] == "]"):
        match = _RETCODE.match(msg)
        if match is not None:
            return "retcode", {"site": match.group(1), "code": int(match.group(2)), "thread": match.group(3)}
    return _INFO


def classify_info(msg: str) -> InfoResult:
    """(kind, data) of an INFO/TRACE message; data is None for plain "info"."""
    for prefix, handler in _BY_FIRST3.get(msg[:3], ()):
        if msg.startswith(prefix):
            return handler(msg)
    return _retcode(msg)


_MISS = object()


def split_line(line: str) -> tuple[Header, str, str] | None:
    """``(header, level, message)`` of an NCCL line with a ``host:pid:tid`` header, else None."""
    idx = line.find(" NCCL ")
    if idx <= 0:
        return None
    head = line[:idx]
    header = _header_cache.get(head, _MISS)
    if header is _MISS:
        header = parse_header(head)
    if header is None:
        return None
    rest = line[idx + 6 :]
    sp = rest.find(" ")
    level = rest if sp < 0 else rest[:sp]  # an empty message is still an NCCL line
    if level not in LEVELS:
        return None
    return header, level, "" if sp < 0 else rest[sp + 1 :]


def bare_version(line: str) -> LogEvent | None:
    bare = _BARE_VERSION.match(line) if "NCCL version" in line else None
    if bare is None:
        return None
    version, build = bare.group(2), bare.group(3) or None
    return LogEvent(
        "version",
        None,
        None,
        None,
        None,
        None,
        f"NCCL version {version}{build or ''}",
        prefix=bare.group(1).strip() or None,
        data={"version": version, "build": build},
    )


def make_event(header: Header, level: str, msg: str, kind: str, data: dict[str, Any] | None) -> LogEvent:
    h = header
    return LogEvent(
        kind, level, h.host, h.pid, h.tid, h.cuda_dev, msg, h.source, h.timestamp, h.prefix, data or {}
    )


def parse_line(line: str) -> LogEvent | None:
    """Classify one line of NCCL output; ``None`` when the line is not NCCL's.

    Never raises for any input string (fuzzed by the test suite)."""
    if len(line) > MAX_LINE_CHARS:
        return None
    line = line.rstrip()
    split = split_line(line)
    if split is None:
        return bare_version(line)
    header, level, msg = split
    kind, data = classify_warn(msg) if level == "WARN" else classify_info(msg)
    return make_event(header, level, msg, kind, data)
