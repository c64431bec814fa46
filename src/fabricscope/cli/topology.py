"""``fabricscope topology discover|show``: the fabric as cabled, in the simulator's YAML format."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import typer

from fabricscope.cli.common import JSON_OPTION, die, end_rank, lldp_options, print_json, read_option
from fabricscope.cli.launching import MASTER_ADDR_OPTION, MASTER_PORT_OPTION, absolute_item, deadline_option
from fabricscope.cli.main import command_group
from fabricscope.errors import FabricscopeError
from fabricscope.jobs.launch import Flag, Flags, child_argv

topology_app = command_group(
    "topology",
    "The fabric as cabled: discover it (ibnetdiscover, LLDP, a lab) into the simulator's YAML, print and draw it.",
)

SOURCE_HELP = (
    "ibnetdiscover (run it here), ibnetdiscover:FILE (its saved output), lldp (every node of the job "
    "reads its lldpd: run under srun/torchrun, or give --launch), lldp:FILE[,FILE...] (saved lldpctl "
    "outputs, one per host: HOST=FILE or FILE named after the host), or lab:NAME (a lab's plan)."
)
LAUNCH_HELP = "Start the job here: lab:NAME[:h1,...] or local:N (see `bench matrix`); with source lldp only."


def _rate(text: str | None, what: str) -> float | None:
    from fabricscope.units import parse_rate

    if text is None:
        return None
    return read_option(what, parse_rate, text)


def _launch(launch: str, child_args: list[str], timeout_s: float, master_port: int | None) -> None:
    """Run this command on every rank of a job started here; exit with the worst status."""
    from fabricscope.jobs.launch import lab_specs, local_specs, parse_launch
    from fabricscope.lab import lldp as lab_lldp
    from fabricscope.lab.procgroup import run_group

    try:
        spec = parse_launch(launch)
        if spec.kind == "lab":
            if "--lldp-socket" not in child_args:
                child_args += ["--lldp-socket", lab_lldp.socket_template(spec.lab or "")]
            if "--switch-lldp" not in child_args:
                child_args += ["--switch-lldp", f"lab:{spec.lab}"]
            specs = lab_specs(spec, child_args, port=master_port)
        else:
            specs = local_specs(spec.count or 1, child_args, port=master_port)
        result = run_group(specs, timeout_s=timeout_s, grace_s=5.0)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    except RuntimeError as exc:
        die(str(exc))
    if result.timed_out:
        die(f"the job did not finish within {timeout_s:g} s; all ranks ended")
    raise typer.Exit(0 if result.worst == 0 else 2)


def _lldp_nodes(lldp_socket: str | None, timeout: float, master_addr: str | None, master_port: int | None):
    """This rank's reading, gathered to rank 0 (None on the other ranks)."""
    from fabricscope.host import Root
    from fabricscope.jobs.launch import detect
    from fabricscope.topology.gather import gather, host_label, local_reading

    env = detect(os.environ, master_addr=master_addr, master_port=master_port)
    host = host_label(env)
    participant = env.local_rank == 0 or env.rank == 0 or env.host_label is not None
    reading = (
        local_reading(Root.live(), host, lldp_socket.replace("{host}", host) if lldp_socket else None)
        if participant
        else None
    )
    return gather(env, reading, timeout)


def _discovery(
    source: str,
    roots: list[str],
    capture: Path | None,
    switch_lldp: list[str],
    lldp_socket: str | None,
    timeout: float,
    master_addr: str | None,
    master_port: int | None,
):
    from fabricscope.topology import sources
    from fabricscope.topology.lldp import from_lldp

    kind, _, arg = source.partition(":")
    if kind == "ibnetdiscover":
        if arg:
            return sources.ib_from_file(arg)
        from fabricscope.host import Root, RootError

        try:
            root = Root.at(roots[0]) if roots else Root.live()
        except RootError as exc:
            die(str(exc))
        if root.is_live and sys.stderr.isatty():
            typer.echo("# running ibnetdiscover (a sweep of a large subnet takes minutes)", err=True)
        if capture is None:
            return sources.ib_from_root(root)
        from fabricscope.host.root import Recording
        from fabricscope.host.snapshot import write_snapshot

        root.recording = Recording()
        disc = sources.ib_from_root(root)
        write_snapshot(root, root.recording, capture)
        return disc
    if kind == "lab" and arg:
        return sources.lab_discovery(arg)
    if kind == "lldp":
        if arg:
            nodes = sources.lldp_from_files([p for p in arg.split(",") if p.strip()])
        elif roots:
            nodes = sources.lldp_from_snapshots(roots)
        else:
            nodes = _lldp_nodes(lldp_socket, timeout, master_addr, master_port)
            if nodes is None:
                return None  # not rank 0: rank 0 writes the result
        return from_lldp(nodes, sources.switch_tables(switch_lldp))
    die(f"unknown source {source!r}: {SOURCE_HELP}")


@dataclass(frozen=True)
class LldpJob:
    """What every launched rank of `topology discover lldp` runs with (paths made absolute)."""

    output: str | None
    switch_lldp: tuple[str, ...]
    lldp_socket: str | None
    name: str | None
    nic_rate: str | None
    uplink_rate: str | None
    nics_per_node: int | None
    gpus_per_node: int | None
    gpu: str
    timeout: float


LLDP_JOB_FLAGS: Flags = {
    "output": "--output",
    "switch_lldp": Flag("--switch-lldp", repeat=True),
    "lldp_socket": "--lldp-socket",
    "name": "--name",
    "nic_rate": "--nic-rate",
    "uplink_rate": "--uplink-rate",
    "nics_per_node": "--nics-per-node",
    "gpus_per_node": "--gpus-per-node",
    "gpu": "--gpu",
    "timeout": "--timeout",
}

LLDP_SOCKET_OPTION, SWITCH_LLDP_OPTION = lldp_options()


@topology_app.command("discover")
def discover(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    output: Path = typer.Option(
        None, "-o", "--output", help="Write the YAML here (default: standard output)."
    ),
    switch_lldp: list[str] = SWITCH_LLDP_OPTION,
    root: list[str] = typer.Option(
        [],
        "--root",
        help="Read from snapshots instead of this machine: one for ibnetdiscover; one per host for lldp (`fabricscope snapshot` records lldpctl).",
    ),
    capture: Path = typer.Option(
        None,
        "--capture",
        help="ibnetdiscover: also write what it read as a snapshot (.tar.gz) that --root reads back.",
    ),
    lldp_socket: str = LLDP_SOCKET_OPTION,
    name: str = typer.Option(None, "--name", help="Name written in the file (default: the source)."),
    nic_rate: str = typer.Option(
        None, "--nic-rate", help="Host NIC rate to write instead of the discovered one, e.g. 400G."
    ),
    uplink_rate: str = typer.Option(
        None,
        "--uplink-rate",
        help="When no switch cable is seen: each leaf's uplink rate to the assumed core (default: non-blocking).",
    ),
    nics_per_node: int = typer.Option(
        None,
        "--nics-per-node",
        min=1,
        max=64,
        help="Keep the hosts with this many cabled NICs (default: the most common count).",
    ),
    gpus_per_node: int = typer.Option(
        None, "--gpus-per-node", min=1, max=1024, help="GPUs per node to write (default: one per NIC)."
    ),
    gpu: str = typer.Option("none", "--gpu", help="GPU preset to write: none, a100, h100, h200, b200."),
    launch: str = typer.Option(None, "--launch", help=LAUNCH_HELP),
    master_addr: str = MASTER_ADDR_OPTION,
    master_port: int = MASTER_PORT_OPTION,
    timeout: float = deadline_option(120.0, "gathering from every rank"),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print the fabricscope.topology/v1 document (the YAML's content plus every NIC's switch port) instead of the YAML.",
    ),
) -> None:
    """Write the fabric as the simulator's YAML topology (`sim collective --topology-file FILE`).

    Exit 0 written, 2 nothing usable discovered (one line on stderr)."""
    from fabricscope.topology.model import BuildOptions, build_document, report, to_yaml

    if launch:
        if source != "lldp" or root:
            die("--launch gathers live LLDP readings: use it with the source lldp and without --root")
        job = LldpJob(output=str(output.resolve()) if output else None, switch_lldp=tuple(absolute_item(i) for i in switch_lldp),
                      lldp_socket=lldp_socket, name=name, nic_rate=nic_rate, uplink_rate=uplink_rate,
                      nics_per_node=nics_per_node, gpus_per_node=gpus_per_node, gpu=gpu, timeout=timeout)  # fmt: skip
        args = child_argv(
            ["topology", "discover", "lldp"], job, LLDP_JOB_FLAGS, ["--json"] if json_out else []
        )
        _launch(launch, args, timeout_s=timeout * 2 + 60, master_port=master_port)
    opts = BuildOptions(
        gpus_per_node=gpus_per_node,
        gpu=gpu,
        nics_per_node=nics_per_node,
        nic_rate_bps=_rate(nic_rate, "--nic-rate"),
        uplink_rate_bps=_rate(uplink_rate, "--uplink-rate"),
    )
    try:
        disc = _discovery(source, root, capture, switch_lldp, lldp_socket, timeout, master_addr, master_port)
        if disc is None:
            return
        if name:
            disc.name = name
        doc = build_document(disc, opts)
        text = to_yaml(doc, disc)
        if output:
            _write(output, text)
    except FabricscopeError as exc:
        end_rank(str(exc), exc.exit_code)  # a gathering rank ends at once, as every launched rank does
    if json_out:
        print_json(report(doc, disc))
    elif not output:
        sys.stdout.write(text)
    where = f" -> {output}" if output else ""
    typer.echo(
        f"topology from {disc.source}: {doc['nodes']} node(s) x {doc['nics_per_node']} NIC(s), "
        f"{len(doc['switches'])} switch(es){where}",
        err=True,
    )
    for warning in disc.warnings:
        typer.echo(f"  note: {warning}", err=True)


def _write(path: Path, text: str) -> None:
    from fabricscope.topology.model import TopologyError

    tmp = path.with_name(path.name + ".partial")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as exc:
        raise TopologyError(f"cannot write {path}: {exc.strerror or exc}") from None


@topology_app.command("show")
def show(
    file: Path = typer.Argument(
        ..., help="A topology file (discovered, or written by hand as docs/sim.md describes)."
    ),
    svg: Path = typer.Option(None, "--svg", help="Also draw it to this SVG file."),
    highlight: list[str] = typer.Option(
        [], "--highlight", help="Draw this link in red: SWITCH,SWITCH or HOST,SWITCH; repeatable."
    ),
    hosts: bool = typer.Option(True, "--hosts/--no-hosts", help="List the hosts under each leaf."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Print the tree (switch tiers, hosts per leaf, capacity down and up) and draw it."""
    from fabricscope.topology.view import load_view, summary_lines, switch_loads, uneven_uplinks

    pairs = []
    for item in highlight:
        a, sep, b = item.partition(",")
        if not sep or not a.strip() or not b.strip():
            die(f"--highlight {item!r}: write two names separated by a comma, e.g. leaf1,spine")
        pairs.append((a.strip(), b.strip()))
    try:
        view = load_view(file)
        known = set(view.switches) | set(view.hosts)
        for a, b in pairs:
            if a not in known or b not in known:
                die(f"--highlight {a},{b}: no such switch or host in {file}")
        if svg:
            from fabricscope.report.topology import topology_svg

            _write(svg, topology_svg(view, pairs))
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    if json_out:
        print_json(
            {
                "schema": "fabricscope.topology-view/v1",
                "name": view.name,
                "hosts": view.hosts,
                "nics_per_node": view.nics_per_node,
                "nic_rate_gbps": view.nic_rate_bps / 1e9,
                "switches": [
                    {
                        "name": s.switch,
                        "tier": s.tier,
                        "hosts": s.hosts,
                        "nics": s.nics,
                        "down_gbps": s.down_bps / 1e9,
                        "up_gbps": s.up_bps / 1e9,
                        "up_cables": s.up_cables,
                        "oversubscription": s.ratio,
                    }
                    for s in switch_loads(view)
                ],
                "links": [
                    {"a": x.a, "b": x.b, "rate_gbps": x.rate_bps / 1e9, "count": x.count} for x in view.links
                ],
                "notes": uneven_uplinks(view),
            }
        )
        return
    sys.stdout.write("\n".join(summary_lines(view, show_hosts=hosts)) + "\n")
    if svg:
        sys.stdout.write(f"drawing written to {svg}\n")
