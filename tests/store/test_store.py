"""The SQLite history: API, migrations, bad files, and several writer processes at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from fabricscope.bench.result import BenchResult, Status, new_result
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
    from fabricscope.bench.result import new_result
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
