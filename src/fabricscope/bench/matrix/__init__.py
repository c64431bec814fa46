"""``bench matrix``: pairwise TCP (and RDMA) bandwidth between every host of a job, and who is to blame.

* :mod:`.schedule`: the parameters and the rounds of disjoint pairs (circle method), each run
  once per direction, so every measured flow has both of its hosts' links to itself;
* :mod:`.blame`: each pair against the fleet's median with a robust margin; a host whose row
  *and* column are low (or lossy, by TCP retransmissions) is the suspect, not its partners; a
  low pair between two fine hosts points at their link; suspects are retested against the
  best hosts; the run becomes a ``fabricscope.bench/v1`` result;
* :mod:`.worker`: what every rank runs, coordinated through the job's store (:mod:`fabricscope.jobs.store`).

RDMA: where every host has an RDMA device and perftest, the same rounds run again with
perftest (:mod:`fabricscope.bench.matrix.rdma`; device, port and GID from each host's
inventory by the rule of ``bench rdma``), and the RDMA matrix is judged the same way (by
bandwidth; perftest reports no retransmissions). Where any host lacks them, the result says
RDMA was skipped and why. The text and the heat map of a result are drawn in ``report/``.
"""

from __future__ import annotations

from fabricscope.bench.matrix.blame import (
    MatrixRun,
    RdmaPart,
    Survey,
    Verdict,
    analyze,
    confirm,
    retest_flows,
    to_bench_result,
)
from fabricscope.bench.matrix.schedule import MatrixError, MatrixParams, pack_phases, phases, round_robin
from fabricscope.bench.matrix.worker import MatrixWorker, run_worker

__all__ = [
    "MatrixError",
    "MatrixParams",
    "MatrixRun",
    "MatrixWorker",
    "RdmaPart",
    "Survey",
    "Verdict",
    "analyze",
    "confirm",
    "pack_phases",
    "phases",
    "retest_flows",
    "round_robin",
    "run_worker",
    "to_bench_result",
]
