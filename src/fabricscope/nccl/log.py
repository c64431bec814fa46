"""Streaming reader of NCCL_DEBUG output (NCCL 2.3 to current formats).

Two layers, both usable on their own:

* :func:`parse_line` turns one line into a :class:`LogEvent` (or ``None`` for lines that are not
  NCCL's). Pure and stateless, so a tailer (the exporter follows live logs with it) can count
  events line by line without keeping anything.
* :class:`LogAggregator` is fed lines one at a time and keeps only per-process, per-rank and
  per-kind state, so memory stays flat whatever the size of the log; :meth:`LogAggregator.report`
  turns that state into per-rank facts and doctor-shaped findings (see :mod:`.verdicts`).

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
import zlib
from dataclasses import dataclass, field
from typing import Any

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
_GDR = re.compile(r"NET/(\S+?) ?: GPU Direct RDMA (Enabled|Disabled) for (?:GPU (\w+) / )?HCA (\d+)(?: '([^']*)')?(.*)$")
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

# Small caches: headers and channel transports repeat millions of times in big logs.
_CACHE_LIMIT = 65536
_header_cache: dict[str, tuple | None] = {}
_via_cache: dict[str, tuple] = {}


def _parse_header(header: str) -> tuple | None:
    """``(prefix, timestamp, host, pid, tid, dev, source)`` or None when not an NCCL header."""
    cached = _header_cache.get(header)
    if cached is not None or header in _header_cache:
        return cached
    match = _HEADER.search(header)
    result: tuple | None = None
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
        result = (
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


def _classify_warn(msg: str) -> tuple[str, dict[str, Any]]:
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


# First three characters of every INFO message we classify; anything else is "info" unless it is a
# ``file:line -> N`` return-code line. Checked first because it is what most lines of a big log hit.
_INFO_FIRST = frozenset({"Cha", "Rin", "Con", "NET", "Usi", "NCC", "com", "ncc", "[Ra", "ran", "Boo", "GPU"})
# The same, as full prefixes, for the batch fast path (``str.startswith`` with a tuple runs in C).
_INFO_PREFIXES = (
    "Channel ", "Ring ", "Connected all rings", "NET", "Using ", "NCCL", "comm ", "ncclComm", "[Rank", "rank ",
    "Bootstrap", "GPU Direct",
)


def _classify_info(msg: str) -> tuple[str, dict[str, Any] | None]:
    """(kind, data) of an INFO/TRACE message; data is None for plain "info"."""
    first = msg[:3]
    if first not in _INFO_FIRST:
        if " -> " in msg and (msg[-1:].isdigit() or msg[-1:] == "]"):
            match = _RETCODE.match(msg)
            if match is not None:
                return "retcode", {"site": match.group(1), "code": int(match.group(2)), "thread": match.group(3)}
        return "info", None
    if first == "Cha" or first == "Rin":
        match = _CHANNEL.match(msg)
        if match is not None:
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
        if msg.startswith("Connected all rings"):
            match = _CONNECTED.match(msg)
            if match is not None and match.group(1) is not None:
                return "connected", {"pxn": int(match.group(1)), "gdr": int(match.group(2))}
            return "connected", {"pxn": None, "gdr": None}
        return "info", None
    if first == "Con" and msg.startswith("Connected all rings"):
        match = _CONNECTED.match(msg)
        if match is not None and match.group(1) is not None:
            return "connected", {"pxn": int(match.group(1)), "gdr": int(match.group(2))}
        return "connected", {"pxn": None, "gdr": None}
    if first == "NET":
        if "GPU Direct RDMA" in msg:
            match = _GDR.match(msg)
            if match is not None:
                return "gdr", {
                    "net": match.group(1),
                    "enabled": match.group(2) == "Enabled",
                    "gpu": match.group(3),
                    "hca_index": int(match.group(4)),
                    "hca": match.group(5),
                    "detail": match.group(6).strip() or None,
                }
        if "No device found" in msg:
            net = msg[4:].split(" ", 1)[0].rstrip(":") or "IB"
            return "no_device", {"net": net}
        match = _NET_USING.match(msg)
        if match is not None and match.group(1) != "Plugin":
            net, rest = match.group(1), match.group(2)
            if net == "Socket":
                return "socket_devices", {"interfaces": _SOCK_DEV.findall(rest)}
            devices = [(int(i), n, int(p), ll) for i, n, p, ll in _IB_DEV.findall(rest)]
            if devices:
                oob = _OOB.search(rest)
                return "net_devices", {
                    "net": net,
                    "devices": devices,
                    "relaxed_ordering": "[RO]" in rest,
                    "oob": oob.group(1) if oob else None,
                }
        match = _IB_DEV_LINE.match(msg)
        if match is not None:
            return "net_devices", {
                "net": match.group(1),
                "devices": [(int(match.group(2)), match.group(3), int(match.group(4)), match.group(5))],
                "relaxed_ordering": False,
                "oob": None,
                "partial": True,
            }
        if " GID " in msg:
            match = _QP.match(msg)
            if match is not None:
                return "qp", {
                    "dev": int(match.group(1)),
                    "ib_dev": int(match.group(2)),
                    "port": int(match.group(3)),
                    "qpn": int(match.group(4)),
                    "mtu": int(match.group(5)),
                    "gid_index": int(match.group(6)),
                    "gid": decode_gid(match.group(7), match.group(8)),
                }
        return "info", None
    if first == "Usi":
        if msg.startswith("Using network "):
            return "network", {"name": msg[14:].strip()}
        if msg.startswith("Using internal Network "):  # NCCL 2.3
            return "network", {"name": msg[23:].strip()}
        return "info", None
    if first == "NCC":
        match = _ENV.match(msg)
        if match is not None:
            value = match.group(2).strip()
            if value.endswith(".") and "set by environment" in msg:
                value = value[:-1]
            return "env", {"name": match.group(1), "value": value}
        match = _VERSION.match(msg)
        if match is not None:
            return "version", {"version": match.group(1), "build": match.group(2) or None}
        return "info", None
    if first == "GPU":
        match = _GDR_TOPO.match(msg)
        if match is not None:
            return "gdr", {
                "net": None,
                "enabled": match.group(1) == "Enabled",
                "gpu": match.group(2),
                "hca_index": int(match.group(3)),
                "hca": None,
                "detail": match.group(4).strip() or None,
            }
        return "info", None
    if first in ("com", "ncc", "[Ra") and "rank" in msg:
        match = _COMM.search(msg)
        if match is not None:
            phase = None
            if "Init START" in msg:
                phase = "start"
            elif "Init COMPLETE" in msg:
                phase = "complete"
            elif "Destroy COMPLETE" in msg:
                phase = "destroy"
            elif "Abort COMPLETE" in msg:
                phase = "abort"
            nnodes = match.group(4)
            return "comm", {
                "comm": match.group(1),
                "rank": int(match.group(2)),
                "nranks": int(match.group(3)),
                "nnodes": int(nnodes) if nnodes is not None else None,
                "phase": phase,
            }
    if first == "ran":
        match = _OLD_RANK.match(msg)
        if match is not None:
            return "comm", {
                "comm": None,
                "rank": int(match.group(1)),
                "nranks": int(match.group(2)),
                "nnodes": None,
                "phase": None,
            }
    if first == "Boo" and "Using" in msg:
        return "bootstrap", {"interfaces": _SOCK_DEV.findall(msg.partition("Using")[2])}
    return "info", None


_MISS = object()


def _split(line: str) -> tuple[tuple, str, str] | None:
    """``(header, level, message)`` of an NCCL line with a ``host:pid:tid`` header, else None."""
    idx = line.find(" NCCL ")
    if idx <= 0:
        return None
    head = line[:idx]
    header = _header_cache.get(head, _MISS)
    if header is _MISS:
        header = _parse_header(head)
    if header is None:
        return None
    rest = line[idx + 6 :]
    sp = rest.find(" ")
    level = rest if sp < 0 else rest[:sp]  # an empty message is still an NCCL line
    if level not in LEVELS:
        return None
    return header, level, "" if sp < 0 else rest[sp + 1 :]


def _bare_version(line: str) -> LogEvent | None:
    bare = _BARE_VERSION.match(line) if "NCCL version" in line else None
    if bare is None:
        return None
    version, build = bare.group(2), bare.group(3) or None
    return LogEvent(
        "version", None, None, None, None, None, f"NCCL version {version}{build or ''}",
        prefix=bare.group(1).strip() or None, data={"version": version, "build": build},
    )


def _event(header: tuple, level: str, msg: str, kind: str, data: dict[str, Any] | None) -> LogEvent:
    prefix, timestamp, host, pid, tid, dev, source = header
    return LogEvent(kind, level, host, pid, tid, dev, msg, source, timestamp, prefix, {} if data is None else data)


def parse_line(line: str) -> LogEvent | None:
    """Classify one line of NCCL output; ``None`` when the line is not NCCL's.

    Never raises for any input string (fuzzed by the test suite)."""
    if len(line) > MAX_LINE_CHARS:
        return None
    line = line.rstrip()
    split = _split(line)
    if split is None:
        return _bare_version(line)
    header, level, msg = split
    kind, data = _classify_warn(msg) if level == "WARN" else _classify_info(msg)
    return _event(header, level, msg, kind, data)


# ----- aggregation ------------------------------------------------------------------------
MAX_WARN_GROUPS = 256  # distinct WARN signatures kept; the rest are counted under "other"
MAX_EXAMPLES = 8  # rank labels kept per group for the report (all are counted)
_DIGITS = re.compile(r"0x[0-9a-fA-F]+|\d+")


@dataclass
class ProcessState:
    """What one NCCL process (host, pid) said about itself."""

    host: str | None
    pid: int | None
    file: str | None = None
    version: str | None = None
    network: str | None = None
    net_name: str | None = None  # net module that listed RDMA devices ("IB")
    net_devices: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # index -> (name, port, IB/RoCE)
    relaxed_ordering: bool = False
    oob: str | None = None
    socket_interfaces: list[tuple[str, str]] = field(default_factory=list)
    bootstrap: list[tuple[str, str]] = field(default_factory=list)
    no_device: set[str] = field(default_factory=set)
    gdr_hca: dict[str, tuple[bool, str | None]] = field(default_factory=dict)  # hca -> (enabled, detail)
    env: dict[str, str] = field(default_factory=dict)
    qp_gids: dict[int, str | None] = field(default_factory=dict)  # GID index -> GID used by QPs


@dataclass
class RankState:
    """Per (host, pid, cudaDev): one GPU's rank and the transports its channels used."""

    host: str | None
    pid: int | None
    cuda_dev: int | None
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    init_started: int = 0
    init_completed: int = 0
    destroyed: int = 0
    aborted: int = 0
    transports: dict[str, int] = field(default_factory=dict)  # label -> channel lines
    tclasses: dict[str, int] = field(default_factory=dict)
    net_devs: set[int] = field(default_factory=set)
    ring_gdr: int | None = None  # "Connected all rings, use ring PXN x GDR y"
    warns: dict[str, int] = field(default_factory=dict)  # WARN kind -> count
    last_result: int | None = None  # last non-zero ncclResult seen propagating on this rank
    _rank_from_nranks: int = -1

    @property
    def label(self) -> str:
        rank = f"rank {self.rank}" if self.rank is not None else f"dev {self.cuda_dev}"
        return f"{self.host or '?'}:{self.pid} {rank}"


@dataclass
class WarnGroup:
    """All WARN lines with one signature (kind plus normalised detail)."""

    kind: str
    key: str
    count: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    example: str = ""
    source: str | None = None
    first_timestamp: str | None = None
    ranks: set[tuple] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)


@dataclass
class ErrorChain:
    """``-> N`` return codes propagating up one thread after (or without) a WARN."""

    code: int
    first_site: str
    cause: str | None  # key of the WarnGroup that preceded it on the same thread
    count: int = 0
    ranks: set[tuple] = field(default_factory=set)
    threads: set[str] = field(default_factory=set)


@dataclass
class FileStats:
    name: str
    bytes: int = 0
    lines: int = 0
    nccl_lines: int = 0
    binary_lines: int = 0  # lines with NUL bytes or undecodable data
    overlong_lines: int = 0
    truncated: bool = False  # ended in the middle of a line


class LogAggregator:
    """Feed NCCL log lines one at a time; memory grows with ranks and distinct warnings, not lines.

    ``expect`` is what the user expects inter-node traffic to use: ``"rdma"``, ``"socket"`` or
    ``"auto"`` (decide from the evidence in the log)."""

    def __init__(self, expect: str = "auto") -> None:
        if expect not in ("auto", "rdma", "socket"):
            raise ValueError("expect must be auto, rdma or socket")
        self.expect = expect
        self.processes: dict[tuple, ProcessState] = {}
        self.ranks: dict[tuple, RankState] = {}
        self.warn_groups: dict[tuple[str, str], WarnGroup] = {}
        self.chains: dict[tuple, ErrorChain] = {}
        self.files: list[FileStats] = []
        self.events: dict[str, int] = {}
        self.versions: dict[str, int] = {}
        self._thread_cause: dict[tuple, tuple | None] = {}  # thread -> (warn key) of its latest WARN
        self._thread_chain: dict[tuple, ErrorChain | None] = {}
        self._file: FileStats | None = None
        self._last_key: tuple | None = None  # (host, pid) of the latest header line in this file
        self._pending_version: str | None = None
        self._info_lines = 0
        self._head_keys: dict[str, tuple | None] = {}  # header text -> (host, pid) or None
        self._head_rank: dict[str, tuple] = {}  # header text -> ((host, pid), rank or None) for channel lines

    # ----- files ------------------------------------------------------------------------
    def begin_file(self, name: str) -> FileStats:
        """Start a new input: bare ``NCCL version`` lines attach to processes of this file only."""
        stats = FileStats(name=name)
        self.files.append(stats)
        self._file = stats
        self._last_key = None
        self._pending_version = None
        return stats

    def _stats(self) -> FileStats:
        if self._file is None:
            return self.begin_file("<lines>")
        return self._file

    # ----- feeding ----------------------------------------------------------------------
    def feed(self, line: str) -> LogEvent | None:
        """Account for one line and return its event (None when the line is not NCCL's).

        For bulk input, :meth:`feed_batch` (what :func:`feed_file` uses) is faster: it skips building
        events for lines the verdicts do not need."""
        stats = self._stats()
        stats.lines += 1
        if "\x00" in line or "\ufffd" in line:
            stats.binary_lines += 1
        if len(line) > MAX_LINE_CHARS:
            stats.overlong_lines += 1
            return None
        event = parse_line(line)
        if event is None:
            return None
        stats.nccl_lines += 1
        self.feed_event(event)
        return event

    def feed_batch(self, lines: list[str], stats: FileStats | None = None) -> None:
        """Feed many lines (already counted in ``stats.lines``); the fast path of :func:`feed_file`.

        Plain INFO lines -- most of a big log -- are recognised with a few string operations and
        a header cache, without building events; everything else goes through :meth:`_feed_line`."""
        stats = stats or self._stats()
        head_keys = self._head_keys
        processes = self.processes
        interesting = _INFO_PREFIXES
        feed_line = self._feed_line
        plain = 0
        last_key = self._last_key
        find, rfind, startswith, get = str.find, str.rfind, str.startswith, head_keys.get
        channel = self._batch_channel
        plain_channels = 0
        for line in lines:
            idx = find(line, " NCCL INFO ")
            if idx > 0:
                start = idx + 11
                if not startswith(line, interesting, start):
                    arrow = rfind(line, " -> ")
                    if arrow < 0 or find(line, " ", start) != arrow:  # not a "file:line -> N" line
                        head = line[:idx]
                        key = get(head, _MISS)
                        if key is _MISS:  # first line with this header: make sure its process exists
                            header = _parse_header(head)
                            key = (header[2], header[3]) if header is not None else None
                            if key is not None and key not in processes:
                                self._new_process(key)
                            if len(head_keys) >= _CACHE_LIMIT:
                                head_keys.clear()
                            head_keys[head] = key
                        if key is not None:
                            plain += 1
                            last_key = key
                            continue
                elif startswith(line, "Channel ", start):
                    key = channel(line, idx, start)
                    if key is not None:
                        plain_channels += 1
                        last_key = key
                        continue
            if line and line[-1] == "\r":
                line = line[:-1]
            self._last_key = last_key
            feed_line(line, stats)
            last_key = self._last_key
        self._last_key = last_key
        self._info_lines += plain
        stats.nccl_lines += plain + plain_channels
        if plain_channels:
            self.events["channel"] = self.events.get("channel", 0) + plain_channels

    def _feed_line(self, line: str, stats: FileStats) -> None:
        split = _split(line)
        if split is None:
            event = _bare_version(line)
            if event is not None:
                stats.nccl_lines += 1
                self.feed_event(event)
            return
        header, level, msg = split
        stats.nccl_lines += 1
        if level == "WARN":
            kind, data = _classify_warn(msg)
        elif msg.startswith("Channel ") and self._fast_channel(header, msg):
            return
        else:
            kind, data = _classify_info(msg)
            if data is None:  # plain info: remember the process, nothing else
                self._info_lines += 1
                key = (header[2], header[3])
                if key not in self.processes:
                    self._new_process(key)
                self._last_key = key
                return
        self.feed_event(_event(header, level, msg, kind, data))

    def _batch_channel(self, line: str, idx: int, start: int) -> tuple | None:
        """A channel line of the batch path: header and rank found through a per-header cache.

        Returns the line's (host, pid), or None when the line is not a channel line after all."""
        match = _CHANNEL.match(line, start)
        if match is None:
            return None
        head = line[:idx]
        cached = self._head_rank.get(head)
        if cached is None:
            header = _parse_header(head)
            if header is None:
                return None
            key = (header[2], header[3])
            if key not in self.processes:
                self._new_process(key)
            rank = None
            if header[5] is not None:
                rkey = (header[2], header[3], header[5])
                rank = self.ranks.get(rkey)
                if rank is None:
                    rank = self.ranks[rkey] = RankState(host=header[2], pid=header[3], cuda_dev=header[5])
            if len(self._head_rank) >= _CACHE_LIMIT:
                self._head_rank.clear()
            cached = self._head_rank[head] = (key, rank)
        key, rank = cached
        if rank is None:
            return key
        label, tclass, _net, net_dev, _gdr = classify_transport(match.group(8))
        transports = rank.transports
        transports[label] = transports.get(label, 0) + 1
        tclasses = rank.tclasses
        tclasses[tclass] = tclasses.get(tclass, 0) + 1
        if net_dev is not None and net_dev not in rank.net_devs and len(rank.net_devs) < 64:
            rank.net_devs.add(net_dev)
        if rank.rank is None:
            rank.rank = int(match.group(5) if match.group(7) == "receive" else match.group(3))
        return key

    def _fast_channel(self, header: tuple, msg: str) -> bool:
        """A channel line straight into its rank's counters (the bulk of init output at scale)."""
        match = _CHANNEL.match(msg)
        if match is None:
            return False
        self.events["channel"] = self.events.get("channel", 0) + 1
        key = (header[2], header[3])
        if key not in self.processes:
            self._new_process(key)
        self._last_key = key
        if header[5] is None:
            return True
        rkey = (header[2], header[3], header[5])
        rank = self.ranks.get(rkey)
        if rank is None:
            rank = self.ranks[rkey] = RankState(host=header[2], pid=header[3], cuda_dev=header[5])
        label, tclass, _net, net_dev, _gdr = classify_transport(match.group(8))
        transports = rank.transports
        transports[label] = transports.get(label, 0) + 1
        tclasses = rank.tclasses
        tclasses[tclass] = tclasses.get(tclass, 0) + 1
        if net_dev is not None and len(rank.net_devs) < 64:
            rank.net_devs.add(net_dev)
        if rank.rank is None:
            rank.rank = int(match.group(5) if match.group(7) == "receive" else match.group(3))
        return True

    def feed_event(self, event: LogEvent) -> None:
        kind = event.kind
        self.events[kind] = self.events.get(kind, 0) + 1
        if kind == "info":
            if event.host is not None or event.pid is not None:
                self._process(event)
            return
        if kind == "version":
            self._version(event)
            return
        proc = self._process(event)
        data = event.data
        if kind == "channel":
            rank = self._rank(event)
            if rank is None:
                return
            label = data["transport"]
            rank.transports[label] = rank.transports.get(label, 0) + 1
            tclass = data["tclass"]
            rank.tclasses[tclass] = rank.tclasses.get(tclass, 0) + 1
            if data["net_dev"] is not None and len(rank.net_devs) < 64:
                rank.net_devs.add(data["net_dev"])
            if rank.rank is None:
                rank.rank = data["local_rank"]
        elif kind == "network":
            proc.network = data["name"]
        elif kind == "net_devices":
            proc.net_name = data["net"]
            if not data.get("partial"):
                proc.net_devices = {}
            for index, name, port, link in data["devices"][:64]:
                proc.net_devices[index] = (name, port, link)
            proc.relaxed_ordering = proc.relaxed_ordering or data["relaxed_ordering"]
            proc.oob = data["oob"] or proc.oob
        elif kind == "socket_devices":
            proc.socket_interfaces = data["interfaces"][:32]
        elif kind == "bootstrap":
            proc.bootstrap = data["interfaces"][:32]
        elif kind == "no_device":
            proc.no_device.add(data["net"])
        elif kind == "gdr":
            name = data["hca"] or f"#{data['hca_index']}"
            if len(proc.gdr_hca) < 64 or name in proc.gdr_hca:
                proc.gdr_hca[name] = (data["enabled"], data["detail"])
        elif kind == "env":
            if len(proc.env) < 256 or data["name"] in proc.env:
                proc.env[data["name"]] = data["value"][:256]
        elif kind == "comm":
            rank = self._rank(event)
            if rank is not None:
                nranks = data["nranks"]
                if nranks > rank._rank_from_nranks:
                    rank.rank, rank.nranks, rank._rank_from_nranks = data["rank"], nranks, nranks
                    if data["nnodes"] is not None:
                        rank.nnodes = data["nnodes"]
                phase = data["phase"]
                if phase == "start":
                    rank.init_started += 1
                elif phase == "complete":
                    rank.init_completed += 1
                elif phase == "destroy":
                    rank.destroyed += 1
                elif phase == "abort":
                    rank.aborted += 1
        elif kind == "connected":
            rank = self._rank(event)
            if rank is not None and data["gdr"] is not None:
                rank.ring_gdr = data["gdr"]
        elif kind == "qp":
            if len(proc.qp_gids) < 16:
                proc.qp_gids[data["gid_index"]] = data["gid"]
        elif kind == "retcode":
            self._retcode(event)
        elif event.level == "WARN":
            self._warn(event)

    # ----- helpers ------------------------------------------------------------------------
    def _new_process(self, key: tuple) -> ProcessState:
        proc = ProcessState(host=key[0], pid=key[1], file=self._stats().name)
        self.processes[key] = proc
        if self._pending_version is not None:
            proc.version = self._pending_version
            self._pending_version = None
        return proc

    def _process(self, event: LogEvent) -> ProcessState:
        key = (event.host, event.pid)
        proc = self.processes.get(key)
        if proc is None:
            proc = self._new_process(key)
        self._last_key = key
        return proc

    def _rank(self, event: LogEvent) -> RankState | None:
        if event.cuda_dev is None:
            return None
        key = (event.host, event.pid, event.cuda_dev)
        rank = self.ranks.get(key)
        if rank is None:
            rank = RankState(host=event.host, pid=event.pid, cuda_dev=event.cuda_dev)
            self.ranks[key] = rank
        return rank

    def _version(self, event: LogEvent) -> None:
        version = event.data["version"]
        self.versions[version] = self.versions.get(version, 0) + 1
        if event.host is not None or event.pid is not None:
            self._process(event).version = version
        elif self._last_key is not None and self._last_key in self.processes:
            last = self.processes[self._last_key]
            if last.version is None:
                last.version = version
        else:
            self._pending_version = version

    def _warn(self, event: LogEvent) -> None:
        kind, data = event.kind, event.data
        if kind == "completion_error":
            key = f"status {data['status']}"
        elif kind == "verbs_error":
            key = f"{data['call']}: {data['error']}"
        else:
            key = _DIGITS.sub("N", event.message)[:160]
        gkey = (kind, key)
        group = self.warn_groups.get(gkey)
        if group is None:
            if len(self.warn_groups) >= MAX_WARN_GROUPS - 1:
                gkey = ("warn", "(other warnings)")
                group = self.warn_groups.get(gkey)
            if group is None:
                group = WarnGroup(kind=gkey[0], key=gkey[1], data=dict(data), example=event.message[:500],
                                  source=event.source, first_timestamp=event.timestamp)
                self.warn_groups[gkey] = group
        group.count += 1
        rank_key = (event.host, event.pid, event.cuda_dev)
        group.ranks.add(rank_key)
        if event.host:
            group.hosts.add(event.host)
        rank = self._rank(event)
        if rank is not None:
            rank.warns[kind] = rank.warns.get(kind, 0) + 1
        thread = (event.host, event.pid, event.tid)
        self._thread_cause[thread] = gkey
        self._thread_chain[thread] = None

    def _retcode(self, event: LogEvent) -> None:
        code = event.data["code"]
        if code == 0:
            return
        thread = (event.host, event.pid, event.tid)
        chain = self._thread_chain.get(thread)
        if chain is None or chain.code != code:
            cause = self._thread_cause.get(thread)
            ckey = (code, cause)
            chain = self.chains.get(ckey)
            if chain is None:
                chain = ErrorChain(code=code, first_site=event.data["site"], cause=cause and f"{cause[0]}|{cause[1]}")
                self.chains[ckey] = chain
            chain.count += 1
            self._thread_chain[thread] = chain
        rank_key = (event.host, event.pid, event.cuda_dev)
        chain.ranks.add(rank_key)
        if event.data["thread"] and len(chain.threads) < 8:
            chain.threads.add(event.data["thread"])
        rank = self._rank(event)
        if rank is not None:
            rank.last_result = code

    def event_counts(self) -> dict[str, int]:
        """Lines seen per event kind (plain INFO lines under "info")."""
        counts = dict(self.events)
        counts["info"] = counts.get("info", 0) + self._info_lines
        return dict(sorted(counts.items()))

    def report(self):
        """Per-rank facts and findings so far (a :class:`fabricscope.nccl.logreport.LogReport`)."""
        from fabricscope.nccl.logreport import build_report

        return build_report(self)

    def end_file(self, truncated: bool = False) -> None:
        if self._file is not None:
            self._file.truncated = truncated
        if self._pending_version is not None:
            self.versions.setdefault(self._pending_version, 0)
        self._pending_version = None
        self._last_key = None


# ----- streaming files --------------------------------------------------------------------
CHUNK_BYTES = 1 << 20


class LogInputError(Exception):
    """A log file that cannot be read at all (missing, unreadable, not a log)."""


def _open(path: str):
    import gzip
    import sys

    if path == "-":
        return sys.stdin.buffer
    handle = open(path, "rb")  # closed by feed_file
    magic = handle.read(2)
    handle.seek(0)
    if magic == b"\x1f\x8b":
        handle.close()
        return gzip.open(path, "rb")
    return handle


def iter_line_batches(handle, stats: FileStats | None = None, chunk_bytes: int = CHUNK_BYTES):
    """Lists of decoded lines of a binary stream, one list per chunk, so memory stays flat.

    A line longer than :data:`MAX_LINE_CHARS` bytes is dropped (counted in ``stats.overlong_lines``);
    undecodable bytes become U+FFFD and lines holding them or NUL are counted in
    ``stats.binary_lines``. Sets ``stats.bytes``, ``stats.lines`` and ``stats.truncated``."""
    carry = b""
    skipping = False  # inside an overlong line: drop bytes up to the next newline
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            break
        if stats is not None:
            stats.bytes += len(chunk)
        if carry:
            chunk = carry + chunk
            carry = b""
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if skipping:
                continue
            if len(chunk) > MAX_LINE_CHARS:
                skipping = True
                if stats is not None:
                    stats.overlong_lines += 1
                    stats.lines += 1
                    if b"\x00" in chunk:
                        stats.binary_lines += 1
            else:
                carry = chunk
            continue
        carry = chunk[cut + 1 :]
        text = chunk[:cut].decode("utf-8", "replace")
        lines = text.split("\n")
        if skipping:
            lines = lines[1:]  # the tail of the overlong line
            skipping = False
        if stats is not None:
            stats.lines += len(lines)
            if "\x00" in text or "\ufffd" in text:
                stats.binary_lines += sum(1 for ln in lines if "\x00" in ln or "\ufffd" in ln)
        if len(text) > MAX_LINE_CHARS and max(map(len, lines)) > MAX_LINE_CHARS:
            kept = [ln for ln in lines if len(ln) <= MAX_LINE_CHARS]
            if stats is not None:
                stats.overlong_lines += len(lines) - len(kept)
            lines = kept
        yield lines
        if len(carry) > MAX_LINE_CHARS:
            carry = b""
            skipping = True
            if stats is not None:
                stats.overlong_lines += 1
                stats.lines += 1
    if carry and not skipping:
        text = carry.decode("utf-8", "replace")
        if stats is not None:
            stats.truncated = True
            stats.lines += 1
            if "\x00" in text or "\ufffd" in text:
                stats.binary_lines += 1
        yield [text]


def iter_lines(handle, stats: FileStats | None = None, chunk_bytes: int = CHUNK_BYTES):
    """Decoded lines of a binary stream (see :func:`iter_line_batches`)."""
    for batch in iter_line_batches(handle, stats, chunk_bytes):
        yield from batch


def feed_file(aggregator: LogAggregator, path: str, progress=None) -> FileStats:
    """Stream one file (plain, gzip, or ``-`` for stdin) into the aggregator.

    ``progress(bytes_read)`` is called about once per MiB. Raises :class:`LogInputError` when the file
    cannot be opened or read."""
    stats = aggregator.begin_file(path)
    try:
        handle = _open(path)
    except OSError as exc:
        raise LogInputError(f"{path}: {exc.strerror or exc}") from None
    try:
        feed_batch = aggregator.feed_batch
        last = 0
        for batch in iter_line_batches(handle, stats):
            feed_batch(batch, stats)
            if progress is not None and stats.bytes - last >= CHUNK_BYTES:
                last = stats.bytes
                progress(stats.bytes)
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, or a corrupt/truncated gzip stream
        aggregator.end_file(truncated=True)
        raise LogInputError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        if path != "-":
            handle.close()
    aggregator.end_file(truncated=stats.truncated)
    return stats
