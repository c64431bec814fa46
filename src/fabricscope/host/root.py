"""The one door to the machine: every file read and every command goes through a Root.

A Root is either the live machine (``/``) or a snapshot: a directory laid out like ``/`` or a
.tar.gz of one, with captured command outputs under ``cmd/`` listed by ``cmd/index.json``.
Readers never raise for bad data: a failed read returns ``None`` and the reason is recorded in
``Root.problems`` so that callers can report it.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from fabricscope.host import command

# Largest file we read from sysfs/procfs/snapshots; anything bigger is not a kernel attribute.
MAX_READ_BYTES = 8 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
DEFAULT_COMMAND_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_ENV = "FABRICSCOPE_COMMAND_TIMEOUT"


class RootError(Exception):
    """The root itself cannot be used (missing path, not a snapshot, corrupt archive)."""


@dataclass(frozen=True)
class Problem:
    """A source that could not be read or understood; kept so reports can say why a value is unknown."""

    source: str
    reason: str


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


@dataclass
class Root:
    """Filesystem root plus command runner. Use :meth:`live` or :meth:`at`."""

    path: Path
    is_live: bool
    label: str
    problems: list[Problem] = field(default_factory=list)
    recording: Recording | None = None
    _real_dirs: dict[Path, str] = field(default_factory=dict, repr=False)
    _commands: dict[tuple[str, ...], tuple[str, int]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ahead: dict[tuple[str, ...], Future[CommandResult]] = field(default_factory=dict, repr=False)
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S  # live: FABRICSCOPE_COMMAND_TIMEOUT

    # ----- construction -------------------------------------------------------------------
    @classmethod
    def live(cls) -> Root:
        return cls(path=Path("/"), is_live=True, label="/", command_timeout_s=_command_timeout_from_env())

    @classmethod
    def at(cls, location: str | os.PathLike[str]) -> Root:
        """Open a snapshot directory or .tar.gz; ``/`` gives the live machine."""
        loc = Path(location)
        if str(loc) == "/":
            return cls.live()
        if not loc.exists():
            raise RootError(f"--root {loc}: no such file or directory")
        if loc.is_dir():
            if not any((loc / top).exists() for top in ("sys", "proc", "cmd", "etc")):
                raise RootError(f"--root {loc}: not a snapshot (no sys/, proc/, cmd/ or etc/ inside)")
            root = cls(path=loc.resolve(), is_live=False, label=str(loc))
        elif loc.is_file():
            root = cls(path=_extract_snapshot(loc), is_live=False, label=str(loc))
        else:
            raise RootError(f"--root {loc}: neither a directory nor a snapshot archive")
        root._load_command_index()
        return root

    # ----- problems -----------------------------------------------------------------------
    def note(self, source: str, reason: str) -> None:
        """Record why a source gave no usable value."""
        with self._lock:
            self.problems.append(Problem(source, reason))

    # ----- files --------------------------------------------------------------------------
    def _host_path(self, rel: str) -> Path:
        return self.path / rel.lstrip("/")

    def read(self, rel: str, *, missing_ok: bool = True) -> str | None:
        """Text of a file, stripped of trailing newlines, or None (absent, unreadable, binary)."""
        data = self.read_bytes(rel, missing_ok=missing_ok)
        if data is None:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self.note(rel, "not UTF-8 text")
            return None
        if "\x00" in text:
            self.note(rel, "contains NUL bytes")
            return None
        return text.rstrip("\n")

    def read_bytes(self, rel: str, *, missing_ok: bool = True) -> bytes | None:
        target = self._host_path(rel)
        if not self.is_live and not self._inside(target):
            self.note(rel, "path leaves the snapshot")
            return None
        try:
            with open(target, "rb") as handle:
                chunks = []
                total = 0
                # Small reads: procfs handlers refuse huge buffers (ENOMEM on /proc/sys files).
                while total <= MAX_READ_BYTES:
                    chunk = handle.read(READ_CHUNK_BYTES)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    total += len(chunk)
                data = b"".join(chunks)
        except FileNotFoundError:
            if not missing_ok:
                self.note(rel, "absent")
            return None
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.EOPNOTSUPP, errno.ENODATA):
                # sysfs answers EINVAL/EOPNOTSUPP for "no such value here" (speed of a virtual
                # device, GID types hidden in a container): unknown, not a fault.
                if not missing_ok:
                    self.note(rel, "absent")
                return None
            self.note(rel, f"unreadable: {exc.strerror or exc}")
            return None
        if len(data) > MAX_READ_BYTES:
            self.note(rel, f"larger than {MAX_READ_BYTES} bytes")
            return None
        if self.recording is not None:
            self.recording.files[rel.lstrip("/")] = data
        return data

    def exists(self, rel: str) -> bool:
        target = self._host_path(rel)
        return os.path.lexists(target) and (self.is_live or self._inside(target))

    def is_dir(self, rel: str) -> bool:
        target = self._host_path(rel)
        return target.is_dir() and (self.is_live or self._inside(target))

    def listdir(self, rel: str) -> list[str]:
        """Sorted entry names, [] when absent or unreadable."""
        target = self._host_path(rel)
        if not self.is_live and not self._inside(target):
            return []
        try:
            names = sorted(os.listdir(target))
            if self.recording is not None:
                self.recording.dirs.add(rel.lstrip("/"))
            return names
        except FileNotFoundError:
            return []
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                self.note(rel, f"cannot list: {exc.strerror or exc}")
            return []

    def resolve(self, rel: str) -> str | None:
        """Path of ``rel`` with symlinks resolved, relative to the root (``sys/devices/...``)."""
        target = self._host_path(rel)
        try:
            real = Path(os.path.realpath(target))
        except OSError:
            return None
        try:
            inside = real.relative_to(self.path.resolve() if not self.is_live else Path("/"))
        except ValueError:
            self.note(rel, "symlink leaves the snapshot")
            return None
        if not os.path.lexists(real):
            return None
        if self.recording is not None:
            self.recording.paths.add(rel.lstrip("/"))
        return str(PurePosixPath(inside))

    def _inside(self, target: Path) -> bool:
        """Whether ``target``, with every symlink resolved, stays inside the snapshot."""
        name = target.name
        if name in ("", ".", "..") or os.path.islink(target):
            real = os.path.realpath(target)
        else:
            # Resolve each directory once: a port has ~50 counter files in one directory, and a
            # full realpath costs an lstat per path component.
            parent = self._real_dirs.get(target.parent)
            if parent is None:
                parent = self._real_dirs[target.parent] = os.path.realpath(target.parent)
            real = os.path.join(parent, name)
        try:
            Path(real).relative_to(self.path)
            return True
        except ValueError:
            return False

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
                return CommandResult(key, available=False, reason=f"captured output cmd/{stdout_file} unreadable")
            return CommandResult(key, available=True, rc=rc, stdout=text)
        ahead = self._ahead.pop(key, None)
        result = ahead.result() if ahead is not None else _run_live(key, time.monotonic() + timeout_s)
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
            [exe, *key[1:]], timeout_s, env={**os.environ, "LC_ALL": "C"}, max_output_bytes=MAX_READ_BYTES, cancel=cancel,
            kill_leftovers=True,  # a probe leaves nothing running on purpose
        )
    except OSError as exc:
        return CommandResult(key, available=False, reason=f"cannot run: {exc.strerror or exc}")
    if outcome.timed_out:
        return CommandResult(key, available=True, rc=None, reason=f"timed out after {round(timeout_s, 1):g} s")
    if outcome.rc is None:
        return CommandResult(key, available=True, rc=None, reason=str(outcome.why_stopped))
    return CommandResult(key, available=True, rc=outcome.rc, stdout=outcome.stdout_text)


def _extract_snapshot(archive: Path) -> Path:
    """Unpack a snapshot archive into a private temporary directory (removed at exit)."""
    try:
        is_tar = tarfile.is_tarfile(archive)
    except OSError as exc:
        raise RootError(f"--root {archive}: cannot read: {exc.strerror or exc}") from None
    if not is_tar:
        raise RootError(f"--root {archive}: not a snapshot archive (expected a .tar.gz)")
    dest = Path(tempfile.mkdtemp(prefix="fabricscope-root-"))
    atexit.register(shutil.rmtree, dest, True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = [m for m in tar.getmembers() if _safe_member(m)]
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter=_tolerant_filter)
            else:  # Python < 3.10.12: members were vetted by _safe_member
                tar.extractall(dest, members=members)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RootError(f"--root {archive}: corrupt snapshot archive ({exc})") from None
    entries = os.listdir(dest)
    # Accept archives with a single top-level directory wrapping the snapshot.
    if len(entries) == 1 and (dest / entries[0]).is_dir() and entries[0] not in ("sys", "proc", "cmd", "etc"):
        return (dest / entries[0]).resolve()
    if not any(e in ("sys", "proc", "cmd", "etc") for e in entries):
        raise RootError(f"--root {archive}: not a snapshot (no sys/, proc/, cmd/ or etc/ inside)")
    return dest.resolve()


def _safe_member(member: tarfile.TarInfo) -> bool:
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts:
        return False
    if member.issym() or member.islnk():
        link = PurePosixPath(member.linkname)
        if link.is_absolute():
            return False
        depth = len(name.parent.parts)
        ups = 0
        for part in link.parts:
            ups = ups + 1 if part == ".." else ups - 1 if part != "." else ups
            if ups > depth:
                return False
    return member.isfile() or member.isdir() or member.issym()


def _tolerant_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's data filter, but a refused member is skipped instead of aborting the extraction."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None
