"""``fabricscope history ...``: browse, compare and baseline stored bench results."""

from __future__ import annotations

import typer

from fabricscope.cli.main import app

history_app = typer.Typer(
    name="history",
    help="List, show and compare stored bench results; define baselines (median and MAD).",
    no_args_is_help=True,
)
app.add_typer(history_app, name="history")
