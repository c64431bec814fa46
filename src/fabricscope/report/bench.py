"""Text of bench results: one renderer per result kind, the same for a live run and a stored one.

``RENDERERS`` maps a kind to its lines (the function its record in bench/results/kinds.py names); :func:`print_live` shows a run as it ends (``bench
...``), :func:`print_stored` a stored one (``history show``). Both go through the same lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fabricscope.bench.results.history import headline
from fabricscope.bench.results.kinds import KINDS, kind_of
from fabricscope.bench.results.schema import BenchResult, CollectiveEntry, Status
from fabricscope.collective_ops import find
from fabricscope.report.incast import incast_lines
from fabricscope.units import size_label


# ----- two-host kinds -----------------------------------------------------------------------------
def tcp_lines(result: BenchResult) -> list[str]:
    """``12.1 Gb/s (4 streams, send); 3,418 TCP retransmits during the run``."""
    m = result.metrics
    parts = [f"{m.get('throughput_gbps') or 0:.2f} Gb/s"]
    if result.params.get("direction") == "bidir":
        parts[0] += (
            f" (send {m.get('send_throughput_gbps') or 0:.2f}, recv {m.get('recv_throughput_gbps') or 0:.2f})"
        )
    return ["; ".join(parts) + f"; {int(m.get('retransmits_count') or 0):,} TCP retransmits during the run"]


def udp_lines(result: BenchResult) -> list[str]:
    """Delivered against offered rate, loss, reordering and jitter."""
    m = result.metrics
    offered = f"{m['offered_gbps']:.2f} Gb/s offered" if m.get("offered_gbps") else "unlimited offered rate"
    line = f"{m.get('throughput_gbps') or 0:.3f} Gb/s delivered ({offered}, {m.get('sent_gbps') or 0:.3f} Gb/s sent)"
    line += f"; loss {m.get('loss_pct') or 0:.3f} % ({int(m.get('datagrams_lost_count') or 0):,} of {int(m.get('datagrams_sent_count') or 0):,} datagrams)"
    line += f", {int(m.get('out_of_order_count') or 0):,} out of order"
    if m.get("jitter_us") is not None:
        line += f", jitter {m['jitter_us']:.1f} us"
    return [line]


def latency_lines(result: BenchResult) -> list[str]:
    """One row per protocol and size: round-trip percentiles."""
    lines = [
        f"{'proto':<6}{'size':>9}{'samples':>10}{'p50 us':>10}{'p99 us':>10}{'p99.9 us':>10}{'max us':>10}"
    ]
    for row in result.detail.get("rows", []):
        label = size_label(row["size_bytes"])
        if row.get("skipped"):
            lines.append(f"{row['proto']:<6}{label:>9}  skipped: {row['skipped']}")
            continue

        def f(v: Any) -> str:
            return f"{v:10.1f}" if isinstance(v, int | float) else f"{'-':>10}"

        lines.append(
            f"{row['proto']:<6}{label:>9}{row.get('samples') or 0:>10,}{f(row.get('p50'))}{f(row.get('p99'))}{f(row.get('p999'))}{f(row.get('max'))}"
        )
    return lines


def connect_lines(result: BenchResult) -> list[str]:
    """Per-request connection rate and latencies against one pooled connection."""
    m = result.metrics
    lines = []
    if m.get("connect_per_s") is not None:
        lines.append(
            f"per-request connections: {m['connect_per_s']:,.0f}/s; connect p50 {m.get('connect_p50_us') or 0:.1f} us, "
            f"p99 {m.get('connect_p99_us') or 0:.1f} us; first byte p50 {m.get('first_byte_p50_us') or 0:.1f} us; "
            f"whole request p50 {m.get('per_request_p50_us') or 0:.1f} us, p99 {m.get('per_request_p99_us') or 0:.1f} us"
        )
    if m.get("pooled_requests_per_s") is not None:
        lines.append(
            f"pooled connection:       {m['pooled_requests_per_s']:,.0f} requests/s; request p50 "
            f"{m.get('pooled_request_p50_us') or 0:.1f} us, p99 {m.get('pooled_request_p99_us') or 0:.1f} us"
        )
    if m.get("pooling_speedup_ratio") is not None:
        lines.append(
            f"pooling serves {m['pooling_speedup_ratio']:.1f}x the requests per second of per-request connections"
        )
    return lines


def rdma_lines(result: BenchResult) -> list[str]:
    """The device, port and GID perftest used, then bandwidth or latency."""
    m = result.metrics
    plan = result.detail.get("plan", {})
    where = f"{plan.get('device')}/{plan.get('port')}"
    if plan.get("gid_index") is not None:
        where += f" GID {plan['gid_index']} ({plan.get('gid_ip')})"
    lines = [f"{result.params.get('test')} on {where}: {plan.get('why', '')}"]
    if "throughput_gbps" in m:
        line = f"{m['throughput_gbps']:.2f} Gb/s at {int(m.get('msg_size_bytes', 0)):,} B messages"
        if m.get("link_utilization_pct") is not None:
            line += f" ({m['link_utilization_pct']:.1f} % of the {plan.get('rate_gbps'):g} Gb/s link)"
        if m.get("msg_rate_mpps") is not None:
            line += f", {m['msg_rate_mpps']:.3f} Mpps"
        lines.append(line)
    if "lat_typical_us" in m:
        lines.append(
            f"one-way latency typical {m['lat_typical_us']:.2f} us, p99 {m.get('lat_p99_us', float('nan')):.2f} us, "
            f"p99.9 {m.get('lat_p999_us', float('nan')):.2f} us, max {m.get('lat_max_us', float('nan')):.2f} us"
        )
    if result.detail.get("gid_mismatch"):
        lines.append(f"warning: {result.detail['gid_mismatch']}")
    return lines


# ----- collective (measured or imported): nccl-tests' table -----------------------------------
def _nccl_num(value: float, width: int) -> str:
    """nccl-tests' number format: 2 decimals while they fit, then fewer."""
    digits = len(str(int(abs(value)))) if value >= 1 else 1
    if digits < width - 2:
        return f"{value:{width}.2f}"
    if digits < width - 1:
        return f"{value:{width}.1f}"
    return f"{value:{width}.0f}"


# nccl-tests' columns, so that tools reading nccl-tests output read ours (`bench import nccl-tests`
# included): the row is size count type redop root, then the out-of-place block, then the in-place
# block when it was measured (imported runs). The slowest rank and the straggler are "#" lines.
_COLUMNS = (  # (heading, unit, width); the row format below follows the same widths
    ("size", "(B)", 10), ("count", "(elements)", 12), ("type", "", 8), ("redop", "", 6), ("root", "", 6),
)  # fmt: skip
_BLOCK = (("time", "(us)", 7), ("algbw", "(GB/s)", 6), ("busbw", "(GB/s)", 6), ("#wrong", "", 6))


def collective_columns(in_place: bool = False) -> list[str]:
    """nccl-tests' three heading lines: the block names, the columns, their units."""
    blocks = 2 if in_place else 1
    lead = "  ".join(" " * w for _, _, w in _COLUMNS)
    block_w = sum(w for _, _, w in _BLOCK) + 2 * (len(_BLOCK) - 1)
    names = ("out-of-place", "in-place")[:blocks]
    lines = [
        "# " + lead + "".join(f"  {name:>{block_w}}" for name in names),
        "# " + "  ".join(f"{h:>{w}}" for h, _, w in (*_COLUMNS, *_BLOCK * blocks)),
        "# " + "  ".join(f"{u:>{w}}" for _, u, w in (*_COLUMNS, *_BLOCK * blocks)),
    ]
    return [line.rstrip() for line in lines]


def _collective_head(result: BenchResult) -> list[str]:
    p = result.params
    n = p.get("world_size") or result.metrics.get("ranks_count")
    source = f"imported from {p['source']}" if p.get("source") else f"{p.get('launcher', '?')}"
    lines = [f"# {p.get('op', '?')} over {p.get('backend', p.get('tool', '?'))}, {n or '?'} ranks ({source})"]
    if "iters" in p:
        lines.append(
            f"# dtype {p.get('dtype')} warmup iters: {p.get('warmup')} iters: {p['iters']} validation: {int(bool(p.get('check')))}"
        )
    devices = [r for r in result.ranks or [] if r.pid is not None]
    if devices:
        lines += ["#", "# Using devices"]
        lines += [
            f"#  Rank {r.rank:2d} Pid {r.pid:7d} on {r.host or '?':>10} device {r.device}" for r in devices
        ]
    lines.append("#")
    return lines + collective_columns(in_place=any(e.in_place is not None for e in result.entries or []))


def redop_root(result: BenchResult, e: CollectiveEntry) -> tuple[str, int]:
    """nccl-tests' redop and root columns of an entry: as imported, else ``sum``/``none`` and the root or -1."""
    op = find(str(result.params.get("op", "")))
    redop = e.redop or ("sum" if op and op.reduces else "none")
    root = e.root if e.root is not None else (int(result.params.get("root", 0)) if op and op.rooted else -1)
    return redop, root


def _block(time_s: float | None, algbw: float | None, busbw: float | None, wrong: int | None) -> str:
    def num(v: float | None, w: int) -> str:
        return _nccl_num(v, w) if v is not None else f"{'N/A':>{w}}"

    return (f"  {num(time_s * 1e6 if time_s is not None else None, 7)}  {num(algbw, 6)}  {num(busbw, 6)}  "
            f"{'N/A' if wrong is None else str(wrong):>6}")  # fmt: skip


def collective_row(result: BenchResult, e: CollectiveEntry) -> str:
    """One size as nccl-tests prints it: out-of-place, then in-place when it was measured."""
    p = result.params
    redop, root = redop_root(result, e)
    row = (f"{e.size_bytes:12d}  {(e.count if e.count is not None else 0):12d}  {e.type or str(p.get('dtype') or '-'):>8}  "
           f"{redop:>6}  {root!s:>6}" + _block(e.time_s, e.algbw_GBps, e.busbw_GBps, e.wrong))  # fmt: skip
    if e.in_place is not None:
        ip = e.in_place
        row += _block(ip.time_s, ip.algbw_GBps, ip.busbw_GBps, ip.wrong)
    return row


def collective_lines(result: BenchResult) -> list[str]:
    """A collective result (measured, imported, live or stored) as nccl-tests prints it (out-of-place columns)."""
    entries = result.entries or []
    lines = _collective_head(result) + [collective_row(result, e) for e in entries]
    wrong = result.metrics.get("wrong_count")
    lines.append(
        f"# {'Out of bounds values':<20} : {wrong if wrong is not None else 'N/A'} {'OK' if not wrong else 'FAILED'}"
    )
    if result.metrics.get("busbw_avg_GBps") is not None:
        lines.append(f"# {'Avg bus bandwidth':<20} : {result.metrics['busbw_avg_GBps']:g}")
    if result.metrics.get("file_avg_busbw_GBps") is not None:  # imported: what nccl-tests itself printed
        lines.append(
            f"# {'Avg bus bandwidth':<20} : {result.metrics['file_avg_busbw_GBps']:g} (as the file says)"
        )
    slowest = [
        f"{e.size_bytes} B {e.max_rank_time_s * 1e6:.6g}" for e in entries if e.max_rank_time_s is not None
    ]
    if slowest:
        lines.append(f"# {'Slowest rank (us)':<20} : {', '.join(slowest)}")
    lines += [f"# straggler at {e.size_bytes} B: {e.straggler_reason}" for e in entries if e.straggler_reason]
    for s in result.stragglers or []:
        lines.append(
            f"# straggler: rank {s.rank} ({s.host or '?'}) at {', '.join(map(str, s.sizes_bytes))} B"
        )
    if result.skipped_sizes_bytes:
        n = result.params.get("world_size")
        lines.append(
            f"# skipped sizes too small for {f'{n} ranks' if n else 'the rank count'}: {', '.join(map(str, result.skipped_sizes_bytes))}"
        )
    lines += [f"# note: {note}" for note in result.notes or []]
    return lines + ["#"]


# ----- matrix -----------------------------------------------------------------------------------
def _matrix_lines(hosts: Sequence[str], matrix: Sequence[Sequence[float | None]]) -> list[str]:
    w = max(7, max((len(h) for h in hosts), default=2) + 1)
    lines = [" " * w + "".join(f"{h:>{w}}" for h in hosts)]
    for i, h in enumerate(hosts):
        cells = []
        for j in range(len(hosts)):
            v = matrix[i][j]
            cells.append(f"{'-':>{w}}" if i == j else (f"{'fail':>{w}}" if v is None else f"{v:>{w}.3f}"))
        lines.append(f"{h:<{w}}" + "".join(cells))
    return lines


def _matrix_rdma_lines(result: BenchResult) -> list[str]:
    rdma = result.rdma
    if rdma is None:
        return []
    if rdma.matrix_gbps is None:
        return [f"RDMA {rdma.status.value}: {rdma.reason or 'no reason recorded'}"]
    where = ", ".join(
        f"{e.host} {e.device}/{e.port}" + (f" GID {e.gid_index}" if e.gid_index is not None else "")
        for e in rdma.endpoints
    )
    lines = [
        f"pairwise RDMA bandwidth (ib_{rdma.test}), Gbit/s, {rdma.duration_s or 0:g} s per flow; {where}"
    ]
    lines += _matrix_lines(result.hosts or [], rdma.matrix_gbps)
    t = rdma.thresholds_gbps
    if t is not None and t.fleet_median is not None:
        lines.append(
            f"fleet median {t.fleet_median:.3f} Gbit/s (pairs among the better hosts); low below {t.low:.3f}"
        )
    return lines


def _suspect_lines(result: BenchResult) -> list[str]:
    if result.suspects is None:
        lines = ["suspects: not recorded (stored before fabricscope kept them)"]
    elif result.suspects:
        lines = ["suspects:"]
        for s in result.suspects:
            conf = {True: "confirmed on retest", False: "cleared", None: "not retested"}[s.confirmed]
            lines.append(f"  {s.kind} {s.label}: {s.reason} ({conf})")  # RDMA reasons start with "RDMA: "
    else:
        lines = ["suspects: none"]
    for s in result.cleared or []:
        again = f" ({s.retest_gbps:.3g} Gbit/s)" if s.retest_gbps is not None else ""
        lines.append(f"  cleared {s.label}: did not reproduce against good peers{again}")
    for f in (result.failures or []) + (result.rdma.failures if result.rdma is not None else []):
        lines.append(f"  failed: {f}")
    if result.kind == "matrix":
        lines += [
            f"note: {n}" for n in result.notes or []
        ]  # --topology: where each host sits, what nothing explains
    return lines


def matrix_lines(result: BenchResult) -> list[str]:
    """A matrix result: the matrices (TCP, RDMA), their cut-offs and the suspects."""
    hosts = result.hosts or []
    lines = [
        f"pairwise TCP bandwidth, Gbit/s (row sends to column), {len(hosts)} hosts, "
        f"{result.params.get('duration_s', '?')} s per flow"
    ]
    if result.matrix_gbps is not None:
        lines += _matrix_lines(hosts, result.matrix_gbps)
    t, r = result.thresholds_gbps, result.thresholds_retransmit_pct
    if t is not None and t.fleet_median is not None:
        line = (f"fleet median {t.fleet_median:.3f} Gbit/s (pairs among the better hosts); low below {t.low:.3f}"
                if t.low is not None else "")  # fmt: skip
        if r is not None and r.high is not None and r.fleet_median is not None:
            line += f"; retransmits median {r.fleet_median:.2f}%, high above {r.high:.2f}%"
        lines.append(line)
    return lines + _matrix_rdma_lines(result) + _suspect_lines(result)


# Each kind's renderer, by the name its record in bench/results/kinds.py gives.
_DRAWERS = {f.__name__: f for f in (tcp_lines, udp_lines, latency_lines, connect_lines, rdma_lines, collective_lines,
                                    matrix_lines, incast_lines)}  # fmt: skip
RENDERERS: dict[str, Callable[[BenchResult], list[str]]] = {
    kind.name: _DRAWERS[kind.renderer] for kind in KINDS.values()
}


def self_titled(result: BenchResult) -> bool:
    kind = kind_of(result.kind)
    return kind is not None and kind.self_titled


def result_lines(result: BenchResult) -> list[str]:
    """The lines of ``result``'s kind (none for a kind without a renderer, or without its data)."""
    kind = kind_of(result.kind)
    if kind is None or result.status != Status.OK:
        return []
    if kind.data and all(getattr(result, name) is None or getattr(result, name) == [] for name in kind.data):
        return []
    return RENDERERS[kind.name](result)


# ----- counters, headline numbers -----------------------------------------------------------------
HIGHLIGHT_TEXT = {
    "host_tcp_retrans_segs_count": "TCP segments retransmitted host-wide",
    "host_tcp_lost_retransmit_count": "lost retransmits host-wide",
    "host_tcp_timeouts_count": "TCP retransmission timeouts host-wide",
    "host_tcp_in_errors_count": "TCP segments received in error host-wide",
    "host_listen_overflows_count": "listen queue overflows",
    "host_listen_drops_count": "listen drops",
    "host_udp_rcvbuf_errors_count": "UDP datagrams dropped for a full receive buffer",
    "host_udp_sndbuf_errors_count": "UDP send buffer errors",
    "host_udp_in_errors_count": "UDP receive errors",
    "host_udp_no_ports_count": "UDP datagrams to closed ports",
    "port_errors_count": "RDMA port error counts",
    "link_error_recovery_count": "link error recoveries",
    "link_downed_count": "link-down events",
    "port_xmit_discards_count": "transmit discards",
    "port_xmit_wait_count": "transmit wait ticks (congestion)",
    "out_of_sequence_count": "out-of-sequence packets",
    "packet_seq_err_count": "packet sequence errors",
    "cnp_sent_count": "CNPs sent",
    "cnp_handled_count": "CNPs handled (rate reductions)",
    "ecn_marked_count": "ECN-marked RoCE packets",
    "ack_timeout_count": "local ACK timeouts",
    "rnr_nak_retry_count": "RNR NAK retry errors",
    "implied_nak_count": "implied NAK sequence errors",
    "pause_rx_count": "pause frames received",
    "pause_tx_count": "pause frames sent",
    "rx_discards_count": "receive discards (PHY)",
    "rx_out_of_buffer_count": "receive out-of-buffer drops",
    "tx_discards_count": "transmit discards (PHY)",
    "rx_crc_errors_count": "CRC errors",
    "rx_symbol_errors_count": "symbol errors",
    "rx_dropped_count": "receive drops",
    "tx_dropped_count": "transmit drops",
}


def counter_lines(result: BenchResult) -> list[str]:
    """Human lines for the counters under the headline ("3,418 TCP retransmits during the run")."""
    lines = []
    counters = result.counters
    if counters.highlights:
        parts = [
            f"{value:,} {HIGHLIGHT_TEXT.get(name, name)}"
            for name, value in sorted(counters.highlights.items())
        ]
        where = f" (interface {counters.interface})" if counters.interface else ""
        lines.append(f"counters during the run{where}: " + "; ".join(parts))
    elif counters.window_s is not None:
        where = f" on {counters.interface}" if counters.interface else ""
        lines.append(f"no error, drop, pause or retransmit counters moved{where} during the run")
    for note in counters.unavailable[:3]:
        lines.append(f"counters: {note}")
    return lines


def format_metric(name: str, value: float | int | None) -> str:
    """``12.3 Gb/s``, ``41 us``, ``0.5 %``: a value with the unit its name carries."""
    if value is None:
        return "-"
    units = (
        ("_gbps", "Gb/s"),
        ("_GBps", "GB/s"),
        ("_per_s", "/s"),
        ("_mpps", "Mpps"),
        ("_us", "us"),
        ("_ms", "ms"),
        ("_pct", "%"),
    )
    for suffix, unit in units:
        if name.endswith(suffix):
            return f"{_num(value)} {unit}"
    if name.endswith("_count"):
        return f"{value:,.0f} {name.removesuffix('_count').replace('_', ' ')}"
    return _num(value)


def _num(value: float | int) -> str:
    if isinstance(value, float) and abs(value) < 1000:
        return f"{value:.4g}"
    return f"{value:,.0f}"


def headline_text(result: BenchResult) -> str:
    """The one or two numbers ``history list`` shows for a completed run."""
    return ", ".join(format_metric(n, v) for n, v in headline(result)[:2])


# ----- a whole run: live and stored -------------------------------------------------------------
def param_text(params: dict[str, Any]) -> str:
    skip = {"peer", "timeout_s"}
    return ", ".join(f"{k}={v}" for k, v in params.items() if k not in skip and v is not None)


def _check_word(check: dict[str, Any]) -> str:
    """PASS, FAIL, or NO VERDICT for a check the run could not judge (it tested nothing it is about)."""
    if check.get("untested"):
        return "[bold yellow]NO VERDICT[/bold yellow]"
    return "[green]PASS[/green]" if check["passed"] else "[bold red]FAIL[/bold red]"


def _threshold_lines(result: BenchResult) -> list[str]:
    return [
        f"  {_check_word(c)} {escape(c['option'])} {c['limit']:g}: {escape(c['metric'])} = {c['value']}"
        + (f" [yellow]({escape(c['untested'])})[/yellow]" if c.get("untested") else "")
        for c in result.thresholds.get("checks", [])
    ]


def print_live(result: BenchResult, out: Console) -> None:
    """A run as it ends: its kind's lines, the counters around it, its thresholds, where it was stored."""
    if not self_titled(result):
        peer = result.params.get("peer")
        head = f"[bold]bench {result.kind}[/bold]" + (f" -> {escape(str(peer))}" if peer else "")
        out.print(f"{head}  [dim]{escape(param_text(result.params))}[/dim]")
    if result.status == Status.OK:
        for line in result_lines(result):
            out.print(escape(line))
        for line in counter_lines(result):
            out.print(f"  [dim]{escape(line)}[/dim]")
        for line in _threshold_lines(result):
            out.print(line)
    elif result.status == Status.SKIPPED:
        out.print(f"[yellow]skipped:[/yellow] {escape(result.reason or '')}")
        for line in _threshold_lines(result):  # NO VERDICT: a skip never passes a threshold
            out.print(line)
    if result.run_id is not None:
        out.print(f"[dim]stored as run {result.run_id} (fabricscope history show {result.run_id})[/dim]")


def _per_item_metric(name: str) -> bool:
    """Per-size (collective) and per-pair (older matrix runs) metrics: the tables show them."""
    return bool(re.match(r"^size_\d+_", name)) or (name.startswith("pair_") and name.endswith("_gbps"))


def plain_number(value: Any) -> str:
    """A table cell: ``-`` for unknown, thousands separators, four significant digits."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_stored(run_id: int, result: BenchResult, out: Console) -> None:
    """A stored run in full (``history show``): parameters, metrics, its kind's lines, counters, thresholds."""
    r = result
    out.print(
        f"[bold]run {run_id}[/bold]: {r.kind} {r.status.value} at {r.started.isoformat()} ({r.duration_s:.2f} s) on {escape(r.host.hostname or '?')}"
    )
    if r.reason:
        out.print(f"  reason: {escape(r.reason)}")
    out.print("  params: " + escape(", ".join(f"{k}={v}" for k, v in r.params.items())))
    lines = result_lines(r)
    structured = self_titled(r) and bool(lines)
    metrics = {k: v for k, v in r.metrics.items() if not (structured and _per_item_metric(k))}
    if metrics:
        table = Table(box=None, pad_edge=False, header_style="bold")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in metrics.items():
            table.add_row(escape(name), plain_number(value))
        out.print(table)
    for line in lines:
        out.print(escape(line), highlight=False)
    for line in counter_lines(r):
        out.print(f"  {escape(line)}")
    for check in r.thresholds.get("checks", []):
        out.print(
            f"  threshold {escape(check['option'])} {check['limit']}: {'pass' if check['passed'] else 'FAIL'} ({check['value']})"
        )
