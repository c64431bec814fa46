"""registry.by_name: the hand-written tables refuse a name given twice, and the project's tables hold."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fabricscope.registry import by_name


@dataclass(frozen=True)
class _Entry:
    name: str
    value: int


def test_entries_are_keyed_by_name_in_order() -> None:
    table = by_name(_Entry("b", 1), _Entry("a", 2))
    assert list(table) == ["b", "a"] and table["a"].value == 2


def test_a_name_given_twice_is_refused() -> None:
    # a dict comprehension would have kept the second "a" and said nothing
    with pytest.raises(ValueError, match="_Entry 'a' is given twice"):
        by_name(_Entry("a", 1), _Entry("b", 2), _Entry("a", 3))


def test_the_project_tables_are_built_by_it() -> None:
    from fabricscope.bench.results.kinds import KINDS
    from fabricscope.nccl.variables import _SPECS, SPECS
    from fabricscope.sim.gpus import GPUS
    from fabricscope.sim.models import MODELS
    from fabricscope.sim.systems import SYSTEMS

    assert len(SPECS) == len(_SPECS)
    for table in (KINDS, SPECS, GPUS, MODELS, SYSTEMS):
        assert table and all(key == entry.name for key, entry in table.items())
