"""Snapshots: capture exactly what the host model reads, in the layout ``Root.at`` opens.

The allow-list is the host model itself: the inventory is read once through a recording Root,
and every file, directory, symlink and command output it touched is written out, with symlinks
kept as the kernel lays them out. Scrubbing (:mod:`.scrub`) replaces what identifies the machine
consistently, so that a snapshot can be shared and still judges the same.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import tarfile
import time
from pathlib import Path
from typing import BinaryIO

from fabricscope.host.confined import DIR, FILE, ConfinedFs, DirStore
from fabricscope.host.inventory import read_inventory
from fabricscope.host.root import Recording, Root
from fabricscope.host.scrub import STANDARD, STRICT, Scrubber
from fabricscope.host.sysfs import printable_name
from fabricscope.host.tempfiles import atomic_writer

SNAPSHOT_DIRNAME = "fabricscope-snapshot"


def capture(root: Root) -> Recording:
    """Read the node once through ``root`` and return everything that was touched."""
    root.recording = Recording()
    try:
        read_inventory(root)
        return root.recording
    finally:
        root.recording = None


# ----- writing ----------------------------------------------------------------------------------
def _source_fs(root: Root) -> ConfinedFs:
    """The root's files walked by the confined logic, so the links met on a path can be listed:
    a snapshot's own fs; for the live machine, ``/`` seen the same way (its links are relative or
    absolute from ``/``, which the walk reads exactly as the kernel does)."""
    return root.fs if isinstance(root.fs, ConfinedFs) else ConfinedFs(DirStore(Path("/")))


def _materialize(fs: ConfinedFs, rel: str, links: dict[str, str]) -> str | None:
    """Resolve ``rel`` inside the root, recording each symlink met on the way (absolute targets
    made relative, so the snapshot reads the same anywhere); the resolved path, None if absent."""
    met: list[tuple[str, str]] = []
    try:
        real = fs.realpath(rel, met=met)
    except OSError:
        real = None
    for path, target in met:
        links.setdefault(path, _relative_inside(path, target))
    return real


def _relative_inside(path: str, target: str) -> str:
    """The target of the link at ``path`` as a relative path that stays inside the snapshot
    (``..`` above the root dropped, as the confined walk reads it), so that even unpacked by tar
    the snapshot written never points outside itself."""
    where = posixpath.dirname(path)
    parts = [] if target.startswith("/") else [p for p in where.split("/") if p]
    for part in target.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return posixpath.relpath("/" + "/".join(parts), "/" + where)


def _device_placeholders(fs: ConfinedFs, rel: str) -> dict[str, bytes]:
    """Empty files named like the device nodes of a listed /dev directory: the names are what the
    host model reads (which /dev/infiniband/uverbsN exist); devices are never opened. Of /dev
    itself only ``null`` is kept, so a missing /dev/infiniband still reads as absent, not unknown."""
    try:
        names = ["null"] if rel == "dev" else fs.listdir(rel)
    except OSError:
        return {}
    out = {}
    for name in names:
        try:
            entry = fs.lstat(f"{rel}/{name}")
        except OSError:
            continue
        if entry.what in ("character device", "block device") or (entry.kind == FILE and not entry.size):
            out[f"{rel}/{name}"] = b""
    return out


def _layout(
    root: Root, recording: Recording, scrubber: Scrubber | None
) -> tuple[set[str], dict[str, bytes], dict[str, str]]:
    """Directories, files (by resolved path) and symlinks of the snapshot to write."""
    fs = _source_fs(root)
    links: dict[str, str] = {}
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for rel, data in recording.files.items():
        if rel.startswith("cmd/"):
            continue  # captured outputs of a source snapshot are re-written from the commands below
        real = _materialize(fs, rel, links)
        if real:
            files[real] = scrubber.data(real, data) if scrubber else data
    for rel in recording.dirs | recording.paths:
        real = _materialize(fs, rel, links)
        if real is not None and _is_dir(fs, real):
            dirs.add(real)
            if real == "dev" or real.startswith("dev/"):
                files.update(_device_placeholders(fs, real))
    commands = []
    for i, result in enumerate(sorted(recording.commands.values(), key=lambda r: r.argv)):
        if not result.available or result.rc is None:
            continue
        name = f"{i:03d}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(result.argv))[:60]
        stdout = scrubber.command(result.argv, result.stdout) if scrubber else result.stdout
        files[f"cmd/{name}"] = printable_name(stdout).encode("utf-8")
        commands.append({"argv": [printable_name(a) for a in result.argv], "stdout": name, "rc": result.rc})
    files["cmd/index.json"] = (json.dumps(commands, indent=1) + "\n").encode()
    return dirs, files, links


def _is_dir(fs: ConfinedFs, rel: str) -> bool:
    try:
        return fs.stat(rel).kind == DIR
    except OSError:
        return False


def _write_tar(
    handle: BinaryIO, name: str, dirs: set[str], files: dict[str, bytes], links: dict[str, str]
) -> None:
    """The snapshot as a .tar.gz written from memory (never through a directory on disk), under
    one top directory; parents before children, a name taken once (directories, then files).
    Names and link targets that were not UTF-8 are written escaped (:func:`printable_name`), the
    same text the exporter shows as a label: the archive stays readable and says the same."""
    dirs = {printable_name(d) for d in dirs} | {""}
    files = {printable_name(path): data for path, data in files.items()}
    links = {printable_name(path): printable_name(target) for path, target in links.items()}
    for path in [*files, *links]:
        parent = posixpath.dirname(path)
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    entries: dict[str, tuple[str, bytes | str]] = {d: ("dir", b"") for d in dirs}
    for path, data in files.items():
        entries.setdefault(path, ("file", data))
    for path, target in links.items():
        entries.setdefault(path, ("link", target))
    now = int(time.time())
    with tarfile.open(name=name, mode="w:gz", fileobj=handle) as tar:
        for path in sorted(entries, key=lambda p: p.split("/")):
            kind, value = entries[path]
            info = tarfile.TarInfo(f"{SNAPSHOT_DIRNAME}/{path}".rstrip("/"))
            info.mtime = now
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind == "link":
                info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, str(value)
                tar.addfile(info)
            else:
                data = value if isinstance(value, bytes) else b""
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))


def write_snapshot(root: Root, recording: Recording, out: Path, scrub: bool | str = False) -> Path:
    """Write the recorded files, symlinks and command outputs as a .tar.gz snapshot; ``scrub``:
    False, True (the standard level) or a level of :mod:`.scrub`.

    ``out`` is replaced atomically: the archive is written to a new file of a unique name beside
    it (O_EXCL: a link planted at any name is never followed) and renamed over it; owner-only,
    since an unscrubbed snapshot names the node, its addresses and its kernel command line."""
    scrubber = None
    if scrub:
        hostname = (
            recording.files.get("proc/sys/kernel/hostname", b"").decode("utf-8", "replace").strip() or None
        )
        scrubber = Scrubber(hostname=hostname, level=STRICT if scrub == STRICT else STANDARD)
    dirs, files, links = _layout(root, recording, scrubber)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(out, mode=0o600) as handle:
        _write_tar(handle, out.name, dirs, files, links)
    return out


def take_snapshot(root: Root, out: Path, scrub: bool | str = False) -> tuple[Path, Recording]:
    recording = capture(root)
    return write_snapshot(root, recording, out, scrub=scrub), recording
