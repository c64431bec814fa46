"""``fabricscope lab``: an emulated cluster of network namespaces on this machine."""

from __future__ import annotations

import sys

import typer

from fabricscope.cli.common import JSON_OPTION, die, first_error, print_json
from fabricscope.cli.main import command_group
from fabricscope.errors import FabricscopeError
from fabricscope.lab.fabric import Labs, require_root
from fabricscope.lab.procgroup import run_group
from fabricscope.lab.run import DEFAULT_MASTER_PORT, exec_on_host, host_specs
from fabricscope.lab.spec import (
    MAX_HOSTS,
    MAX_RAILS,
    LabError,
    LabSpec,
    format_rate,
    parse_loss,
    parse_oversubscription,
    parse_rate,
)
from fabricscope.units import parse_size

lab_app = command_group(
    "lab",
    "An emulated cluster on this machine: namespaces as hosts, bridges as switches, tc for rates, nftables for loss.",
)


def _spec(**kwargs) -> LabSpec:
    from pydantic import ValidationError

    try:
        return LabSpec(**kwargs)
    except ValidationError as exc:
        raise LabError(first_error(exc)) from None


@lab_app.command("up")
def up(
    name: str = typer.Option("lab", "--name", help="Lab name: 1-12 lower-case letters/digits."),
    topology: str = typer.Option("star", "--topology", help="star, leaf-spine or rail."),
    hosts: int = typer.Option(4, "--hosts", min=1, max=MAX_HOSTS, help="Number of hosts (h1 .. hN)."),
    hosts_per_leaf: int = typer.Option(
        None, "--hosts-per-leaf", min=1, max=MAX_HOSTS, help="leaf-spine: hosts under each leaf."
    ),
    rails: int = typer.Option(
        2, "--rails", min=1, max=MAX_RAILS, help="rail: NICs per host, one rail switch each."
    ),
    link_rate: str = typer.Option(
        None, "--link-rate", help="Host link rate, e.g. 1gbit, 250mbit (default: unshaped)."
    ),
    uplink_rate: str = typer.Option(None, "--uplink-rate", help="leaf-spine: leaf-to-spine rate."),
    oversubscription: str = typer.Option(
        None,
        "--oversubscription",
        help="leaf-spine: DOWN:UP, e.g. 4:1 (uplink = hosts-per-leaf x link rate / 4).",
    ),
    loss: str = typer.Option(None, "--loss", help="Random loss per direction on host links, e.g. 0.1%."),
    loss_on: str = typer.Option(
        None, "--loss-on", help="Apply --loss only to these hosts (comma-separated, e.g. h3)."
    ),
    mtu: int = typer.Option(1500, "--mtu", min=576, max=65000, help="MTU of every lab interface."),
    lldp: bool = typer.Option(
        False,
        "--lldp",
        help="Run lldpd on every switch and host (real LLDP for `topology discover lldp`; Debian package lldpd).",
    ),
    slurm: bool = typer.Option(
        False,
        "--slurm",
        help="Run a real Slurm cluster over the lab: munged, slurmctld here, one slurmd per host in its namespace (Debian packages slurm-wlm and munge).",
    ),
    replace: bool = typer.Option(
        False, "--replace", help="Rebuild even if a lab of this name exists with other options."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Create (or confirm) a lab. Idempotent: the same command twice changes nothing."""
    try:
        spec = _spec(
            name=name,
            topology=topology,
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            rails=rails,
            link_rate_bps=parse_rate(link_rate) if link_rate else None,
            uplink_rate_bps=parse_rate(uplink_rate) if uplink_rate else None,
            oversubscription=parse_oversubscription(oversubscription) if oversubscription else None,
            loss_pct=parse_loss(loss) if loss else 0.0,
            loss_on=tuple(h.strip() for h in loss_on.split(",") if h.strip()) if loss_on else (),
            mtu=mtu,
            lldp=lldp,
            slurm=slurm,
        )
        labs = Labs()
        result = labs.up(spec, replace=replace)
        doc = labs.status(spec.name)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    if json_out:
        print_json({**doc, "changed": result.changed, "seconds": round(result.seconds, 3)})
        return
    verb = "created" if result.changed else "already up, unchanged"
    typer.echo(f"lab {spec.name}: {verb} ({spec.topology}, {spec.hosts} hosts, {result.seconds:.1f} s)")
    _print_status(doc)


@lab_app.command("down")
def down(name: str = typer.Argument(..., help="Lab name.")) -> None:
    """Remove everything the lab created (also after a crash halfway through `up`)."""
    try:
        removed = Labs().down(name)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    typer.echo(
        f"lab {name}: removed {len(removed)} namespaces" if removed else f"lab {name}: nothing to remove"
    )


@lab_app.command("status")
def status(
    name: str = typer.Argument(None, help="Lab name (omit to list labs)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Hosts with addresses, links and shaping (configured and as the kernel has it)."""
    labs = Labs()
    try:
        if name is None:
            names = labs.names() if _can_list() else []
            docs = []
            for n in names:
                try:
                    docs.append(labs.status(n))
                except LabError as exc:
                    docs.append(
                        {"schema": "fabricscope.lab/v1", "name": n, "status": "leftover", "problem": str(exc)}
                    )
            if json_out:
                print_json({"schema": "fabricscope.labs/v1", "labs": docs})
            elif not docs:
                typer.echo("no labs")
            else:
                for d in docs:
                    typer.echo(
                        f"{d['name']:<14} {d['status']:<9} {d.get('topology', '-'):<11} {len(d.get('hosts', []))} hosts"
                    )
            return
        doc = labs.status(name)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    if json_out:
        print_json(doc)
    else:
        _print_status(doc)


def _can_list() -> bool:
    try:
        require_root()
        return True
    except LabError as exc:
        die(str(exc))


@lab_app.command("set")
def set_link(
    name: str = typer.Argument(..., help="Lab name."),
    target: str = typer.Argument(..., help="Host (h3) or leaf uplink (leaf1)."),
    link_rate: str = typer.Option(
        None, "--link-rate", help="New rate, e.g. 250mbit; 'none' removes shaping."
    ),
    loss: str = typer.Option(None, "--loss", help="New random loss per direction, e.g. 1% (0% removes it)."),
    queue: str = typer.Option(
        None,
        "--queue",
        help="Queue of the switch port towards this host (or of the uplink), e.g. 64KiB: a shallow buffer; 'default' = 50 ms at the rate.",
    ),
) -> None:
    """Make one host's link (or a leaf's uplink) slow, lossy or shallow-buffered: plant a faulty node."""
    if link_rate is None and loss is None and queue is None:
        die("give --link-rate, --loss and/or --queue")
    try:
        rate: int | None | str = "keep"
        if link_rate is not None:
            rate = None if link_rate.strip().lower() in ("none", "unshaped") else parse_rate(link_rate)
        pct = parse_loss(loss) if loss is not None else None
        depth: int | None | str = "keep"
        if queue is not None:
            depth = None if queue.strip().lower() == "default" else parse_size(queue, maximum=1 << 30)
        state = Labs().set_link(name, target, rate_bps=rate, loss_pct=pct, queue_bytes=depth)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    setting = state.link(target)
    shown = f"{setting.queue_bytes} bytes" if setting.queue_bytes else "default (50 ms)"
    typer.echo(
        f"lab {name}: {target} now {format_rate(setting.rate_bps)}, loss {setting.loss_pct:g}%, switch queue {shown}"
    )


@lab_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Lab name."),
    host: str = typer.Argument(..., help="Host, e.g. h1."),
    timeout: float = typer.Option(
        None, "--timeout", min=0.1, max=86400, help="End the command after SECONDS (exit 124)."
    ),
) -> None:
    """Run one command on one host: `lab exec NAME h2 -- ping -c1 198.18.0.1`."""
    command = list(ctx.args)
    if not command:
        die("no command given (put it after --)")
    try:
        require_root()
        ended = exec_on_host(Labs().load(name), host, command, timeout)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    if ended.timed_out:
        die(f"{host}: command still running after {timeout:g} s; ended", 124)
    raise typer.Exit(ended.rc)


@lab_app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Lab name."),
    hosts: str = typer.Option(
        None, "--hosts", help="Hosts in rank order (default all, h1 = rank 0), e.g. h1,h5,h2,h6."
    ),
    master_port: int = typer.Option(
        DEFAULT_MASTER_PORT, "--master-port", min=1, max=65535, help="MASTER_PORT given to every host."
    ),
    timeout: float = typer.Option(
        3600.0, "--timeout", min=0.1, max=86400, help="End every host's command after SECONDS (exit 124)."
    ),
    grace: float = typer.Option(
        10.0, "--grace", min=0, max=3600, help="After one host fails, give the others SECONDS to end."
    ),
) -> None:
    """Run a command on every host at once, with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.

    Output lines are prefixed with the host; the exit status is the worst of all.
    """
    command = list(ctx.args)
    try:
        require_root()
        state = Labs().load(name)
        order = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
        specs = host_specs(state, command, hosts=order, master_port=master_port)
        result = run_group(specs, timeout_s=timeout, grace_s=grace)
    except FabricscopeError as exc:
        die(str(exc), exc.exit_code)
    except RuntimeError as exc:
        die(str(exc))
    failed = {k: v for k, v in result.codes.items() if v != 0}
    if result.timed_out:
        typer.echo(f"fabricscope: error: lab run: deadline of {timeout:g} s reached", err=True)
    elif failed:
        summary = ", ".join(f"{k}={v}" for k, v in failed.items())
        typer.echo(f"fabricscope: lab run: non-zero exit on {summary}", err=True)
    raise typer.Exit(result.worst)


def _print_status(doc: dict) -> None:
    out = sys.stdout
    out.write(
        f"lab {doc['name']} [{doc['status']}] topology {doc['topology']}, switches {', '.join(doc['switches'])}\n"
    )
    out.write(
        f"  {'host':<5} {'rank':>4}  {'address':<18} {'switch':<8} {'rate':>9} {'loss':>6}  live (host/switch side)\n"
    )
    for h in doc["hosts"]:
        for link in h["links"]:
            live = "/".join(_live(link[k]) for k in ("live_host_side", "live_switch_side"))
            out.write(
                f"  {h['name']:<5} {h['rank']:>4}  {link['address']:<18} {link['switch']:<8} {link['rate']:>9} "
                f"{link['loss_pct']:>5g}%  {live}\n"
            )
    for u in doc.get("uplinks", []):
        live = "/".join(_live(u[k]) for k in ("live_leaf_side", "live_spine_side"))
        out.write(f"  uplink {u['leaf']} -> {u['spine']}: {u['rate']}, loss {u['loss_pct']:g}%  {live}\n")
    if doc.get("slurm"):
        nodes = doc["slurm"]["nodes"]
        states = (
            ", ".join(f"{n} {st}" for n, st in sorted(nodes.items()))
            if nodes is not None
            else "slurmctld does not answer"
        )
        out.write(f"  slurm: controller {doc['slurm']['controller']}, partition lab: {states}\n")
        out.write(f"  clients (srun, sinfo, scontrol) need: export SLURM_CONF={doc['slurm']['conf']}\n")


def _live(q: dict | None) -> str:
    if not q:
        return "-"
    if q.get("rate_gbps"):
        return f"{q['qdisc']} {format_rate(int(round(q['rate_gbps'] * 1e9)))}"
    return str(q.get("qdisc"))
