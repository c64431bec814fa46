"""The ``fabricscope`` command: one Typer app, one module per command family."""

from __future__ import annotations

import os
import sys

import typer

from fabricscope import __version__
from fabricscope.errors import FabricscopeError

app = typer.Typer(
    name="fabricscope",
    help="Does the network deliver what the GPUs need? Why not, and what to change.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fabricscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """fabricscope: GPU-cluster network doctor, NCCL advisor, benchmarks, simulator and exporter."""


def _register() -> None:
    # Each command family lives in its own module and adds itself to ``app``.
    from fabricscope.cli import (
        bench,  # noqa: F401
        doctor,  # noqa: F401
        exporter,  # noqa: F401
        history,  # noqa: F401
        lab,  # noqa: F401
        nccl,  # noqa: F401
    )


def main() -> None:
    _register()
    try:
        app()
    except FabricscopeError as exc:
        typer.echo(f"fabricscope: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.echo("fabricscope: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # never a traceback for the user; FABRICSCOPE_DEBUG=1 shows it
        if os.environ.get("FABRICSCOPE_DEBUG"):
            raise
        typer.echo(f"fabricscope: internal error: {type(exc).__name__}: {exc} (FABRICSCOPE_DEBUG=1 shows details)", err=True)
        sys.exit(2)
