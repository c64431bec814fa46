"""Benchmarks: TCP, UDP, latency, connect and RDMA (perftest), one result schema for all.

Each benchmark separates planning (a pydantic parameter model), running (through a runner with
deadlines) and parsing (pure functions of raw output). Results are :class:`BenchResult`.
"""

from fabricscope.bench.result import SCHEMA, BenchResult, CounterDeltas, Interval, Status, new_result

__all__ = ["SCHEMA", "BenchResult", "CounterDeltas", "Interval", "Status", "new_result"]
