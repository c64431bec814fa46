"""Small parsers for the value formats sysfs uses; shared by every host reader."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from fabricscope.host.root import Root

# How many objects of a kind are read at most. A snapshot is untrusted: a 229 KB archive claiming
# 20,001 RDMA ports made 200,010 series. The caps leave room over the largest real nodes: 8
# ConnectX PFs with 127 SR-IOV VFs each are 1,024 RDMA devices of one port; a Kubernetes node
# with thousands of veths; a few hundred PCI functions on a large server; mlx5 writes about 20
# counters and 45 hw_counters per port (bnxt_re and irdma about 100); 256 GID entries per port.
T = TypeVar("T")
MAX_RDMA_DEVICES = 1024
MAX_RDMA_PORTS = 1024  # across all devices
MAX_NETDEVS = 8192
MAX_PCI_DEVICES = 8192
MAX_COUNTER_FILES = 256  # per counters/ or hw_counters/ directory
MAX_COUNTER_FILES_PER_SCRAPE = 65_536  # 1,024 ports x 64: every counter file an exporter scrape reads
MAX_GIDS = 1024  # per port
PRIORITIES = range(8)  # 802.1p priorities: a per-priority directory has no others


def capped(root: Root, kind: str, source: str, names: Sequence[T], limit: int) -> list[T]:
    """The first ``limit`` of ``names``; the rest is left unread and recorded as a problem that
    says how many were dropped (the exporter exports the count)."""
    names = list(names)
    if len(names) <= limit:
        return names
    dropped = len(names) - limit
    root.note(
        source, f"{dropped:,} {kind} beyond the cap of {limit:,} left unread", dropped=dropped, kind=kind
    )
    return names[:limit]


class Budget:
    """A cap shared by many directories (counter files per scrape): each takes what is left."""

    def __init__(self, kind: str, limit: int) -> None:
        self.kind, self.limit, self.left, self.dropped = kind, limit, limit, 0

    def take(self, names: list[str]) -> list[str]:
        allowed = names[: max(self.left, 0)]
        self.left -= len(allowed)
        self.dropped += len(names) - len(allowed)
        return allowed

    def report(self, root: Root, source: str) -> None:
        if self.dropped:
            root.note(
                source,
                f"{self.dropped:,} {self.kind} beyond the cap of {self.limit:,} left unread",
                dropped=self.dropped,
                kind=self.kind,
            )


_ID_NAME = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")


def printable_name(name: str) -> str:
    """A file name as text that encodes: bytes that were not UTF-8 (``os.listdir`` hands them over
    as surrogate escapes) become ``\\xNN``. Used for every label and every snapshot member name,
    so a name like ``bad\\xffname`` reads the same on the host and in its snapshot; a name that
    already holds such text is indistinguishable from it, which is acceptable for display."""
    if name.isascii():
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def parse_id_name(text: str | None) -> tuple[int | None, str | None]:
    """``"4: ACTIVE"`` -> ``(4, "ACTIVE")``; anything else -> ``(None, None)``."""
    if text is None:
        return None, None
    match = _ID_NAME.match(text)
    if not match:
        return None, None
    return int(match.group(1)), match.group(2)


def parse_int(text: str | None, base: int = 10) -> int | None:
    """An integer attribute (``"1500"``, ``"0x3db"`` with base 0); None for anything else."""
    if text is None:
        return None
    value = text.strip()
    if not value:
        return None
    try:
        return int(value, base)
    except ValueError:
        return None


def read_int(root: Root, rel: str, base: int = 10) -> int | None:
    """Read an integer attribute; a present but garbled file is recorded as a problem."""
    text = root.read(rel)
    value = parse_int(text, base)
    if text is not None and value is None and text.strip() and not text.startswith("N/A"):
        root.note(rel, f"not an integer: {text[:40]!r}")
    return value


def read_str(root: Root, rel: str) -> str | None:
    """Read a one-line string attribute; empty files give None."""
    text = root.read(rel)
    if text is None:
        return None
    text = text.strip()
    return text or None


def read_counters(root: Root, rel_dir: str) -> dict[str, int]:
    """Every integer file in a counters directory; garbled or N/A files are left out (and noted)."""
    counters: dict[str, int] = {}
    for name in capped(root, "counter files", rel_dir, root.listdir(rel_dir), MAX_COUNTER_FILES):
        value = read_int(root, f"{rel_dir}/{name}")
        if value is not None:
            counters[name] = value
    return counters


_MAX_ATTR_BYTES = 64 * 1024


class SysDir:
    """A directory of a kernel object (an RDMA port, a netdev, a PCI function), resolved once:
    its attributes are read by name without following symlinks, so nothing read through it can
    leave a snapshot, a port's fifty counters cost one resolution, and every reader of the object
    notes the same problems (a required attribute absent or empty, a garbled integer)."""

    def __init__(self, root: Root, rel: str, real: str) -> None:
        self.root = root
        self.rel = rel  # the path readers asked for: named in problems and the recording
        self.real = real  # the same directory, symlinks resolved

    @classmethod
    def open(cls, root: Root, rel: str) -> SysDir | None:
        """The directory at ``rel`` (symlinks resolved and confined by :meth:`Root.resolve`)."""
        resolved = root.resolve(rel)
        if resolved is None or not root.is_dir(resolved):
            return None
        return cls(root, rel, resolved)

    def sub(self, name: str) -> SysDir | None:
        """A subdirectory (``a/b`` for deeper ones); a symlink in its place is not followed."""
        current: SysDir | None = self
        for part in name.split("/"):
            if current is None:
                return None
            real = f"{current.real}/{part}" if current.real else part
            entry = current.root.lstat(real)
            current = (
                SysDir(current.root, f"{current.rel}/{part}", real)
                if entry is not None and entry.kind == "dir"
                else None
            )
        return current

    def names(self) -> list[str]:
        return self.root.listdir(self.real, source=self.rel)  # `fabricscope snapshot` keeps what was listed

    def read(self, name: str, *, required: bool = False) -> str | None:
        """Text of the file (trailing newlines stripped), or None as :meth:`Root.read` would."""
        rel = f"{self.rel}/{name}"
        data = self.root.read_bytes(
            f"{self.real}/{name}", missing_ok=not required, follow=False, limit=_MAX_ATTR_BYTES, source=rel
        )
        return None if data is None else self.root.text_of(rel, data)

    def required(self, name: str) -> str | None:
        """A one-line attribute every such object has: absent or empty is a problem."""
        text = self.read(name, required=True)
        if text is None:
            return None
        text = text.strip()
        if not text:
            self.root.note(f"{self.rel}/{name}", "empty")
            return None
        return text

    def optional(self, name: str) -> str | None:
        text = self.read(name)
        if text is None:
            return None
        return text.strip() or None

    def integer(self, name: str, base: int = 10) -> int | None:
        text = self.read(name)
        value = parse_int(text, base)
        if text is not None and value is None and text.strip() and not text.startswith("N/A"):
            self.root.note(f"{self.rel}/{name}", f"not an integer: {text[:40]!r}")
        return value

    def id_name(self, name: str) -> tuple[int | None, str | None]:
        """A required ``"<id>: <name>"`` attribute (port state)."""
        text = self.required(name)
        parsed = parse_id_name(text)
        if text is not None and parsed[0] is None:
            self.root.note(f"{self.rel}/{name}", f"not '<id>: <name>': {text[:40]!r}")
        return parsed

    def counters(self, name: str, budget: Budget | None = None) -> dict[str, int]:
        """Every integer file of the subdirectory ``name`` (capped, and taken from ``budget``);
        N/A files are left out, garbled ones noted."""
        sub = self.sub(name)
        if sub is None:
            return {}
        values = {}
        names = capped(self.root, "counter files", sub.rel, sub.names(), MAX_COUNTER_FILES)
        for entry in budget.take(names) if budget is not None else names:
            value = sub.integer(entry)
            if value is not None:
                values[entry] = value
        return values

    def priorities(self, name: str) -> dict[int, bool]:
        """A per-priority directory of 0/1 files (MLNX_OFED ``ecn/roce_np/enable/<prio>``)."""
        out: dict[int, bool] = {}
        sub = self.sub(name)
        if sub is None:
            return out
        for entry in sub.names():
            if entry.isascii() and entry.isdigit() and int(entry) in PRIORITIES:
                value = sub.integer(entry)
                if value is not None:
                    out[int(entry)] = value == 1
        return out
