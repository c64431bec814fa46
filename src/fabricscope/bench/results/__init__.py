"""Benchmark results: the fabricscope.bench/v1 schema, history and baselines, thresholds, statistics."""
