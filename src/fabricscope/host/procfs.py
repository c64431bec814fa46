"""procfs: network sysctls, TCP counters, loaded modules and the kernel command line."""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricscope.host.root import Root

SYSCTL_DIRS = ("proc/sys/net/core", "proc/sys/net/ipv4")
RDMA_MODULES = ("ib_core", "mlx5_ib", "mlx5_core", "ib_uverbs", "rdma_cm", "rdma_ucm")
GPUDIRECT_MODULES = ("nvidia_peermem", "nv_peer_mem")


@dataclass(frozen=True)
class Rlimit:
    """A resource limit from /proc/<pid>/limits; None means "unlimited"."""

    soft: int | None
    hard: int | None


@dataclass(frozen=True)
class KernelState:
    sysctls: dict[str, str] = field(default_factory=dict)  # "net.core.somaxconn" -> "4096"
    netstat: dict[str, int] = field(default_factory=dict)  # "TcpExt.TCPLostRetransmit", "Tcp.RetransSegs"
    modules: frozenset[str] = frozenset()
    modules_known: bool = False
    cmdline: str | None = None
    memlock: Rlimit | None = None  # RLIMIT_MEMLOCK of this process (/proc/self/limits); None: unknown

    def sysctl_int(self, name: str) -> int | None:
        try:
            return int(self.sysctls[name].split()[0])
        except (KeyError, ValueError, IndexError):
            return None

    def sysctl_ints(self, name: str) -> list[int] | None:
        """Multi-value sysctls like tcp_rmem ("4096 131072 6291456")."""
        try:
            return [int(v) for v in self.sysctls[name].split()]
        except (KeyError, ValueError):
            return None


def parse_netstat(text: str) -> dict[str, int]:
    """/proc/net/netstat and /proc/net/snmp: header line then value line per protocol."""
    result: dict[str, int] = {}
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for header, values in zip(lines[::2], lines[1::2]):
        proto, _, names = header.partition(":")
        vproto, _, nums = values.partition(":")
        if proto != vproto:
            continue
        for name, num in zip(names.split(), nums.split()):
            try:
                result[f"{proto}.{name}"] = int(num)
            except ValueError:
                continue
    return result


def parse_limits(text: str) -> dict[str, Rlimit]:
    """/proc/<pid>/limits (fs/proc/base.c proc_pid_limits: "%-25s %-20s %-20s %-10s" per limit)
    -> {"Max locked memory": Rlimit(65536, 65536)}; "unlimited" becomes None."""
    limits: dict[str, Rlimit] = {}
    for line in text.splitlines():
        if not line.startswith("Max ") or len(line) < 26:
            continue
        name = line[:25].strip()
        values = line[25:].split()
        if len(values) < 2:
            continue
        try:
            soft, hard = (None if v == "unlimited" else int(v) for v in values[:2])
        except ValueError:
            continue
        limits[name] = Rlimit(soft, hard)
    return limits


def parse_modules(text: str) -> frozenset[str]:
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip())


def read_sysctls(root: Root) -> dict[str, str]:
    sysctls: dict[str, str] = {}
    for rel in SYSCTL_DIRS:
        prefix = rel.removeprefix("proc/sys/").replace("/", ".")
        for name in root.listdir(rel):
            if rel.endswith("ipv4") and not name.startswith("tcp_"):
                continue
            value = root.read(f"{rel}/{name}")
            if value is not None:
                sysctls[f"{prefix}.{name}"] = " ".join(value.split())
    return sysctls


def read_netstat(root: Root, *, required: bool = False) -> dict[str, int]:
    """/proc/net/netstat and /proc/net/snmp as ``{"Tcp.RetransSegs": n, "TcpExt.TCPTimeouts": n}``;
    a garbled file is a problem, and so is a missing one when ``required`` (the exporter: every
    Linux kernel has both, while a snapshot of an old version may lack them)."""
    counters: dict[str, int] = {}
    for rel in ("proc/net/netstat", "proc/net/snmp"):
        text = root.read(rel, missing_ok=not required)
        if text is None:
            continue
        parsed = parse_netstat(text)
        if not parsed and (text.strip() or required):
            root.note(rel, "no counters recognised")
        counters.update(parsed)
    return counters


def read_kernel_state(root: Root) -> KernelState:
    modules_text = root.read("proc/modules")
    cmdline = root.read("proc/cmdline")
    limits_text = root.read("proc/self/limits")
    limits = parse_limits(limits_text) if limits_text is not None else {}
    if limits_text is not None and not limits:
        root.note("proc/self/limits", "no limits recognised")
    return KernelState(
        sysctls=read_sysctls(root),
        netstat=read_netstat(root),
        modules=parse_modules(modules_text) if modules_text is not None else frozenset(),
        modules_known=modules_text is not None,
        cmdline=cmdline.strip() if cmdline is not None else None,
        memlock=limits.get("Max locked memory"),
    )
