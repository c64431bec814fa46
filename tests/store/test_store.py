"""The SQLite history: API, migrations, bad files, and several writer processes at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from fabricscope.bench.results.schema import (
    BenchResult,
    CollectiveEntry,
    MatrixRdma,
    MatrixSuspect,
    RankInfo,
    Status,
    new_result,
)
from fabricscope.store import SCHEMA_VERSION, Store, StoreError, default_db_path
from fabricscope.store.migrations import MIGRATIONS


def _result(kind: str = "tcp", gbps: float = 10.0, **params) -> BenchResult:
    return new_result(kind, {"peer": "10.0.0.2", "streams": 1, **params}).finish(
        {"throughput_gbps": gbps, "retransmits_count": 3}, 1.0
    )


def test_save_get_list(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db") as store:
        a = store.save(_result(gbps=9.0))
        b = store.save(_result(gbps=11.0, streams=4))
        c = store.save(
            new_result("udp", {"peer": "10.0.0.3"}).fail("connect to 10.0.0.3:5211: connection refused")
        )
        assert (a, b, c) == (1, 2, 3)
        got = store.get(b).result
        assert got.run_id == b and got.metrics["throughput_gbps"] == 11.0 and got.params["streams"] == 4
        assert [r.id for r in store.list()] == [3, 2, 1]  # newest first
        assert [r.id for r in store.list(kind="tcp")] == [2, 1]
        assert [r.id for r in store.list(params={"streams": 4})] == [2]
        assert [r.id for r in store.list(params={"streams": "4"})] == [2]  # CLI filters arrive as text
        assert [r.id for r in store.list(status="failed")] == [3]
        assert [r.id for r in store.list(peer="10.0.0.3")] == [3]
        assert [r.id for r in store.list(limit=1)] == [3]
        assert [r.id for r in store.list(since=datetime.now(timezone.utc) + timedelta(hours=1))] == []
        assert [r.id for r in store.results([1, 3])] == [1, 3]
        with pytest.raises(StoreError, match="no run with id 99"):
            store.get(99)
        with pytest.raises(StoreError, match="no run with id 42"):
            store.results([1, 42])
        assert store.get(c).result.status == Status.FAILED


def test_baselines(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db") as store:
        ids = [store.save(_result(gbps=g)) for g in (9.0, 10.0, 11.0)]
        udp = store.save(new_result("udp", {}).finish({"loss_pct": 0.1}))
        failed = store.save(_result().fail("boom"))
        saved = store.save_baseline("fabric-a", ids, note="after the cable swap")
        assert saved.kind == "tcp" and saved.run_ids == tuple(ids)
        assert store.get_baseline("fabric-a").note == "after the cable swap"
        store.save_baseline("fabric-a", ids[:2])  # replace
        assert store.get_baseline("fabric-a").run_ids == tuple(ids[:2])
        assert [b.name for b in store.list_baselines()] == ["fabric-a"]
        with pytest.raises(StoreError, match="one kind"):
            store.save_baseline("mixed", [ids[0], udp])
        with pytest.raises(StoreError, match="completed"):
            store.save_baseline("bad", [failed])
        with pytest.raises(StoreError, match="no run with id"):
            store.save_baseline("missing", [12345])
        with pytest.raises(StoreError, match="printable"):
            store.save_baseline("", ids)
        assert store.delete_baseline("fabric-a") and not store.delete_baseline("fabric-a")
        with pytest.raises(StoreError, match="no baseline"):
            store.get_baseline("fabric-a")


def test_wal_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_migration_from_version_1_keeps_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            conn.execute(statement)
    doc = _result(gbps=7.5).to_json()
    conn.execute(
        "INSERT INTO runs (kind, status, started, duration_s, hostname, peer, params_key, doc, saved) VALUES (?,?,?,?,?,?,?,?,?)",
        (
            "tcp",
            "ok",
            "2026-01-01T00:00:00+00:00",
            1.0,
            "h",
            "10.0.0.2",
            "{}",
            doc,
            "2026-01-01T00:00:00+00:00",
        ),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.get(1).result.metrics["throughput_gbps"] == 7.5
        store.save_baseline("b", [1])  # the table added by migration 2 works


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with Store.open(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this fabricscope"):
        Store.open(path)


def test_garbage_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database\x00" * 200)
    with pytest.raises(StoreError, match="not a database"):
        Store.open(path)
    with pytest.raises(StoreError, match="is a directory"):
        Store.open(tmp_path)


def test_default_path_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FABRICSCOPE_DB", str(tmp_path / "x.db"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.setenv("FABRICSCOPE_DB", "")
    assert default_db_path().name == "history.sqlite3" and "fabricscope" in str(default_db_path())


WRITER = textwrap.dedent(
    """
    import sys
    from fabricscope.bench.results.schema import new_result
    from fabricscope.store import Store
    path, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ids = []
    for i in range(count):
        # a fresh connection for some saves, a kept one for others: both must be safe
        result = new_result("tcp", {"peer": "p", "worker": worker, "i": i}).finish({"throughput_gbps": float(i)})
        if i % 3 == 0:
            with Store.open(path) as store:
                ids.append(store.save(result))
        else:
            if i % 3 == 1:
                kept = Store.open(path)
            ids.append(kept.save(result))
    print(" ".join(map(str, ids)))
    """
)


def test_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"  # fresh: the writers also race to create and migrate it
    writers, count = 5, 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    ids: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        ids += [int(x) for x in out.split()]
    assert len(ids) == writers * count and len(set(ids)) == writers * count
    with Store.open(path) as store:
        runs = store.list(limit=None)
    assert len(runs) == writers * count
    seen = {(r.result.params["worker"], r.result.params["i"]) for r in runs}
    assert seen == {(w, i) for w in range(writers) for i in range(count)}


# ----- structured collective / matrix data ---------------------------------------------------------
def _legacy_db(path: Path, docs: list[BenchResult]) -> None:
    """A database as fabricscope wrote it at schema version 2 (before migration 3)."""
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:2]:
        assert isinstance(migration, str)
        for statement in migration.split(";"):
            if statement.strip():
                conn.execute(statement)
    for r in docs:
        cur = conn.execute(
            "INSERT INTO runs (kind, status, started, duration_s, hostname, peer, params_key, doc, saved) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                r.kind,
                r.status.value,
                r.started.isoformat(),
                r.duration_s,
                "h",
                None,
                "{}",
                r.to_json(),
                r.started.isoformat(),
            ),
        )
        conn.executemany(
            "INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)",
            [(cur.lastrowid, k, v) for k, v in r.metrics.items()],
        )
    conn.execute(
        "INSERT INTO baselines VALUES ('coll', 'collective', '[1]', '2026-01-01T00:00:00+00:00', NULL)"
    )
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()


def _legacy_collective() -> BenchResult:
    """What `bench collective` stored before v1 had entries: per-size figures as metrics only."""
    metrics: dict[str, float | int | None] = {"busbw_avg_GBps": 3.0, "wrong_count": 0, "ranks_count": 2}
    for size, t in ((1 << 20, 1e-3), (4 << 20, 3e-3)):
        algbw = size / t / 1e9
        metrics.update({f"size_{size}_time_s": t, f"size_{size}_max_rank_time_s": t * 1.1,
                        f"size_{size}_algbw_GBps": algbw, f"size_{size}_busbw_GBps": algbw, f"size_{size}_wrong_count": 0})  # fmt: skip
    return new_result("collective", {"op": "all_reduce", "world_size": 2, "hosts": ["a", "b"]}).finish(
        metrics, 2.0
    )


def _legacy_matrix() -> BenchResult:
    hosts = ["h1", "h2", "h_to_3"]  # "_to_" in a host name must not confuse the pair names
    metrics: dict[str, float | int | None] = {"fleet_median_gbps": 1.0, "suspects_count": 1, "hosts_count": 3}
    for i, a in enumerate(hosts):
        for j, b in enumerate(hosts):
            if i != j:
                metrics[f"pair_{a}_to_{b}_gbps"] = 0.25 if 2 in (i, j) else 1.0
    metrics["pair_h1_to_h2_gbps"] = None  # a failed pair
    return new_result("matrix", {"hosts": hosts, "transport": "tcp"}).finish(metrics, 9.0)


def test_migration_3_structures_older_collective_and_matrix_runs(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    legacy = [_legacy_collective(), _legacy_matrix(), _result(gbps=7.5)]
    broken = new_result("collective", {}).finish({"busbw_avg_GBps": 1.0})  # no per-size metrics at all
    _legacy_db(path, [*legacy, broken])
    before = sqlite3.connect(path).execute("SELECT run_id, name, value FROM metrics ORDER BY 1, 2").fetchall()
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 3
        coll, mat, tcp, empty = (store.get(i).result for i in (1, 2, 3, 4))
        assert store.get_baseline("coll").run_ids == (1,)
    # collective: entries rebuilt from the per-size metrics; the metrics themselves untouched
    assert [(e.size_bytes, e.time_s, e.wrong) for e in coll.entries] == [
        (1 << 20, 1e-3, 0),
        (4 << 20, 3e-3, 0),
    ]
    assert coll.entries[1].busbw_GBps == pytest.approx((4 << 20) / 3e-3 / 1e9)
    assert coll.entries[0].max_rank_time_s == pytest.approx(1.1e-3)
    assert [(r.rank, r.host) for r in coll.ranks] == [(0, "a"), (1, "b")]
    assert coll.metrics == legacy[0].metrics
    # matrix: hosts and the N x N matrix from the pair metrics; suspects unknown (never stored)
    assert mat.hosts == ["h1", "h2", "h_to_3"]
    assert mat.matrix_gbps == [[None, None, 0.25], [1.0, None, 0.25], [0.25, 0.25, None]]
    assert mat.suspects is None and mat.metrics == legacy[1].metrics
    # other runs, and a collective run with nothing to rebuild, are as they were
    assert tcp.to_json_dict() == {**legacy[2].to_json_dict(), "run_id": 3} and empty.entries is None
    after = sqlite3.connect(path).execute("SELECT run_id, name, value FROM metrics ORDER BY 1, 2").fetchall()
    assert after == before  # the metrics table (SQL queries, baselines) loses nothing
    with Store.open(path) as store:  # a second open migrates nothing more
        assert store.get(1).result.entries == coll.entries


def test_structured_results_round_trip_through_the_store(tmp_path: Path) -> None:
    coll = _legacy_collective()
    coll.entries = [CollectiveEntry(size_bytes=8, count=2, time_s=1e-6, algbw_GBps=0.008, busbw_GBps=0.008, wrong=0,
                                    per_rank_time_s=[1e-6, 1.1e-6], straggler_rank=1, straggler_reason="late")]  # fmt: skip
    coll.ranks = [
        RankInfo(rank=0, host="a", pid=1, device="cpu"),
        RankInfo(rank=1, host="b", pid=2, device="cpu"),
    ]
    mat = _legacy_matrix()
    mat.hosts = ["h1", "h2"]
    mat.matrix_gbps = [[None, 1.0], [0.5, None]]
    mat.suspects = [
        MatrixSuspect(host="h2", peer="h1", kind="link", reason="slow link", transport="rdma", confirmed=True)
    ]
    mat.rdma = MatrixRdma(status=Status.SKIPPED, reason="no RDMA device on h1, h2")
    with Store.open(tmp_path / "h.db") as store:
        ids = [store.save(coll), store.save(mat)]
        got = [store.get(i).result for i in ids]
    assert got[0].to_json_dict() == coll.to_json_dict() and got[1].to_json_dict() == mat.to_json_dict()
    assert got[1].suspects[0].label == "h2 <-> h1" and got[1].rdma.reason == "no RDMA device on h1, h2"
    assert "entries" not in _result().to_json_dict()  # other kinds carry no empty structured fields


def test_printed_documents_of_older_versions_still_validate() -> None:
    """`--json` output saved by users before these fields were typed (matrix ranks were bare ints)."""
    doc = _legacy_matrix().to_json_dict()
    doc.update(hosts=["a", "b"], ranks=[0, 1], matrix_gbps=[[None, 1.0], [1.0, None]], retransmit_pct=[[None, 0.0], [0.0, None]],
               suspects=[{"host": "a", "kind": "host", "reason": "slow", "peer": None, "score_gbps": 0.2, "fleet_median_gbps": 1.0,
                          "retransmit_pct": None, "confirmed": True, "retest_gbps": 0.2, "retest_retransmit_pct": None}],
               cleared=[], retests=[{"from": "a", "to": "b", "gbps": 0.2, "retransmit_pct": 0.0, "error": None}],
               thresholds_gbps={"fleet_median": 1.0, "low": 0.8}, thresholds_retransmit_pct={"fleet_median": 0.0, "high": 0.5},
               failures=[])  # fmt: skip
    result = BenchResult.model_validate(doc)
    assert [r.rank for r in result.ranks] == [0, 1] and result.suspects[0].transport == "tcp"
    assert result.retests[0].from_ == "a" and result.to_json_dict()["retests"][0]["from"] == "a"
    with pytest.raises(ValueError, match="2 x 2"):
        BenchResult.model_validate({**doc, "matrix_gbps": [[None, 1.0]]})
