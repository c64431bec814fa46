"""Following NCCL logs as they are written: appends, rotation, truncation, garbage, real samples."""

from __future__ import annotations

import os
from pathlib import Path

from fabricscope.monitor.follow import MAX_LINE_BYTES
from fabricscope.monitor.nccl_tail import NcclLogTailer
from tests.conftest import samples_dir
from tests.monitor.conftest import NCCL_LINES

SOCKET = "node1:852750:852802 [0] NCCL INFO Using network Socket\n"
IB = "node1:852750:852802 [0] NCCL INFO Using network IB\n"
WARN = "node1:225140:225355 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable\n"
STATUS12 = NCCL_LINES[-1] + "\n"


def append(path: Path, text: str) -> None:
    with open(path, "a") as handle:
        handle.write(text)


def test_existing_content_is_skipped_and_new_lines_counted(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(SOCKET * 5)
    tailer = NcclLogTailer([str(tmp_path / "*.log")])
    assert tailer.poll().socket_fallbacks == 0  # the past is not news
    append(log, SOCKET + IB + WARN)
    counts = tailer.poll()
    assert counts.socket_fallbacks == 1
    assert counts.lines == 3
    assert counts.warnings == {"verbs_error": 1}
    assert counts.files == 1


def test_from_start_counts_existing_content(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(SOCKET * 5 + STATUS12 * 2)
    counts = NcclLogTailer([str(log)], from_start=True).poll()
    assert counts.socket_fallbacks == 5
    assert counts.completion_errors == {12: 2}
    assert counts.warnings == {"completion_error": 2}


def test_files_appearing_later_are_read_from_their_start(tmp_path: Path) -> None:
    tailer = NcclLogTailer([str(tmp_path / "rank*.log")])
    assert tailer.poll().files == 0
    (tmp_path / "rank0.log").write_text(SOCKET * 2)
    (tmp_path / "rank1.log").write_text(SOCKET)
    counts = tailer.poll()
    assert counts.socket_fallbacks == 3 and counts.files == 2


def test_rotation_by_rename_drains_the_old_file_first(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text("")
    tailer = NcclLogTailer([str(log)])
    tailer.poll()
    append(log, SOCKET)
    tailer.poll()
    append(log, SOCKET * 2)  # written after the last poll, before the rotation
    os.rename(log, tmp_path / "nccl.log.1")
    log.write_text(SOCKET * 4)  # the new file
    counts = tailer.poll()
    assert counts.socket_fallbacks == 1 + 2 + 4
    assert counts.rotations == 1
    append(log, SOCKET)
    assert tailer.poll().socket_fallbacks == 8


def test_copytruncate_is_detected(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text("")
    tailer = NcclLogTailer([str(log)])
    tailer.poll()
    append(log, SOCKET * 3)
    assert tailer.poll().socket_fallbacks == 3
    with open(log, "r+") as handle:
        handle.truncate(0)
    append(log, SOCKET)
    counts = tailer.poll()
    assert counts.socket_fallbacks == 4
    assert counts.rotations == 1


def test_deleted_then_recreated(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text("")
    tailer = NcclLogTailer([str(log)])
    tailer.poll()
    append(log, SOCKET)
    log.unlink()
    counts = tailer.poll()
    assert counts.socket_fallbacks == 1 and counts.files == 0
    log.write_text(SOCKET)
    assert tailer.poll().socket_fallbacks == 2


def test_partial_lines_wait_for_their_newline(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text("")
    tailer = NcclLogTailer([str(log)])
    tailer.poll()
    append(log, SOCKET[:20])
    assert tailer.poll().lines == 0
    append(log, SOCKET[20:])
    counts = tailer.poll()
    assert counts.lines == 1 and counts.socket_fallbacks == 1


def test_overlong_lines_and_binary_garbage(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text("")
    tailer = NcclLogTailer([str(log)])
    tailer.poll()
    with open(log, "ab") as handle:
        handle.write(b"x" * (MAX_LINE_BYTES + 10))  # no newline yet: spans polls
    tailer.poll()
    with open(log, "ab") as handle:
        handle.write(b"y" * 100 + b"\n")
        handle.write(os.urandom(5000).replace(b"\n", b"") + b"\n")
        handle.write(SOCKET.encode())
    counts = tailer.poll()
    assert counts.dropped_lines == 1
    assert counts.socket_fallbacks == 1
    assert counts.lines == 2  # the garbage line and the socket line


def test_unreadable_file_is_a_problem(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(SOCKET)
    log.chmod(0)
    tailer = NcclLogTailer([str(log)], from_start=True)
    counts = tailer.poll()
    if os.geteuid() == 0:  # root reads anything: nothing to report
        assert counts.problems == ()
    else:
        assert counts.problems and counts.problems[0][0] == str(log)


def test_real_sample_logs() -> None:
    base = samples_dir()
    fallback = NcclLogTailer([str(base / "nccl_log_socket_fallback.txt")], from_start=True).poll()
    expected = sum(
        1
        for line in (base / "nccl_log_socket_fallback.txt").read_text().splitlines()
        if line.endswith("Using network Socket")
    )
    assert fallback.socket_fallbacks == expected > 0
    qp = NcclLogTailer([str(base / "nccl_log_roce_modify_qp_error.txt")], from_start=True).poll()
    assert qp.socket_fallbacks == 0
    assert qp.warnings.get("verbs_error", 0) == 1
    assert sum(qp.warnings.values()) == sum(
        1
        for line in (base / "nccl_log_roce_modify_qp_error.txt").read_text().splitlines()
        if " NCCL WARN " in line
    )


def test_large_sparse_logs_cost_a_bounded_pass(tmp_path: Path) -> None:
    """Whoever can write the log directory could make the exporter read 16 MiB of every one of
    256 files each second (a 1 TB sparse file is one truncate away): one core burnt. Now a poll
    reads at most MAX_READ_PER_POLL in all, a file far behind skips ahead, and the pass is cheap."""
    import time

    from fabricscope.monitor.follow import MAX_BACKLOG, MAX_READ_PER_FILE, MAX_READ_PER_POLL

    tailer = NcclLogTailer([str(tmp_path / "*.log")])
    tailer.poll()
    for i in range(32):
        with open(tmp_path / f"rank{i}.log", "wb") as handle:
            handle.truncate(1 << 40)  # 1 TiB of holes, no newline in it
    started = time.thread_time()
    counts = tailer.poll()
    cpu_s = time.thread_time() - started
    assert counts.read_bytes <= MAX_READ_PER_POLL
    assert counts.skipped_bytes >= 4 * (
        (1 << 40) - MAX_READ_PER_FILE
    )  # the files it reached skipped their holes
    assert (
        counts.lines == 0 and counts.files == MAX_READ_PER_POLL // MAX_READ_PER_FILE
    )  # the rest wait their turn
    # 16 MiB of zeros read and split: ~20 ms here; one core would be 1 s per 1 s poll.
    assert cpu_s < 0.25, f"one follow pass took {cpu_s:.3f} s of CPU"
    # Real lines written after the hole are still read: a file skips ahead, it is not given up.
    with open(tmp_path / "rank0.log", "ab") as handle:
        handle.write(b"\n" + SOCKET.encode())
    for _ in range(32):
        counts = tailer.poll()
    assert counts.socket_fallbacks == 1
    assert MAX_BACKLOG > MAX_READ_PER_FILE
