"""Helpers every command shares: opening a root, JSON output, one-line errors."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

from fabricscope.findings import Severity
from fabricscope.host import Root, RootError

ROOT_HELP = "Read this snapshot (directory or .tar.gz) instead of the live machine."
JSON_HELP = "Print one JSON document instead of the human report."
FAIL_ON_HELP = "Exit 1 when a finding reaches this severity (warn or fail)."


def die(message: str, code: int = 2) -> NoReturn:
    """One clear line on stderr, then exit (2 = unusable input or incomplete run)."""
    typer.echo(f"fabricscope: error: {message}", err=True)
    raise typer.Exit(code)


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


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")
