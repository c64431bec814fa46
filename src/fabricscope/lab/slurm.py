"""A real Slurm cluster over a lab: munged, slurmctld, and one slurmd per lab host inside that
host's network namespace (Debian's slurm-wlm and munge), so that `srun` places tasks on the lab
fabric exactly as on a cluster.

How it is wired (each choice was verified on a 2-core VM; see docs/lab.md):

- slurmd must not start through ``ip netns exec``: that remounts /sys, which hides
  /sys/fs/cgroup, and slurmd 22.05 always starts its cgroup plugin and dies. It starts through
  ``nsenter --net`` (the network namespace only), in a UTS namespace of its own whose hostname is
  the lab host's name (``srun hostname`` says h1..hN; ``slurmd -N`` names the node), and in a mount
  namespace of its own where the lab's hosts file is bound over /etc/hosts, as ``ip netns exec``
  does for /etc: tasks resolve h1..hN to lab addresses, which torch's store and gloo need.
- This machine reaches the fabric through one veth "leg" (``fsl<lab>`` here, ``ctl`` on the
  switch that carries 198.18.0.0/24) with address 198.18.0.254: slurmctld listens there (in its
  own UTS namespace, hostname ``ctl``), and srun, sinfo and scontrol run here, unchanged. The leg
  goes with the fabric namespace, so ``lab down`` cannot leave it behind. Only one lab at a time
  can run Slurm: two would route the same subnet from this machine.
- One munged serves every daemon through a socket path (the namespaces share the filesystem).
- Configuration, key, state, logs and sockets live in one private directory
  (:func:`fabricscope.host.tempfiles.make_private_dir`) named ``fabricscope-slurm-<lab>-*``; the
  lab state records it. Stopping ends the daemons by the pid files they wrote there (each pid
  checked against /proc: its argv must name the directory's slurm.conf or munge socket, so a
  stale file never ends a process that reused the number), then removes it. A leftover directory
  found by its name is used only if it is a real directory owned by this user: any local user can
  create ``/tmp/fabricscope-slurm-<lab>-<anything>``, and nothing in such a name is ever matched
  against command lines (``pgrep -f NAME`` once let a planted name choose what root killed).
- srun waits forever for a drained or dead node: whatever fabricscope runs passes ``--immediate``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import time
from pathlib import Path

from fabricscope.host.tempfiles import PREFIX as TEMP_PREFIX
from fabricscope.host.tempfiles import atomic_write, make_private_dir, remove_private_dir
from fabricscope.lab.plan import SUBNET_PREFIXLEN, Plan, address
from fabricscope.lab.runner import Runner
from fabricscope.lab.spec import LabError

TOOLS = {
    "munged": "munge",
    "slurmctld": "slurm-wlm",
    "slurmd": "slurm-wlm",
    "sinfo": "slurm-wlm",
    "scontrol": "slurm-wlm",
    "nsenter": "util-linux",
    "unshare": "util-linux",
}
CONTROLLER = "ctl"
CONTROLLER_INDEX = 254  # 198.18.0.254: lab hosts are h1..h64
LEG_IN_FABRIC = "ctl"
START_DEADLINE_S = 30.0
STOP_DEADLINE_S = 5.0
# Set the hostname (and bind the lab's hosts file over /etc/hosts), then become the daemon. The
# script is fixed; names and paths arrive as arguments ("$1", "$2"), never spliced into it.
_AS_HOST = 'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"'
_AS_CONTROLLER = 'hostname "$1" && shift && exec "$@"'


def purpose(lab: str) -> str:
    return f"slurm-{lab}"


def leg_name(lab: str) -> str:
    """The leg's name on this machine: ``fsl<lab>`` (at most 15 characters, the kernel's limit)."""
    return f"fsl{lab}"


def controller_address() -> str:
    return address(0, CONTROLLER_INDEX)


def conf_path(directory: Path) -> Path:
    return directory / "slurm.conf"


def munge_socket(directory: Path) -> Path:
    return directory / "munge" / "munge.socket.2"


def conf_text(plan: Plan, directory: Path) -> str:
    """slurm.conf for the lab: every host a node of one partition ``lab``, one CPU each (one task
    per node), no cgroups, no accounting; every path inside ``directory``."""
    d = str(directory)
    lines = [
        f"ClusterName=fs{plan.spec.name}",
        f"SlurmctldHost={CONTROLLER}({controller_address()})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket(directory)}",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        f"StateSaveLocation={d}/ctl/state",
        f"SlurmctldPidFile={d}/ctl/slurmctld.pid",
        f"SlurmctldLogFile={d}/ctl/slurmctld.log",
        f"SlurmdSpoolDir={d}/nodes/%n/spool",
        f"SlurmdPidFile={d}/nodes/%n/slurmd.pid",
        f"SlurmdLogFile={d}/nodes/%n/slurmd.log",
        # 22.05 has no CgroupPlugin=disabled: these need no cgroup.conf
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "MinJobAge=60",
        "KillWait=5",
        "Waittime=0",
        "MailProg=/bin/true",
    ]
    lines += [
        f"NodeName={h.name} NodeAddr={h.address} CPUs=1 RealMemory=1000 State=UNKNOWN" for h in plan.hosts
    ]
    lines.append(
        f"PartitionName=lab Nodes={','.join(h.name for h in plan.hosts)} Default=YES MaxTime=INFINITE State=UP"
    )
    return "\n".join(lines) + "\n"


def require(runner: Runner) -> None:
    missing = [tool for tool in TOOLS if not runner.which(tool)]
    if missing:
        packages = sorted({TOOLS[t] for t in missing})
        raise LabError(
            f"--slurm needs {', '.join(missing)}: install the Debian package(s) {' '.join(packages)}"
        )


def client_argv(directory: Path, *argv: str) -> list[str]:
    """A Slurm client run against the lab's controller (``env`` sets SLURM_CONF; no shell)."""
    return ["env", f"SLURM_CONF={conf_path(directory)}", *argv]


def node_states(runner: Runner, directory: Path) -> dict[str, str] | None:
    """Node -> state as ``sinfo -N`` says it (``idle``, ``drained`` ...); None when slurmctld does not answer."""
    done = runner.run(client_argv(directory, "sinfo", "-h", "-N", "-o", "%N %T"), check=False, timeout_s=10)
    if done.rc != 0:
        return None
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if len(line.split(None, 1)) == 2)


def _check_leg_free(runner: Runner, lab: str) -> None:
    for line in runner.run(["ip", "-o", "link", "show"]).stdout.splitlines():
        name = line.split(":", 2)[1].strip().split("@", 1)[0] if line.count(":") >= 2 else ""
        if name.startswith("fsl") and name != leg_name(lab):
            raise LabError(
                f"lab {name[3:]} already runs Slurm here; one Slurm lab at a time (`fabricscope lab down {name[3:]}`)"
            )


def check_leg_name_free(runner: Runner, lab: str) -> None:
    """Refuse when an interface on this machine already has the leg's name: it is not the lab's
    (the lab's leg goes with its fabric namespace), and deleting it would cut whatever uses it."""
    leg = leg_name(lab)
    if runner.run(["ip", "-o", "link", "show", "dev", leg], check=False).rc == 0:
        raise LabError(
            f"an interface named {leg} already exists here and is not lab {lab}'s; --slurm needs that name "
            f"for its leg: rename or remove {leg}, or give the lab another name"
        )


def _add_leg(plan: Plan, runner: Runner) -> None:
    run, leg, fab = runner.run, leg_name(plan.spec.name), plan.fabric_namespace
    switch, mtu = plan.hosts[0].ports[0].switch, str(plan.spec.mtu)
    # a leg of this lab's earlier Slurm is removed through its end in the fabric namespace (a veth
    # goes as a pair); an interface of that name that is still here is someone else's: refuse
    run(["ip", "-n", fab, "link", "del", LEG_IN_FABRIC], check=False)
    check_leg_name_free(runner, plan.spec.name)
    run(["ip", "link", "add", leg, "type", "veth", "peer", "name", LEG_IN_FABRIC, "netns", fab])
    run(["ip", "-n", fab, "link", "set", LEG_IN_FABRIC, "addrgenmode", "none"])
    run(["ip", "-n", fab, "link", "set", LEG_IN_FABRIC, "mtu", mtu, "master", switch, "up"])
    run(["ip", "link", "set", leg, "addrgenmode", "none"])
    run(["ip", "addr", "add", f"{controller_address()}/{SUBNET_PREFIXLEN}", "dev", leg])
    run(["ip", "link", "set", leg, "mtu", mtu, "up"])


def prepare(lab: str) -> Path:
    """The lab's private Slurm directory (kept after this process: the daemons live on)."""
    return make_private_dir(purpose(lab), outlive_process=True)


def start(plan: Plan, runner: Runner, directory: Path, hosts_file: dict[str, Path]) -> None:
    """Leg, munged, slurmctld, one slurmd per host; returns when every node is idle."""
    require(runner)
    _check_leg_free(runner, plan.spec.name)
    _add_leg(plan, runner)
    # munged wants every directory above its socket enterable by all (it refuses 0700): the lab's
    # directory becomes 0711, enterable but not listable; the key inside stays 0600
    os.chmod(directory, 0o711)
    (directory / "munge").mkdir(mode=0o755)
    os.chmod(directory / "munge", 0o755)  # munged refuses a socket directory that others cannot enter
    (directory / "ctl" / "state").mkdir(parents=True)
    atomic_write(directory / "munge.key", os.urandom(1024), mode=0o600)
    atomic_write(conf_path(directory), conf_text(plan, directory).encode())
    runner.run(
        [
            "munged",
            f"--socket={munge_socket(directory)}",
            f"--key-file={directory / 'munge.key'}",
            f"--log-file={directory / 'munged.log'}",
            f"--pid-file={directory / 'munged.pid'}",
            f"--seed-file={directory / 'munged.seed'}",
        ]
    )
    conf = str(conf_path(directory))
    runner.run(
        [
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            _AS_CONTROLLER,
            "fabricscope-slurm",
            CONTROLLER,
            "slurmctld",
            "-f",
            conf,
        ]
    )
    for host in plan.hosts:
        (directory / "nodes" / host.name / "spool").mkdir(parents=True)
        runner.run(
            [
                "nsenter",
                f"--net=/run/netns/{host.namespace}",
                "unshare",
                "--uts",
                "--mount",
                "--propagation",
                "slave",
                "--",
                "sh",
                "-c",
                _AS_HOST,
                "fabricscope-slurm",
                str(hosts_file[host.name]),
                host.name,
                "slurmd",
                "-f",
                conf,
                "-N",
                host.name,
            ]
        )
    _wait_idle(plan, runner, directory)


def _wait_idle(plan: Plan, runner: Runner, directory: Path) -> None:
    deadline = time.monotonic() + START_DEADLINE_S
    states: dict[str, str] | None = None
    while time.monotonic() < deadline:
        states = node_states(runner, directory)
        if states is not None and all(states.get(h.name) == "idle" for h in plan.hosts):
            return
        time.sleep(0.2)
    if states is None:
        raise LabError(
            f"slurmctld did not answer within {START_DEADLINE_S:g} s: {_log_tail(directory / 'ctl' / 'slurmctld.log')}"
        )
    late = sorted(h.name for h in plan.hosts if states.get(h.name) != "idle")
    raise LabError(
        f"Slurm nodes {', '.join(late)} not idle within {START_DEADLINE_S:g} s "
        f"({', '.join(f'{n}={states.get(n)}' for n in late)}): {_log_tail(directory / 'nodes' / late[0] / 'slurmd.log')}"
    )


def _log_tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if "error" in ln.lower()]
    except OSError:
        return f"no log at {path}"
    return lines[-1].strip()[:300] if lines else f"see {path}"


PID_FILES = ("munged.pid", "ctl/slurmctld.pid", "nodes/*/slurmd.pid")  # as start() and conf_text() name them
MAX_PID_FILE_BYTES = 64


def running(directory: Path) -> list[int]:
    """PIDs of the lab's live daemons: read from the pid files they wrote in ``directory``, each
    kept only if ``/proc/PID/cmdline`` names that directory's slurm.conf or munge socket (a pid
    file outlives its daemon, and the kernel reuses numbers)."""
    if not owned_directory(directory):
        return []
    mine = {str(conf_path(directory)), f"--socket={munge_socket(directory)}"}
    pids: set[int] = set()
    for pattern in PID_FILES:
        for path in directory.glob(pattern):
            pid = _read_pid(path)
            if pid is not None and pid != os.getpid() and mine & set(_argv(pid)):
                pids.add(pid)
    return sorted(pids)


def _read_pid(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        text = os.read(fd, MAX_PID_FILE_BYTES).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(text) if text.isdigit() and 1 < int(text) < 1 << 22 else None


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]


def owned_directory(directory: Path) -> bool:
    """A real directory (not a symlink) owned by this user: one this user's ``lab up`` made."""
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def answering(plan: Plan, runner: Runner, directory: Path) -> bool:
    """Every daemon of the lab is there: slurmctld answers and lists every host as a node."""
    if not conf_path(directory).is_file():
        return False
    states = node_states(runner, directory)
    return states is not None and all(h.name in states for h in plan.hosts)


def stop(directory: Path) -> None:
    """End the lab's daemons (SIGTERM, then SIGKILL after a grace) and remove their directory.
    A directory this user does not own is left alone (it is not a lab's: see :func:`leftovers`)."""
    if not owned_directory(directory):
        return
    pids = running(directory)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            _signal_if_ours(directory, pid, sig)
        deadline = time.monotonic() + STOP_DEADLINE_S
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = running(directory)
        if not pids:
            break
    if pids:
        raise LabError(f"Slurm processes {', '.join(map(str, pids))} of {directory} did not end")
    remove_private_dir(directory)


def _signal_if_ours(directory: Path, pid: int, sig: signal.Signals) -> None:
    """Signal ``pid`` through a pidfd opened before its argv is checked again, so a number reused
    between the check and the signal cannot be hit."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # gone
    try:
        if pid in running(directory):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)


def leftovers(lab: str) -> list[Path]:
    """Private Slurm directories of ``lab`` in the temporary directory (found when the state file
    is gone): only real directories owned by this user; anyone may plant a name there."""
    found = Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}{purpose(lab)}-*")
    return sorted(p for p in found if owned_directory(p))


def stop_all(lab: str, recorded: str | None) -> None:
    """``lab down``: the recorded directory and any other left by a crash, then the leg."""
    folders = {Path(recorded)} if recorded else set()
    folders.update(leftovers(lab))
    for folder in sorted(folders):
        stop(folder)
    # the leg needs nothing here: it goes with the fabric namespace


def status(runner: Runner, directory: Path) -> dict[str, object]:
    """What `lab status` shows: where the clients' configuration is, and each node's state."""
    return {
        "conf": str(conf_path(directory)),
        "controller": f"{CONTROLLER}({controller_address()})",
        "environment": {"SLURM_CONF": str(conf_path(directory))},
        "nodes": node_states(runner, directory),
    }
