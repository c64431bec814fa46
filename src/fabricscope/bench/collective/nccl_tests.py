"""Read nccl-tests output (``all_reduce_perf`` and friends) into ``fabricscope.bench/v1``.

Accepts the text tables every nccl-tests version prints (with or without the ``redop`` and
``root`` columns, per-iteration columns, timestamps, NCCL INFO lines interleaved), nccl-tests'
JSON report (``-J``/``--output_file``, ``"version": 2`` with ``results``), and rccl-tests-style
JSON records (``name``/``size``/``algBw``/``busBw``, a list or JSON lines). Pure functions of
text; tested on captured outputs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fabricscope.bench.collective import size_metrics
from fabricscope.bench.results.schema import BenchResult, CollectiveEntry, new_result
from fabricscope.collective_ops import find
from fabricscope.errors import FabricscopeError

MAX_FILE_BYTES = 64 << 20


class NcclTestsError(FabricscopeError):
    """The file is not nccl-tests output (or cannot be read)."""


@dataclass
class Row:
    size_bytes: int
    count: int | None
    dtype: str | None
    redop: str | None
    root: int | None
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: int | None
    inplace_time_s: float | None = None
    inplace_algbw_GBps: float | None = None
    inplace_busbw_GBps: float | None = None
    inplace_wrong: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.dtype,
            "redop": self.redop,
            "root": self.root,
            "time_s": self.time_s,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "wrong": self.wrong,
            "in_place": None
            if self.inplace_time_s is None
            else {
                "time_s": self.inplace_time_s,
                "algbw_GBps": self.inplace_algbw_GBps,
                "busbw_GBps": self.inplace_busbw_GBps,
                "wrong": self.inplace_wrong,
            },
        }


@dataclass
class Parsed:
    op: str
    op_assumed: bool
    ranks: int | None
    ranks_inferred: bool
    hosts: list[str]
    version: str | None
    settings: dict[str, Any]
    rows: list[Row]
    out_of_bounds: int | None
    avg_busbw_GBps: float | None  # as the file states it
    format: str  # text | json | records
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)


# ----- text ---------------------------------------------------------------------------------
_NUM = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\Z")
_TS = re.compile(r"^\d{4}-\d{2}-\d{2}\Z|^\d{2}:\d{2}:\d{2}\Z")


def _is_num(tok: str) -> bool:
    return bool(_NUM.match(tok))


def _wrong(tok: str) -> int | None:
    if tok.upper() == "N/A":
        return None
    return int(float(tok))


def parse_row(line: str) -> Row | None:
    """One result row, or None when the line is not one."""
    toks = [t for t in line.split() if not _TS.match(t)]
    if len(toks) < 7 or not toks[0].isdigit() or not toks[1].isdigit():
        return None
    if _is_num(toks[2]):
        return None
    size, count, dtype = int(toks[0]), int(toks[1]), toks[2]
    rest = toks[3:]
    redop = None
    root = None
    if rest and not _is_num(rest[0]) and rest[0].upper() != "N/A":
        redop = rest.pop(0)
    # the numeric block: [root] time algbw busbw wrong [per-iter x4] [time algbw busbw wrong [per-iter x4]]
    if len(rest) in (5, 9, 13, 17) and re.fullmatch(r"-?\d+", rest[0]):
        root = int(rest.pop(0))
    if len(rest) == 16:  # per-iteration report: i_min i_max i_p99 i_cv% after each block
        rest = rest[0:4] + rest[8:12]
    elif len(rest) == 8 and not (_is_num(rest[3]) or rest[3].upper() == "N/A"):
        return None
    if len(rest) not in (4, 8):
        return None
    try:
        oop = [float(rest[0]), float(rest[1]), float(rest[2])]
        oop_wrong = _wrong(rest[3])
        ip = [float(x) for x in rest[4:7]] if len(rest) == 8 else None
        ip_wrong = _wrong(rest[7]) if len(rest) == 8 else None
    except ValueError:
        return None
    return Row(
        size_bytes=size,
        count=count,
        dtype=dtype,
        redop=redop,
        root=root,
        time_s=oop[0] / 1e6,
        algbw_GBps=oop[1],
        busbw_GBps=oop[2],
        wrong=oop_wrong,
        inplace_time_s=ip[0] / 1e6 if ip else None,
        inplace_algbw_GBps=ip[1] if ip else None,
        inplace_busbw_GBps=ip[2] if ip else None,
        inplace_wrong=ip_wrong,
    )


def parse_text(text: str, *, op: str | None = None, ranks: int | None = None) -> Parsed:
    rows: list[Row] = []
    hosts: list[str] = []
    rank_ids: set[int] = set()
    version = None
    settings: dict[str, Any] = {}
    found_op = None
    oob = None
    avg = None
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            if m := re.match(r"nccl-tests version (\S+)", body):
                version = m.group(1)
            elif m := re.match(r"Collective test starting:\s*(\S+)", body):
                found_op = m.group(1)
            elif m := re.match(r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)", body):
                rank_ids.add(int(m.group(1)))
                if m.group(2) not in hosts:
                    hosts.append(m.group(2))
            elif body.startswith("nThread"):
                settings.update(_settings(body))
            elif m := re.match(r"Out of bounds values\s*:\s*(\d+)", body):
                oob = int(m.group(1))
            elif m := re.match(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+)", body):
                avg = float(m.group(1))
            continue
        row = parse_row(line)
        if row is None:
            skipped += 1
            continue
        rows.append(row)
    if not rows:
        raise NcclTestsError(
            "no nccl-tests result rows found (expected lines like '  1048576  262144  float  sum  -1  181.3  5.79  5.79  0 ...')"
        )
    return _finish(
        rows,
        op=op,
        found_op=found_op,
        ranks=ranks,
        hosts=hosts,
        version=version,
        settings=settings,
        oob=oob,
        avg=avg,
        fmt="text",
        skipped=skipped,
        rank_ids=rank_ids,
    )


def _settings(body: str) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for key, value in re.findall(
        r"(nThread|nGpus|minBytes|maxBytes|warmup iters|agg iters|iters|validation|graph|unalign)[:]?\s+(-?\d+)",
        body,
    ):
        pairs.append((key.replace(" ", "_"), int(value)))
    return pairs


def _op_name(name: str | None) -> str | None:
    if not name:
        return None
    base = Path(name).name
    base = base.removesuffix("_perf").removesuffix("_perf_mpi")
    return base or None


def _finish(
    rows, *, op, found_op, ranks, hosts, version, settings, oob, avg, fmt, skipped, rank_ids=frozenset()
) -> Parsed:
    notes = []
    name = op or _op_name(found_op)
    assumed = False
    if name is None:
        name, assumed = "all_reduce", True
        notes.append("operation not stated in the file; assumed all_reduce (pass --op)")
    inferred = False
    if ranks is None:
        ranks, inferred, note = count_ranks(name, rows, rank_ids)
        if note:
            notes.append(note)
    return Parsed(
        name, assumed, ranks, inferred, hosts, version, settings, rows, oob, avg, fmt, skipped, notes
    )


def count_ranks(
    op: str, rows: list[Row], rank_ids: set[int] | frozenset
) -> tuple[int | None, bool, str | None]:
    """(ranks, inferred, note) from the header's ``#  Rank N ... on HOST`` lines and the rows.

    Rank 0 prints one line per rank, 0 to n-1; when they are not all there (the file's head was
    cut) or busbw/algbw says there are more, the count comes from busbw/algbw, else from the
    highest rank seen."""
    from_bw = infer_ranks(op, rows)
    top = max(rank_ids) + 1 if rank_ids else None
    if top is not None and len(rank_ids) == top and not (from_bw is not None and from_bw > top):
        return top, False, None
    if from_bw is not None and (top is None or from_bw >= top):
        cut = f"; the 'Rank N' lines are cut (highest Rank {top - 1})" if top is not None else ""
        return from_bw, True, f"rank count {from_bw} inferred from busbw/algbw{cut}"
    if top is not None:
        return top, True, f"rank count {top} from the highest 'Rank N' line; the header is cut"
    return None, False, None


def infer_ranks(op: str, rows: list[Row]) -> int | None:
    """n from the median busbw/algbw by inverting the operation's bus factor (None when the
    factor does not depend on n, e.g. broadcast, or the operation is unknown)."""
    row = find(op)
    ratios = [r.busbw_GBps / r.algbw_GBps for r in rows if r.algbw_GBps >= 0.1]
    if row is None or not ratios:
        return None
    ratios.sort()
    f = ratios[len(ratios) // 2]
    n = row.ranks_from_factor(f)
    if n is None or n < 1.5 or n > 1_000_000:
        return None
    rounded = round(n)
    return rounded if abs(row.factor(rounded) - f) < 0.02 else None


# ----- JSON ---------------------------------------------------------------------------------
def parse_json(doc: Any, *, op: str | None = None, ranks: int | None = None) -> Parsed:
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        return _parse_report(doc, op=op, ranks=ranks)
    records = doc if isinstance(doc, list) else [doc] if isinstance(doc, dict) else None
    if records and all(isinstance(r, dict) and "busBw" in r for r in records):
        return _parse_records(records, op=op, ranks=ranks)
    raise NcclTestsError('JSON is neither an nccl-tests report (with "results") nor records with "busBw"')


def _f(value: Any) -> float:
    if isinstance(value, str):
        value = value.strip()
    try:
        return float(value)
    except (TypeError, ValueError):
        raise NcclTestsError(f"expected a number, got {value!r}") from None


def _parse_report(doc: dict, *, op, ranks) -> Parsed:
    rows = []
    for rec in doc["results"]:
        if not isinstance(rec, dict):
            continue
        oop, ip = rec.get("out_of_place"), rec.get("in_place")
        block = oop or ip
        if not isinstance(block, dict):
            continue
        root = rec.get("root")
        rows.append(
            Row(
                size_bytes=int(_f(rec.get("size"))),
                count=int(_f(rec["count"])) if rec.get("count") is not None else None,
                dtype=rec.get("type"),
                redop=rec.get("redop"),
                root=int(_f(root)) if root not in (None, "") else None,
                time_s=_f(block.get("time", block.get("cpu_time"))) / 1e6,
                algbw_GBps=_f(block.get("alg_bw")),
                busbw_GBps=_f(block.get("bus_bw")),
                wrong=None if block.get("nwrong") is None else int(_f(block["nwrong"])),
                inplace_time_s=_f(ip.get("time", ip.get("cpu_time"))) / 1e6
                if isinstance(ip, dict) and oop
                else None,
                inplace_algbw_GBps=_f(ip.get("alg_bw")) if isinstance(ip, dict) and oop else None,
                inplace_busbw_GBps=_f(ip.get("bus_bw")) if isinstance(ip, dict) and oop else None,
                inplace_wrong=int(_f(ip["nwrong"]))
                if isinstance(ip, dict) and oop and ip.get("nwrong") is not None
                else None,
            )
        )
    if not rows:
        raise NcclTestsError("nccl-tests JSON report has no results")
    config = doc.get("config") or {}
    devices = config.get("devices") or []
    hosts = []
    for d in devices:
        if isinstance(d, dict) and d.get("hostname") and d["hostname"] not in hosts:
            hosts.append(d["hostname"])
    args = doc.get("args") or []
    oob = (doc.get("out_of_bounds") or {}).get("count")
    avg = (doc.get("average_bus_bandwidth") or {}).get("bandwidth")
    settings = {k: v for k, v in config.items() if k != "devices" and isinstance(v, (int, float, str))}
    return _finish(
        rows,
        op=op,
        found_op=args[0] if args else None,
        ranks=ranks or (len(devices) or None),
        hosts=hosts,
        version=str(doc.get("version")),
        settings=settings,
        oob=oob,
        avg=_f(avg) if avg is not None else None,
        fmt="json",
        skipped=0,
    )


def _parse_records(records: list[dict], *, op, ranks) -> Parsed:
    oop = [r for r in records if not r.get("inPlace")]
    use = oop or records
    rows = [
        Row(
            size_bytes=int(_f(r.get("size"))),
            count=int(_f(r["count"])) if r.get("count") is not None else None,
            dtype=r.get("type"),
            redop=r.get("redop"),
            root=None,
            time_s=_f(r.get("time")) / 1e6,
            algbw_GBps=_f(r.get("algBw")),
            busbw_GBps=_f(r.get("busBw")),
            wrong=None if str(r.get("wrong", "N/A")).upper() == "N/A" else int(_f(r.get("wrong"))),
        )
        for r in use
    ]
    names = {r.get("name") for r in use if r.get("name")}
    n = ranks or next((int(r["ranks"]) for r in use if r.get("ranks")), None)
    return _finish(
        rows,
        op=op,
        found_op=next(iter(names)) if len(names) == 1 else None,
        ranks=n,
        hosts=[],
        version=None,
        settings={},
        oob=None,
        avg=None,
        fmt="records",
        skipped=0,
    )


# ----- files --------------------------------------------------------------------------------
def parse_file(path: Path, *, op: str | None = None, ranks: int | None = None) -> Parsed:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise NcclTestsError(
                f"{path}: {size} bytes is more than nccl-tests output ever is (limit 64 MiB)"
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise NcclTestsError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise NcclTestsError(f"{path} is a directory") from None
    except OSError as exc:
        raise NcclTestsError(f"{path}: {exc.strerror or exc}") from None
    text = data.decode("utf-8", "replace")
    stripped = text.lstrip()
    try:
        if stripped.startswith("{") or stripped.startswith("["):
            try:
                doc = json.loads(stripped)
            except ValueError:
                lines = [ln for ln in stripped.splitlines() if ln.strip()]
                try:
                    doc = [json.loads(ln) for ln in lines]
                except ValueError:
                    raise NcclTestsError(f"{path}: looks like JSON but does not parse") from None
            return parse_json(doc, op=op, ranks=ranks)
        return parse_text(text, op=op, ranks=ranks)
    except NcclTestsError as exc:
        raise NcclTestsError(f"{path}: {exc}") from None


def to_bench_result(parsed: Parsed, *, source: str) -> BenchResult:
    """The imported run as printed and stored: summary metrics plus typed per-size entries."""
    params = {
        "source": source,
        "tool": "nccl-tests",
        "format": parsed.format,
        "op": parsed.op,
        "op_assumed": parsed.op_assumed,
        "world_size": parsed.ranks,
        "world_size_inferred": parsed.ranks_inferred,
        "hosts": parsed.hosts,
        "dtype": parsed.rows[0].dtype if parsed.rows else None,
        "nccl_tests_version": parsed.version,
        "sizes": [r.size_bytes for r in parsed.rows],
        **{f"nccl_tests_{k}": v for k, v in parsed.settings.items()},
    }
    result = new_result("collective", params)
    busbws = [r.busbw_GBps for r in parsed.rows]
    wrongs = [r.wrong for r in parsed.rows if r.wrong is not None]
    try:
        entries = [CollectiveEntry.model_validate(r.to_dict()) for r in parsed.rows]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise NcclTestsError(
            f"{source}: a result row is out of range ({where}: {first.get('msg')})"
        ) from None
    metrics: dict[str, float | int | None] = {
        "busbw_avg_GBps": sum(busbws) / len(busbws),
        "busbw_max_GBps": max(busbws),
        "algbw_max_GBps": max(r.algbw_GBps for r in parsed.rows),
        "wrong_count": sum(wrongs) if wrongs else None,
        "ranks_count": parsed.ranks,
        "file_avg_busbw_GBps": parsed.avg_busbw_GBps,
        "file_out_of_bounds_count": parsed.out_of_bounds,
        **size_metrics(entries),
    }
    result.finish(metrics)
    result.entries = entries
    result.notes = list(parsed.notes)
    return result
