"""``bench collective``: nccl-tests' measurements over torch.distributed, for any launcher.

* :mod:`.run`: parameters, nccl-tests' numbers per size (algbw, busbw, time as nccl-tests
  defines them) and the ``fabricscope.bench/v1`` result;
* :mod:`.straggler`: which rank the others wait for;
* :mod:`.worker`: what every rank runs (needs torch).

The planning and arithmetic are pure (tested without torch). The nccl-tests-like table of a
result, live or stored, is drawn in ``report/``.
"""

from __future__ import annotations

from fabricscope.bench.collective.run import (
    DTYPE_ALIASES,
    DTYPES,
    MAX_SIZE,
    CollectiveError,
    CollectiveParams,
    CollectiveRun,
    SizeResult,
    pattern_modulus,
    size_metrics,
    size_result,
    to_bench_result,
)
from fabricscope.bench.collective.straggler import StragglerVerdict, find_straggler
from fabricscope.bench.collective.worker import CollectiveWorker, run_worker

__all__ = [
    "DTYPES",
    "DTYPE_ALIASES",
    "MAX_SIZE",
    "CollectiveError",
    "CollectiveParams",
    "CollectiveRun",
    "CollectiveWorker",
    "SizeResult",
    "StragglerVerdict",
    "find_straggler",
    "pattern_modulus",
    "run_worker",
    "size_metrics",
    "size_result",
    "to_bench_result",
]
