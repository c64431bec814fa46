"""Real LLDP in a lab: one lldpd per switch and one per host, so that topology discovery is tested
on real LLDP frames.

A lab switch is a Linux bridge in the fabric namespace. A bridge does not forward LLDP's group
address 01:80:c2:00:00:0e (802.1D reserves it; the bridge's ``group_fwd_mask`` leaves it out), so,
as on real switches, every host hears only its own switch. The switch side is an lldpd started in
the fabric namespace and limited to that bridge's ports (``-I``): it sends LLDP on them as the
switch (system name = the switch's name, chassis ID = the MAC of its first port, ``-C``) and lists
the hosts and the other switches it hears. Several switches share the fabric namespace, so each
lldpd has its own control socket (``-u``) and PID file (``-p``); their unprivileged halves share
lldpd's chroot (/run/lldpd), which holds nothing per instance. Hosts run one lldpd on their NICs.
``lab down`` ends them with every other process in the lab's namespaces.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from fabricscope.lab.plan import Plan
from fabricscope.lab.runner import Runner
from fabricscope.lab.spec import LabError

LLDPD = "lldpd"
RUN_DIR = Path("/run/fabricscope/lldp")  # sockets must stay short: a unix socket path has 108 bytes
TX_INTERVAL_S = 1  # frames every second, so neighbours appear (and age out) within seconds
START_DEADLINE_S = 15.0


@dataclass(frozen=True)
class Instance:
    """One lldpd: as switch ``name`` on the bridge ports, or as host ``name`` on its NICs."""

    name: str
    namespace: str
    interfaces: tuple[str, ...]
    chassis_interfaces: tuple[str, ...]
    role: str  # switch | host


def instances(plan: Plan) -> list[Instance]:
    out = []
    for switch in plan.switches:
        ports = [p.port for h in plan.hosts for p in h.ports if p.switch == switch]
        ports += [u.leaf_port for u in plan.uplinks if u.leaf == switch]
        ports += [u.spine_port for u in plan.uplinks if u.spine == switch]
        # the chassis ID comes from one of the switch's own ports: lldpd does not take a bridge's
        # MAC (-C on the bridge falls back to the machine's hostname), and switches sharing one
        # chassis ID would be merged into one neighbour by every lldpd that hears them
        out.append(Instance(switch, plan.fabric_namespace, tuple(ports), tuple(ports[:1]), "switch"))
    for host in plan.hosts:
        devs = tuple(p.dev for p in host.ports)
        out.append(Instance(host.name, host.namespace, devs, devs, "host"))
    return out


def folder(lab: str) -> Path:
    return RUN_DIR / lab


def socket_path(lab: str, name: str) -> Path:
    """The control socket of the lldpd of switch or host ``name`` (``lldpctl -u`` takes it)."""
    return folder(lab) / f"{name}.sock"


def socket_template(lab: str) -> str:
    """The socket path with ``{host}`` for the host's name, as ranks launched in the lab fill it in."""
    return str(folder(lab) / "{host}.sock")


def _answers(runner: Runner, sock: Path) -> bool:
    if not sock.exists():
        return False
    done = runner.run(
        ["lldpctl", "-u", str(sock), "-f", "keyvalue", "show", "chassis"], check=False, timeout_s=5
    )
    return done.rc == 0


def _start(runner: Runner, lab: str, inst: Instance) -> None:
    base = folder(lab)
    conf = base / f"{inst.name}.conf"
    # lldpd runs lldpcli on this file at start (-O): the name it announces, and a short interval
    conf.write_text(f"configure system hostname {inst.name}\nconfigure lldp tx-interval {TX_INTERVAL_S}\n")
    runner.run(
        [
            "ip",
            "netns",
            "exec",
            inst.namespace,
            LLDPD,
            "-u",
            str(socket_path(lab, inst.name)),
            "-p",
            str(base / f"{inst.name}.pid"),
            "-I",
            ",".join(inst.interfaces),
            "-C",
            ",".join(inst.chassis_interfaces),
            "-O",
            str(conf),
        ]
    )


def require(runner: Runner) -> None:
    for tool in (LLDPD, "lldpctl"):
        if not runner.which(tool):
            raise LabError(f"--lldp needs {tool}: install the Debian package lldpd")


def ensure(plan: Plan, runner: Runner) -> list[str]:
    """Start the lldpd of every switch and host that has none answering, and wait until each
    hears a neighbour on every port (LLDP has converged); returns those started."""
    require(runner)
    lab = plan.spec.name
    base = folder(lab)
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LabError(f"cannot create {base}: {exc.strerror or exc}") from None
    started = []
    for inst in instances(plan):
        sock = socket_path(lab, inst.name)
        if _answers(runner, sock):
            continue
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()  # left by an lldpd that died
        _start(runner, lab, inst)
        started.append(inst.name)
    deadline = time.monotonic() + START_DEADLINE_S
    waiting = [i for i in instances(plan) if i.name in started]
    while waiting and time.monotonic() < deadline:
        waiting = [i for i in waiting if _heard(runner, lab, i) < len(i.interfaces)]
        if waiting:
            time.sleep(0.2)
    if waiting:
        raise LabError(
            f"lldpd of {', '.join(i.name for i in waiting)} did not hear a neighbour on every port within {START_DEADLINE_S:g} s"
        )
    return started


def _heard(runner: Runner, lab: str, inst: Instance) -> int:
    """On how many of its ports an lldpd has a neighbour (0 while it does not answer)."""
    sock = socket_path(lab, inst.name)
    if not sock.exists():
        return 0
    done = runner.run(["lldpctl", "-u", str(sock), "-f", "keyvalue"], check=False, timeout_s=5)
    if done.rc != 0:
        return 0
    return len(
        {
            line.split(".", 2)[1]
            for line in done.stdout.splitlines()
            if line.startswith("lldp.") and ".via=" in line
        }
    )


def switch_tables(plan: Plan, runner: Runner) -> dict[str, str]:
    """``lldpctl -f json`` of every switch's lldpd: what each switch hears on its ports."""
    out = {}
    for inst in instances(plan):
        if inst.role != "switch":
            continue
        sock = socket_path(plan.spec.name, inst.name)
        done = runner.run(["lldpctl", "-u", str(sock), "-f", "json"], check=False, timeout_s=10)
        if done.rc != 0:
            raise LabError(
                f"lldpd of switch {inst.name} does not answer ({sock}): is the lab up with --lldp?"
            )
        out[inst.name] = done.stdout
    return out


def forget(lab: str) -> None:
    """Remove the lab's sockets, PID and config files (the daemons die with the namespaces)."""
    shutil.rmtree(folder(lab), ignore_errors=True)
