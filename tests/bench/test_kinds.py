"""The bench-kind table (bench/results/kinds.py) against the schema, the parameter models, the
history and report/ (issue 21 item 2), and the null leak it fixes."""

from __future__ import annotations

import json

import pydantic
import pytest

from fabricscope.bench.results.history import headline
from fabricscope.bench.results.kinds import KIND_FIELDS, KINDS
from fabricscope.bench.results.schema import BenchResult, IncastPoint, new_result
from fabricscope.report import bench as report_bench

# Top-level fields every result has, whatever its kind.
COMMON = {"schema_", "kind", "status", "reason", "params", "host", "started", "duration_s", "metrics", "intervals",
          "counters", "thresholds", "detail", "run_id"}  # fmt: skip


def test_every_optional_field_belongs_to_a_kind() -> None:
    """A field added to BenchResult without a kind would leak into every result's JSON as null."""
    assert set(BenchResult.model_fields) - COMMON == set(KIND_FIELDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_result_of_one_kind_carries_no_other_kinds_fields(name: str) -> None:
    doc = json.loads(new_result(name, {}).finish({"x_gbps": 1.0}).to_json())
    assert not set(doc) & set(KIND_FIELDS), sorted(set(doc) & set(KIND_FIELDS))


def test_the_reported_leak_is_gone() -> None:
    """Every result's JSON used to carry "topology": null and "incast": null."""
    doc = json.loads(new_result("tcp", {}).finish({"throughput_gbps": 9.5}).to_json())
    assert "topology" not in doc and "incast" not in doc
    incast = new_result("incast", {})
    incast.incast = [IncastPoint(senders=1, goodput_gbps=1, round_p50_ms=1, round_p99_ms=1, round_max_ms=1, rounds=1,
                                 retransmits=0, timeouts=0)]  # fmt: skip
    assert json.loads(incast.to_json())["incast"][0]["senders"] == 1


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_record_is_whole(name: str) -> None:
    kind = KINDS[name]
    model = kind.params_model()
    assert issubclass(model, pydantic.BaseModel)
    assert callable(getattr(report_bench, kind.renderer))
    assert set(kind.data) <= set(kind.fields)
    result = new_result(name, {}).finish({m: 1.0 for m in kind.headline})
    assert [m for m, _ in headline(result)] == list(kind.headline)


def test_the_served_kinds_are_the_protocols() -> None:
    """The kinds run against `bench serve` are the test kinds its control protocol knows."""
    import typing

    from fabricscope.bench.sockets import protocol

    spoken = set()
    for model in vars(protocol).values():
        if isinstance(model, type) and issubclass(model, pydantic.BaseModel) and "kind" in model.model_fields:
            spoken.update(typing.get_args(model.model_fields["kind"].annotation))
    assert spoken == {k.name for k in KINDS.values() if k.served}
