"""Name-keyed tables of hand-written facts: GPUs, system presets, model shapes, bench kinds, NCCL
variables.

A dict comprehension over such a table keeps the last of two entries with one name and says
nothing, so the entry a user asks for could be the one nobody meant; here a name given twice
is refused when the table is built (at import, so every test run sees it)."""

from __future__ import annotations

from typing import Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


NamedT = TypeVar("NamedT", bound=Named)


def by_name(*entries: NamedT) -> dict[str, NamedT]:
    """The entries keyed by their names, in their order; ValueError on a name given twice."""
    table: dict[str, NamedT] = {}
    for entry in entries:
        if entry.name in table:
            raise ValueError(f"{type(entry).__name__} {entry.name!r} is given twice")
        table[entry.name] = entry
    return table
