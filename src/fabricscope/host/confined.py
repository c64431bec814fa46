"""Paths of a snapshot resolved by our own walk, confined to it: the kernel never follows its links.

A snapshot (a directory the user names, or a .tar.gz served from its index by :mod:`.archive`) is
untrusted: anyone may have made its symlinks. Letting the kernel follow them (``open``,
``realpath``) and checking the result afterwards is the design that failed (a chain of long names
pushes ``realpath`` past PATH_MAX, then ``x -> .`` makes a link look inside while the kernel
resolves it outside: the class of CVE-2025-4517). Here a path is walked one name at a time
against a :class:`Store` that answers lstat-like questions about one name in a directory already
resolved, and the walk itself follows links, as a chroot into the snapshot would see them:

- ``..`` never climbs above the snapshot's root (``/..`` is ``/`` in a chroot);
- an absolute link target starts again at the snapshot's root: ``/sys/devices/x`` in a snapshot
  is the snapshot's ``sys/devices/x``, never the analysing machine's;
- at most :data:`MAX_HOPS` links per lookup (the kernel's MAXSYMLINKS, 40), then ELOOP;
- a missing name is ENOENT, a non-directory in the middle of a path ENOTDIR.

Only a store's regular files are read, and at most ``limit + 1`` bytes of them. :class:`DirStore`
serves a directory through file descriptors opened one name at a time with ``O_NOFOLLOW`` (a link
swapped in meanwhile fails to open instead of being followed) and opens files with ``O_NONBLOCK``
after checking they are regular: a FIFO or a device in a snapshot is never opened for reading.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

MAX_HOPS = 40  # Linux MAXSYMLINKS (include/linux/namei.h): links followed in one lookup
MAX_LINK_TARGET = 4095  # PATH_MAX - 1: the longest target symlink(2) accepts

Parts = tuple[str, ...]

DIR, FILE, LINK, OTHER = "dir", "file", "link", "other"


@dataclass(frozen=True)
class Entry:
    """What lstat says about one name: its kind, a link's target, a file's size (``what`` names
    an OTHER: fifo, character device, block device, socket)."""

    kind: str
    target: str = ""
    size: int = 0
    what: str = ""


ROOT_ENTRY = Entry(DIR)


class Store(Protocol):
    """A tree of names; ``parts`` never holds a link before its last name (the walk resolved it)."""

    def lookup(self, parts: Parts) -> Entry | None:
        """The entry at ``parts`` without following it; None when absent."""

    def read(self, parts: Parts, limit: int) -> bytes:
        """At most ``limit + 1`` bytes of the regular file at ``parts``; raises OSError."""

    def names(self, parts: Parts) -> list[str]:
        """Entry names of the directory at ``parts``; raises OSError."""


def _error(code: int, rel: str) -> OSError:
    return OSError(code, os.strerror(code), rel)


def kind_of_mode(mode: int) -> tuple[str, str]:
    """(kind, what) of an st_mode."""
    if stat.S_ISDIR(mode):
        return DIR, ""
    if stat.S_ISREG(mode):
        return FILE, ""
    if stat.S_ISLNK(mode):
        return LINK, ""
    what = (
        "fifo"
        if stat.S_ISFIFO(mode)
        else "character device"
        if stat.S_ISCHR(mode)
        else "block device"
        if stat.S_ISBLK(mode)
        else "socket"
        if stat.S_ISSOCK(mode)
        else "special file"
    )
    return OTHER, what


def not_regular(entry: Entry, rel: str) -> OSError:
    """The error for reading what is not a regular file (never opened: a FIFO would block)."""
    if entry.kind == DIR:
        return _error(errno.EISDIR, rel)
    return OSError(f"not a regular file ({entry.what or entry.kind})")


class ConfinedFs:
    """File operations on a :class:`Store`, every path resolved by the confined walk. Raises
    OSError with the errno the kernel would give (ENOENT, ENOTDIR, ELOOP, EISDIR, EINVAL)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._dirs: dict[str, Parts] = {"": ()}  # resolved directories by the path asked for

    # ----- the walk ---------------------------------------------------------------------------
    def _parent(self, rel: str) -> tuple[Parts, str]:
        """Resolved directory holding ``rel``'s last name (cached: a port directory holds fifty
        counters), and that name."""
        parent, _, name = rel.strip("/").rpartition("/")
        base = self._dirs.get(parent)
        if base is None:
            base, entry = self._resolve((), parent.split("/"), True, parent)
            if entry.kind != DIR:
                raise _error(errno.ENOTDIR, parent)
            self._dirs[parent] = base
        return base, name

    def _resolve(
        self, start: Parts, names: list[str], follow: bool, rel: str, met: list[tuple[str, str]] | None = None
    ) -> tuple[Parts, Entry]:
        """Walk ``names`` from the resolved directory ``start``; follow a last link if ``follow``.
        Each link followed is added to ``met`` as (its path, its target)."""
        cur = list(start)
        todo = names[::-1]
        entry: Entry | None = ROOT_ENTRY if not cur else None
        hops = 0
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if cur:
                    cur.pop()
                entry = None
                continue
            if "\x00" in name:
                raise _error(errno.ENOENT, rel)
            found = self.store.lookup((*cur, name))
            if found is None:
                raise _error(errno.ENOENT, rel)
            if found.kind == LINK and (follow or any(n not in ("", ".") for n in todo)):
                if met is not None:
                    met.append(("/".join((*cur, name)), found.target))
                hops += 1
                if hops > MAX_HOPS or not found.target:
                    raise _error(errno.ELOOP if found.target else errno.ENOENT, rel)
                if found.target.startswith("/"):
                    cur = []  # absolute: from the snapshot's root, as inside a chroot
                entry = None
                todo.extend(found.target.split("/")[::-1])
                continue
            if todo and found.kind != DIR and any(n not in ("", ".") for n in todo):
                raise _error(errno.ENOTDIR, rel)
            cur.append(name)
            entry = found
        parts = tuple(cur)
        if entry is None:
            entry = ROOT_ENTRY if not parts else self.store.lookup(parts)
            if entry is None:  # a directory vanished under the walk (a live DirStore)
                raise _error(errno.ENOENT, rel)
        return parts, entry

    def walk(self, rel: str, follow: bool = True) -> tuple[Parts, Entry]:
        """Resolved parts and entry of ``rel`` (relative to the root; a leading ``/`` is ignored)."""
        base, name = self._parent(rel)
        return self._resolve(base, [name], follow, rel)

    # ----- operations -------------------------------------------------------------------------
    def lstat(self, rel: str) -> Entry:
        return self.walk(rel, follow=False)[1]

    def stat(self, rel: str) -> Entry:
        return self.walk(rel)[1]

    def realpath(self, rel: str, met: list[tuple[str, str]] | None = None) -> str:
        """``rel`` with every link resolved, relative to the root; raises when it does not exist.
        With ``met``, the path is walked from the root and every link on the way is listed."""
        if met is None:
            return "/".join(self.walk(rel)[0])
        return "/".join(self._resolve((), rel.split("/"), True, rel, met)[0])

    def readlink(self, rel: str) -> str:
        entry = self.lstat(rel)
        if entry.kind != LINK:
            raise _error(errno.EINVAL, rel)
        return entry.target

    def read(self, rel: str, limit: int, follow: bool = True) -> bytes:
        """At most ``limit + 1`` bytes of a regular file (more than ``limit``: the caller refuses).
        Not following, a link at the end is ELOOP, as with O_NOFOLLOW."""
        parts, entry = self.walk(rel, follow)
        if entry.kind == LINK:
            raise _error(errno.ELOOP, rel)
        if entry.kind != FILE:
            raise not_regular(entry, rel)
        return self.store.read(parts, limit)

    def listdir(self, rel: str) -> list[str]:
        parts, entry = self.walk(rel)
        if entry.kind != DIR:
            raise _error(errno.ENOTDIR, rel)
        return sorted(self.store.names(parts))


# Flags for every open below a DirStore: never follow a last link, never block on a FIFO, never
# take a terminal as controlling tty.
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
READ_CHUNK_BYTES = 64 * 1024
_OPEN_DIRS = 256  # directory descriptors kept open, least recently used closed first (an exporter scrape of
# the 8-HCA fixture touches some 150 directories; the default limit on descriptors is 1024)


def read_fd(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of an open file, in chunks procfs accepts (it refuses huge
    buffers with ENOMEM on some /proc/sys files)."""
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, min(READ_CHUNK_BYTES, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


class DirStore:
    """A snapshot directory on disk, reached only through descriptors opened one name at a time
    relative to the directory above, with O_NOFOLLOW: no path string ever goes to the kernel whole."""

    def __init__(self, path: Path) -> None:
        self._root_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._fds: OrderedDict[Parts, int] = OrderedDict()
        self._lock = threading.Lock()  # exporter threads share a Root; fds are closed on eviction
        self._finalizer = weakref.finalize(self, _close_all, self._root_fd, self._fds)

    def _dir_fd(self, parts: Parts) -> int:
        """Descriptor of the resolved directory ``parts``; call with the lock held."""
        if not parts:
            return self._root_fd
        fd = self._fds.get(parts)
        if fd is not None:
            self._fds.move_to_end(parts)
            return fd
        fd = os.open(parts[-1], _DIR_OPEN, dir_fd=self._dir_fd(parts[:-1]))
        self._fds[parts] = fd
        while len(self._fds) > _OPEN_DIRS:
            os.close(self._fds.popitem(last=False)[1])
        return fd

    def lookup(self, parts: Parts) -> Entry | None:
        with self._lock:
            try:
                fd = self._dir_fd(parts[:-1])
                st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
                kind, what = kind_of_mode(st.st_mode)
                target = os.readlink(parts[-1], dir_fd=fd) if kind == LINK else ""
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    return None  # ELOOP: a directory swapped for a link since the walk
                raise
        return Entry(kind, target, st.st_size, what)

    def read(self, parts: Parts, limit: int) -> bytes:
        with self._lock:
            fd = os.open(parts[-1], _FILE_OPEN, dir_fd=self._dir_fd(parts[:-1]))
        try:
            kind, what = kind_of_mode(os.fstat(fd).st_mode)
            if kind != FILE:  # swapped since the walk looked: refuse, unread
                raise not_regular(Entry(kind, what=what), "/".join(parts))
            return read_fd(fd, limit)
        finally:
            os.close(fd)

    def names(self, parts: Parts) -> list[str]:
        with self._lock:
            return os.listdir(self._dir_fd(parts))  # listdir reads a duplicate of the descriptor


def _close_all(root_fd: int, fds: OrderedDict[Parts, int]) -> None:
    for fd in [root_fd, *fds.values()]:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()
