"""The kernel log (``dmesg``, else ``journalctl -k``) as the events doctor judges: link state
changes per port, NVIDIA Xid errors, mlx5 firmware/health events.

Both commands are read through the Root, so snapshots capture them like any other command.
Lines carry the kernel's monotonic timestamp (``[ 1843.308145] ...``; journalctl prints the same
with ``-o short-monotonic``), which is what windows are measured in. Formats, from real captures
(tests/data/samples/kernel_log_*.txt):

* ``NVRM: Xid (PCI:0000:01:00): 79, pid=6755, name=..., GPU has fallen off the bus.``
  (older drivers: ``NVRM: Xid (0000:01:00): 3, ...``); ``NVRM: GPU 0000:01:00.0: GPU has fallen
  off the bus.`` and the multi-line ``NVRM: The NVIDIA GPU 0000:b3:00.0`` form mean Xid 79 too.
* ``mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE`` (IB port state) and
  ``mlx5_core 0000:4b:00.0 ens1f0np0: Link down`` (Ethernet carrier).
* ``mlx5_core 0000:41:00.0: poll_health:852:(pid 0): device's health compromised - reached miss count``,
  ``... wait_func:964:(pid 112): ENABLE_HCA(0x104) timeout. Will cause a leak of a command resource``,
  ``... cmd_work_handler:887:(pid 383): failed to allocate command entry``,
  ``mlx5_core 0000:0b:00.0: Port module event: module 0, Cable plugged``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricscope.host.root import Root

DMESG = ("dmesg",)
JOURNAL = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic")
KERNEL_LOG_COMMANDS = (DMESG, JOURNAL)

# "[ 1843.308145] msg" (dmesg), "[ 1843.308145] host kernel: msg" (journalctl -o short-monotonic),
# with an optional "kernel: " (syslog) or "node: " (pdsh) prefix.
_STAMP = re.compile(r"^(?:[\w.-]+: )?\s*\[\s*(\d+\.\d+)\]\s?(?:\S+ kernel: )?(.*)\Z")
_COMMAND_TIMEOUT = re.compile(
    r"timeout\. Will cause a leak of a command resource|No done completion|failed to allocate command entry|cmd_work_handler"
)
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+),\s*(.*)$")
_GPU_ADDR = re.compile(
    r"NVRM: (?:GPU (?:at )?(?:PCI:)?|The NVIDIA GPU )([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
)
_FALLEN_TEXT = "GPU has fallen off the bus (logged without an Xid line)"
_MLX5 = re.compile(r"mlx5_core (\d{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)(?: ([^\s:]+))?: (.*)$")
_IB_LINK = re.compile(r"Port: (\d+) Link (DOWN|INIT|ARM|ACTIVE|ACTIVE_DEFER)\b")
_ETH_LINK = re.compile(r"^Link (up|down)\b")
_MODULE = re.compile(r"Port module event(?:\[error\])?: module (\d+), (.*)$")


@dataclass(frozen=True)
class LinkEvent:
    at_s: float | None
    port: str  # "mlx5_5/1" (IB port state) or a netdev name (Ethernet carrier)
    pci: str
    up: bool
    state: str  # "DOWN", "ACTIVE", "up", "down", ...


@dataclass(frozen=True)
class XidEvent:
    at_s: float | None
    pci: str  # as NVRM prints it: "0000:01:00" (bus:device, no function)
    code: int
    text: str


@dataclass(frozen=True)
class NicEvent:
    at_s: float | None
    pci: str
    kind: str  # "health", "command_timeout", "module", "pcie_power"
    text: str


@dataclass(frozen=True)
class KernelLog:
    source: str  # the command that answered
    lines: int
    last_s: float | None  # newest monotonic timestamp (seconds since boot)
    links: tuple[LinkEvent, ...] = field(default=())
    xids: tuple[XidEvent, ...] = field(default=())
    nic: tuple[NicEvent, ...] = field(default=())


def _nic_kind(message: str) -> str | None:
    if (
        "health compromised" in message
        or "unrecoverable hardware error" in message
        or "Fatal error" in message
    ):
        return "health"
    if _COMMAND_TIMEOUT.search(message):
        return "command_timeout"
    if "insufficient power on the PCIe slot" in message:
        return "pcie_power"
    if _MODULE.search(message) and "Cable plugged" not in message:
        return "module"
    return None


def _mlx5(at: float | None, match: re.Match[str], links: list, nic: list) -> None:
    pci, name, message = match.group(1), match.group(2), match.group(3)
    ib = _IB_LINK.search(message)
    eth = _ETH_LINK.search(message)
    if ib and name:
        state = ib.group(2)
        links.append(LinkEvent(at, f"{name}/{ib.group(1)}", pci, state in ("ACTIVE", "ACTIVE_DEFER"), state))
    elif eth and name:
        links.append(LinkEvent(at, name, pci, eth.group(1) == "up", eth.group(1)))
    elif (kind := _nic_kind(message)) is not None:
        nic.append(NicEvent(at, pci, kind, message.strip()))


def parse_kernel_log(text: str, source: str = "dmesg") -> KernelLog:
    """Kernel log text -> the events doctor judges; lines it does not know are skipped."""
    links: list[LinkEvent] = []
    xids: list[XidEvent] = []
    nic: list[NicEvent] = []
    last = None
    count = 0
    gpu_pci: str | None = None  # the GPU a multi-line NVRM message names on its first line
    prev: float | None = None
    for raw in text.splitlines():
        count += 1
        stamp = _STAMP.match(raw)
        if stamp:
            at, line = float(stamp.group(1)), stamp.group(2)
        else:  # an indented continuation line belongs to the message above it
            at, line = (prev if raw[:1].isspace() else None), raw
        prev = at
        if at is not None:
            last = at if last is None else max(last, at)
        if (m := _XID.search(line)) is not None:
            event = XidEvent(at, m.group(1).lower(), int(m.group(2)), m.group(3).strip())
            xids[:] = [
                x for x in xids if not (x.text == _FALLEN_TEXT and x.pci == event.pci and event.code == 79)
            ]
            xids.append(event)
        elif "NVRM:" in line:
            gpu = _GPU_ADDR.search(line)
            gpu_pci = gpu.group(1).lower() if gpu else gpu_pci
            if (
                "fallen off the bus" in line
                and gpu_pci
                and not any(x.code == 79 and x.pci == gpu_pci for x in xids)
            ):
                # Drivers without an Xid line for it (NVSentinel #155): the same fault as Xid 79.
                xids.append(XidEvent(at, gpu_pci, 79, _FALLEN_TEXT))
        elif (m := _MLX5.search(line)) is not None:
            _mlx5(at, m, links, nic)
    return KernelLog(source, count, last, tuple(links), tuple(xids), tuple(nic))


def read_kernel_log(root: Root) -> tuple[KernelLog | None, str | None]:
    """The kernel log from ``dmesg`` (needs root where kernel.dmesg_restrict=1), else from the journal;
    (None, why) when neither answered."""
    reasons = []
    for argv in KERNEL_LOG_COMMANDS:
        result = root.run(list(argv))
        log = parse_kernel_log(result.stdout, " ".join(argv)) if result.ok else None
        if log is not None and log.last_s is not None:
            return log, None
        # Both commands stamp every record "[seconds.micros]": without one, this is no kernel log.
        why = (
            "no timestamped kernel log line in the output"
            if result.ok
            else (result.reason or f"exit status {result.rc}")
        )
        reasons.append(f"{argv[0]}: {why}")
    return None, "; ".join(reasons)
