"""Options whose accepted range a domain validator shares: one :class:`~fabricscope.units.Bounds`
declares it, the option says it in its help and checks it where it is parsed, the validator
checks it again with the same object (issue 26 item 5)."""

from __future__ import annotations

from typing import Any

import typer

from fabricscope.units import Bounds


def bounded_option(default: float, flag: str, bounds: Bounds, help: str, **extra: Any) -> Any:
    """A number option limited to ``bounds``: ``help`` gains ``(RANGE)``; a value outside is one
    line and exit 2 at parse time, as for options with min/max."""

    def check(value: float | None) -> float | None:
        if value is not None and not bounds.accepts(value):
            raise typer.BadParameter(f"takes {bounds.text()}, not {value:g}")
        return value

    return typer.Option(default, flag, callback=check, help=f"{help} ({bounds.text()})", **extra)
