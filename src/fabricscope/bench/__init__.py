"""Benchmarks: TCP, UDP, latency, connect and RDMA (perftest), one result schema for all.

Each benchmark separates planning (a pydantic parameter model), running (through a runner with
deadlines) and parsing (pure functions of raw output). Results are
:class:`fabricscope.bench.result.BenchResult`; import it from there. This package ``__init__``
stays import-free because benchmark worker processes import ``fabricscope.bench.workers`` and
must start fast.
"""
