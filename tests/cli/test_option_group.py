"""cli/options.option_group: a group of options declared once takes the place its command names
in --help and reaches the command as one object; a clash with the command's own options is refused."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import typer
from typer.testing import CliRunner


@dataclass(frozen=True)
class Pair:
    left: int
    right: str | None


def _app():
    from fabricscope.cli.options import option_group

    pair_options = option_group(
        Pair, left=typer.Option(1, "--left", min=0, max=9), right=typer.Option(None, "--right")
    )
    app = typer.Typer(add_completion=False)
    got: list[object] = []

    @app.command()
    @pair_options
    def cmd(
        first: str = typer.Option("a", "--first"), *, pair: Pair, last: bool = typer.Option(False, "--last")
    ):
        got.append((first, pair, last))

    return app, got


def test_the_group_reaches_the_command_as_one_object_in_its_place() -> None:
    app, got = _app()
    result = CliRunner().invoke(app, ["--left", "3", "--right", "x", "--last"])
    assert result.exit_code == 0, result.output
    assert got == [("a", Pair(3, "x"), True)]
    names = [p.name for p in typer.main.get_command(app).params]
    assert names == ["first", "left", "right", "last"]
    assert CliRunner().invoke(app, ["--left", "10"]).exit_code == 2  # the option's own range


def test_a_command_that_declares_a_group_option_itself_is_refused() -> None:
    from fabricscope.cli.options import option_group

    group = option_group(Pair, left=typer.Option(1, "--left"), right=typer.Option(None, "--right"))
    with pytest.raises(TypeError):

        @group
        def cmd(left: int = 0, *, pair: Pair) -> None: ...
