"""The one door to the machine: every file read and every command goes through a Root.

A Root is either the live machine (``/``) or a snapshot: a directory laid out like ``/`` or a
.tar.gz of one, with captured command outputs under ``cmd/`` listed by ``cmd/index.json``.
Readers never raise for bad data: a failed read returns ``None`` and the reason is recorded in
``Root.problems`` so that callers can report it.

A snapshot is untrusted input: an archive is served from an index of its members and never
unpacked (:mod:`.archive`), and in a directory or an archive every path is resolved by our own
walk, confined to the snapshot (:mod:`.confined`). Only regular files are read, with a size cap.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fabricscope.host import command
from fabricscope.host.archive import SNAPSHOT_TOPS, ArchiveError, open_archive
from fabricscope.host.confined import (
    DIR,
    FILE,
    LINK,
    ConfinedFs,
    DirStore,
    Entry,
    kind_of_mode,
    not_regular,
    read_fd,
)

# Largest file we read from sysfs/procfs/snapshots; anything bigger is not a kernel attribute.
MAX_READ_BYTES = 8 * 1024 * 1024
DEFAULT_COMMAND_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_ENV = "FABRICSCOPE_COMMAND_TIMEOUT"


# Errors that mean "no value here": absent, and what sysfs answers for a value a device lacks.
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.EOPNOTSUPP, errno.ENODATA)


class RootError(Exception):
    """The root itself cannot be used (missing path, not a snapshot, corrupt archive)."""


@dataclass(frozen=True)
class Problem:
    """A source that could not be read or understood; kept so reports can say why a value is unknown."""

    source: str
    reason: str
    dropped: int = 0  # objects left unread by a cap on how many of a kind are read (see sysfs.capped)
    kind: str = ""  # which kind they were ("rdma ports", "netdevs", ...)


@dataclass(frozen=True)
class CommandResult:
    """Output of one command; ``available`` is False when the tool is absent (or not captured)."""

    argv: tuple[str, ...]
    available: bool
    rc: int | None = None
    stdout: str = ""
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.available and self.rc == 0


@dataclass
class Recording:
    """What the host model touched through a Root: enough to write a snapshot of exactly that."""

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)  # resolved or listed paths whose symlinks matter
    commands: dict[tuple[str, ...], CommandResult] = field(default_factory=dict)


class LiveFs:
    """The machine itself: the kernel resolves paths (its links are the truth, not an attack).
    The same operations as :class:`ConfinedFs`, raising the same OSErrors."""

    def lstat(self, rel: str) -> Entry:
        st = os.lstat("/" + rel.lstrip("/"))
        kind, what = kind_of_mode(st.st_mode)
        return Entry(kind, os.readlink("/" + rel.lstrip("/")) if kind == LINK else "", st.st_size, what)

    def stat(self, rel: str) -> Entry:
        kind, what = kind_of_mode(os.stat("/" + rel.lstrip("/")).st_mode)
        return Entry(kind, what=what)

    def realpath(self, rel: str) -> str:
        real = os.path.realpath("/" + rel.lstrip("/"))
        if not os.path.lexists(real):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), rel)
        return real.lstrip("/")

    def readlink(self, rel: str) -> str:
        return os.readlink("/" + rel.lstrip("/"))

    def read(self, rel: str, limit: int, follow: bool = True) -> bytes:
        fd = os.open(
            "/" + rel.lstrip("/"),
            os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW),
        )
        try:
            kind, what = kind_of_mode(os.fstat(fd).st_mode)
            if kind != FILE:
                raise not_regular(Entry(kind, what=what), rel)
            return read_fd(fd, limit)
        finally:
            os.close(fd)

    def listdir(self, rel: str) -> list[str]:
        return sorted(os.listdir("/" + rel.lstrip("/")))


Fs = LiveFs | ConfinedFs


@dataclass
class Root:
    """Filesystem root plus command runner. Use :meth:`live` or :meth:`at`.

    ``location`` says where it came from (``/``, a snapshot directory, an archive); files are
    read only through ``fs``, never through ``location``: in a snapshot ``fs`` resolves every
    path itself, confined to the snapshot (:mod:`.confined`)."""

    location: Path
    is_live: bool
    label: str
    fs: Fs
    problems: list[Problem] = field(default_factory=list)
    recording: Recording | None = None
    _commands: dict[tuple[str, ...], tuple[str, int]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ahead: dict[tuple[str, ...], Future[CommandResult]] = field(default_factory=dict, repr=False)
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S  # live: FABRICSCOPE_COMMAND_TIMEOUT

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def live(cls) -> Root:
        return cls(
            location=Path("/"),
            is_live=True,
            label="/",
            fs=LiveFs(),
            command_timeout_s=_command_timeout_from_env(),
        )

    @classmethod
    def at(cls, location: str | os.PathLike[str]) -> Root:
        """Open a snapshot directory or archive (.tar.gz, also .tar, bzip2, xz); ``/`` is the live machine."""
        loc = Path(location)
        if str(loc) == "/":
            return cls.live()
        if not loc.exists():
            raise RootError(f"--root {loc}: no such file or directory")
        problems: list[tuple[str, str]] = []
        try:
            if loc.is_dir():
                fs = ConfinedFs(DirStore(loc))
            elif loc.is_file():
                store, problems = open_archive(loc)
                fs = ConfinedFs(store)
            else:
                raise RootError(f"--root {loc}: neither a directory nor a snapshot archive")
        except ArchiveError as exc:
            raise RootError(f"--root {loc}: {exc}") from None
        except OSError as exc:
            raise RootError(f"--root {loc}: cannot read: {exc.strerror or exc}") from None
        root = cls(location=loc, is_live=False, label=str(loc), fs=fs)
        if not any(root.exists(top) for top in SNAPSHOT_TOPS):
            raise RootError(f"--root {loc}: not a snapshot (no sys/, proc/, cmd/ or etc/ inside)")
        for source, reason in problems:
            root.note(source, reason)
        root._load_command_index()
        return root

    # ----- problems -----------------------------------------------------------------------
    def note(self, source: str, reason: str, *, dropped: int = 0, kind: str = "") -> None:
        """Record why a source gave no usable value (``dropped`` objects of ``kind`` left unread
        by a cap, when that is why)."""
        with self._lock:
            self.problems.append(Problem(source, reason, dropped, kind))

    # ----- files --------------------------------------------------------------------------
    def read(self, rel: str, *, missing_ok: bool = True) -> str | None:
        """Text of a file, stripped of trailing newlines, or None (absent, unreadable, binary)."""
        data = self.read_bytes(rel, missing_ok=missing_ok)
        return None if data is None else self.text_of(rel, data)

    def text_of(self, rel: str, data: bytes) -> str | None:
        """``data`` read from ``rel`` as text: None (and a problem) when not UTF-8 or holding NULs."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self.note(rel, "not UTF-8 text")
            return None
        if "\x00" in text:
            self.note(rel, "contains NUL bytes")
            return None
        return text.rstrip("\n")

    def read_bytes(
        self,
        rel: str,
        *,
        missing_ok: bool = True,
        follow: bool = True,
        limit: int = MAX_READ_BYTES,
        source: str | None = None,
    ) -> bytes | None:
        """Contents of a regular file, at most ``limit`` bytes; None (and a problem unless absent
        and ``missing_ok``) otherwise. ``follow=False``: a link at the end is refused, as with
        O_NOFOLLOW. ``source`` names the file in problems and the recording (default ``rel``)."""
        source = source or rel
        try:
            data = self.fs.read(rel, limit, follow)
        except OSError as exc:
            if exc.errno in _ABSENT:
                # sysfs answers EINVAL/EOPNOTSUPP for "no such value here" (speed of a virtual
                # device, GID types hidden in a container): unknown, not a fault.
                if not missing_ok:
                    self.note(source, "absent")
            elif exc.errno == errno.ELOOP and not follow:
                self.note(source, "a symlink where a file was expected")
            else:
                self.note(source, f"unreadable: {exc.strerror or exc}")
            return None
        if len(data) > limit:
            self.note(
                source,
                f"larger than {limit} bytes" + ("" if limit == MAX_READ_BYTES else ": not a sysfs attribute"),
            )
            return None
        if self.recording is not None:
            self.recording.files[source.lstrip("/")] = data
        return data

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists (a dangling link does)."""
        try:
            self.fs.lstat(rel)
            return True
        except OSError:
            return False

    def is_dir(self, rel: str) -> bool:
        try:
            return self.fs.stat(rel).kind == DIR
        except OSError:
            return False

    def lstat(self, rel: str) -> Entry | None:
        """Kind (and link target) of ``rel`` itself, None when absent."""
        try:
            return self.fs.lstat(rel)
        except OSError:
            return None

    def listdir(self, rel: str, *, source: str | None = None) -> list[str]:
        """Sorted entry names, [] when absent or unreadable."""
        source = source or rel
        try:
            names = self.fs.listdir(rel)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                self.note(source, f"cannot list: {exc.strerror or exc}")
            return []
        if self.recording is not None:
            self.recording.dirs.add(source.lstrip("/"))
        return names

    def resolve(self, rel: str) -> str | None:
        """Path of ``rel`` with symlinks resolved, relative to the root (``sys/devices/...``);
        None when it does not exist. In a snapshot links never lead outside it."""
        try:
            real = self.fs.realpath(rel)
        except OSError:
            return None
        if self.recording is not None:
            self.recording.paths.add(rel.lstrip("/"))
        return real

    # ----- commands -----------------------------------------------------------------------
    def run(self, argv: list[str] | tuple[str, ...], timeout_s: float | None = None) -> CommandResult:
        """Run a command on the live machine, or look up its captured output in a snapshot."""
        result = self._run(tuple(argv), self.command_timeout_s if timeout_s is None else timeout_s)
        if self.recording is not None:
            self.recording.commands[result.argv] = result
        return result

    def _run(self, key: tuple[str, ...], timeout_s: float) -> CommandResult:
        if not self.is_live:
            captured = (self._commands or {}).get(key)
            if captured is None:
                return CommandResult(key, available=False, reason="not captured in snapshot")
            stdout_file, rc = captured
            text = self.read(f"cmd/{stdout_file}", missing_ok=False)
            if text is None:
                return CommandResult(
                    key, available=False, reason=f"captured output cmd/{stdout_file} unreadable"
                )
            return CommandResult(key, available=True, rc=rc, stdout=text)
        ahead = self._ahead.pop(key, None)
        result = (
            command.result_of(ahead) if ahead is not None else _run_live(key, time.monotonic() + timeout_s)
        )
        if result.available and result.rc is None:
            self.note(" ".join(key), str(result.reason))
        return result

    @contextmanager
    def commands_ahead(
        self, argvs: Iterable[list[str] | tuple[str, ...]], timeout_s: float | None = None
    ) -> Iterator[None]:
        """Start these commands now, in parallel under one deadline; :meth:`run` of the same argv
        inside the block takes its result. Those not taken are stopped when the block ends.

        Readers keep calling :meth:`run` one command at a time; this only makes N hung tools
        cost one timeout instead of N. A snapshot has nothing to run: a no-op there.
        """
        if not self.is_live:
            yield
            return
        deadline = time.monotonic() + (self.command_timeout_s if timeout_s is None else timeout_s)
        cancel = threading.Event()
        started = command.in_parallel(lambda key: _run_live(key, deadline, cancel), (tuple(a) for a in argvs))
        self._ahead.update(started)
        try:
            yield
        finally:
            cancel.set()
            for key, future in started.items():
                if self._ahead.get(key) is future:
                    del self._ahead[key]

    def _load_command_index(self) -> None:
        self._commands = {}
        raw = self.read("cmd/index.json")
        if raw is None:
            return
        try:
            entries = json.loads(raw)
        except ValueError as exc:
            self.note("cmd/index.json", f"not valid JSON: {exc}")
            return
        if not isinstance(entries, list):
            self.note("cmd/index.json", "not a JSON list")
            return
        for entry in entries:
            if not isinstance(entry, dict):
                self.note("cmd/index.json", f"malformed entry skipped: {str(entry)[:80]}")
                continue
            argv, stdout, rc = entry.get("argv"), entry.get("stdout"), entry.get("rc", 0)
            if (
                isinstance(argv, list)
                and argv
                and all(isinstance(a, str) for a in argv)
                and isinstance(stdout, str)
                and "/" not in stdout
                and isinstance(rc, int)
            ):
                self._commands[tuple(argv)] = (stdout, rc)
            else:
                self.note("cmd/index.json", f"malformed entry skipped: {str(entry)[:80]}")


def _command_timeout_from_env() -> float:
    """FABRICSCOPE_COMMAND_TIMEOUT: seconds one optional command (ethtool, nvidia-smi...) may take."""
    raw = os.environ.get(COMMAND_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_COMMAND_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.1 <= value <= 3600:
        raise RootError(f"{COMMAND_TIMEOUT_ENV} takes seconds from 0.1 to 3600, not {raw[:40]!r}")
    return value


def _run_live(key: tuple[str, ...], deadline: float, cancel: threading.Event | None = None) -> CommandResult:
    """Run one command on this machine (C locale, own session, capped output) until ``deadline``."""
    exe = shutil.which(key[0])
    if exe is None:
        return CommandResult(key, available=False, reason=f"{key[0]} not installed")
    timeout_s = max(0.0, deadline - time.monotonic())
    try:
        outcome = command.run(
            [exe, *key[1:]],
            timeout_s,
            env={**os.environ, "LC_ALL": "C"},
            max_output_bytes=MAX_READ_BYTES,
            cancel=cancel,
            kill_leftovers=True,  # a probe leaves nothing running on purpose
        )
    except OSError as exc:
        return CommandResult(key, available=False, reason=f"cannot run: {exc.strerror or exc}")
    if outcome.timed_out:
        return CommandResult(
            key, available=True, rc=None, reason=f"timed out after {round(timeout_s, 1):g} s"
        )
    if outcome.rc is None:
        return CommandResult(key, available=True, rc=None, reason=str(outcome.why_stopped))
    return CommandResult(key, available=True, rc=outcome.rc, stdout=outcome.stdout_text)
