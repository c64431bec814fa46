"""PyTorch's process-group prefix (2.3 on: ``[PG ID 0 PG GUID 0(default_pg) Rank 3]``, earlier
``[PG 3 Rank 5]``) on real lines (tests/data/samples/torch_pg*.txt, each naming its thread on
line 1): the reader places them where it placed the ``[Rank N]`` wording, and reads the same
collective, timeout and, in the job log, rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.nccl.log.place import place, placed_event
from fabricscope.triage.joblog import read_log

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def quoted(name: str) -> list[str]:
    """The file's lines after its source/note lines."""
    return [
        line for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines() if not line.startswith("#")
    ]


def last(name: str) -> str:
    return quoted(name)[-1]


@pytest.mark.parametrize(
    ("name", "seq", "op", "timeout_ms", "ran_ms"),
    [
        ("torch_pgid_watchdog_default_pg.txt", 1, "ALLREDUCE", 1, 90),
        ("torch_pgid_watchdog_subgroup.txt", 91885, "ALLREDUCE", 600000, 600066),
        ("torch_pg_watchdog_short_prefix.txt", 9141, "_ALLGATHER_BASE", 600000, 600020),
    ],
)
def test_watchdog_exit_under_the_pg_prefix_reads_as_a_timeout(
    name: str, seq: int, op: str, timeout_ms: int, ran_ms: int
) -> None:
    placed = place(last(name))
    assert placed is not None and placed.message is not None, name
    assert placed.message.project == "pytorch"
    assert placed.message.format == "Process group watchdog thread terminated with exception: "
    assert placed.wrapper.startswith("what():") and "Rank " in placed.wrapper
    event = placed_event(placed)
    assert event.kind == "torch"
    assert (event.data["kind"], event.data["seq"], event.data["op"]) == ("timeout", seq, op)
    assert (event.data["timeout_ms"], event.data["ran_ms"]) == (timeout_ms, ran_ms)


def test_the_old_wording_reads_the_same() -> None:
    """The [Rank N] line of the same timeout, as before: the same fields."""
    placed = place(last("torch_pgid_watchdog_default_pg.txt").split("exception: ", 1)[1])
    assert placed is not None and placed.message is not None
    assert placed.message.format.startswith("[Rank %s] Watchdog caught collective operation timeout")
    data = placed_event(placed).data
    assert (data["kind"], data["seq"], data["op"], data["timeout_ms"]) == ("timeout", 1, "ALLREDUCE", 1)


def test_heartbeat_monitor_line_is_placed() -> None:
    placed = place(last("torch_pgid_heartbeat_stuck.txt"))
    assert placed is not None and placed.message is not None
    assert placed.message.format.startswith("ProcessGroupNCCL's watchdog got stuck for %s seconds")
    assert "[PG ID 0 PG GUID 0(default_pg) Rank 2]" in placed.wrapper
    assert placed_event(placed).kind == "torch"


def test_job_log_takes_the_default_groups_rank_from_the_prefix() -> None:
    """No launcher prefix: PG 0's Rank is the global rank; a subgroup's is not, so it is not taken."""
    ev = read_log(quoted("torch_pgid_watchdog_default_pg.txt"), "default_pg.txt")
    assert ev.timeouts == {3: "collective 1 (ALLREDUCE)"}
    ev = read_log(quoted("torch_pgid_watchdog_subgroup.txt"), "subgroup.txt")
    assert ev.timeouts == {}
    ev = read_log(quoted("torch_pg_watchdog_short_prefix.txt"), "short.txt")
    assert ev.timeouts == {}


def test_work_rank_prefix_is_peeled_only_when_the_text_needs_it() -> None:
    """tests/data/job/h200/timeout_stderr.txt (torch 2.11): WorkNCCL's '[Rank 0] ' before a
    handleException line, and the PG prefix before the watchdog's ' failure detected' line."""
    lines = (SAMPLES.parent / "job" / "h200" / "timeout_stderr.txt").read_text(encoding="utf-8").splitlines()
    by_text = {}
    for line in lines:
        placed = place(line)
        if placed is not None and placed.message is not None:
            by_text[placed.message.format.strip()[:40]] = placed
    assert by_text["Some NCCL operations have failed or time"].wrapper.endswith("[Rank 0]")
    assert by_text["failure detected by watchdog at work seq"].wrapper.endswith("Rank 0]")
    old = by_text["[Rank %s] Watchdog caught collective ope"]  # the [Rank %s] format: nothing peeled
    assert "[Rank" not in old.wrapper and placed_event(old).data["seq"] == 7
