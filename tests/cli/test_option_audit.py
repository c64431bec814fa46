"""Every numeric option of every command, given a bad value, ends in one line on stderr and exit 2
(issue 15 item 12): below its minimum, above its maximum, non-ASCII digits, nan and inf.

Nonsense is refused where it is parsed: every numeric option outside ``sim`` declares a minimum
and a maximum, so no command body ever runs with ``--min-gbps -1`` or a 23-digit port (the
command bodies are replaced by a sentinel here: nothing is started). ``sim`` commands validate
their scenario in one place (sim/scenario.py), so they run for real with the negative values."""

from __future__ import annotations

import typing
from collections.abc import Iterator

import pytest
import typer.main

from fabricscope.cli.main import _register, app

HUGE = "99999999999999999999999"


class Accepted(Exception):
    """A command body was reached: the bad value got through parsing."""


def _leaves(cmd, path: list[str]) -> Iterator[tuple[list[str], object]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        yield path, cmd
        return
    for name, sub in sorted(subs.items()):
        yield from _leaves(sub, [*path, name])


def _number_type(param) -> type | None:
    """int or float: typer's option objects differ between releases (a GPU node's image had an
    older typer whose options are click's)."""
    if hasattr(param, "type_descriptor"):  # typer >= 0.2x: its own option objects
        annotation = param.type_descriptor.annotation
        kinds = {annotation, *typing.get_args(annotation)}
        for arg in typing.get_args(annotation):
            kinds.update(typing.get_args(arg))  # list[int]
        return float if float in kinds else int if int in kinds else None
    names = {cls.__name__ for cls in type(param.type).__mro__}  # older typer: click's parameter types
    return float if "FloatParamType" in names else int if "IntParamType" in names else None


def _bad_values(param, kind: type, in_sim: bool) -> list[str]:
    values = ["\u00b2"]  # str.isdigit() says yes, int() and float() say no
    if kind is float:
        values += ["nan"] if in_sim else ["nan", "inf", "-inf"]
    if param.param_type_name == "argument":
        return values  # "-1" would read as an option; run ids are checked by the store
    if in_sim:
        return [*values, "-1"]
    values += [str(param.min - 1) if param.min is not None else "-1"]
    values += [str(param.max + 1) if param.max is not None else HUGE, HUGE]
    return values


def _cases() -> list[tuple[list[str], str, str]]:
    _register([])
    root = typer.main.get_command(app)
    cases = []
    for path, cmd in _leaves(root, []):
        for param in cmd.params:
            kind = _number_type(param)
            if kind is None or getattr(param, "is_flag", False):
                continue
            name = param.opts[0]
            if param.param_type_name == "argument":  # earlier positional arguments get a placeholder
                before = cmd.params[: cmd.params.index(param)]
                args = ["1" for p in before if p.param_type_name == "argument"]
            else:
                args = [name]
            for bad in _bad_values(param, kind, path[0] == "sim"):
                cases.append(([*path, *args, bad], name, path[0]))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def root():
    """The command tree with every body but sim's replaced by a sentinel."""
    _register([])
    command = typer.main.get_command(app)
    for path, leaf in _leaves(command, []):
        if path[0] != "sim":

            def sentinel(*_a, _path=tuple(path), **_k):
                raise Accepted(" ".join(_path))

            leaf.callback = sentinel
    return command


def test_the_audit_covers_the_commands() -> None:
    families = {family for _, _, family in CASES}
    assert {"bench", "doctor", "history", "lab", "sim", "exporter", "fleet", "topology"} <= families
    assert len(CASES) > 300


@pytest.mark.parametrize(("argv", "option", "family"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_bad_number_is_one_line_exit_2(root, capsys, argv: list[str], option: str, family: str) -> None:
    try:
        code = root.main(args=argv, prog_name="fabricscope", standalone_mode=False)
    except Accepted as exc:
        pytest.fail(f"{' '.join(argv)!r} was accepted: the body of {exc} ran")
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("fabricscope: error: "), err
    if family != "sim":
        assert option in lines[0] or option.lstrip("-").replace("-", "_") in lines[0], lines[0]
