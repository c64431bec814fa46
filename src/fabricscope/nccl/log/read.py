"""Stream NCCL log files (plain, gzip or stdin) into a :class:`~fabricscope.nccl.log.aggregate.LogAggregator`.

Many files are read each on its own, over several cores if asked (:func:`read_files`), and merged
in the order given (:mod:`fabricscope.nccl.log.merge`)."""

from __future__ import annotations

import gzip
import os
import stat
import sys
import zlib
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from fabricscope.host.command import result_of
from fabricscope.nccl.log.aggregate import FileStats, LogAggregator
from fabricscope.nccl.log.merge import merge
from fabricscope.nccl.log.parse import MAX_LINE_CHARS

PROGRESS_BYTES = 1 << 20  # how often feed_file reports progress
CHUNK_BYTES = 1 << 16  # 64 KiB: a chunk and its pieces stay in the L2 cache (1 MiB was 1.3x slower)


class LogInputError(Exception):
    """A log file that cannot be read at all (missing, unreadable, not a log)."""


def _open(path: str):
    """The log as a binary stream: a file or a pipe (``<(zcat ...)``, a FIFO), gunzipped if it
    starts with gzip's magic, or stdin as plain text. A device is refused (``/dev/zero`` would never
    end); a FIFO is opened without blocking, so one with no writer reads as empty, not forever."""
    if path == "-":
        handle = sys.stdin.buffer
        try:
            fd = handle.fileno()
        except (OSError, ValueError):  # an in-memory stream (a test runner's): nothing to check
            return handle
        _check_kind(path, fd, terminal_ok=True)
        return handle
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _check_kind(path, fd, terminal_ok=False)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    handle = os.fdopen(fd, "rb")  # closed by feed_file
    if handle.peek(2)[:2] == b"\x1f\x8b":  # peek: a pipe cannot seek back
        return _Gunzip(fileobj=handle, mode="rb")
    return handle


class _Gunzip(gzip.GzipFile):
    """A gzip stream over an open file that closes that file too (a pipe cannot be reopened by
    name, so gzip.open(path) is no option)."""

    def close(self) -> None:
        raw = self.fileobj
        try:
            super().close()
        finally:
            if raw is not None:
                raw.close()


def _check_kind(path: str, fd: int, *, terminal_ok: bool) -> None:
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return
    if terminal_ok and os.isatty(fd):
        return
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "not a file"
    )
    raise LogInputError(f"{path}: {kind}, not a log; give a log file, a pipe or - for stdin")


def iter_line_batches(handle, stats: FileStats | None = None, chunk_bytes: int = CHUNK_BYTES):
    """Lists of the lines of a binary stream, one list per chunk, so memory stays flat.

    A chunk of pure ASCII (nearly every NCCL log) comes as ``bytes`` lines, sparing the decoding;
    any other as ``str`` lines, decoded from UTF-8. A line longer than :data:`MAX_LINE_CHARS` bytes is dropped (counted in ``stats.overlong_lines`` only);
    undecodable bytes become U+FFFD and lines holding them or NUL are counted in
    ``stats.binary_lines``. Sets ``stats.bytes``, ``stats.lines`` and ``stats.truncated``."""
    for batch, _count in iter_chunks(handle, stats, chunk_bytes):
        yield batch.split(b"\n") if isinstance(batch, bytes) else batch


def iter_chunks(handle, stats: FileStats | None = None, chunk_bytes: int = CHUNK_BYTES):
    """``(batch, lines)``: what :func:`iter_line_batches` gives and its number of lines, except that
    a clean chunk (ASCII, no NUL, no overlong line: nearly every chunk of a real log) comes unsplit,
    as ``bytes`` of whole lines joined by newlines, for
    :meth:`~fabricscope.nccl.log.aggregate.LogAggregator.feed_chunk`."""
    carry = b""
    skipping = False  # inside an overlong line: drop bytes up to the next newline
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            break
        if stats is not None:
            stats.bytes += len(chunk)
        cut = chunk.rfind(b"\n")
        if cut < 0:
            chunk = carry + chunk
            carry = b""
            if skipping:
                continue
            if len(chunk) > MAX_LINE_CHARS:
                skipping = True
                if stats is not None:
                    stats.overlong_lines += 1
                    stats.lines += 1
            else:
                carry = chunk
            continue
        body = b"".join((carry, memoryview(chunk)[:cut])) if carry else chunk[:cut]  # one copy
        carry = chunk[cut + 1 :]
        if skipping:  # drop the tail of the overlong line
            skipping = False
            tail = body.find(b"\n")
            body = None if tail < 0 else body[tail + 1 :]
        if body is not None:
            yield _chunk(body, stats)
        if len(carry) > MAX_LINE_CHARS:
            carry = b""
            skipping = True
            if stats is not None:
                stats.overlong_lines += 1
                stats.lines += 1
    if carry and not skipping:
        text = carry.decode("utf-8", "replace")
        if stats is not None:
            stats.truncated = True
            stats.lines += 1
            if "\x00" in text or "\ufffd" in text:
                stats.binary_lines += 1
        yield [text], 1


def _overlong(body: bytes) -> bool:
    """Whether a line of ``body`` is longer than MAX_LINE_CHARS, in about one step per 16 KiB.

    From a line start, the last newline within the next MAX_LINE_CHARS + 1 bytes ends a line and
    the next one starts after it; there is none exactly when the line starting here is too long."""
    pos, end = 0, len(body)
    while end - pos > MAX_LINE_CHARS:
        newline = body.rfind(b"\n", pos, pos + MAX_LINE_CHARS + 1)
        if newline < 0:
            return True
        pos = newline + 1
    return False


def _chunk(body: bytes, stats: FileStats | None) -> tuple[bytes | list[Any], int]:
    """``body`` itself when it is clean (see :func:`iter_chunks`), else its lines (:func:`_lines`);
    and the number of lines."""
    if body.isascii() and b"\x00" not in body and not (len(body) > MAX_LINE_CHARS and _overlong(body)):
        count = body.count(b"\n") + 1
        if stats is not None:
            stats.lines += count
        return body, count
    lines = _lines(body, stats)
    return lines, len(lines)


def _lines(body: bytes, stats: FileStats | None) -> list[Any]:
    """The lines of a chunk, decoded unless ASCII, overlong ones (measured in bytes, as across
    chunks) dropped, binary ones counted."""
    if len(body) > MAX_LINE_CHARS and _overlong(body):
        raw = body.split(b"\n")
        kept = [ln for ln in raw if len(ln) <= MAX_LINE_CHARS]
        if stats is not None:
            stats.lines += len(raw)
            stats.overlong_lines += len(raw) - len(kept)
        if not kept:
            return []
        body = b"\n".join(kept)  # a newline is ASCII: no character spans two lines
    elif stats is not None:
        stats.lines += body.count(b"\n") + 1
    text = body if body.isascii() else body.decode("utf-8", "replace")
    lines = text.split(b"\n" if text is body else "\n")
    if stats is not None:  # an overlong line is only that: dropped whole, whatever it holds
        stats.binary_lines += _binary_lines(text, lines)
    return lines


def _binary_lines(text: str | bytes, lines: list[Any]) -> int:
    """Lines holding NUL or undecodable bytes (U+FFFD after decoding)."""
    if isinstance(text, bytes):
        return sum(1 for ln in lines if b"\x00" in ln) if b"\x00" in text else 0
    if "\x00" in text or "\ufffd" in text:
        return sum(1 for ln in lines if "\x00" in ln or "\ufffd" in ln)
    return 0


def iter_lines(handle, stats: FileStats | None = None, chunk_bytes: int = CHUNK_BYTES):
    """Decoded lines of a binary stream (see :func:`iter_line_batches`)."""
    for batch in iter_line_batches(handle, stats, chunk_bytes):
        if batch and isinstance(batch[0], bytes):
            yield from (ln.decode("ascii") for ln in batch)
        else:
            yield from batch


def feed_file(aggregator: LogAggregator, path: str, progress=None) -> FileStats:
    """Stream one file (plain, gzip, or ``-`` for stdin) into the aggregator.

    ``progress(bytes_read)`` is called about once per MiB. Raises :class:`LogInputError` when the file
    cannot be opened or read."""
    stats = aggregator.begin_file(path)
    try:
        handle = _open(path)
    except OSError as exc:
        raise LogInputError(f"{path}: {exc.strerror or exc}") from None
    try:
        feed_batch, feed_chunk = aggregator.feed_batch, aggregator.feed_chunk
        last = 0
        for batch, count in iter_chunks(handle, stats):
            if isinstance(batch, bytes):
                feed_chunk(batch, count, stats)
            else:
                feed_batch(batch, stats)
            if progress is not None and stats.bytes - last >= PROGRESS_BYTES:
                last = stats.bytes
                progress(stats.bytes)
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, or a corrupt/truncated gzip stream
        aggregator.end_file(truncated=True)
        raise LogInputError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        if path != "-":
            handle.close()
    aggregator.end_file(truncated=stats.truncated)
    return stats


def read_file(path: str, expect: str = "auto", progress=None) -> LogAggregator:
    """One file into an aggregator of its own (what a worker process does for ``read_files``)."""
    aggregator = LogAggregator(expect=expect)
    feed_file(aggregator, path, progress)
    aggregator.flush()
    aggregator.drop_caches()  # not worth sending back
    return aggregator


def default_jobs() -> int:
    """Worker processes for ``read_files``: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def read_files(paths: list[str], expect: str = "auto", jobs: int = 1, done=None) -> LogAggregator:
    """Read log files, each into its own aggregator, and merge them in the order given.

    With ``jobs`` > 1 the files are read by that many worker processes; the result is the same
    as with one (merging is in file order either way). ``done(path, bytes)`` is called as each
    file is finished. Raises :class:`LogInputError` for the first file (in order) that fails."""
    result = LogAggregator(expect=expect)
    workers = min(jobs, sum(1 for p in paths if p != "-"))
    if workers <= 1:
        parts = (read_file(path, expect) for path in paths)
        for path, part in zip(paths, parts):
            _finish(result, part, path, done)
        return result
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [None if p == "-" else pool.submit(read_file, p, expect) for p in paths]
        try:
            for path, future in zip(paths, futures):
                part = read_file(path, expect) if future is None else result_of(future)  # stdin: read here
                _finish(result, part, path, done)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return result


def _finish(result: LogAggregator, part: LogAggregator, path: str, done) -> None:
    merge(result, part)
    if done is not None:
        done(path, part.files[-1].bytes)
