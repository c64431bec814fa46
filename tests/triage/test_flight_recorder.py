"""Flight Recorder dumps: real ones (an H200 with NCCL 2.28.9, gloo jobs in the lab) and hostile ones."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from fabricscope.triage.flight_recorder import parse_bytes, rank_from_name, read_dump
from fabricscope.triage.model import RankDump, Skipped
from fabricscope.triage.safe_pickle import HostilePickle, loads_plain
from tests.triage.conftest import DATA

H200 = DATA / "h200"


def test_real_nccl_dumps_pickle_and_json_agree() -> None:
    pkl, js = (
        read_dump(H200 / "healthy_nccl_fr_rank0.pkl", 0),
        read_dump(H200 / "healthy_nccl_fr_rank0.json", 0),
    )
    assert isinstance(pkl, RankDump) and isinstance(js, RankDump)
    assert pkl.version == js.version == "2.10" and pkl.comm_lib_version == "2.28.9"
    group, jgroup = pkl.groups["0"], js.groups["0"]
    assert (group.last_enqueued, group.last_started, group.last_completed) == (14, 14, 14)
    assert (jgroup.last_enqueued, jgroup.last_completed) == (14, 14)  # the JSON form writes them as strings
    assert [e.op for e in group.entries] == [e.op for e in jgroup.entries]
    assert group.entries[0].op == "nccl:all_reduce" and group.entries[0].state == "completed"
    assert group.entries[0].in_sizes == [[1048576]] and group.ranks == (0,)
    # what a slow link delays the next call by (triage/slowlink): 1 Mi Float elements, 4 B each
    assert group.entries[0].in_bytes == jgroup.entries[0].in_bytes == 4 * 1048576


def test_entry_bytes_follow_the_dtype_names_pytorch_writes() -> None:
    entry = read_dump(H200 / "healthy_nccl_fr_rank0.json", 0).groups["0"].entries[0]
    assert entry._replace(in_sizes=[[8, 2], [3]], dtypes=["BFloat16", "Long"]).in_bytes == 8 * 2 * 2 + 3 * 8
    assert entry._replace(in_sizes=[[5]], dtypes=["NewType"]).in_bytes == 5 * 4  # unknown: a float
    assert entry._replace(in_sizes=[["x"]], dtypes=None).in_bytes == 0  # a garbled shape moves nothing


def test_real_watchdog_timeout_dump_shows_the_open_collective() -> None:
    dump = read_dump(H200 / "timeout_nccl_trace_rank_0")
    assert isinstance(dump, RankDump) and dump.rank == 0
    group = dump.groups["0"]
    assert (group.last_enqueued, group.last_completed) == (7, 6)
    assert group.entries[-1].seq == 7 and group.entries[-1].state == "scheduled"


def test_real_gloo_dump_counters_under_their_group() -> None:
    """gloo's default group is configured under "" and counted under "0": one group, with its ranks."""
    dump = read_dump(DATA / "lab" / "healthy" / "h2" / "fr_rank1.pkl")
    assert isinstance(dump, RankDump) and list(dump.groups) == ["0"]
    assert dump.groups["0"].ranks == (0, 1, 2, 3) and dump.groups["0"].last_started is None
    assert dump.groups["0"].entries[0].op == "gloo:all_reduce"


class Hostile:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def test_hostile_pickle_is_refused_by_name_and_never_runs(tmp_path) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps({"version": "2.10", "entries": [Hostile(marker)]})
    got = parse_bytes(data, 3, "evil_rank3.pkl")
    assert isinstance(got, Skipped) and "hostile" in got.reason and "mkdir" in got.reason
    assert not marker.exists()
    try:
        loads_plain(pickle.dumps(Path("/etc")))
    except HostilePickle as exc:
        assert "PosixPath" in str(exc) or "pathlib" in str(exc)
    else:
        raise AssertionError("a pickled Path was loaded")


def test_truncated_empty_and_foreign_files_are_named(tmp_path) -> None:
    real = (H200 / "healthy_nccl_fr_rank0.pkl").read_bytes()
    (tmp_path / "cut_rank1.pkl").write_bytes(real[: len(real) // 2])
    (tmp_path / "empty_rank2.pkl").write_bytes(b"")
    (tmp_path / "cut_rank3.json").write_bytes((H200 / "healthy_nccl_fr_rank0.json").read_bytes()[:500])
    (tmp_path / "other_rank4.json").write_text('{"entries": 5, "hello": 1}')
    reasons = {p.name: read_dump(p).reason for p in sorted(tmp_path.iterdir())}  # type: ignore[union-attr]
    assert "truncated" in reasons["cut_rank1.pkl"]
    assert reasons["empty_rank2.pkl"] == "empty file"
    assert "not valid JSON" in reasons["cut_rank3.json"]
    assert "not a Flight Recorder dump" in reasons["other_rank4.json"]


def test_entry_cap_keeps_the_newest(monkeypatch) -> None:
    import fabricscope.triage.flight_recorder as fr

    monkeypatch.setattr(fr, "MAX_ENTRIES", 5)
    dump = read_dump(H200 / "healthy_nccl_fr_rank0.pkl", 0)
    assert isinstance(dump, RankDump) and [e.seq for e in dump.groups["0"].entries] == [10, 11, 12, 13, 14]
    assert dump.notes and "only the newest 5" in dump.notes[0]


def test_rank_from_names_pytorch_and_users_write() -> None:
    assert rank_from_name("nccl_trace_rank_12") == 12
    assert rank_from_name("fr_rank3.json") == 3
    assert rank_from_name("nccl_trace_rank_7.node-12") == 7  # a host name after the rank (pytorch#140879)
    assert rank_from_name("trace5.pkl") == 5
    assert rank_from_name("notes.txt") is None


def test_no_input_raises(tmp_path) -> None:
    """Cut, flipped and re-typed versions of a real dump: each is a dump or a named reason, never an exception."""
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    real = (H200 / "healthy_nccl_fr_rank0.pkl").read_bytes()

    @settings(max_examples=300, deadline=None)
    @given(st.integers(0, len(real)), st.integers(0, len(real) - 1), st.integers(0, 255))
    def flipped(cut: int, at: int, value: int) -> None:
        data = bytearray(real[:cut] or real)
        data[at % len(data)] = value
        got = parse_bytes(bytes(data), 0)
        assert isinstance(got, RankDump | Skipped)

    flipped()
    for obj in (
        {"version": 1, "entries": [1, 2]},
        {"version": "2.10", "entries": [{"collective_seq_id": "x"}]},
        {"version": "2.10", "entries": [], "pg_status": {"0": {"last_enqueued_collective": "many"}}},
        {"version": "2.10", "entries": [], "pg_config": {"0": {"ranks": "[0, 1"}}},
        [1, 2, 3],
        "text",
    ):
        got = parse_bytes(json.dumps(obj).encode(), 0)
        assert isinstance(got, Skipped), obj
