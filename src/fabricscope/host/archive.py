"""A snapshot archive served from an index of its members: never unpacked, never on disk.

``Root.at("node.tar.gz")`` reads the archive once, as a stream, into a table of names: directories,
regular files (their bytes kept in memory: a snapshot is a few MB of small sysfs files) and
symlinks (their targets, resolved later by :mod:`.confined`, confined to the archive). Nothing is
written anywhere, so no member can be made to land outside a temporary directory, whatever its
name or its links.

What an archive may hold, and what happens to the rest (each recorded as a Problem on the Root):

- absolute names and names with ``..``: ignored;
- a member whose name goes through a symlink or a file of the archive (``x -> /etc`` then
  ``x/passwd``): ignored, the index is a tree and a link has no children;
- a second member of the same name: ignored, the first is kept (directories merge);
- a hard link: served as the regular file it names, when that file came earlier in the archive;
  otherwise ignored;
- devices, FIFOs: kept as names (the host model lists /dev/infiniband), never readable;
- a symlink target longer than PATH_MAX: ignored.

Limits (:class:`Limits`) stop decompression bombs and huge archives while the stream is read; going
over one makes the archive unusable (:class:`ArchiveError`, one line and exit 2 in the CLI).
"""

from __future__ import annotations

import bz2
import errno
import gzip
import lzma
import os
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fabricscope.host.confined import DIR, FILE, LINK, MAX_LINK_TARGET, OTHER, ROOT_ENTRY, Entry, Parts

SNAPSHOT_TOPS = ("sys", "proc", "cmd", "etc")
MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Caps on one archive. The defaults leave 50x room over the snapshots measured (the 8-HCA
    RoCE fixture: 1,956 members, 4.0 MB of tar stream, largest member 5.5 KB; this 2-core VM:
    240 members, 0.5 MB), and a member may be as large as the largest file a Root reads."""

    unpacked_bytes: int = 256 * MIB  # the decompressed tar stream, headers included
    members: int = 100_000
    member_bytes: int = 8 * MIB  # = root.MAX_READ_BYTES: nothing larger could be read anyway


class ArchiveError(Exception):
    """The archive cannot be used: not an archive, corrupt, or over a limit."""


@dataclass
class ArchiveStore:
    """The index: entries by name parts, directory listings, file contents (a :class:`Store`)."""

    entries: dict[Parts, Entry] = field(default_factory=dict)
    children: dict[Parts, set[str]] = field(default_factory=lambda: {(): set()})
    data: dict[Parts, bytes] = field(default_factory=dict)

    def lookup(self, parts: Parts) -> Entry | None:
        return self.entries.get(parts) if parts else ROOT_ENTRY

    def read(self, parts: Parts, limit: int) -> bytes:
        return self.data.get(parts, b"")[: limit + 1]

    def names(self, parts: Parts) -> list[str]:
        if parts and self.entries.get(parts, ROOT_ENTRY).kind != DIR:
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), "/".join(parts))
        return list(self.children.get(parts, ()))


class _CappedReader:
    """The decompressed stream, refused past ``cap`` bytes: tarfile itself reads long-name and pax
    headers whole, before any member size could be checked."""

    def __init__(self, raw: BinaryIO, cap: int) -> None:
        self.raw, self.cap, self.count = raw, cap, 0

    def read(self, size: int = -1) -> bytes:
        room = self.cap - self.count + 1
        data = self.raw.read(room if size is None or size < 0 else min(size, room))
        self.count += len(data)
        if self.count > self.cap:
            raise ArchiveError(f"unpacks to more than {_size(self.cap)} (limit on unpacked bytes)")
        return data


def _decompressed(handle: BinaryIO) -> BinaryIO:
    """The tar stream inside gzip, bzip2 or xz (by magic number), or the file itself."""
    magic = handle.read(6)
    handle.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=handle, mode="rb")
    if magic[:3] == b"BZh":
        return bz2.BZ2File(handle)
    if magic == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(handle)
    return handle


def _size(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n} bytes"


def member_parts(name: str) -> Parts | None:
    """Name parts of a member, ``./`` and empty parts dropped; None when absolute or with ``..``."""
    if name.startswith("/") or "\x00" in name:
        return None
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    return None if ".." in parts else parts


class _Indexer:
    """Builds an :class:`ArchiveStore` member by member, recording what it leaves out and why."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.store = ArchiveStore()
        self.problems: list[tuple[str, str]] = []
        self.specials: list[str] = []
        self.count = 0

    def skip(self, member: tarfile.TarInfo, reason: str) -> None:
        self.problems.append((f"archive member {member.name[:200]}", reason))

    def add_member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.count += 1
        if self.count > self.limits.members:
            raise ArchiveError(f"more than {self.limits.members:,} members (limit on members)")
        if member.size > self.limits.member_bytes and member.isreg():
            raise ArchiveError(
                f"member {member.name[:120]} holds {_size(member.size)}, more than "
                f"{_size(self.limits.member_bytes)} (limit on one member)"
            )
        parts = member_parts(member.name)
        if parts is None:
            return self.skip(member, "name leaves the archive (absolute or with ..): ignored")
        if not parts:
            return None  # the archive's root itself (./)
        if member.isdir():
            return self.put(member, parts, Entry(DIR))
        if member.isreg():
            handle = tar.extractfile(member)
            data = handle.read() if handle is not None else b""
            if self.put(member, parts, Entry(FILE, size=len(data))):
                self.store.data[parts] = data
            return None
        if member.issym():
            if (
                not member.linkname
                or len(member.linkname.encode("utf-8", "surrogateescape")) > MAX_LINK_TARGET
            ):
                return self.skip(member, "symlink with an empty or over-long target: ignored")
            return self.put(member, parts, Entry(LINK, target=member.linkname))
        if member.islnk():
            return self.hard_link(member, parts)
        if member.ischr() or member.isblk() or member.isfifo():
            what = "fifo" if member.isfifo() else "character device" if member.ischr() else "block device"
            if self.put(member, parts, Entry(OTHER, what=what)):
                self.specials.append(member.name)
            return None
        return self.skip(member, "not a file, directory or link: ignored")

    def hard_link(self, member: tarfile.TarInfo, parts: Parts) -> None:
        """A hard link names an earlier member: serve that member's bytes, never a path."""
        target = member_parts(member.linkname)
        entry = self.store.entries.get(target) if target else None
        if entry is None or entry.kind != FILE:
            return self.skip(
                member,
                f"hard link to {member.linkname[:120]!r}, not a regular file earlier in the archive: ignored",
            )
        if self.put(member, parts, entry):
            self.store.data[parts] = self.store.data[target]
        return None

    def put(self, member: tarfile.TarInfo, parts: Parts, entry: Entry) -> bool:
        """Add ``entry`` at ``parts`` (parents made as directories); False when refused."""
        store = self.store
        for i in range(1, len(parts)):
            above = store.entries.get(parts[:i])
            if above is None:
                store.entries[parts[:i]] = Entry(DIR)
                store.children[parts[:i]] = set()
                store.children[parts[: i - 1]].add(parts[i - 1])
            elif above.kind != DIR:
                self.skip(member, f"name goes through the {above.kind} {'/'.join(parts[:i])}: ignored")
                return False
        old = store.entries.get(parts)
        if old is not None:
            if not (old.kind == DIR and entry.kind == DIR):
                self.skip(member, "a second member of this name: ignored, the first is kept")
            return False
        store.entries[parts] = entry
        store.children[parts[:-1]].add(parts[-1])
        if entry.kind == DIR:
            store.children[parts] = set()
        return True

    def unwrap(self) -> None:
        """Archives holding one directory that wraps the snapshot (``fabricscope-snapshot/``) are
        served from inside it."""
        top = self.store.children[()]
        if len(top) != 1:
            return
        (name,) = top
        if name in SNAPSHOT_TOPS or self.store.entries[(name,)].kind != DIR:
            return
        old = self.store
        self.store = ArchiveStore(
            entries={k[1:]: v for k, v in old.entries.items() if k[:1] == (name,) and len(k) > 1},
            children={k[1:]: v for k, v in old.children.items() if k[:1] == (name,)},
            data={k[1:]: v for k, v in old.data.items() if k[:1] == (name,)},
        )


def open_archive(path: Path, limits: Limits | None = None) -> tuple[ArchiveStore, list[tuple[str, str]]]:
    """Index a snapshot archive; returns the store and the (source, reason) of what was left out."""
    indexer = _Indexer(limits or Limits())
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise ArchiveError(f"cannot read: {exc.strerror or exc}") from None
    try:
        with handle:
            raw = _decompressed(handle)
            stream = _CappedReader(raw, indexer.limits.unpacked_bytes)
            try:
                tar = tarfile.open(fileobj=stream, mode="r|")  # type: ignore[call-overload]
            except tarfile.ReadError:
                raise ArchiveError("not a snapshot archive (expected a .tar.gz)") from None
            with tar:
                while (member := tar.next()) is not None:
                    indexer.add_member(tar, member)
                    tar.members.clear()  # stream mode keeps every TarInfo otherwise
    except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, ValueError) as exc:
        raise ArchiveError(f"corrupt snapshot archive ({exc})") from None
    indexer.unwrap()
    if not any((top,) in indexer.store.entries for top in SNAPSHOT_TOPS):
        raise ArchiveError("not a snapshot (no sys/, proc/, cmd/ or etc/ inside)")
    problems = indexer.problems
    if indexer.specials:
        problems.append(
            (
                f"archive member {indexer.specials[0]}",
                f"{len(indexer.specials)} device or FIFO member(s): kept as names, never read",
            )
        )
    return indexer.store, problems
