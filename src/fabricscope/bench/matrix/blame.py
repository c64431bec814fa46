"""Who is to blame in a pairwise matrix, and the result a run becomes.

Each off-diagonal entry is judged against the fleet's median with a robust margin (3 robust
standard deviations, :func:`fabricscope.bench.results.stats.robust_sigma`, at least ``rel_margin`` of
the median). A host whose row *and* column fall below (median of its 2(N-1) entries) is the
suspect, not its partners; a low pair whose hosts are both fine points at the link between
them. TCP retransmissions, read from each sending socket's TCP_INFO, are judged the same way,
so a lossy host that still reaches line rate on a short-RTT fabric is found too. Suspects are
retested against the best-scoring hosts before they are reported.

Given the fabric (``--topology``, :mod:`.localize`), the same per-flow verdicts go to network
tomography instead (:mod:`.tomography`): hosts, switch cables and switches are blamed together,
so an uplink whose hosts are fine with each other is named instead of those hosts, and each
suspect is retested through itself alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fabricscope.bench.matrix.schedule import MatrixParams
from fabricscope.bench.results.schema import (
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
from fabricscope.bench.results.stats import robust_sigma

if TYPE_CHECKING:
    from fabricscope.bench.matrix.localize import Fabric, Located

Matrix = Sequence[Sequence[float | None]]


@dataclass
class Verdict:
    suspects: list[MatrixSuspect]
    fleet_median_gbps: float | None
    low_threshold_gbps: float | None
    fleet_retransmit_pct: float | None
    high_retransmit_pct: float | None
    host_scores_gbps: list[float | None]
    host_retransmit_pct: list[float | None]
    fabric: Fabric | None = None
    located: Located | None = None

    @property
    def notes(self) -> list[str]:
        return list(self.located.notes) if self.located else []


def offdiag(matrix: Matrix) -> list[float]:
    """Every measured pair (the diagonal and failed pairs left out)."""
    return [v for i, row in enumerate(matrix) for j, v in enumerate(row) if i != j and v is not None]


def _line(matrix: Matrix, h: int) -> list[float]:
    n = len(matrix)
    vals = [matrix[h][j] for j in range(n) if j != h] + [matrix[i][h] for i in range(n) if i != h]
    return [v for v in vals if v is not None]


def _scores(matrix: Matrix) -> list[float | None]:
    """Each host's median over its row and column."""
    return [statistics.median(line) if (line := _line(matrix, h)) else None for h in range(len(matrix))]


def _reference(
    matrix: Matrix, scores: list[float | None], better_high: bool, by_flow: bool = False
) -> list[float]:
    """Entries between hosts of the better half: a bad host cannot drag the reference down.

    With few hosts, one bad host touches most entries (2 of 3 pairs at N=3), so the median of
    all entries would follow it; the pairs among the better-scoring half do not.
    ``by_flow`` (a fabric is given): the better quarter of all flows instead. A bad uplink slows
    every flow between its leaf and the others (32 of 56 with two leaves of four), a bad spine
    every flow between leaves (54 of 72 with three leaves of three), so no half of the *hosts* is
    clean, while the better quarter of the flows is, up to three quarters of them bad.
    """
    if by_flow:
        vals = sorted(offdiag(matrix), reverse=better_high)
        return vals[: max(1, (len(vals) + 3) // 4)]
    known = [s for s in scores if s is not None]
    if not known:
        return []
    cut = statistics.median(known)
    good = {h for h, s in enumerate(scores) if s is not None and ((s >= cut) if better_high else (s <= cut))}
    vals = [matrix[i][j] for i in good for j in good if i != j and matrix[i][j] is not None]
    return vals or offdiag(matrix)


def _fraction(values: list[float], test: Callable[[float], bool]) -> float:
    return sum(1 for v in values if test(v)) / len(values) if values else 0.0


@dataclass(frozen=True)
class _Scale:
    """One matrix judged: per-host scores, the fleet median and the cut-off beyond it."""

    scores: list[float | None]
    median: float
    cut: float


def _bandwidth_scale(matrix: Matrix, rel_margin: float, by_flow: bool = False) -> _Scale:
    scores = _scores(matrix)
    ref = _reference(matrix, scores, better_high=True, by_flow=by_flow)
    med = statistics.median(ref)
    return _Scale(scores, med, med - max(3 * robust_sigma(ref), rel_margin * med))


def _retransmit_scale(
    retransmit_pct: Matrix | None, floor_pct: float, by_flow: bool = False
) -> _Scale | None:
    if retransmit_pct is None or not offdiag(retransmit_pct):
        return None
    scores = _scores(retransmit_pct)
    ref = _reference(retransmit_pct, scores, better_high=False, by_flow=by_flow)
    med = statistics.median(ref)
    return _Scale(scores, med, med + max(3 * robust_sigma(ref), floor_pct))


def analyze(
    hosts: Sequence[str],
    matrix_gbps: Matrix,
    retransmit_pct: Matrix | None = None,
    *,
    rel_margin: float = 0.2,
    retx_floor_pct: float = 0.5,
    transport: str = "tcp",
    fabric: Fabric | None = None,
) -> Verdict:
    """Rank suspects: hosts whose row and column are low (or lossy), then links.

    A host is the suspect when more than half of its 2(N-1) transfers are low: its partners
    each have only the transfers with it low (2 of 2(N-1), at most half even at N=3).
    ``transport`` labels the suspects (and prefixes RDMA reasons). With ``fabric``, every
    flow's verdict goes to tomography instead (:func:`.localize.locate`).
    """
    n = len(hosts)
    if n < 2 or not offdiag(matrix_gbps):
        return Verdict([], None, None, None, None, [None] * n, [None] * n, fabric)
    bw = _bandwidth_scale(matrix_gbps, rel_margin, by_flow=fabric is not None)
    retx = _retransmit_scale(retransmit_pct, retx_floor_pct, by_flow=fabric is not None)
    judge = _Judge(hosts, matrix_gbps, retransmit_pct, bw, retx, transport)
    located = None
    if fabric is not None:
        from fabricscope.bench.matrix.localize import locate

        located = locate(fabric, hosts, judge.flow_bad, lambda a, b: matrix_gbps[a][b], transport, bw.median)
        suspects = list(located.suspects)
    else:
        bad = (
            judge.host_suspects() if n >= 3 else {}
        )  # with two hosts, a host cannot be told from its only link
        suspects = list(bad.values()) + judge.link_suspects(set(bad))
    order = {"host": 0, "switch": 1, "link": 2}
    suspects.sort(key=lambda s: (order[s.kind], s.score_gbps if s.score_gbps is not None else 0.0))
    return Verdict(
        suspects,
        bw.median,
        bw.cut,
        retx.median if retx else None,
        retx.cut if retx else None,
        bw.scores,
        retx.scores if retx else [None] * n,
        fabric,
        located,
    )


@dataclass(frozen=True)
class _Judge:
    hosts: Sequence[str]
    gbps: Matrix
    retx: Matrix | None
    bw: _Scale
    rs: _Scale | None
    transport: str

    @property
    def prefix(self) -> str:
        return "RDMA: " if self.transport == "rdma" else ""

    def flow_bad(self, a: int, b: int) -> bool | None:
        """One directed flow: slow or lossy by the cut-offs (None: not measured)."""
        gbps = self.gbps[a][b]
        if gbps is None:
            return None
        retx = self.retx[a][b] if self.retx is not None else None
        return gbps < self.bw.cut or (self.rs is not None and retx is not None and retx > self.rs.cut)

    def host_suspects(self) -> dict[int, MatrixSuspect]:
        """Hosts more than half of whose transfers are low or lossy, by index."""
        out = {}
        bw, rs = self.bw, self.rs
        for h, host in enumerate(self.hosts):
            slow = _fraction(_line(self.gbps, h), lambda v: v < bw.cut) > 0.5
            lossy = (
                rs is not None
                and self.retx is not None
                and _fraction(_line(self.retx, h), lambda v: v > rs.cut) > 0.5
            )
            if not (slow or lossy):
                continue
            score = bw.scores[h]
            parts = []
            if slow and score is not None:
                parts.append(
                    f"its transfers (row and column) run at {score:.3g} Gbit/s median, "
                    f"{score / bw.median * 100:.0f}% of the fleet's {bw.median:.3g} Gbit/s"
                )
            rscore = rs.scores[h] if rs is not None else None
            if lossy and rs is not None and rscore is not None:
                parts.append(f"TCP retransmits {rscore:.2f}% of its segments (fleet median {rs.median:.2f}%)")
            out[h] = self._suspect(host, None, "host", "; ".join(parts), score, rscore)
        return out

    def link_suspects(self, bad_hosts: set[int]) -> list[MatrixSuspect]:
        """Low or lossy pairs between hosts that are fine with everyone else."""
        out = []
        hosts, m, r = self.hosts, self.gbps, self.retx
        for i in range(len(hosts)):
            for j in range(i + 1, len(hosts)):
                if i in bad_hosts or j in bad_hosts:
                    continue
                pair = [v for v in (m[i][j], m[j][i]) if v is not None]
                rpair = [v for v in (r[i][j], r[j][i]) if v is not None] if r else []
                slow = bool(pair) and min(pair) < self.bw.cut
                lossy = self.rs is not None and bool(rpair) and max(rpair) > self.rs.cut
                if not (slow or lossy):
                    continue
                parts = []
                if slow:
                    parts.append(
                        f"{min(pair):.3g} Gbit/s between them vs the fleet's {self.bw.median:.3g}, while both hosts are fine with others"
                    )
                if lossy:
                    parts.append(f"{max(rpair):.2f}% retransmits between them")
                reason = f"link {hosts[i]} <-> {hosts[j]}: " + "; ".join(parts)
                out.append(
                    self._suspect(
                        hosts[i],
                        hosts[j],
                        "link",
                        reason,
                        min(pair) if pair else None,
                        max(rpair) if rpair else None,
                    )
                )
        return out

    def _suspect(
        self, host: str, peer: str | None, kind: str, reason: str, score: float | None, retx: float | None
    ) -> MatrixSuspect:
        return MatrixSuspect(
            host=host, peer=peer, kind=kind, reason=self.prefix + reason, transport=self.transport,
            score_gbps=score, fleet_median_gbps=self.bw.median, retransmit_pct=retx,
        )  # fmt: skip


# ----- retests ----------------------------------------------------------------------------------
def suspect_key(s: MatrixSuspect) -> str:
    return f"{s.kind}:{s.host}:{s.peer or ''}"


def retest_flows(hosts: Sequence[str], verdict: Verdict, peers: int) -> dict[str, list[tuple[int, int]]]:
    """For each suspect, directed flows to and from the best-scoring hosts that are not suspects
    (with a fabric: flows that cross the suspect and nothing else under suspicion)."""
    if verdict.fabric is not None and verdict.located is not None:
        from fabricscope.bench.matrix.localize import retest_plan

        return {
            suspect_key(s): flows
            for s, flows in retest_plan(verdict.fabric, verdict.located, verdict.host_scores_gbps, peers)
        }
    index = {h: i for i, h in enumerate(hosts)}
    suspect_hosts = {s.host for s in verdict.suspects if s.kind == "host"}
    scores = verdict.host_scores_gbps
    good = sorted(
        (i for i, h in enumerate(hosts) if h not in suspect_hosts and scores[i] is not None),
        key=lambda i: -(scores[i] or 0.0),
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
        plan[suspect_key(s)] = flows
    return plan


def confirm(
    verdict: Verdict, plan: dict[str, list[tuple[int, int]]], results: dict[tuple[int, int], dict[str, Any]]
) -> tuple[list[MatrixSuspect], list[MatrixSuspect]]:
    """Split suspects into confirmed (retest low or lossy again) and cleared (retest fine)."""
    confirmed, cleared = [], []
    for s in verdict.suspects:
        flows = [results[f] for f in plan.get(suspect_key(s), []) if f in results]
        gbps = [r["gbps"] for r in flows if r.get("gbps") is not None]
        retx = [r["retx_pct"] for r in flows if r.get("retx_pct") is not None]
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


# ----- results ----------------------------------------------------------------------------------
@dataclass
class Survey:
    """One transport's matrix over the job, judged and retested (rank 0 only)."""

    transport: str  # tcp | rdma
    matrix_gbps: list[list[float | None]]
    retransmit_pct: list[list[float | None]] | None
    verdict: Verdict
    suspects: list[MatrixSuspect]
    cleared: list[MatrixSuspect]
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
    fabric: Fabric | None = None

    @property
    def matrix_gbps(self) -> list[list[float | None]]:
        return self.tcp.matrix_gbps

    @property
    def surveys(self) -> list[Survey]:
        return [self.tcp] + ([self.rdma.survey] if self.rdma.survey else [])

    @property
    def suspects(self) -> list[MatrixSuspect]:
        return [s for sv in self.surveys for s in sv.suspects]

    @property
    def failures(self) -> list[str]:
        return [f for sv in self.surveys for f in sv.failures]


def _summary(prefix: str, survey: Survey) -> dict[str, float | int | None]:
    """One meaning per word (issue 26): ``fleet_median_gbps`` is the median the blame judged by
    (pairs among the better hosts, as the CLI's "fleet median"); ``all_pairs_median_gbps`` is the
    median of every pair, which a bad host drags down."""
    vals = offdiag(survey.matrix_gbps)
    return {
        f"{prefix}fleet_median_gbps": survey.verdict.fleet_median_gbps,
        f"{prefix}all_pairs_median_gbps": statistics.median(vals) if vals else None,
        f"{prefix}matrix_min_gbps": min(vals) if vals else None,
        f"{prefix}matrix_max_gbps": max(vals) if vals else None,
        f"{prefix}failed_pairs_count": len(survey.failures),
    }


def to_bench_result(run: MatrixRun) -> BenchResult:
    """The result as printed (``--json``) and stored: summary metrics, matrices, suspects.

    Per-pair figures live in ``matrix_gbps`` only (host names are not metric names: the hosts
    of two jobs differ, and the matrix keeps every pair anyway).
    """
    params = run.params.model_dump(mode="json")
    rdma_survey = run.rdma.survey
    params.update(hosts=run.hosts, launcher=run.launcher, transport="tcp+rdma" if rdma_survey else "tcp")
    result = new_result("matrix", params)
    metrics = {**_summary("", run.tcp), "hosts_count": len(run.hosts), "suspects_count": len(run.suspects)}
    if rdma_survey is not None:
        metrics.update(_summary("rdma_", rdma_survey))
    result.finish(metrics, duration_s=run.duration_s)
    v = run.tcp.verdict
    result.hosts = list(run.hosts)
    result.ranks = [RankInfo(rank=r, host=h) for r, h in zip(run.ranks, run.hosts)]
    result.matrix_gbps = run.tcp.matrix_gbps
    result.retransmit_pct = run.tcp.retransmit_pct
    result.suspects = [s.model_copy() for sv in run.surveys for s in sv.suspects]
    result.cleared = [s.model_copy() for sv in run.surveys for s in sv.cleared]
    result.retests = [
        MatrixRetest.model_validate({**r, "transport": sv.transport})
        for sv in run.surveys
        for r in sv.retests
    ]
    result.thresholds_gbps = Cutoffs(fleet_median=v.fleet_median_gbps, low=v.low_threshold_gbps)
    result.thresholds_retransmit_pct = Cutoffs(
        fleet_median=v.fleet_retransmit_pct, high=v.high_retransmit_pct
    )
    result.failures = list(run.tcp.failures)
    result.rdma = _rdma_part(run.rdma)
    if run.fabric is not None:
        result.topology = run.fabric.document
        result.notes = [
            f"topology {run.fabric.source}: {', '.join(f'{h} on {run.fabric.leaf_of(t) or t}' for h, t in run.fabric.placed.items())}"
        ]
        result.notes += [
            ("RDMA: " if sv.transport == "rdma" else "") + n for sv in run.surveys for n in sv.verdict.notes
        ]
    return result


def _rdma_part(part: RdmaPart) -> MatrixRdma:
    rdma = MatrixRdma(
        status=Status(part.status),
        reason=part.reason,
        test=part.test,
        duration_s=part.duration_s,
        endpoints=[RdmaEndpoint.model_validate(e) for e in part.endpoints],
    )
    if part.survey is not None:
        rv = part.survey.verdict
        rdma.matrix_gbps = part.survey.matrix_gbps
        rdma.thresholds_gbps = Cutoffs(fleet_median=rv.fleet_median_gbps, low=rv.low_threshold_gbps)
        rdma.failures = list(part.survey.failures)
    return rdma
