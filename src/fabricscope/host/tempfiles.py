"""Scratch directories and atomic file writes: the only way fabricscope makes temporary files.

A scratch directory is owner-only (0700: snapshots and perftest outputs may hold what other users
must not read), named ``fabricscope-<purpose>-XXXXXXXX`` under ``$TMPDIR`` so an operator can
tell whose it is, and removed when its block ends, on an exception, on SIGTERM/SIGHUP (the CLI
turns those into a normal exit) and, for anything left over, at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

PREFIX = "fabricscope-"
PRIVATE_MODE = 0o700


def make_private_dir(purpose: str, *, outlive_process: bool = False) -> Path:
    """A new owner-only directory ``$TMPDIR/fabricscope-<purpose>-*``; removed at exit at the latest.

    ``outlive_process``: the directory serves daemons that run on after this process (a lab's
    Slurm); whoever stops them removes it with :func:`remove_private_dir`.
    """
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{purpose}-"))
    os.chmod(path, PRIVATE_MODE)  # mkdtemp's mode already; said again because it is the point
    if not outlive_process:
        with _LOCK:
            _MADE.add(path)
    return path


def remove_private_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with _LOCK:
        _MADE.discard(path)


@contextlib.contextmanager
def private_dir(purpose: str) -> Iterator[Path]:
    """``with private_dir("snap") as tmp:`` an owner-only scratch directory for the block."""
    path = make_private_dir(purpose)
    try:
        yield path
    finally:
        remove_private_dir(path)


def atomic_write(target: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``target`` with ``data`` so readers never see half a file (see :func:`atomic_writer`)."""
    with atomic_writer(target, mode) as handle:
        handle.write(data)


@contextlib.contextmanager
def atomic_writer(target: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """``with atomic_writer(path) as handle:`` write the new contents of ``target``; it replaces
    the target when the block ends, so readers never see half a file.

    The temporary file is created beside the target with O_EXCL|O_NOFOLLOW (mkstemp: a unique,
    unpredictable name; a symlink planted at any name is never followed), and renamed over the
    target (a rename replaces a symlink at the target instead of writing through it). It is
    removed if anything, a signal included, interrupts. Raises OSError.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _remove_all() -> None:
    with _LOCK:
        left = list(_MADE)
    for path in left:
        remove_private_dir(path)


_MADE: set[Path] = set()
_LOCK = threading.Lock()
atexit.register(_remove_all)
