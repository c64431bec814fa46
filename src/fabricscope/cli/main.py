"""The ``fabricscope`` command: one Typer app, one module per command family."""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
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


# Top-level command -> the modules that define it. Only the modules of the command being run are
# imported, so `doctor` does not pay for numpy, torch or prometheus-client; --help imports all.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "doctor": ("fabricscope.cli.doctor",),
    "inventory": ("fabricscope.cli.doctor",),
    "checks": ("fabricscope.cli.doctor",),
    "snapshot": ("fabricscope.cli.doctor",),
    "nccl": ("fabricscope.cli.nccl",),
    "bench": ("fabricscope.cli.bench", "fabricscope.cli.collective"),
    "history": ("fabricscope.cli.history", "fabricscope.cli.exporter"),
    "report": ("fabricscope.cli.report",),
    "lab": ("fabricscope.cli.lab",),
    "sim": ("fabricscope.cli.sim",),
    "exporter": ("fabricscope.cli.exporter",),
    "monitoring": ("fabricscope.cli.exporter", "fabricscope.cli.k8s"),
    "fleet": ("fabricscope.cli.fleet",),
    "topology": ("fabricscope.cli.topology",),
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
    from fabricscope.host.command import stop_all

    _install_signal_exits()
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
    finally:
        stop_all()  # child processes still running (a signal, an error): end their whole groups
