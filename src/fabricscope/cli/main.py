"""The ``fabricscope`` command: one Typer app, one module per command family."""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import sys

import typer
from typer.core import TyperGroup

from fabricscope import __version__
from fabricscope.errors import FabricscopeError

ERROR_LINE_MAX = 1000


def error_line(message: str) -> str:
    """A message as the one line users see: whitespace runs (newlines of a pasted value, click's
    wrapped text) become one space, control characters a '?', so no input can add a line."""
    text = " ".join(message.split())
    return "".join(c if c.isprintable() else "?" for c in text)[:ERROR_LINE_MAX]


class OneLineErrors(TyperGroup):
    """The root command: every usage error (a value out of range, an unknown option, a missing
    argument) and every :class:`FabricscopeError` ends as ``fabricscope: error: ...`` on one line
    with its exit status (2), not click's usage box. In-process test runners get the same."""

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[no-untyped-def]
        from fabricscope.cli.helpformat import tidy

        tidy(self)  # how every command's --help reads (cli/helpformat.py), once per tree
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except (typer.TyperException, FabricscopeError) as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except (typer.TyperException, FabricscopeError) as exc:
            raise _one_line(exc) from None


def _one_line(exc: Exception) -> Exception:
    """Print ``exc`` as one line and return the Exit to raise; click's help-on-no-arguments stays."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        return exc  # the help text itself (typer prints it), exit status 2 as before
    if isinstance(exc, FabricscopeError):
        message, code = str(exc), exc.exit_code
    else:
        message, code = exc.format_message(), 2  # type: ignore[attr-defined]  # click: usage errors
        ctx = getattr(exc, "ctx", None)
        if ctx is not None and ctx.parent is not None:
            path = " ".join(c.info_name for c in _chain(ctx)[1:] if c.info_name)
            message = f"{message} (see fabricscope {path} -h)"
    typer.echo(f"fabricscope: error: {error_line(message)}", err=True)
    return typer.Exit(code)


def _chain(ctx) -> list:  # type: ignore[no-untyped-def]
    out = []
    while ctx is not None:
        out.append(ctx)
        ctx = ctx.parent
    return out[::-1]


app = typer.Typer(
    cls=OneLineErrors,
    name="fabricscope",
    help="Does the network deliver what the GPUs need? Why not, and what to change.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def command_group(name: str, help_text: str, parent: typer.Typer | None = None) -> typer.Typer:
    """A group of subcommands (``fabricscope NAME ...``), registered on ``parent`` (the top level
    by default); without a subcommand it prints its help."""
    group = typer.Typer(name=name, help=help_text, no_args_is_help=True)
    (parent or app).add_typer(group, name=name)
    return group


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fabricscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """fabricscope: GPU-cluster network doctor, NCCL advisor, benchmarks, simulator and exporter."""


# Top-level command -> the modules that define it. Only the modules of the command being run are
# imported, so `doctor` does not pay for numpy, torch or prometheus-client; --help imports all.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "doctor": ("fabricscope.cli.doctor",),
    "inventory": ("fabricscope.cli.doctor",),
    "checks": ("fabricscope.cli.doctor",),
    "snapshot": ("fabricscope.cli.doctor",),
    "nccl": ("fabricscope.cli.nccl",),
    "bench": ("fabricscope.cli.bench", "fabricscope.cli.collective", "fabricscope.cli.incast"),
    "history": ("fabricscope.cli.history", "fabricscope.cli.exporter"),
    "report": ("fabricscope.cli.report",),
    "lab": ("fabricscope.cli.lab",),
    "sim": ("fabricscope.cli.sim", "fabricscope.cli.sim_train", "fabricscope.cli.incast"),
    "exporter": ("fabricscope.cli.exporter",),
    "monitoring": ("fabricscope.cli.exporter", "fabricscope.cli.k8s"),
    "fleet": ("fabricscope.cli.fleet",),
    "topology": ("fabricscope.cli.topology",),
    "job": ("fabricscope.cli.job",),
    "ready": ("fabricscope.cli.ready",),
}


def _register(argv: list[str] | None = None) -> None:
    """Import the command modules (each adds itself to ``app``) needed for this invocation."""
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if not a.startswith("-")), None)
    wanted = COMMAND_MODULES.get(command or "", None)
    modules = wanted if wanted is not None else sorted({m for ms in COMMAND_MODULES.values() for m in ms})
    for module in modules:
        if importlib.util.find_spec(module) is None:
            continue  # a command family not present in this build (tests/cli checks the table)
        importlib.import_module(module)


def _exit_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP end the run like an error would: finally blocks, context managers and atexit
    run (temporary directories removed, child process groups ended); exit status 128 + signum."""
    for sig in EXIT_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the cleanup short
    raise SystemExit(128 + signum)


EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # SIGINT already raises KeyboardInterrupt (exit 130)


def _install_signal_exits() -> None:
    for sig in EXIT_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:  # under nohup, SIGHUP stays ignored
            signal.signal(sig, _exit_on_signal)


def main() -> None:
    from fabricscope.host.command import shutdown

    _install_signal_exits()
    _register()
    try:
        app()
    except FabricscopeError as exc:  # raised outside a command (OneLineErrors takes those inside)
        typer.echo(f"fabricscope: error: {error_line(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.echo("fabricscope: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # never a traceback for the user; FABRICSCOPE_DEBUG=1 shows it
        if os.environ.get("FABRICSCOPE_DEBUG"):
            raise
        typer.echo(
            f"fabricscope: internal error: {type(exc).__name__}: {exc} (FABRICSCOPE_DEBUG=1 shows details)",
            err=True,
        )
        sys.exit(2)
    finally:
        shutdown()  # child processes still running (a signal, an error): end their whole groups
