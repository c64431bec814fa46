"""Benchmarks: one result schema for every kind.

- ``results/``: the ``fabricscope.bench/v1`` schema (:class:`results.schema.BenchResult`), history
  and baselines, thresholds, statistics.
- ``sockets/``: the control protocol, ``bench serve`` and its client, tcp/udp/latency/connect and
  their data-plane worker processes.
- ``rdma/``: perftest output, ``bench rdma`` and its GPUDirect loopback.
- ``collective/``, ``matrix/``, ``incast``: the multi-host kinds, launched as a job (``jobs/``).
- ``counters``: NIC, port and TCP counters around every run.

Each benchmark separates planning (a pydantic parameter model), running (through a runner with
deadlines) and parsing (pure functions of raw output). This package ``__init__`` stays
import-free because benchmark worker processes import ``fabricscope.bench.sockets.workers`` and
must start fast.
"""
