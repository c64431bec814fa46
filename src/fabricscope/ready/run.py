"""A readiness run, as every rank of the job runs it: doctor, lint, predict, matrix, collective.

Each step meets at its own port (MASTER_PORT + :data:`~fabricscope.ready.params.PORT_OFFSET`):
a rank that finishes one step early cannot join the previous step's store by mistake. Rank 0
judges each step as it ends and hands it to ``progress`` (printed at once); the other ranks only
take part. A step that cannot complete (a peer gone, a deadline passed) ends the run: what was
judged so far is kept, the rest is marked not run.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fabricscope.errors import FabricscopeError, one_line
from fabricscope.findings import Severity
from fabricscope.jobs.launch import DistEnv
from fabricscope.nccl.job import JobSources
from fabricscope.ready import predict as model
from fabricscope.ready.node import NodeInfo, exchange
from fabricscope.ready.params import PORT_OFFSET, Plan, ReadyParams, job_nodes, plan
from fabricscope.ready.verdict import (
    Step,
    Verdict,
    judge_doctor,
    judge_lint,
    judge_matrix,
    judge_measured,
    verdict,
)

Progress = Callable[[Step], None]


@dataclass
class Prediction:
    """What rank 0 expects before measuring: per matrix pair and per collective size, for the
    fabric as it is (predicted) and as built (expected), and what runs slower than built."""

    matrix: list[list[float | None]] | None = None
    matrix_expected: list[list[float | None]] | None = None
    busbw: list[float] | None = None
    busbw_expected: list[float] | None = None
    bottlenecks: list[str] = field(default_factory=list)
    degradations: list[model.Degradation] = field(default_factory=list)
    calibration: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    rdma: list[list[float | None]] | None = None  # the RDMA matrix (perftest), per directed pair
    rdma_expected: list[list[float | None]] | None = None
    rdma_transport: str | None = None  # ib | roce
    rdma_degradations: list[model.Degradation] = field(default_factory=list)

    def to_dict(self, hosts: list[str]) -> dict[str, Any]:
        return {
            "matrix_gbps": self.matrix, "matrix_expected_gbps": self.matrix_expected,
            "busbw_GBps": self.busbw, "busbw_expected_GBps": self.busbw_expected, "bottlenecks": self.bottlenecks,
            "degradations": [dataclasses.asdict(d) for d in self.degradations], "calibration": self.calibration,
            "notes": self.notes, "hosts": hosts, "rdma_gbps": self.rdma, "rdma_expected_gbps": self.rdma_expected,
            "rdma_transport": self.rdma_transport,
            "rdma_degradations": [dataclasses.asdict(d) for d in self.rdma_degradations],
        }  # fmt: skip


@dataclass
class ReadyRun:
    """Rank 0's whole run: the plan, the allocation, the prediction and the judged steps."""

    params: ReadyParams
    plan: Plan
    world_size: int
    launcher: str
    hosts: list[str] = field(default_factory=list)
    prediction: Prediction = field(default_factory=Prediction)
    steps: list[Step] = field(default_factory=list)
    duration_s: float = 0.0
    error: str | None = None
    node_of: dict[str, str] = field(default_factory=dict)  # matrix host -> the scheduler's node name
    trusted: set[str] | None = None  # nodes whose doctor documents came signed (None: no job secret)

    @property
    def verdict(self) -> Verdict:
        return verdict(self.steps, self.node_of)


def at(env: DistEnv, step: str) -> DistEnv:
    return dataclasses.replace(env, master_port=env.master_port + PORT_OFFSET[step])


class Runner:
    """One rank's run (rank 0 judges; ``progress`` sees each judged step)."""

    def __init__(self, params: ReadyParams, env: DistEnv, sources: JobSources | None, *, calibration: Any = None,
                 progress: Progress | None = None, environ: Mapping[str, str] = os.environ) -> None:  # fmt: skip
        self.params, self.env, self.sources, self.calibration = params, env, sources, calibration
        self.progress, self.environ = progress, environ
        self.plan = plan(params, env.world_size, job_nodes(env.world_size, env.launcher, environ))
        self.run = ReadyRun(params, self.plan, env.world_size, env.launcher)
        self.t0 = time.monotonic()

    def done(self, step: Step, started: float) -> None:
        step.duration_s = time.monotonic() - started
        if self.env.rank == 0:
            self.run.steps.append(step)
            if self.progress:
                self.progress(step)

    # -- steps
    def doctor(self) -> list[Any] | None:
        from fabricscope.fleet.doctor import judge_fleet
        from fabricscope.fleet.launched import run_ranks, to_nodes

        started = time.monotonic()
        gathering = run_ranks(
            at(self.env, "doctor"), self.params.root, self.plan.node_timeout_s, environ=self.environ
        )
        if gathering is None:
            return None
        received = gathering.received
        self.run.trusted = gathering.trusted_names() if gathering.authenticated else None
        nodes = to_nodes(received)
        if self.params.expect:
            from pathlib import Path

            from fabricscope.fleet.expect import apply_manifest
            from fabricscope.fleet.manifest import load_manifest

            apply_manifest(load_manifest(Path(self.params.expect)), nodes)
        report = judge_fleet(nodes, manifest=self.params.expect)
        step = judge_doctor([(n.name, n.all_findings) for n in report.nodes], Severity.FAIL)
        step.details = {"fleet": report.summary()}
        self.done(step, started)
        return received

    def lint(self) -> list[NodeInfo] | None:
        started = time.monotonic()
        lldp = "live" if self.params.topology == "discover" else None
        infos = exchange(at(self.env, "lint"), self.plan.node_timeout_s, self.sources, self.params.root,
                         self.params.nccl_version, lldp, self.environ)  # fmt: skip
        if infos is None:
            return None
        self.run.node_of = {i.host: i.node for i in infos if i.speaks}
        labels = self.sources.labels if self.sources is not None else []
        per_node = [(i.node, i.lint) for i in infos if i.speaks and i.lint is not None]
        self.done(judge_lint(per_node, labels), started)
        return infos

    def matrix(self) -> Any:
        from fabricscope.bench.matrix import MatrixParams, run_worker

        started = time.monotonic()
        p = self.params
        params = MatrixParams(duration_s=self.plan.flow_s, timeout_s=self.plan.matrix_timeout_s, rdma=p.rdma,
                              topology=p.topology)  # fmt: skip
        got = run_worker(params, at(self.env, "matrix"))
        if got is None:
            return None
        pred = self.run.prediction
        suspects = got.tcp.suspects
        step = judge_matrix(
            got.hosts, got.tcp.matrix_gbps, pred.matrix, pred.matrix_expected, pred.degradations, suspects
        )
        step.details.update(hosts=got.hosts, measured_gbps=got.tcp.matrix_gbps, rdma=got.rdma.status)
        self.done(step, started)
        if got.rdma.survey is not None:
            self.done(rdma_step(got.hosts, got.rdma.survey, pred), started)
        return got

    def collective(self) -> Any:
        from fabricscope.bench.collective import CollectiveParams, run_worker

        started = time.monotonic()
        p = self.params
        params = CollectiveParams(op=p.op, sizes=p.sizes, dtype=p.dtype, backend=p.backend, iters=self.plan.iters,
                                  warmup=self.plan.warmup, timeout_s=self.plan.collective_timeout_s)  # fmt: skip
        got = run_worker(params, at(self.env, "collective"))
        if got is None:
            return None
        pred = self.run.prediction
        measured = got.sizes[-1].busbw_GBps if got.sizes else None
        predicted = pred.busbw[-1] if pred.busbw else None
        expected = pred.busbw_expected[-1] if pred.busbw_expected else None
        size = got.sizes[-1].size_bytes if got.sizes else 0
        step = judge_measured("collective", "GB/s", predicted, measured, expected, pred.degradations,
                              what=f"{p.op} {size >> 20} MiB busbw ")  # fmt: skip
        wrong = got.wrong_total
        if wrong:
            step.status = "fail"
            step.summary += f"; {wrong} wrong element(s)"
        step.details = {"sizes": [{"size_bytes": s.size_bytes, "busbw_GBps": s.busbw_GBps,
                                   "predicted_GBps": pred.busbw[i] if pred.busbw else None,
                                   "expected_GBps": pred.busbw_expected[i] if pred.busbw_expected else None}
                                  for i, s in enumerate(got.sizes)], "bottlenecks": pred.bottlenecks}  # fmt: skip
        self.done(step, started)
        return got

    # -- the whole
    def execute(self, predicted: Callable[[Prediction], None] | None = None) -> ReadyRun | None:
        """Every step in order; rank 0 returns the run (an error that ended it in ``error``)."""
        steps = [
            ("doctor", self.doctor),
            ("lint", self.lint),
            ("matrix", self.matrix),
            ("collective", self.collective),
        ]
        received = infos = None
        for name, step in steps:
            try:
                out = step()
            except FabricscopeError as exc:
                if self.env.rank != 0:
                    raise
                self.run.error = f"{name}: {one_line(exc)}"
                self.run.steps.append(Step(name, "error", one_line(exc)))
                break
            if name == "doctor":
                received = out
            if name == "lint" and self.env.rank == 0:
                infos = out
                self.run.prediction = self.predict(received or [], infos or [])
                if predicted:
                    predicted(self.run.prediction)
        self.run.duration_s = time.monotonic() - self.t0
        return self.run if self.env.rank == 0 else None

    def predict(self, received: list[Any], infos: list[NodeInfo]) -> Prediction:
        """Rank 0, before the matrix: the allocation on its fabric, and the simulator's figures."""
        from fabricscope.ready.allocation import allocation, collective_model

        pred = Prediction()
        try:
            alloc = allocation(self.params, self.env, received, infos)
            self.run.hosts = alloc.hosts
            now, built, pred.degradations = model.documents(alloc)
            pred.matrix = model.matrix_gbps(alloc, now, alloc.framing)
            pred.matrix_expected = model.matrix_gbps(alloc, built, alloc.framing)
        except FabricscopeError as exc:
            pred.notes.append(f"no prediction: {one_line(exc)}")
            return pred
        try:  # an unknown GPU leaves the collective unmodelled, the matrices still predicted
            spec = collective_model(self.params, received)
            pred.busbw, pred.bottlenecks, pred.calibration = self._busbw(
                alloc, now, spec, self.calibration, pred
            )
            pred.busbw_expected = model.collective_busbw(alloc, built, alloc.framing, spec)[0]
        except FabricscopeError as exc:
            pred.notes.append(f"no collective prediction: {one_line(exc)}")
        if self.params.rdma:
            try:
                predict_rdma(alloc, [got.document for got in received if got.document is not None], pred)
            except FabricscopeError as exc:
                pred.notes.append(f"no RDMA prediction: {one_line(exc)}")
        return pred

    @staticmethod
    def _busbw(alloc: model.Allocation, doc: dict[str, Any], spec: model.CollectiveModel, calibration: Any,
               pred: Prediction) -> tuple[list[float], list[str], dict[str, Any] | None]:  # fmt: skip
        if calibration is not None:
            try:
                return model.collective_busbw(alloc, doc, alloc.framing, spec, calibration)
            except FabricscopeError as exc:
                pred.notes.append(f"the stored run was not used to calibrate: {one_line(exc)}")
        return model.collective_busbw(alloc, doc, alloc.framing, spec)


def predict_rdma(alloc: model.Allocation, documents: list[Any], pred: Prediction) -> None:
    """The RDMA matrix from the nodes' RDMA ports (doctor: a degraded port at its real rate) over
    the transport their link layer runs (InfiniBand or RoCE); nothing when no node has one."""
    from fabricscope.ready.allocation import transport_of

    view = model.rdma_view(alloc)
    transport = transport_of(documents, "nccl")
    if view is None or transport == "tcp":
        return
    now, built, pred.rdma_degradations = model.documents(view)
    pred.rdma = model.matrix_gbps(view, now, alloc.framing, transport)
    pred.rdma_expected = model.matrix_gbps(view, built, alloc.framing, transport)
    pred.rdma_transport = transport


def rdma_step(hosts: list[str], survey: Any, pred: Prediction) -> Step:
    """The RDMA matrix (perftest) against its prediction, as the TCP matrix is judged."""
    step = judge_matrix(hosts, survey.matrix_gbps, pred.rdma, pred.rdma_expected, pred.rdma_degradations,
                        survey.suspects)  # fmt: skip
    step.name = "rdma"
    step.details.update(hosts=hosts, measured_gbps=survey.matrix_gbps, transport=pred.rdma_transport)
    return step
