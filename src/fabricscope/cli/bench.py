"""``fabricscope bench ...``: the sub-Typer other modules add benchmark commands to.

Other modules do ``from fabricscope.cli.bench import bench_app`` and decorate commands with
``@bench_app.command("name")``.
"""

from __future__ import annotations

import typer

from fabricscope.cli.main import app

bench_app = typer.Typer(
    name="bench",
    help="Measure TCP, UDP, latency, connection setup and RDMA between two hosts; results go to the history.",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")
