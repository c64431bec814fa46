"""``bench matrix``: pairwise TCP (and RDMA) bandwidth between every host of a job, and who is to blame.

Scheduling: the circle method splits all pairs into rounds of disjoint pairs (N-1 rounds for
even N); each round runs twice, once per direction, so every measured flow has both of its
hosts' links to itself. Coordination goes through torch.distributed's TCPStore at
MASTER_ADDR:MASTER_PORT (no SSH, no rendezvous of our own): endpoints, a random token that
every data connection must present, per-phase barriers and results.

Blame (:func:`analyze`): each off-diagonal entry is judged against the fleet's median with a
robust margin (3 x 1.4826 x MAD, at least ``rel_margin`` of the median). A host whose row
*and* column fall below (median of its 2(N-1) entries) is the suspect, not its partners; a
low pair whose hosts are both fine points at the link between them. TCP retransmissions,
read from each sending socket's TCP_INFO, are judged the same way, so a lossy host that still
reaches line rate on a short-RTT fabric is found too. Suspects are retested against the
best-scoring hosts before they are reported.

RDMA: where every host has an RDMA device and perftest, the same rounds run again with
perftest (:mod:`fabricscope.bench.matrix_rdma`; device, port and GID from each host's
inventory by the rule of ``bench rdma``), and the RDMA matrix is judged the same way (by
bandwidth; perftest reports no retransmissions). Where any host lacks them, the result says
RDMA was skipped and why.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import secrets
import shutil
import socket
import statistics
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench import matrix_rdma
from fabricscope.bench.launch import DistEnv
from fabricscope.bench.result import (
    BenchResult,
    Cutoffs,
    MatrixRdma,
    MatrixRetest,
    MatrixSuspect,
    RankInfo,
    RdmaEndpoint,
    Status,
    new_result,
)
from fabricscope.errors import FabricscopeError
from fabricscope.host import Root

CHUNK_BYTES = 256 << 10
HEADER_MAX = 512


class MatrixError(FabricscopeError):
    """The matrix could not be measured (a peer vanished, a deadline passed)."""


class MatrixParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    duration_s: float = Field(default=2.0, gt=0.05, le=600)
    warmup_s: float = Field(default=0.25, ge=0, le=60)
    retest: bool = True
    retest_peers: int = Field(default=2, ge=1, le=8)
    rel_margin: float = Field(default=0.2, gt=0, lt=1)
    retx_floor_pct: float = Field(default=0.5, ge=0, le=100)
    timeout_s: float = Field(default=120.0, gt=0, le=86400)
    bind: str | None = None
    rdma: bool = True  # also measure RDMA with perftest where every host has it
    rdma_test: Literal["write_bw", "read_bw", "send_bw"] = "write_bw"
    rdma_device: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    rdma_port: int = Field(default=18515, ge=1024, le=60000)  # + the receiver's index: one port per host
    root: str | None = None  # read the RDMA inventory here instead of the live machine


# ----- schedule -----------------------------------------------------------------------------
def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """All pairs of ``n`` hosts in rounds of disjoint pairs (circle method)."""
    if n < 2:
        return []
    ids: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    m = len(ids)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = ids[i], ids[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        ids = [ids[0], ids[-1], *ids[1:-1]]
    return rounds


def phases(n: int) -> list[list[tuple[int, int]]]:
    """Directed phases: each round once low->high, once high->low."""
    out = []
    for pairs in round_robin(n):
        out.append(list(pairs))
        out.append([(b, a) for a, b in pairs])
    return out


def pack_phases(flows: Sequence[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Greedy: put directed flows into phases where no host appears twice."""
    remaining = list(dict.fromkeys(flows))
    out: list[list[tuple[int, int]]] = []
    while remaining:
        busy: set[int] = set()
        phase, rest = [], []
        for a, b in remaining:
            if a in busy or b in busy:
                rest.append((a, b))
            else:
                phase.append((a, b))
                busy.update((a, b))
        out.append(phase)
        remaining = rest
    return out


# ----- analysis -----------------------------------------------------------------------------
@dataclass
class Suspect:
    host: str
    kind: str  # host | link
    reason: str
    peer: str | None = None
    transport: str = "tcp"  # tcp | rdma
    score_gbps: float | None = None
    fleet_median_gbps: float | None = None
    retransmit_pct: float | None = None
    confirmed: bool | None = None  # None: not retested
    retest_gbps: float | None = None
    retest_retransmit_pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class Verdict:
    suspects: list[Suspect]
    fleet_median_gbps: float | None
    low_threshold_gbps: float | None
    fleet_retransmit_pct: float | None
    high_retransmit_pct: float | None
    host_scores_gbps: list[float | None]
    host_retransmit_pct: list[float | None]


def _offdiag(matrix: Sequence[Sequence[float | None]]) -> list[float]:
    return [v for i, row in enumerate(matrix) for j, v in enumerate(row) if i != j and v is not None]


def _line(matrix: Sequence[Sequence[float | None]], h: int) -> list[float]:
    n = len(matrix)
    vals = [matrix[h][j] for j in range(n) if j != h] + [matrix[i][h] for i in range(n) if i != h]
    return [v for v in vals if v is not None]


def _mad(values: list[float], center: float) -> float:
    return statistics.median(abs(v - center) for v in values) if values else 0.0


def _reference(
    matrix: Sequence[Sequence[float | None]], scores: list[float | None], better_high: bool
) -> list[float]:
    """Entries between hosts of the better half: a bad host cannot drag the reference down.

    With few hosts, one bad host touches most entries (2 of 3 pairs at N=3), so the median of
    all entries would follow it; the pairs among the better-scoring half do not.
    """
    n = len(matrix)
    known = [s for s in scores if s is not None]
    if not known:
        return []
    cut = statistics.median(known)
    good = {
        h
        for h in range(n)
        if scores[h] is not None and ((scores[h] >= cut) if better_high else (scores[h] <= cut))
    }
    vals = [matrix[i][j] for i in good for j in good if i != j and matrix[i][j] is not None]
    return vals or _offdiag(matrix)


def _fraction(values: list[float], test: Callable[[float], bool]) -> float:
    return sum(1 for v in values if test(v)) / len(values) if values else 0.0


def analyze(
    hosts: Sequence[str],
    matrix_gbps: Sequence[Sequence[float | None]],
    retransmit_pct: Sequence[Sequence[float | None]] | None = None,
    *,
    rel_margin: float = 0.2,
    retx_floor_pct: float = 0.5,
    transport: str = "tcp",
) -> Verdict:
    """Rank suspects: hosts whose row and column are low (or lossy), then links.

    A host is the suspect when more than half of its 2(N-1) transfers are low: its partners
    each have only the transfers with it low (2 of 2(N-1), at most half even at N=3).
    ``transport`` labels the suspects (and prefixes RDMA reasons).
    """
    prefix = "RDMA: " if transport == "rdma" else ""
    n = len(hosts)
    vals = _offdiag(matrix_gbps)
    if n < 2 or not vals:
        return Verdict([], None, None, None, None, [None] * n, [None] * n)
    scores = [statistics.median(_line(matrix_gbps, h)) if _line(matrix_gbps, h) else None for h in range(n)]
    ref = _reference(matrix_gbps, scores, better_high=True)
    med = statistics.median(ref)
    sigma = 1.4826 * _mad(ref, med)
    low = med - max(3 * sigma, rel_margin * med)

    rmed = None
    high = None
    rscores: list[float | None] = [None] * n
    rvals = _offdiag(retransmit_pct) if retransmit_pct is not None else []
    if rvals and retransmit_pct is not None:
        rscores = [
            statistics.median(_line(retransmit_pct, h)) if _line(retransmit_pct, h) else None
            for h in range(n)
        ]
        rref = _reference(retransmit_pct, rscores, better_high=False)
        rmed = statistics.median(rref)
        high = rmed + max(3 * 1.4826 * _mad(rref, rmed), retx_floor_pct)

    suspects: list[Suspect] = []
    bad_hosts: set[int] = set()
    if n >= 3:  # with two hosts, a host cannot be told from its only link
        for h in range(n):
            slow = _fraction(_line(matrix_gbps, h), lambda v: v < low) > 0.5
            lossy = (
                high is not None
                and retransmit_pct is not None
                and _fraction(_line(retransmit_pct, h), lambda v: v > high) > 0.5
            )
            if not (slow or lossy):
                continue
            bad_hosts.add(h)
            parts = []
            if slow:
                parts.append(
                    f"its transfers (row and column) run at {scores[h]:.3g} Gbit/s median, "
                    f"{scores[h] / med * 100:.0f}% of the fleet's {med:.3g} Gbit/s"
                )
            if lossy:
                parts.append(f"TCP retransmits {rscores[h]:.2f}% of its segments (fleet median {rmed:.2f}%)")
            suspects.append(
                Suspect(
                    host=hosts[h],
                    kind="host",
                    reason=prefix + "; ".join(parts),
                    transport=transport,
                    score_gbps=scores[h],
                    fleet_median_gbps=med,
                    retransmit_pct=rscores[h],
                )
            )
    for i in range(n):
        for j in range(i + 1, n):
            if i in bad_hosts or j in bad_hosts:
                continue
            pair = [v for v in (matrix_gbps[i][j], matrix_gbps[j][i]) if v is not None]
            rpair = (
                [v for v in (retransmit_pct[i][j], retransmit_pct[j][i]) if v is not None]
                if retransmit_pct
                else []
            )
            slow = bool(pair) and min(pair) < low
            lossy = high is not None and bool(rpair) and max(rpair) > high
            if slow or lossy:
                parts = []
                if slow:
                    parts.append(
                        f"{min(pair):.3g} Gbit/s between them vs the fleet's {med:.3g}, while both hosts are fine with others"
                    )
                if lossy:
                    parts.append(f"{max(rpair):.2f}% retransmits between them")
                suspects.append(
                    Suspect(
                        host=hosts[i],
                        peer=hosts[j],
                        kind="link",
                        reason=f"{prefix}link {hosts[i]} <-> {hosts[j]}: " + "; ".join(parts),
                        transport=transport,
                        score_gbps=min(pair) if pair else None,
                        fleet_median_gbps=med,
                        retransmit_pct=max(rpair) if rpair else None,
                    )
                )
    suspects.sort(key=lambda s: (s.kind != "host", s.score_gbps if s.score_gbps is not None else 0.0))
    return Verdict(suspects, med, low, rmed, high, scores, rscores)


def retest_flows(hosts: Sequence[str], verdict: Verdict, peers: int) -> dict[str, list[tuple[int, int]]]:
    """For each suspect, directed flows to and from the best-scoring hosts that are not suspects."""
    index = {h: i for i, h in enumerate(hosts)}
    suspect_hosts = {s.host for s in verdict.suspects if s.kind == "host"}
    good = sorted(
        (
            i
            for i, h in enumerate(hosts)
            if h not in suspect_hosts and verdict.host_scores_gbps[i] is not None
        ),
        key=lambda i: -(verdict.host_scores_gbps[i] or 0.0),
    )
    plan: dict[str, list[tuple[int, int]]] = {}
    for s in verdict.suspects:
        if s.kind == "host":
            h = index[s.host]
            flows = []
            for g in [g for g in good if g != h][:peers]:
                flows += [(h, g), (g, h)]
        else:
            a, b = index[s.host], index[s.peer or ""]
            flows = [(a, b), (b, a)]
        plan[_key(s)] = flows
    return plan


def _key(s: Suspect) -> str:
    return f"{s.kind}:{s.host}:{s.peer or ''}"


def confirm(
    verdict: Verdict, plan: dict[str, list[tuple[int, int]]], results: dict[tuple[int, int], dict[str, Any]]
) -> tuple[list[Suspect], list[Suspect]]:
    """Split suspects into confirmed (retest low or lossy again) and cleared (retest fine)."""
    confirmed, cleared = [], []
    for s in verdict.suspects:
        flows = plan.get(_key(s), [])
        gbps = [results[f]["gbps"] for f in flows if f in results and results[f].get("gbps") is not None]
        retx = [
            results[f]["retx_pct"] for f in flows if f in results and results[f].get("retx_pct") is not None
        ]
        if not gbps:
            s.confirmed = None
            confirmed.append(s)  # nothing to retest against: report, marked unconfirmed
            continue
        s.retest_gbps = statistics.median(gbps)
        s.retest_retransmit_pct = statistics.median(retx) if retx else None
        still_slow = verdict.low_threshold_gbps is not None and s.retest_gbps < verdict.low_threshold_gbps
        still_lossy = (
            verdict.high_retransmit_pct is not None
            and s.retest_retransmit_pct is not None
            and s.retest_retransmit_pct > verdict.high_retransmit_pct
        )
        s.confirmed = bool(still_slow or still_lossy)
        (confirmed if s.confirmed else cleared).append(s)
    return confirmed, cleared


# ----- heat map -----------------------------------------------------------------------------
def _color(ratio: float | None) -> str:
    """Red (0) -> yellow (0.5) -> green (>= 1) of the fleet median."""
    if ratio is None:
        return "#dddddd"
    r = max(0.0, min(1.0, ratio))
    if r < 0.5:
        red, green = 215, int(48 + (r / 0.5) * (190 - 48))
    else:
        red, green = int(215 - ((r - 0.5) / 0.5) * (215 - 40)), int(190 - ((r - 0.5) / 0.5) * (190 - 160))
    return f"#{red:02x}{green:02x}{60:02x}"


def heatmap_svg(
    hosts: Sequence[str],
    matrix_gbps: Sequence[Sequence[float | None]],
    *,
    title: str | None = None,
    cell: int = 44,
    name: str | None = None,
    reference_gbps: float | None = None,
) -> str:
    """An N x N heat map (sender rows, receiver columns), coloured by fraction of the median.

    Self-contained SVG for the HTML report; no plotting library needed. With ``name`` the
    SVG is marked as a report plot (``class="plot" data-plot=NAME``); cells are ``rect.cell``.
    ``reference_gbps`` (the blame's fleet median, from the pairs among the better hosts) is
    what the colours compare with; without it, the median of all pairs, which a bad host drags
    down in a small fleet.
    """
    n = len(hosts)
    vals = _offdiag(matrix_gbps)
    med = reference_gbps if reference_gbps else (statistics.median(vals) if vals else None)
    label_w = max(40, 8 * max((len(h) for h in hosts), default=2) + 10)
    top = 30 + label_w
    width = label_w + n * cell + 20
    height = top + n * cell + 40
    title = title or "pairwise TCP bandwidth (Gbit/s), rows send to columns"
    marker = f' class="plot" data-plot="{html.escape(name)}" role="img"' if name else ""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg"{marker} width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="4" y="16" font-size="13">{html.escape(title)}</text>',
    ]
    for j, h in enumerate(hosts):
        x = label_w + j * cell + cell / 2
        out.append(
            f'<text x="{x:.0f}" y="{top - 6}" text-anchor="start" transform="rotate(-60 {x:.0f} {top - 6})">{html.escape(h)}</text>'
        )
    for i, h in enumerate(hosts):
        y = top + i * cell
        out.append(
            f'<text x="{label_w - 6}" y="{y + cell / 2 + 4:.0f}" text-anchor="end">{html.escape(h)}</text>'
        )
        for j in range(n):
            v = matrix_gbps[i][j] if i != j else None
            ratio = (v / med) if (v is not None and med) else None
            fill = "#ffffff" if i == j else _color(ratio)
            x = label_w + j * cell
            tip = (
                f"{hosts[i]} -> {hosts[j]}: {v:.3f} Gbit/s" if v is not None else f"{hosts[i]} -> {hosts[j]}"
            )
            out.append(
                f'<rect class="cell" x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}" stroke="#999999" stroke-width="0.5">'
                f"<title>{html.escape(tip)}</title></rect>"
            )
            if v is not None:
                out.append(
                    f'<text x="{x + cell / 2 - 1:.0f}" y="{y + cell / 2 + 4:.0f}" text-anchor="middle">{v:.3g}</text>'
                )
    if med is not None:
        out.append(
            f'<text x="4" y="{height - 12}">{"fleet median" if reference_gbps else "median"} {med:.3g} Gbit/s; '
            "red = far below it, green = at or above it</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ----- results ------------------------------------------------------------------------------
@dataclass
class Survey:
    """One transport's matrix over the job, judged and retested (rank 0 only)."""

    transport: str  # tcp | rdma
    matrix_gbps: list[list[float | None]]
    retransmit_pct: list[list[float | None]] | None
    verdict: Verdict
    suspects: list[Suspect]
    cleared: list[Suspect]
    retests: list[dict[str, Any]]
    failures: list[str] = field(default_factory=list)


@dataclass
class RdmaPart:
    """What became of RDMA in this run: measured (``survey``), skipped or failed, and why."""

    status: str  # ok | skipped | failed
    reason: str | None = None
    test: str | None = None
    duration_s: int | None = None
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    survey: Survey | None = None


@dataclass
class MatrixRun:
    params: MatrixParams
    hosts: list[str]
    ranks: list[int]
    tcp: Survey
    rdma: RdmaPart
    launcher: str
    duration_s: float

    @property
    def matrix_gbps(self) -> list[list[float | None]]:
        return self.tcp.matrix_gbps

    @property
    def suspects(self) -> list[Suspect]:
        return self.tcp.suspects + (self.rdma.survey.suspects if self.rdma.survey else [])

    @property
    def failures(self) -> list[str]:
        return self.tcp.failures + (self.rdma.survey.failures if self.rdma.survey else [])


def _suspect_model(s: Suspect) -> MatrixSuspect:
    return MatrixSuspect.model_validate(s.to_dict())


def _retest_models(survey: Survey) -> list[MatrixRetest]:
    return [MatrixRetest.model_validate({**r, "transport": survey.transport}) for r in survey.retests]


def _summary(prefix: str, matrix: list[list[float | None]], failures: list[str]) -> dict[str, float | int | None]:
    vals = _offdiag(matrix)
    return {
        f"{prefix}matrix_median_gbps": statistics.median(vals) if vals else None,
        f"{prefix}matrix_min_gbps": min(vals) if vals else None,
        f"{prefix}matrix_max_gbps": max(vals) if vals else None,
        f"{prefix}failed_pairs_count": len(failures),
    }


def to_bench_result(run: MatrixRun) -> BenchResult:
    """The result as printed (``--json``) and stored: summary metrics, matrices, suspects.

    Per-pair figures live in ``matrix_gbps`` only (host names are not metric names: the hosts
    of two jobs differ, and the matrix keeps every pair anyway).
    """
    params = run.params.model_dump(mode="json")
    params.update(hosts=run.hosts, launcher=run.launcher, transport="tcp+rdma" if run.rdma.survey else "tcp")
    result = new_result("matrix", params)
    metrics: dict[str, float | int | None] = {
        **_summary("", run.tcp.matrix_gbps, run.tcp.failures),
        "hosts_count": len(run.hosts),
        "suspects_count": len(run.suspects),
    }
    rdma_survey = run.rdma.survey
    if rdma_survey is not None:
        metrics.update(_summary("rdma_", rdma_survey.matrix_gbps, rdma_survey.failures))
    result.finish(metrics, duration_s=run.duration_s)
    v = run.tcp.verdict
    result.hosts = list(run.hosts)
    result.ranks = [RankInfo(rank=r, host=h) for r, h in zip(run.ranks, run.hosts)]
    result.matrix_gbps = run.tcp.matrix_gbps
    result.retransmit_pct = run.tcp.retransmit_pct
    surveys = [run.tcp] + ([rdma_survey] if rdma_survey else [])
    result.suspects = [_suspect_model(s) for sv in surveys for s in sv.suspects]
    result.cleared = [_suspect_model(s) for sv in surveys for s in sv.cleared]
    result.retests = [r for sv in surveys for r in _retest_models(sv)]
    result.thresholds_gbps = Cutoffs(fleet_median=v.fleet_median_gbps, low=v.low_threshold_gbps)
    result.thresholds_retransmit_pct = Cutoffs(fleet_median=v.fleet_retransmit_pct, high=v.high_retransmit_pct)
    result.failures = list(run.tcp.failures)
    rdma = MatrixRdma(
        status=Status(run.rdma.status),
        reason=run.rdma.reason,
        test=run.rdma.test,
        duration_s=run.rdma.duration_s,
        endpoints=[RdmaEndpoint.model_validate(e) for e in run.rdma.endpoints],
    )
    if rdma_survey is not None:
        rv = rdma_survey.verdict
        rdma.matrix_gbps = rdma_survey.matrix_gbps
        rdma.thresholds_gbps = Cutoffs(fleet_median=rv.fleet_median_gbps, low=rv.low_threshold_gbps)
        rdma.failures = list(rdma_survey.failures)
    result.rdma = rdma
    return result


def _matrix_lines(hosts: Sequence[str], matrix: Sequence[Sequence[float | None]]) -> list[str]:
    n = len(hosts)
    w = max(7, max((len(h) for h in hosts), default=2) + 1)
    lines = [" " * w + "".join(f"{h:>{w}}" for h in hosts)]
    for i, h in enumerate(hosts):
        cells = []
        for j in range(n):
            v = matrix[i][j]
            cells.append(f"{'-':>{w}}" if i == j else (f"{'fail':>{w}}" if v is None else f"{v:>{w}.3f}"))
        lines.append(f"{h:<{w}}" + "".join(cells))
    return lines


def format_matrix(result: BenchResult) -> str:
    """A matrix result (live or stored) for the terminal: the matrices, cut-offs and suspects."""
    hosts = result.hosts or []
    p = result.params
    lines = [
        f"pairwise TCP bandwidth, Gbit/s (row sends to column), {len(hosts)} hosts, "
        f"{p.get('duration_s', '?')} s per flow"
    ]
    if result.matrix_gbps is not None:
        lines += _matrix_lines(hosts, result.matrix_gbps)
    t, r = result.thresholds_gbps, result.thresholds_retransmit_pct
    if t is not None and t.fleet_median is not None:
        line = f"median {t.fleet_median:.3f} Gbit/s; low below {t.low:.3f}" if t.low is not None else ""
        if r is not None and r.high is not None and r.fleet_median is not None:
            line += f"; retransmits median {r.fleet_median:.2f}%, high above {r.high:.2f}%"
        lines.append(line)
    rdma = result.rdma
    if rdma is not None and rdma.matrix_gbps is not None:
        where = ", ".join(
            f"{e.host} {e.device}/{e.port}" + (f" GID {e.gid_index}" if e.gid_index is not None else "")
            for e in rdma.endpoints
        )
        lines.append(
            f"pairwise RDMA bandwidth (ib_{rdma.test}), Gbit/s, {rdma.duration_s or 0:g} s per flow; {where}"
        )
        lines += _matrix_lines(hosts, rdma.matrix_gbps)
        if rdma.thresholds_gbps is not None and rdma.thresholds_gbps.fleet_median is not None:
            lines.append(
                f"median {rdma.thresholds_gbps.fleet_median:.3f} Gbit/s; low below {rdma.thresholds_gbps.low:.3f}"
            )
    elif rdma is not None:
        lines.append(f"RDMA {rdma.status.value}: {rdma.reason or 'no reason recorded'}")
    if result.suspects is None:
        lines.append("suspects: not recorded (stored before fabricscope kept them)")
    elif result.suspects:
        lines.append("suspects:")
        for s in result.suspects:
            conf = {True: "confirmed on retest", False: "cleared", None: "not retested"}[s.confirmed]
            lines.append(f"  {s.kind} {s.label}: {s.reason} ({conf})")  # RDMA reasons start with "RDMA: "
    else:
        lines.append("suspects: none")
    for s in result.cleared or []:
        again = f" ({s.retest_gbps:.3g} Gbit/s)" if s.retest_gbps is not None else ""
        lines.append(f"  cleared {s.label}: did not reproduce against good peers{again}")
    for f in (result.failures or []) + (rdma.failures if rdma is not None else []):
        lines.append(f"  failed: {f}")
    return "\n".join(lines) + "\n"


# ----- the worker: sockets, TCP_INFO, the store ---------------------------------------------
def tcp_counters(sock: socket.socket) -> tuple[int, int] | None:
    """(total retransmits, segments out) from struct tcp_info (linux/tcp.h, offsets 100 and 136)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 192)
    except (OSError, AttributeError):
        return None
    if len(raw) < 144:
        return None
    (total_retrans,) = struct.unpack_from("I", raw, 100)
    (segs_out,) = struct.unpack_from("I", raw, 136)
    return total_retrans, segs_out


def local_address_towards(addr: str, port: int) -> str:
    """The address this host uses to reach ``addr`` (UDP connect sends nothing)."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.connect((addr, port or 9))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def _send(
    endpoint: tuple[str, int], header: dict[str, Any], duration_s: float, deadline_s: float
) -> dict[str, Any]:
    payload = memoryview(os.urandom(CHUNK_BYTES))
    sock = socket.create_connection(endpoint, timeout=min(10.0, deadline_s))
    try:
        sock.settimeout(deadline_s)
        sock.sendall((json.dumps(header) + "\n").encode())
        end = time.monotonic() + duration_s
        sent = 0
        while time.monotonic() < end:
            sock.sendall(payload)
            sent += len(payload)
        sock.shutdown(socket.SHUT_WR)
        # wait for the receiver to close: every byte acknowledged, retransmit count complete
        while sock.recv(4096):
            pass
        counters = tcp_counters(sock)
    finally:
        sock.close()
    out: dict[str, Any] = {"sent_bytes": sent}
    if counters and counters[1] > 0:
        out["retx_pct"] = counters[0] / counters[1] * 100.0
        out["retransmits"] = counters[0]
        out["segments"] = counters[1]
    return out


def _receive(
    server: socket.socket, expect: dict[str, Any], duration_s: float, warmup_s: float, deadline_s: float
) -> dict[str, Any]:
    """Accept the expected sender (token, phase, source checked) and measure its rate after warm-up."""
    end_by = time.monotonic() + deadline_s
    while True:
        left = end_by - time.monotonic()
        if left <= 0:
            raise MatrixError(f"no connection from {expect['src_host']} within {deadline_s:g} s")
        server.settimeout(left)
        try:
            conn, _ = server.accept()
        except TimeoutError:
            raise MatrixError(f"no connection from {expect['src_host']} within {deadline_s:g} s") from None
        conn.settimeout(min(10.0, max(0.1, end_by - time.monotonic())))
        try:
            header_raw = b""
            while b"\n" not in header_raw and len(header_raw) < HEADER_MAX:
                chunk = conn.recv(HEADER_MAX - len(header_raw))
                if not chunk:
                    break
                header_raw += chunk
            line, _, rest = header_raw.partition(b"\n")
            header = json.loads(line.decode("utf-8"))
            if not (
                isinstance(header, dict)
                and header.get("token") == expect["token"]
                and header.get("phase") == expect["phase"]
                and header.get("src") == expect["src"]
            ):
                raise ValueError("unexpected header")
        except (ValueError, OSError, UnicodeDecodeError):
            conn.close()  # a stranger or a stale connection: refuse it and keep waiting
            continue
        break
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    t_first = time.monotonic()
    total = len(rest)
    mark_t, mark_b = None, 0
    cap = t_first + duration_s + max(10.0, duration_s)  # a sender that never stops is cut off
    conn.settimeout(max(1.0, duration_s))
    try:
        while True:
            n = conn.recv_into(view)
            now = time.monotonic()
            if n == 0:
                break
            total += n
            if mark_t is None and now - t_first >= warmup_s:
                mark_t, mark_b = now, total
            if now > cap:
                break
    finally:
        conn.close()
    t_end = time.monotonic()
    if mark_t is None or t_end - mark_t < 0.02:
        mark_t, mark_b = t_first, 0
    seconds = t_end - mark_t
    gbps = (total - mark_b) * 8 / seconds / 1e9 if seconds > 0 else None
    return {"bytes": total, "seconds": seconds, "gbps": gbps}


class _Coordinator:
    """Keys in the TCPStore, barriers over the participating ranks."""

    def __init__(self, store: Any, count: int, timeout_s: float) -> None:
        self.store = store
        self.count = count
        self.timeout = timedelta(seconds=timeout_s)

    def barrier(self, key: str) -> None:
        if self.store.add(f"bar/{key}", 1) == self.count:
            self.store.set(f"bar/{key}/go", "1")
        self.store.wait([f"bar/{key}/go"], self.timeout)

    def put(self, key: str, value: Any) -> None:
        self.store.set(key, json.dumps(value))

    def get(self, key: str) -> Any:
        self.store.wait([key], self.timeout)
        return json.loads(self.store.get(key).decode())


def run_worker(
    params: MatrixParams,
    env: DistEnv,
    progress: Callable[[str], None] | None = None,
    *,
    which: Callable[[str], str | None] = shutil.which,
) -> MatrixRun | None:
    """Every rank runs this; rank 0 returns the run, the others None."""
    try:
        from torch.distributed import TCPStore
    except ImportError:
        raise MatrixError(
            "bench matrix needs torch (for torch.distributed's store): pip install 'fabricscope[torch]'"
        ) from None
    t_start = time.monotonic()
    rank = env.rank
    try:
        store = TCPStore(
            env.master_addr,
            env.master_port,
            env.world_size,
            rank == 0,
            timeout=timedelta(seconds=params.timeout_s),
            wait_for_workers=True,
        )
    except Exception as exc:
        raise MatrixError(
            f"rank {rank}: cannot reach the job's store at {env.master_addr}:{env.master_port}: {_short(exc)}"
        ) from None
    all_ranks = _Coordinator(store, env.world_size, params.timeout_s)
    # one participant per host: local rank 0, or every rank our own launchers labelled as a host
    participant = env.local_rank == 0 or rank == 0 or env.host_label is not None
    server = None
    try:
        addr = params.bind or local_address_towards(env.master_addr, env.master_port)
        if participant:
            family = socket.AF_INET6 if ":" in addr else socket.AF_INET
            server = socket.socket(family, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((addr, 0))
            server.listen(8)
            all_ranks.put(
                f"ep/{rank}",
                {
                    "addr": addr,
                    "port": server.getsockname()[1],
                    "host": env.host_label or socket.gethostname(),
                },
            )
        else:
            all_ranks.put(f"ep/{rank}", None)
        if rank == 0:
            all_ranks.put("token", secrets.token_hex(16))
        token = all_ranks.get("token")
        eps = [all_ranks.get(f"ep/{r}") for r in range(env.world_size)]
        members = [r for r in range(env.world_size) if eps[r] is not None]
        hosts = _unique_labels([eps[r]["host"] for r in members], members)
        n = len(members)
        if params.rdma and params.rdma_port + n - 1 > 65535:
            raise MatrixError(f"--rdma-port {params.rdma_port} + {n} hosts runs past port 65535")
        if not participant:
            _leave(all_ranks, expected_s=_expected_s(params, n))
            return None
        me = members.index(rank)
        co = _Coordinator(store, n, params.timeout_s)
        flow_deadline = params.duration_s + 30.0
        rdma_s = matrix_rdma.flow_seconds(params.duration_s)
        ready: matrix_rdma.Readiness | None = None

        def tcp_send(tag: str, k: int, a: int, b: int) -> dict[str, Any]:
            ep = eps[members[b]]
            try:
                return _send(
                    (ep["addr"], ep["port"]),
                    {"token": token, "phase": f"{tag}/{k}", "src": a},
                    params.duration_s,
                    flow_deadline,
                )
            except (OSError, MatrixError) as exc:
                return {"error": f"{hosts[a]} -> {hosts[b]}: send failed: {_short(exc)}"}

        def tcp_receive(tag: str, k: int, a: int, b: int) -> dict[str, Any]:
            assert server is not None
            try:
                return _receive(
                    server,
                    {"token": token, "phase": f"{tag}/{k}", "src": a, "src_host": hosts[a]},
                    params.duration_s,
                    params.warmup_s,
                    flow_deadline,
                )
            except (OSError, MatrixError) as exc:
                return {"error": f"{hosts[a]} -> {hosts[b]}: receive failed: {_short(exc)}"}

        def rdma_send(tag: str, k: int, a: int, b: int) -> dict[str, Any]:
            assert ready is not None
            co.get(f"rdma-up/{tag}/{k}/{b}")  # the receiver started its perftest server
            argv = matrix_rdma.client_argv(
                ready, params.rdma_test, rdma_s, params.rdma_port + b, eps[members[b]]["addr"]
            )
            res = matrix_rdma.send_flow(argv, rdma_s)
            if "error" in res:
                res["error"] = f"{hosts[a]} -> {hosts[b]}: {res['error']}"
            return res

        def rdma_receive(tag: str, k: int, a: int, b: int) -> dict[str, Any]:
            assert ready is not None
            argv = matrix_rdma.server_argv(ready, params.rdma_test, rdma_s, params.rdma_port + b)
            res = matrix_rdma.serve_flow(
                argv,
                rdma_s,
                started=lambda: co.put(f"rdma-up/{tag}/{k}/{b}", True),
                sender_done=lambda: bool(store.check([f"res/{tag}/{k}/{a}/{b}/send"])),
            )
            if "error" in res:
                res["error"] = f"{hosts[a]} -> {hosts[b]}: {res['error']}"
            return res

        flows = {"tcp": (tcp_send, tcp_receive), "rdma": (rdma_send, rdma_receive)}

        def run_phases(transport: str, tag: str, plan: list[list[tuple[int, int]]]) -> None:
            send, receive = flows[transport]
            for k, phase in enumerate(plan):
                co.barrier(f"{tag}/{k}")
                if progress and me == 0:
                    progress(
                        f"{tag} phase {k + 1}/{len(plan)}: {', '.join(f'{hosts[a]}->{hosts[b]}' for a, b in phase)}"
                    )
                for a, b in phase:
                    if a == me:
                        co.put(f"res/{tag}/{k}/{a}/{b}/send", send(tag, k, a, b))
                    elif b == me:
                        co.put(f"res/{tag}/{k}/{a}/{b}/recv", receive(tag, k, a, b))

        def collect(tag: str, plan: list[list[tuple[int, int]]]) -> dict[tuple[int, int], dict[str, Any]]:
            out = {}
            for k, phase in enumerate(plan):
                for a, b in phase:
                    recv = co.get(f"res/{tag}/{k}/{a}/{b}/recv")
                    send = co.get(f"res/{tag}/{k}/{a}/{b}/send")
                    # the sender's error first: for RDMA the client says why a flow failed
                    out[(a, b)] = {**send, **recv, "error": send.get("error") or recv.get("error")}
            return out

        def survey(transport: str) -> Survey | None:
            """Every pair in both directions, then retests of the suspects; rank 0 gets the verdict."""
            main_plan = phases(n)
            run_phases(transport, transport, main_plan)
            if me == 0:
                results = collect(transport, main_plan)
                mat: list[list[float | None]] = [[None] * n for _ in range(n)]
                retx: list[list[float | None]] = [[None] * n for _ in range(n)]
                failures = []
                for (a, b), r in results.items():
                    if r.get("error"):
                        failures.append(r["error"])
                        continue
                    mat[a][b] = r.get("gbps")
                    retx[a][b] = r.get("retx_pct")
                retx_or_none = retx if transport == "tcp" else None
                verdict = analyze(
                    hosts,
                    mat,
                    retx_or_none,
                    rel_margin=params.rel_margin,
                    retx_floor_pct=params.retx_floor_pct,
                    transport=transport,
                )
                plan_by_suspect = retest_flows(hosts, verdict, params.retest_peers) if params.retest else {}
                co.put(
                    f"plan/{transport}-retest", pack_phases([f for fl in plan_by_suspect.values() for f in fl])
                )
            retest_plan = [[(int(a), int(b)) for a, b in ph] for ph in co.get(f"plan/{transport}-retest")]
            if retest_plan:
                run_phases(transport, f"{transport}-retest", retest_plan)
            if me != 0:
                return None
            retests: list[dict[str, Any]] = []
            if params.retest and verdict.suspects:
                rres = collect(f"{transport}-retest", retest_plan)
                confirmed, cleared = confirm(verdict, plan_by_suspect, rres)
                retests = [
                    {
                        "from": hosts[a],
                        "to": hosts[b],
                        "gbps": r.get("gbps"),
                        "retransmit_pct": r.get("retx_pct"),
                        "error": r.get("error"),
                    }
                    for (a, b), r in rres.items()
                ]
            else:
                confirmed, cleared = verdict.suspects, []
            return Survey(transport, mat, retx_or_none, verdict, confirmed, cleared, retests, failures)

        tcp = survey("tcp")
        if not params.rdma:
            rdma = RdmaPart("skipped", "not asked (--no-rdma)")
        else:
            root = Root.at(params.root) if params.root else Root.live()
            ready = matrix_rdma.readiness(
                params.rdma_test, root=root, address=eps[rank]["addr"], device=params.rdma_device, which=which
            )
            co.put(f"rdma-ready/{me}", ready.public())
            public = [co.get(f"rdma-ready/{i}") for i in range(n)]
            endpoints = [e for e in (matrix_rdma.endpoint_dict(h, p) for h, p in zip(hosts, public)) if e]
            why = matrix_rdma.skip_reason(hosts, public)
            if why is not None:
                rdma = RdmaPart("skipped", why, params.rdma_test, None, endpoints)
            else:
                rsurvey = survey("rdma")
                rdma = RdmaPart("ok", None, params.rdma_test, rdma_s, endpoints, rsurvey)
                if rsurvey is not None and not _offdiag(rsurvey.matrix_gbps):
                    rdma.status, rdma.reason = "failed", f"every RDMA flow failed; first: {rsurvey.failures[0]}"
        if me != 0:
            _leave(all_ranks, expected_s=params.timeout_s)
            return None
        assert tcp is not None
        all_ranks.put("done", True)
        _wait_for_leavers(store, env.world_size - 1)  # rank 0 hosts the store: outlive its readers
        return MatrixRun(params, hosts, members, tcp, rdma, env.launcher, time.monotonic() - t_start)
    except MatrixError:
        raise
    except Exception as exc:  # store timeouts (a peer died) and socket errors
        raise MatrixError(
            f"rank {rank}: matrix run failed: {_short(exc)} (a peer died, or a deadline of {params.timeout_s:g} s passed)"
        ) from None
    finally:
        if server is not None:
            with contextlib.suppress(OSError):
                server.close()


def _expected_s(params: MatrixParams, n: int) -> float:
    """A generous bound on a whole run, for ranks that only wait for its end."""
    flows = len(phases(n)) * 2  # main rounds and, at most as many again, retests
    per_flow = params.duration_s + params.warmup_s + 5.0
    if params.rdma:
        per_flow += matrix_rdma.flow_seconds(params.duration_s) + 10.0
    return flows * per_flow + params.timeout_s


def _leave(co: _Coordinator, expected_s: float) -> None:
    """Wait for rank 0's "done" (the end of the run), then say so; rank 0 keeps the store up till then."""
    co.store.wait(["done"], timedelta(seconds=max(expected_s, co.timeout.total_seconds())))
    co.store.add("left", 1)


def _wait_for_leavers(store: Any, count: int, limit_s: float = 10.0) -> None:
    end = time.monotonic() + limit_s
    while count > 0 and time.monotonic() < end:
        if store.add("left", 0) >= count:
            return
        time.sleep(0.05)


def _unique_labels(labels: list[str], ranks: list[int]) -> list[str]:
    if len(set(labels)) == len(labels):
        return labels
    return [f"{lab}/r{r}" for lab, r in zip(labels, ranks)]


def _short(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]
