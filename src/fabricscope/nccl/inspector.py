"""The NCCL Inspector's output, parsed: per rank, communicator and collective, the time each
collective took and the bandwidth it reached.

The Inspector is NVIDIA's profiler plugin in NCCL's tree (plugins/profiler/inspector, shipped
from NCCL 2.29). Two forms, both read here (formats from its README and source at v2.29.7-1 and
v2.30.7-1; the examples are in tests/data/nccl_inspector/):

- the dump directory (NCCL_INSPECTOR_DUMP_DIR): files ``<hostname>-pid<pid>.log``, one compact
  JSON object per line (``jsonNewline`` after each), per completed collective or P2P operation:
  ``header`` {id (the communicator hash), comm_name (v2.30), rank, n_ranks, nnodes},
  ``metadata`` {inspector_output_format_version "v4.0", git_rev, rec_mechanism,
  dump_timestamp_us, hostname, pid} and ``coll_perf`` {coll, coll_sn, coll_msg_size_bytes,
  coll_exec_time_us, coll_timing_source (v2.30), coll_algobw_gbs, coll_busbw_gbs, and with
  NCCL_INSPECTOR_DUMP_VERBOSE event_trace_*} or ``p2p_perf`` (p2p, p2p_sn, p2p_peer, ...);
- the node_exporter textfile (NCCL_INSPECTOR_PROM_DUMP=1): ``nccl_inspector_metrics_<gpu uuid>.prom``
  rewritten every interval, with ``nccl_bus_bandwidth_gbs`` and
  ``nccl_collective_exec_time_microseconds`` (+ ``nccl_algorithm_bandwidth_gbs`` in v2.29, and
  ``nccl_p2p_*`` in v2.30); labels differ by version (v2.29: comm_id, hostname, rank, nranks,
  gpu_device_id, coll_sn, message_size "2.00GB"; v2.30: version "v5.1", node, gpu, comm_name,
  nranks, algo_proto, message_size bucket "4-5GB").

Pure functions over text, no I/O: the exporter follows the files (monitor/inspector_tail.py) and
``fabricscope job`` (triage) reads a job's directory with the same types. Bandwidths are GB/s as
NCCL counts them (1e9 bytes/s).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

GB = 1e9  # NCCL's GB/s: algbw = bytes / time / 1e9
MAX_LINE_CHARS = 64 * 1024  # a verbose record with 64 channels is about 12 KB
SIZE_UNITS = ("B", "KB", "MB", "GB", "TB")


class InspectorFormatError(ValueError):
    """A line or object that is not an Inspector record."""


@dataclass(frozen=True)
class InspectorRecord:
    """One completed collective (or P2P operation) on one rank of one communicator."""

    comm_id: str  # the communicator hash ("0x7f8c496ae9f661"), the same on every rank
    rank: int
    n_ranks: int
    n_nodes: int
    op: str  # "AllReduce", "ReduceScatter", ... ; "Send"/"Recv" for P2P
    seq: int  # coll_sn / p2p_sn
    msg_size_bytes: int
    exec_time_us: float
    algbw_gbs: float
    busbw_gbs: float
    p2p: bool = False
    peer: int | None = None  # P2P only
    comm_name: str | None = None  # v2.30: the name the application gave (NCCL_COMM_NAME / config)
    timing_source: str | None = None  # v2.30: kernel_gpu, kernel_cpu, collective_cpu
    hostname: str | None = None
    pid: int | None = None
    dump_timestamp_us: int | None = None  # when the Inspector wrote it (not when the collective ran)
    format_version: str | None = None  # "v4.0"

    @property
    def exec_time_s(self) -> float:
        return self.exec_time_us * 1e-6

    @property
    def busbw_bytes_per_s(self) -> float:
        return self.busbw_gbs * GB

    @property
    def algbw_bytes_per_s(self) -> float:
        return self.algbw_gbs * GB

    @property
    def size_bucket(self) -> str:
        return size_bucket(self.msg_size_bytes)


@dataclass
class DumpReading:
    """What a dump (file or stream of lines) held: the records, and the lines that were not."""

    records: list[InspectorRecord] = field(default_factory=list)
    bad_lines: int = 0
    first_error: str | None = None


def size_bucket(size_bytes: int) -> str:
    """The Inspector's message-size label (inspectorPromFormatMessageSizeRange, v2.30): the size
    in the largest binary unit that keeps it >= 1, floored, as ``"<n>-<n+1><unit>"``: 4.5 GiB ->
    ``"4-5GB"``, 512 MiB -> ``"512-513MB"``, 0 -> ``"0B"``."""
    if size_bytes <= 0:
        return "0B"
    value, unit = float(size_bytes), 0
    while value >= 1024.0 and unit < len(SIZE_UNITS) - 1:
        value /= 1024.0
        unit += 1
    lower = max(1, math.floor(value))
    return f"{lower}-{lower + 1}{SIZE_UNITS[unit]}"


def size_bucket_lower_bytes(bucket: str) -> int | None:
    """The smallest size in a bucket label (``"4-5GB"`` -> 4 GiB); None when not a bucket."""
    if bucket == "0B":
        return 0
    match = _BUCKET.match(bucket)
    if match is None:
        return None
    return int(match.group(1)) * int(1024 ** SIZE_UNITS.index(match.group(2)))


_BUCKET = re.compile(r"(\d+)-\d+(B|KB|MB|GB|TB)\Z")


def _int(obj: dict[str, object], key: str, where: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InspectorFormatError(f"{where}.{key}: expected an integer, got {type(value).__name__}")
    return value


def _num(obj: dict[str, object], key: str, where: str) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InspectorFormatError(f"{where}.{key}: expected a non-negative number")
    return float(value)


def _str(obj: dict[str, object], key: str) -> str | None:
    value = obj.get(key)
    return value[:256] if isinstance(value, str) else None


def parse_record(obj: object) -> InspectorRecord:
    """One decoded JSON object of a dump; raises :class:`InspectorFormatError`."""
    if not isinstance(obj, dict):
        raise InspectorFormatError("not a JSON object")
    header, meta = obj.get("header"), obj.get("metadata") or {}
    if not isinstance(header, dict) or not isinstance(meta, dict):
        raise InspectorFormatError("no header object")
    perf, prefix, p2p = obj.get("coll_perf"), "coll", False
    if perf is None:
        perf, prefix, p2p = obj.get("p2p_perf"), "p2p", True
    if not isinstance(perf, dict):
        raise InspectorFormatError("neither coll_perf nor p2p_perf")
    comm_id = _str(header, "id")
    op = _str(perf, prefix)
    if not comm_id or not op:
        raise InspectorFormatError("header.id or the operation name missing")
    where = f"{prefix}_perf"
    pid = meta.get("pid")
    stamp = meta.get("dump_timestamp_us")
    peer = perf.get("p2p_peer")
    return InspectorRecord(
        comm_id=comm_id,
        rank=_int(header, "rank", "header"),
        n_ranks=_int(header, "n_ranks", "header"),
        n_nodes=_int(header, "nnodes", "header"),
        op=op,
        seq=_int(perf, f"{prefix}_sn", where),
        msg_size_bytes=_int(perf, f"{prefix}_msg_size_bytes", where),
        exec_time_us=_num(perf, f"{prefix}_exec_time_us", where),
        algbw_gbs=_num(perf, f"{prefix}_algobw_gbs", where),
        busbw_gbs=_num(perf, f"{prefix}_busbw_gbs", where),
        p2p=p2p,
        peer=peer if isinstance(peer, int) and not isinstance(peer, bool) else None,
        comm_name=_str(header, "comm_name"),
        timing_source=_str(perf, f"{prefix}_timing_source"),
        hostname=_str(meta, "hostname"),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        dump_timestamp_us=stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else None,
        format_version=_str(meta, "inspector_output_format_version"),
    )


def parse_line(line: str) -> InspectorRecord | None:
    """One line of a dump file: a record, None for a blank line; raises for anything else."""
    text = line.strip()
    if not text:
        return None
    if len(text) > MAX_LINE_CHARS:
        raise InspectorFormatError(f"line longer than {MAX_LINE_CHARS} characters")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InspectorFormatError(f"not JSON: {str(exc)[:80]}") from None
    return parse_record(obj)


def read_dump(lines: Iterable[str]) -> DumpReading:
    """Every record of a dump's lines; bad lines are counted (and the first one's reason kept),
    never fatal: a file being written ends in half a line."""
    out = DumpReading()
    for line in lines:
        try:
            record = parse_line(line)
        except InspectorFormatError as exc:
            out.bad_lines += 1
            out.first_error = out.first_error or str(exc)
            continue
        if record is not None:
            out.records.append(record)
    return out


# ----- the Prometheus textfile -------------------------------------------------------------------
@dataclass(frozen=True)
class PromSample:
    """One sample of an Inspector textfile, its labels normalised across versions."""

    metric: str  # "busbw_gbs", "algbw_gbs", "exec_time_us"
    p2p: bool
    op: str  # collective ("AllReduce") or p2p_operation ("Send")
    comm: str  # comm_id (v2.29) or comm_name (v2.30)
    node: str
    gpu: str  # "GPU4"
    n_ranks: int | None
    n_nodes: int | None
    size_bucket: str  # the label as written: "4-5GB" (v2.30) or "2.00GB" (v2.29)
    value: float
    rank: int | None = None  # v2.29 only
    algo_proto: str | None = None  # v2.30 only: "Ring_ll"
    version: str | None = None  # v2.30: "v5.1"
    labels: dict[str, str] = field(default_factory=dict)


_PROM_METRICS = {
    "nccl_bus_bandwidth_gbs": ("busbw_gbs", False),
    "nccl_algorithm_bandwidth_gbs": ("algbw_gbs", False),
    "nccl_collective_exec_time_microseconds": ("exec_time_us", False),
    "nccl_p2p_bus_bandwidth_gbs": ("busbw_gbs", True),
    "nccl_p2p_exec_time_microseconds": ("exec_time_us", True),
}
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\s+(\S+)(?:\s+-?\d+)?\Z")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|\Z)')


def _labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            raise InspectorFormatError(f"bad label set near {text[pos : pos + 40]!r}")
        out[match.group(1)] = match.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = match.end()
    return out


def _opt_int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isascii() and text.isdigit() else None


def parse_prom_line(line: str) -> PromSample | None:
    """One line of an Inspector textfile; None for comments, blanks and other metrics."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    match = _SAMPLE.match(text)
    if match is None:
        raise InspectorFormatError(f"not a sample line: {text[:60]!r}")
    known = _PROM_METRICS.get(match.group(1))
    if known is None:
        return None
    labels = _labels(match.group(2))
    try:
        value = float(match.group(3))
    except ValueError:
        raise InspectorFormatError(f"bad value {match.group(3)[:20]!r}") from None
    metric, p2p = known
    op = labels.get("p2p_operation" if p2p else "collective")
    comm = labels.get("comm_name") or labels.get("comm_id")
    if not op or not comm or not math.isfinite(value):
        raise InspectorFormatError("sample without its collective or communicator")
    return PromSample(
        metric=metric,
        p2p=p2p,
        op=op,
        comm=comm,
        node=labels.get("node") or labels.get("hostname") or "",
        gpu=labels.get("gpu") or labels.get("gpu_device_id") or "",
        n_ranks=_opt_int(labels.get("nranks") or labels.get("n_ranks")),
        n_nodes=_opt_int(labels.get("n_nodes")),
        size_bucket=labels.get("message_size", ""),
        value=value,
        rank=_opt_int(labels.get("rank")),
        algo_proto=labels.get("algo_proto"),
        version=labels.get("version"),
        labels=labels,
    )


def read_prom(lines: Iterable[str]) -> tuple[list[PromSample], int]:
    """The Inspector samples of a textfile and the number of lines that were not samples."""
    samples, bad = [], 0
    for line in lines:
        try:
            sample = parse_prom_line(line)
        except InspectorFormatError:
            bad += 1
            continue
        if sample is not None:
            samples.append(sample)
    return samples, bad


def by_communicator(records: Iterable[InspectorRecord]) -> Iterator[tuple[str, list[InspectorRecord]]]:
    """Records grouped by communicator id, each group in (rank, seq) order."""
    groups: dict[str, list[InspectorRecord]] = {}
    for record in records:
        groups.setdefault(record.comm_id, []).append(record)
    for comm_id, group in groups.items():
        yield comm_id, sorted(group, key=lambda r: (r.rank, r.seq))
