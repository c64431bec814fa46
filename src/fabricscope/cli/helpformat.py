"""How every command's ``--help`` reads (issue 26 item 5), applied once to the whole command tree.

* No type labels (``<bool>``, ``<list[str]>``, ``<float range>``): the description says what a
  value is, and the column they took left 20 characters for it at 80 columns.
* A numeric range is said once, in the description, from the option's own ``min``/``max``: the
  bounds the parser enforces (``cli/options.py`` declares those that a deeper validator shares).
* An on/off pair (``--x/--no-x``) is shown on two lines of the name column, not in two columns.
* Docstrings read as whole sentences: a paragraph's line breaks (made to fit the source) go.
* Options are grouped in panels (Connection, Launch, Verdict, Output, ...) by what they do, from
  the option's own ``rich_help_panel`` or, for the families every command shares, by its name.
"""

from __future__ import annotations

import inspect
from typing import Any

# Options every family shares -> the panel they go to when the command does not say.
SHARED_PANELS: dict[str, str] = {
    "--json": "Output", "--store": "Output", "--no-store": "Output", "--svg": "Output", "--output": "Output",
    "--quiet": "Output", "--verbose": "Output", "--format": "Output", "--html": "Output",
    "--launch": "Launch", "--master-addr": "Launch", "--master-port": "Launch", "--single-rank": "Launch",
    "--peer": "Connection", "--token": "Connection",
    "--root": "Input",
}  # fmt: skip
TIDY_MARK = "fabricscope_help_tidy"


def number(value: float) -> str:
    """A bound as people write it: 1,000,000 not 1e+06; 0.05 not 0.050000."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:g}"


def range_text(param: Any) -> str | None:
    """``(0.5 to 300)``, ``(at least 1)``, ``(at most 100)`` from the parser's own bounds."""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is None and high is None:
        return None
    if getattr(param, "count", False):
        return None
    low_word = "more than " if getattr(param, "min_open", False) else ""
    high_word = " (exclusive)" if getattr(param, "max_open", False) else ""
    if low is not None and high is not None:
        return f"({low_word}{number(low)} to {number(high)}{high_word})"
    return f"(at least {number(low)})" if low is not None else f"(at most {number(high)}{high_word})"


def whole_paragraphs(text: str | None) -> str | None:
    """Paragraphs kept, the line breaks inside each one removed."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


_PLAIN: dict[type, type] = {}


def _plain_class(cls: type) -> type:
    """``cls`` without a type label or a range column: Typer draws both from these two methods
    (typer.core); the range now lives in the description, the label nowhere."""
    if cls not in _PLAIN:
        methods = {
            "display_type_rich": lambda self, ctx: None,
            "_get_number_range_help_str": lambda self: None,
        }
        _PLAIN[cls] = type(f"Plain{cls.__name__}", (cls,), methods)
    return _PLAIN[cls]


def plain(param: Any) -> None:
    """One parameter: no type label, its range in its description, its panel."""
    if getattr(param, TIDY_MARK, False) or param.param_type_name not in ("option", "argument"):
        return
    setattr(param, TIDY_MARK, True)
    span = range_text(param)
    if span and span not in (param.help or ""):
        param.help = f"{(param.help or '').rstrip()} {span}".strip()
    param.__class__ = _plain_class(type(param))
    if param.param_type_name == "option" and getattr(param, "rich_help_panel", None) is None:
        names = [*param.opts, *param.secondary_opts]
        panel = next((SHARED_PANELS[n] for n in names if n in SHARED_PANELS), None)
        if panel is None and (param.help or "").startswith("Exit 1 when"):
            panel = "Verdict"
        param.rich_help_panel = panel


def _pairs_stacked(command: Any, format_help: Any) -> Any:
    """``format_help`` showing each on/off pair on two lines of one column (``--x`` above ``--no-x``):
    side by side, as Typer draws them, ``--sequence-parallel  --no-sequence-parallel`` pushed every
    description in the panel past column 50 at 80 columns. Only while help is drawn: the parser
    was built (and reads the names) before ``--help`` runs, and both names are restored after."""

    def stacked(ctx: Any, formatter: Any) -> Any:
        pairs = [p for p in command.params if p.param_type_name == "option" and p.secondary_opts]
        saved = [(p, p.opts, p.secondary_opts) for p in pairs]
        try:
            for p in pairs:
                p.opts, p.secondary_opts = ["\n".join([*p.opts, *p.secondary_opts])], []
            return format_help(ctx, formatter)
        finally:
            for p, opts, secondary in saved:
                p.opts, p.secondary_opts = opts, secondary

    return stacked


def tidy(command: Any) -> None:
    """Every command below ``command`` (itself included), once."""
    if getattr(command, TIDY_MARK, False):
        return
    setattr(command, TIDY_MARK, True)
    command.help = whole_paragraphs(command.help)
    for param in command.params:
        plain(param)
    original = command.get_help_option

    def get_help_option(ctx: Any) -> Any:  # -h/--help is made per context: tidy it when it is
        option = original(ctx)
        if option is not None:
            plain(option)
        return option

    command.get_help_option = get_help_option
    if hasattr(command, "format_help"):
        command.format_help = _pairs_stacked(command, command.format_help)
    for sub in (getattr(command, "commands", None) or {}).values():
        tidy(sub)
