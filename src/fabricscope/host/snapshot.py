"""Snapshots: capture exactly what the host model reads, in the layout ``Root.at`` opens.

The allow-list is the host model itself: the inventory is read once through a recording Root,
and every file, directory, symlink and command output it touched is written out, with symlinks
kept as the kernel lays them out. ``scrub`` replaces GUIDs, MAC addresses, IP addresses (also
inside GIDs), UUIDs and the hostname consistently, so that a snapshot can be shared.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from fabricscope.host.inventory import read_inventory
from fabricscope.host.root import Recording, Root
from fabricscope.host.tempfiles import private_dir

SNAPSHOT_DIRNAME = "fabricscope-snapshot"


def capture(root: Root) -> Recording:
    """Read the node once through ``root`` and return everything that was touched."""
    root.recording = Recording()
    try:
        read_inventory(root)
        return root.recording
    finally:
        root.recording = None


# ----- scrubbing ------------------------------------------------------------------------------
_GID = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{4}:){7}[0-9a-fA-F]{4}(?![0-9a-fA-F:])"
_IPOIB_HW = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{2}:){19}[0-9a-fA-F]{2}(?![0-9a-fA-F:])"
_MAC = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}(?![0-9a-fA-F:])"
_GUID = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{4}:){3}[0-9a-fA-F]{4}(?![0-9a-fA-F:.])"
_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
_IPV6 = r"(?<![0-9a-fA-F:])[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){2,7}(?![0-9a-fA-F:])"
_IPV4 = r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])"
_TOKEN = re.compile("|".join(f"(?P<{n}>{p})" for n, p in (
    ("gid", _GID), ("ipoib", _IPOIB_HW), ("mac", _MAC), ("guid", _GUID), ("uuid", _UUID), ("ipv6", _IPV6), ("ipv4", _IPV4),
)))
_KEEP_V4 = {"127.0.0.1", "0.0.0.0", "255.255.255.255"}


@dataclass
class Scrubber:
    """Consistent replacement of identifying values: the same input always maps to the same output."""

    hostname: str | None = None
    maps: dict[str, dict[str, str]] = field(default_factory=dict)

    def _next(self, kind: str, original: str, make) -> str:
        table = self.maps.setdefault(kind, {})
        key = original.lower()
        if key not in table:
            table[key] = make(len(table) + 1)
        return table[key]

    def ipv4(self, text: str) -> str:
        try:
            addr = ipaddress.IPv4Address(text)
        except ValueError:
            return text
        if text in _KEEP_V4 or addr.is_loopback:
            return text
        return self._next("ipv4", text, lambda n: f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}")

    def mac(self, text: str) -> str:
        if text == "00:00:00:00:00:00":
            return text
        return self._next("mac", text, lambda n: "02:00:" + ":".join(f"{(n >> s) & 255:02x}" for s in (24, 16, 8, 0)))

    def guid(self, text: str) -> str:
        return self._next("guid", text, lambda n: f"0200:0000:{(n >> 16) & 0xFFFF:04x}:{n & 0xFFFF:04x}")

    def uuid(self, text: str) -> str:
        return self._next("uuid", text, lambda n: f"00000000-0000-4000-8000-{n:012x}")

    def ipv6(self, addr: ipaddress.IPv6Address) -> ipaddress.IPv6Address:
        if addr.is_unspecified or addr.is_loopback:
            return addr
        if addr.ipv4_mapped is not None:
            return ipaddress.IPv6Address(f"::ffff:{self.ipv4(str(addr.ipv4_mapped))}")
        iid = int(addr) & ((1 << 64) - 1)
        prefix = int(addr) >> 64
        new_iid = int(self._next("iid", f"{iid:x}", lambda n: f"{0x0200_0000_0000_0000 | n:x}"), 16)
        new_prefix = prefix
        if not addr.is_link_local:
            new_prefix = int(self._next("prefix", f"{prefix:x}", lambda n: f"{0xFD00_0000_0000_0000 | n:x}"), 16)
        return ipaddress.IPv6Address((new_prefix << 64) | new_iid)

    def gid(self, text: str) -> str:
        try:
            addr = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        return ":".join(f"{(int(self.ipv6(addr)) >> s) & 0xFFFF:04x}" for s in range(112, -1, -16))

    def _replace(self, match: re.Match[str]) -> str:
        kind, value = match.lastgroup, match.group(0)
        if kind == "gid":
            return self.gid(value)
        if kind == "ipoib":
            # IPoIB hardware address: 4 bytes of flags/QPN, then the 16-byte port GID.
            parts = value.split(":")
            gid = ":".join("".join(parts[i : i + 2]) for i in range(4, 20, 2))
            new = self.gid(gid).replace(":", "")
            return ":".join(parts[:4] + [new[i : i + 2] for i in range(0, 32, 2)])
        if kind == "mac":
            return self.mac(value)
        if kind == "guid":
            return self.guid(value)
        if kind == "uuid":
            return self.uuid(value)
        if kind == "ipv6":
            try:
                return str(self.ipv6(ipaddress.IPv6Address(value)))
            except ValueError:
                return value
        return self.ipv4(value)

    def text(self, text: str) -> str:
        text = _TOKEN.sub(self._replace, text)
        if self.hostname:
            text = re.sub(rf"\b{re.escape(self.hostname)}\b", "node-1", text)
        return text

    def data(self, data: bytes) -> bytes:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data  # binary (PCI config space): no identifiers
        if "\x00" in text:
            return data
        return self.text(text).encode("utf-8")


# ----- writing ----------------------------------------------------------------------------------
def _materialize(src_root: Path, rel: str, links: dict[str, str]) -> str:
    """Follow ``rel`` inside the source root, recording each symlink met on the way; returns the
    resolved path (relative to the root)."""
    cur = PurePosixPath()
    for part in PurePosixPath(rel).parts:
        cur = cur / part
        for _ in range(40):  # symlink chains are short in sysfs; stop on loops
            host = src_root / cur
            if not host.is_symlink():
                break
            target = os.readlink(host)
            if os.path.isabs(target):
                target = os.path.relpath(target, "/" + str(cur.parent)) if str(src_root) == "/" else os.path.relpath(
                    str(src_root) + target, src_root / cur.parent
                )
            links[str(cur)] = target
            cur = PurePosixPath(os.path.normpath(str(cur.parent / target)))
            if str(cur).startswith(".."):
                return str(cur)
    return str(cur)


def _device_placeholders(src_root: Path, rel: str) -> dict[str, bytes]:
    """Empty files named like the device nodes of a listed /dev directory: the names are what the
    host model reads (which /dev/infiniband/uverbsN exist); devices are never opened. Of /dev
    itself only ``null`` is kept, so a missing /dev/infiniband still reads as absent, not unknown."""
    base = src_root / rel
    try:
        names = ["null"] if rel == "dev" else os.listdir(base)
    except OSError:
        return {}
    out = {}
    for name in names:
        try:
            mode = os.lstat(base / name).st_mode
        except OSError:
            continue
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or (stat.S_ISREG(mode) and not (base / name).stat().st_size):
            out[f"{rel}/{name}"] = b""
    return out


def write_snapshot(root: Root, recording: Recording, out: Path, scrub: bool = False) -> Path:
    """Write the recorded files, symlinks and command outputs as a .tar.gz snapshot."""
    scrubber = None
    if scrub:
        hostname = recording.files.get("proc/sys/kernel/hostname", b"").decode("utf-8", "replace").strip() or None
        scrubber = Scrubber(hostname=hostname)
    links: dict[str, str] = {}
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for rel, data in recording.files.items():
        if rel.startswith("cmd/"):
            continue  # captured outputs of a source snapshot are re-written from the commands below
        real = _materialize(root.path, rel, links)
        files[real] = scrubber.data(data) if scrubber else data
    for rel in recording.dirs | recording.paths:
        real = _materialize(root.path, rel, links)
        if (root.path / real).is_dir():
            dirs.add(real)
            if real == "dev" or real.startswith("dev/"):
                files.update(_device_placeholders(root.path, real))
    commands = []
    for i, result in enumerate(sorted(recording.commands.values(), key=lambda r: r.argv)):
        if not result.available or result.rc is None:
            continue
        name = f"{i:03d}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(result.argv))[:60]
        stdout = scrubber.text(result.stdout) if scrubber else result.stdout
        files[f"cmd/{name}"] = stdout.encode("utf-8")
        commands.append({"argv": list(result.argv), "stdout": name, "rc": result.rc})
    files["cmd/index.json"] = (json.dumps(commands, indent=1) + "\n").encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    with private_dir("snap") as tmp:
        base = tmp / SNAPSHOT_DIRNAME
        for rel in sorted(dirs):
            if not rel.startswith(".."):
                (base / rel).mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            if rel.startswith(".."):
                continue
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                continue
            path.write_bytes(data)
        for rel, target in sorted(links.items()):
            path = base / rel
            if path.exists() or path.is_symlink() or rel.startswith(".."):
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target)
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(base, arcname=SNAPSHOT_DIRNAME)
        partial.replace(out)
    return out


def take_snapshot(root: Root, out: Path, scrub: bool = False) -> tuple[Path, Recording]:
    recording = capture(root)
    return write_snapshot(root, recording, out, scrub=scrub), recording
