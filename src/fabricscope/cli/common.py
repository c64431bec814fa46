"""Helpers every command shares: opening a root, JSON output, one-line errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer

from fabricscope.errors import FabricscopeError
from fabricscope.findings import Severity
from fabricscope.host import Root, RootError

ROOT_HELP = "Read this snapshot (directory or .tar.gz) instead of the live machine."
JSON_HELP = "Print one JSON document instead of the human report."
FAIL_ON_HELP = "Exit 1 when a finding reaches this severity (warn or fail)."
DB_HELP = "History database (default $FABRICSCOPE_DB or the user data directory)."
LLDP_SOCKET_HELP = "lldpd control socket to ask (lldpctl -u); {host} becomes the rank's host name."
SWITCH_LLDP_HELP = "A switch's own LLDP table: SWITCH=FILE (its lldpctl -f json/keyvalue), or lab:NAME; repeatable. Gives the switch-to-switch cables."

# Options many commands share, declared once: a typer OptionInfo is only read, never changed, so
# one declaration serves every command that names it as a default. Their --help panel comes from
# their name (cli/helpformat.py SHARED_PANELS). A command whose option means something else (a
# --root that is a rank, a --json that prints another document) declares its own.
ROOT_OPTION = typer.Option(None, "--root", help=ROOT_HELP)
JSON_OPTION = typer.Option(False, "--json", help=JSON_HELP)
FAIL_ON_OPTION = typer.Option("fail", "--fail-on", help=FAIL_ON_HELP)
DB_OPTION = typer.Option(None, "--db", help=DB_HELP)


def scheduler_options(whom: str, *, drain_note: str = "", **extra: Any) -> tuple[Any, Any, Any]:
    """--slurm-drain, --k8s-taint and --apply as every command that acts on nodes declares them
    (fleet doctor, ready): only ``whom`` they act on differs."""
    return (
        typer.Option(
            False,
            "--slurm-drain",
            help=f"Drain {whom} in Slurm{drain_note} (dry run unless --apply).",
            **extra,
        ),
        typer.Option(
            None, "--k8s-taint", help=f"Taint {whom}: KEY=VALUE:EFFECT (dry run unless --apply).", **extra
        ),
        typer.Option(
            False, "--apply", help="Carry out the scheduler actions instead of only showing them.", **extra
        ),
    )


def lldp_options(when: str = "", **extra: Any) -> tuple[Any, Any]:
    """--lldp-socket and --switch-lldp, the LLDP sources topology discover reads and bench matrix
    passes on to it; ``when`` says under which other option a command reads them."""

    def sentence(text: str) -> str:
        return f"{when}{text[0].lower()}{text[1:]}" if when else text

    return (
        typer.Option(None, "--lldp-socket", help=sentence(LLDP_SOCKET_HELP), **extra),
        typer.Option([], "--switch-lldp", help=sentence(SWITCH_LLDP_HELP), **extra),
    )


def die(message: str, code: int = 2) -> NoReturn:
    """End the command with one clear line on stderr and this exit status (2 = unusable input or
    incomplete run). Raises a :class:`FabricscopeError`, so the one error path in ``cli.main``
    prints it, the same as errors raised deeper down."""
    error = FabricscopeError(message)
    error.exit_code = code
    raise error


def end_rank(message: str, code: int = 2) -> NoReturn:
    """The one exception to :func:`die`: a launched rank ends at once (``os._exit``), as
    torch.distributed's threads (bench collective) or a store still serving would keep it alive
    through a normal exit. The line is the same ``fabricscope: error: ...`` that ``cli.main`` prints."""
    import os

    from fabricscope.cli.main import error_line

    sys.stdout.flush()
    sys.stderr.write(f"fabricscope: error: {error_line(message)}\n")
    sys.stderr.flush()
    os._exit(code)


def first_error(exc: Exception) -> str:
    """A parameter model's refusal as the one line users see: the first of pydantic's errors,
    where (the field) and what; any other exception as its text."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    first = errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    what = str(first.get("msg", exc)).removeprefix("Value error, ")
    return f"{where}: {what}" if where else what


T = TypeVar("T")


def validated(model: Callable[..., T], **values: Any) -> T:
    """A parameter model built from a command's options; a refusal is one line and exit 2."""
    try:
        return model(**values)
    except ValueError as exc:  # pydantic's ValidationError is one
        die(first_error(exc))


def read_option(option: str, parse: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """An option's text read by its parser; a refusal (the parsers raise ValueError, UnitError
    among them, saying what to write) is one line that names the option, exit 2."""
    try:
        return parse(*args, **kwargs)
    except ValueError as exc:
        die(f"{option}: {exc}")


def open_root(location: str | None) -> Root:
    try:
        return Root.at(location) if location else Root.live()
    except RootError as exc:
        die(str(exc))


def parse_fail_on(value: str) -> Severity:
    try:
        severity = Severity.parse(value)
    except ValueError as exc:
        die(str(exc))
    if severity not in (Severity.INFO, Severity.WARN, Severity.FAIL):
        die("--fail-on takes info, warn or fail")
    return severity


def save_result(result: Any, store: bool) -> FabricscopeError | None:
    """Save a finished result in the history unless ``--no-store``; return the error, if any.

    One policy for every command that produces a result: the caller prints the result first
    (nothing measured is lost), then raises what this returns, so a result that cannot be stored
    ends the command with one line and exit 2 instead of a warning that scripts never see."""
    if not store:
        return None
    import sqlite3

    from fabricscope.store import Store

    try:
        with Store.open() as db:
            db.save(result)
    except (FabricscopeError, sqlite3.Error, OSError) as exc:
        return FabricscopeError(f"result not stored: {exc} (--no-store runs without the history)")
    return None


def store_and_print(result: Any, *, store: bool, json_out: bool) -> None:
    """Every result-producing command ends the same way: save the result (unless ``--no-store``),
    print it (the ``--json`` document, or report.bench's text, as ``history show`` prints it), and
    only then raise a store failure (exit 2), so the printed result is never lost."""
    store_error = save_result(result, store)
    if json_out:
        print_json(result.to_json_dict())
    else:
        from fabricscope.report.bench import print_live
        from fabricscope.report.terminal import console

        print_live(result, console())
    if store_error:
        raise store_error


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")
