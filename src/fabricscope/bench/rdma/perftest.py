"""Parsers for perftest (ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_send_lat) output.

Pure functions of text, tested on real captures (tests/data/samples/perftest_*.txt). Units as
perftest computes them (src/perftest_parameters.c, ``format_factor``): ``MB/sec`` and
``MiB/sec`` are 2^20 bytes per second, ``Gb/sec`` (``--report_gbits``) is 10^9 bits per second;
latency columns are microseconds (perftest's ``*_lat`` report one-way time, half a round trip).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MIB = 1 << 20
TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_send_lat")

_TEST_NAME = re.compile(r"^\s*(\S.*?(?:BW|Latency) Test)\s*$")
_PAIR = re.compile(r"([A-Za-z][\w\-* .]*?)\s*:\s*([^\t]*?)\s*(?=\t|$)")
_COLUMN = re.compile(r"#\w+|tps average|(?:[\w.%]+ )*[\w.%]+\[[^\]]*\]")
_ADDRESS = re.compile(r"^\s*(local|remote) address:\s*(.*)\Z")
_GID_LINE = re.compile(r"^\s*GID:\s*([0-9a-fA-F:]+)\s*$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\Z")

# Names perftest gives the same figure in its text columns and its JSON keys -> our field name.
_COMMON_FIELDS = {
    "msgrate": "msg_rate_mpps",
    "t_min": "lat_min_us",
    "t_max": "lat_max_us",
    "t_typical": "lat_typical_us",
    "t_avg": "lat_avg_us",
    "t_stdev": "lat_stdev_us",
}
# Column label (unit stripped, lower case) -> our field name.
COLUMN_FIELDS = {
    "#bytes": "size_bytes",
    "#iterations": "iterations",
    "bw peak": "bw_peak",
    "bw average": "bw_average",
    **_COMMON_FIELDS,
    "99% percentile": "lat_p99_us",
    "99.9% percentile": "lat_p999_us",
    "tps average": "tps",
}


class PerftestParseError(ValueError):
    """Output that is not perftest's (or too garbled to use)."""


@dataclass
class PerftestOutput:
    """What one perftest run printed, in numbers with known units."""

    test: str | None  # "RDMA_Write BW Test", "Send Latency Test", ...
    kind: str | None  # "bw" or "lat"
    header: dict[str, str] = field(default_factory=dict)  # "Device" -> "mlx5_0", "GID index" -> "3"
    local: dict[str, str] = field(default_factory=dict)  # LID, QPN, PSN, GID...
    remote: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)  # as printed, units included
    bw_unit: str | None = None  # "MB/sec", "MiB/sec" or "Gb/sec"
    rows: list[dict[str, float]] = field(default_factory=list)  # bandwidth already in *_gbps
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lines we could not use

    @property
    def device(self) -> str | None:
        return self.header.get("Device")

    @property
    def gid_index(self) -> int | None:
        value = self.header.get("GID index")
        return int(value) if value is not None and value.isdigit() else None

    @property
    def link_type(self) -> str | None:
        return self.header.get("Link type")

    @property
    def mtu_bytes(self) -> int | None:
        match = re.match(r"(\d+)", self.header.get("Mtu", ""))
        return int(match.group(1)) if match else None


def bw_to_gbps(value: float, unit: str | None) -> float:
    """A perftest bandwidth figure in 10^9 bit/s."""
    if unit in ("MB/sec", "MiB/sec"):
        return value * MIB * 8 / 1e9
    if unit == "Gb/sec":
        return value
    raise PerftestParseError(f"unknown bandwidth unit {unit!r}")


def _put(row: dict[str, float], name: str, value: float, bw_unit: str | None) -> None:
    """One figure into a result row: bandwidth columns in 10^9 bit/s under ``*_gbps``."""
    if name in ("bw_peak", "bw_average"):
        row[f"{name}_gbps"] = bw_to_gbps(value, bw_unit)
    else:
        row[name] = value


def _column_key(label: str) -> tuple[str, str | None]:
    match = re.match(r"^(.*?)\[([^\]]*)\]\Z", label)
    name, unit = (match.group(1), match.group(2)) if match else (label, None)
    return name.strip().lower(), unit


def _result_header(line: str, out: PerftestOutput) -> list[str | None]:
    """The ``#bytes ...`` column header: our field per column (None: a column we do not keep)."""
    out.columns = _COLUMN.findall(line)
    fields: list[str | None] = []
    for label in out.columns:
        name, unit = _column_key(label)
        if name in ("bw peak", "bw average") and unit:
            out.bw_unit = unit
        fields.append(COLUMN_FIELDS.get(name))
    return fields


def _result_line(line: str, fields: list[str | None], out: PerftestOutput) -> None:
    """A line under the column header: a result row, a row cut short, or a warning."""
    tokens = line.split()
    if not tokens or not tokens[0].isdigit():
        out.warnings.append(line.strip())
    elif len(tokens) < len(fields) or not all(_NUMBER.match(t) for t in tokens[: len(fields)]):
        out.problems.append(f"incomplete result row: {line.strip()[:80]}")
    else:
        row: dict[str, float] = {}
        for name, token in zip(fields, tokens):
            if name is not None:
                _put(row, name, float(token), out.bw_unit)
        out.rows.append(row)


def parse_text(text: str) -> PerftestOutput:
    """Parse perftest's human output (server or client side, one size or an ``-a`` sweep)."""
    out = PerftestOutput(test=None, kind=None)
    last_address: dict[str, str] | None = None
    fields: list[str | None] | None = None  # set once the results' column header is read
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or set(line.strip()) <= {"-", "*"}:
            continue
        if (m := _TEST_NAME.match(line)) and out.test is None:
            out.test = m.group(1)
            out.kind = "lat" if "Latency" in out.test else "bw"
        elif (m := _ADDRESS.match(line)) is not None:
            target = out.local if m.group(1) == "local" else out.remote
            tokens = m.group(2).split()
            for key, value in zip(tokens[::2], tokens[1::2]):
                target[key] = value
            last_address = target
        elif (m := _GID_LINE.match(line)) is not None and last_address is not None:
            last_address["GID"] = m.group(1)
        elif line.lstrip().startswith("#bytes"):
            fields = _result_header(line, out)
        elif fields is not None:
            _result_line(line, fields, out)
        elif ":" in line and not line.lstrip().startswith(("*", "#")):
            for key, value in _PAIR.findall(line):
                if value.strip():
                    out.header[key.strip()] = value.strip()
        elif not line.lstrip().startswith("*"):
            out.warnings.append(line.strip())
    if out.test is None and not out.columns:
        raise PerftestParseError("no perftest test banner or result header found")
    return out


_BARE = re.compile(r'(?<!")\b([A-Za-z_][\w.\-*]*)\b(?!")')


def _lenient_json(text: str) -> Any:
    """perftest before 2023 wrote JSON with bare strings and trailing commas (perftest #216)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    fixed_lines = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not key.strip().startswith('"'):
            key = f'"{key.strip()}"'
        value = value.strip()
        core = value.rstrip(",")
        if sep and core and core not in ("{", "[") and not core.startswith('"') and not _NUMBER.match(core):
            value = json.dumps(core) + ("," if value.endswith(",") else "")
        fixed_lines.append(f"{key}{sep} {value}" if sep else line)
    fixed = "\n".join(fixed_lines)
    fixed = re.sub(r",\s*([}\]])", r"\1", fixed)
    try:
        return json.loads(fixed)
    except ValueError as exc:
        raise PerftestParseError(f"perftest JSON unreadable: {exc}") from None


_JSON_FIELDS = {
    "msgsize": "size_bytes",
    "n_iterations": "iterations",
    "bw_peak": "bw_peak",
    "bw_average": "bw_average",
    **_COMMON_FIELDS,
    "percentile_99": "lat_p99_us",
    "percentile_99.9": "lat_p999_us",
}


def parse_json(text: str, bw_unit: str = "Gb/sec") -> PerftestOutput:
    """Parse ``--out_json_file`` output. The file carries no unit: ``bw_unit`` says which
    report format was asked for (``Gb/sec`` with ``--report_gbits``, else ``MB/sec``)."""
    doc = _lenient_json(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict | list):
        raise PerftestParseError("perftest JSON has no results")
    info = doc.get("test_info") if isinstance(doc.get("test_info"), dict) else {}
    test = str(info.get("test", "")).replace("_", " ") or None
    out = PerftestOutput(test=test, kind=None, bw_unit=bw_unit)
    for key, value in info.items():
        out.header[str(key).replace("_", " ")] = str(value)
    if "GID index" not in out.header and "GID_index" in info:
        out.header["GID index"] = str(info["GID_index"])
    results = doc["results"] if isinstance(doc["results"], list) else [doc["results"]]
    for entry in results:
        if not isinstance(entry, dict):
            continue
        row: dict[str, float] = {}
        for key, value in entry.items():
            name = _JSON_FIELDS.get(str(key).lower())
            if name is None:
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                out.problems.append(f"{key}: not a number ({str(value)[:40]})")
                continue
            _put(row, name, number, bw_unit)
        if row:
            out.rows.append(row)
    out.kind = "lat" if any("lat_typical_us" in r for r in out.rows) else "bw"
    if not out.rows:
        raise PerftestParseError("perftest JSON results are empty")
    return out


def metrics_from(output: PerftestOutput, link_rate_gbps: float | None = None) -> dict[str, float | None]:
    """Headline metrics: the largest message size's row (what people quote for a link)."""
    if not output.rows:
        return {}
    row = max(output.rows, key=lambda r: r.get("size_bytes", 0))
    metrics: dict[str, float | None] = {"msg_size_bytes": row.get("size_bytes")}
    if output.kind == "lat":
        for name in (
            "lat_min_us",
            "lat_typical_us",
            "lat_avg_us",
            "lat_stdev_us",
            "lat_p99_us",
            "lat_p999_us",
            "lat_max_us",
        ):
            if name in row:
                metrics[name] = row[name]
    else:
        metrics["throughput_gbps"] = row.get("bw_average_gbps")
        metrics["peak_gbps"] = row.get("bw_peak_gbps")
        metrics["msg_rate_mpps"] = row.get("msg_rate_mpps")
        metrics["max_throughput_gbps"] = max((r.get("bw_average_gbps") or 0.0) for r in output.rows)
        if link_rate_gbps and metrics["throughput_gbps"] is not None:
            metrics["link_utilization_pct"] = round(metrics["throughput_gbps"] / link_rate_gbps * 100.0, 3)
    return {k: v for k, v in metrics.items() if v is not None}


def gid_address(text: str | None) -> str | None:
    """perftest prints a GID as 16 decimal bytes (``...:255:255:10:255:255:05``): as an address."""
    import ipaddress

    if not text:
        return None
    parts = text.split(":")
    if len(parts) != 16 or not all(p.isdigit() and int(p) < 256 for p in parts):
        return None
    addr = ipaddress.IPv6Address(bytes(int(p) for p in parts))
    return str(addr.ipv4_mapped) if addr.ipv4_mapped is not None else str(addr)


def failure_reason(text: str) -> str:
    """The line that says why perftest failed (its last error-looking line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keywords = ("fail", "error", "couldn't", "unable", "cannot", "not found", "no such", "refused", "invalid")
    for line in reversed(lines):
        if any(word in line.lower() for word in keywords):
            return line[:300]
    return lines[-1][:300] if lines else "no output"
