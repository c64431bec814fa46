"""``fabricscope exporter``, ``fabricscope monitoring assets`` and ``fabricscope history export-textfile``."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import typer

from fabricscope.cli.common import DB_OPTION, JSON_OPTION, ROOT_OPTION, die, open_root, print_json
from fabricscope.cli.history import history_app
from fabricscope.cli.main import app, command_group
from fabricscope.cli.options import bounded_option
from fabricscope.errors import FabricscopeError
from fabricscope.monitor.intervals import INTERVAL_BOUNDS

monitoring_app = command_group("monitoring", "Grafana dashboard and Prometheus alert rules for the exporter.")

PROM_MISSING = "the exporter needs prometheus-client: pip install 'fabricscope[prom]'"


def _require_prom() -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        die(PROM_MISSING)


@app.command()
def exporter(
    listen: str = typer.Option(
        "127.0.0.1:9731",
        "--listen",
        help="ADDR:PORT to serve /metrics on (loopback by default; [::1]:PORT for IPv6, :PORT for every interface).",
    ),
    root: str = ROOT_OPTION,
    nccl_log: list[str] = typer.Option(
        [], "--nccl-log", help="Follow NCCL logs matching this GLOB (repeatable; rotation-safe)."
    ),
    nccl_from_start: bool = typer.Option(
        False, "--nccl-from-start", help="Count what the NCCL logs already hold, not only new lines."
    ),
    nccl_inspector: list[str] = typer.Option(
        [],
        "--nccl-inspector",
        help="Follow the NCCL Inspector's output in this DIR (NCCL_INSPECTOR_DUMP_DIR: *.log JSONL dumps and *.prom textfiles; repeatable).",
    ),
    topology: str = typer.Option(
        None,
        "--topology",
        help="Judge NCCL communicators against the fabric this FILE describes (topology discover's output, or a sim --topology-file); default: a rail-optimised fabric of this node's NICs.",
    ),
    # The intervals' ranges are declared once, in monitor/intervals.py (issue 26 item 5).
    doctor_interval: float = bounded_option(
        300.0,
        "--doctor-interval",
        INTERVAL_BOUNDS["doctor_interval_s"],
        "Run the doctor every SECONDS in the background.",
    ),
    ethtool_interval: float = bounded_option(
        5.0,
        "--ethtool-interval",
        INTERVAL_BOUNDS["ethtool_interval_s"],
        "Refresh ethtool -S statistics every SECONDS in the background.",
    ),
    topology_interval: float = bounded_option(
        60.0,
        "--topology-interval",
        INTERVAL_BOUNDS["topology_interval_s"],
        "Re-read devices, netdevs, GPUs and QoS setup every SECONDS.",
    ),
    once: bool = typer.Option(
        False, "--once", help="Print one scrape to stdout and exit (doctor run first when enabled)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error (to stderr)."),
) -> None:
    """Serve the fabric's health as Prometheus metrics: ports, congestion, PFC/ECN, PCIe, TCP, findings, NCCL."""
    _require_prom()
    from fabricscope.monitor.exporter import Exporter, ExporterOptions
    from fabricscope.monitor.server import MetricsServer, parse_listen

    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int) or log_level.lower() not in ("debug", "info", "warning", "error"):
        die("--log-level takes debug, info, warning or error")
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    try:
        options = ExporterOptions(
            nccl_globs=tuple(nccl_log),
            nccl_from_start=nccl_from_start or once,
            inspector_dirs=tuple(nccl_inspector),
            doctor_interval_s=doctor_interval,
            ethtool_interval_s=ethtool_interval,
            topology_interval_s=topology_interval,
            topology_file=topology,
        )
    except ValueError as exc:
        die(str(exc))
    host, port = (None, None) if once else parse_listen(listen)
    node = open_root(root)
    try:
        exp = Exporter(node, options)
    except FabricscopeError as exc:  # a topology file that cannot be read or built
        die(f"--topology: {exc}")

    if once:
        exp.prime(doctor=True)
        sys.stdout.write(exp.render().decode("utf-8"))
        exp.stop()
        return

    assert host is not None and port is not None
    server = MetricsServer(exp.render, host, port)  # bind before the slow start: a busy port fails fast
    exp.start()
    _serve(
        server,
        exp,
        f"(root {node.label}, doctor every {f'{doctor_interval:g} s' if doctor_interval else 'off'})",
    )


def _serve(server: Any, exp: Any, what: str) -> None:
    """Serve until SIGTERM, SIGINT or SIGHUP (each: stop serving, clean up, exit 0)."""
    stopping = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    logging.getLogger("fabricscope.exporter").info("fabricscope exporter serving %s %s", server.url, what)
    try:
        server.serve_forever()
    finally:
        exp.stop()


@monitoring_app.command("assets")
def assets(
    out: Path = typer.Option(..., "--out", help="Directory to write the dashboard and the alert rules into."),
    force: bool = typer.Option(False, "--force", help="Overwrite files that differ from the shipped ones."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Write the Grafana dashboard (JSON) and the Prometheus alert rules (YAML) shipped with fabricscope."""
    from fabricscope.monitor.assets import write_assets

    written = write_assets(out, force=force)
    if json_out:
        print_json(
            {
                "schema": "fabricscope.monitoring_assets/v1",
                "files": [{"path": str(w.path), "kind": w.kind, "status": w.status} for w in written],
            }
        )
        return
    for item in written:
        typer.echo(f"{item.status:<9} {item.path}  ({item.kind})")
    typer.echo(
        "Import the dashboard in Grafana (Dashboards > New > Import) and add the rules file to "
        "rule_files in prometheus.yml; see docs/monitoring.md."
    )


@history_app.command("export-textfile")
def export_textfile(
    directory: Path = typer.Argument(..., help="node_exporter's --collector.textfile.directory."),
    db: Path = DB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Write the latest bench result of each kind/peer/parameters as fabricscope_bench.prom (atomically)."""
    _require_prom()
    from fabricscope.monitor.textfile import MAX_RUNS
    from fabricscope.monitor.textfile import export_textfile as export
    from fabricscope.store import Store

    with Store.open(db, create=False) as store:  # exporting never creates a history
        runs = store.list(limit=MAX_RUNS)
    report = export([run.result for run in runs], directory)
    if json_out:
        print_json(
            {
                "schema": "fabricscope.textfile_export/v1",
                "path": str(report.path),
                "series_groups": report.groups,
                "runs_considered": report.runs_considered,
            }
        )
    else:
        typer.echo(f"wrote {report.path}: latest of {report.groups} kind/peer/parameter group(s)")
