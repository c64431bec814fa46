"""Option declarations shared beyond one module.

* :func:`bounded_option`: an option whose accepted range a domain validator shares: one
  :class:`~fabricscope.units.Bounds` declares it, the option says it in its help and checks it
  where it is parsed, the validator checks it again with the same object (issue 26 item 5).
* :func:`option_group`: options several commands take together, declared once and received by
  each command as one object (as cli/sim_options.py does for the scenario's fields).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

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


F = TypeVar("F", bound=Callable[..., Any])


def _cli_type(hint: Any) -> Any:
    """The option's type as typer reads it: ``X`` for a field of ``X | None``, as the commands
    declare theirs (the None default says it may be absent); typer 0.12, the floor, refuses
    ``X | None`` ('Type not yet supported')."""
    args = typing.get_args(hint)
    kept = [a for a in args if a is not type(None)]
    return kept[0] if len(args) == 2 and len(kept) == 1 else hint


def option_group(group: type, **options: Any) -> Callable[[F], F]:
    """Options commands take together, declared once: ``group`` is a dataclass, ``options`` its
    fields' typer options. A command names the group once, as a parameter annotated ``group``,
    where its --help lists them; typer sees the options in its place and the command receives
    their values as one ``group``."""
    hints = typing.get_type_hints(group)
    if set(options) != {f.name for f in dataclasses.fields(group)}:
        raise TypeError(f"option_group({group.__name__}): one option per field")

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        params = list(sig.parameters.values())
        at = next(i for i, p in enumerate(params) if p.annotation is group)
        name = params[at].name
        added = [
            inspect.Parameter(
                field, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=_cli_type(hints[field])
            )
            for field, info in options.items()
        ]
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params if p.name != name]
        if {p.name for p in own} & set(options):
            raise TypeError(f"{fn.__name__} declares an option of {group.__name__} itself")

        @functools.wraps(fn)
        def command(**kw: Any) -> Any:
            values = {field: kw.pop(field) for field in options}
            return fn(**kw, **{name: group(**values)})

        command.__signature__ = sig.replace(parameters=[*own[:at], *added, *own[at:]])  # type: ignore[attr-defined]
        return command  # type: ignore[return-value]

    return wrap
