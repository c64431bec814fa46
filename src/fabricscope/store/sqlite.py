"""SQLite history of bench results (standard library sqlite3, WAL, versioned schema).

Safe for several processes writing at once: every write is one short ``BEGIN IMMEDIATE``
transaction with a busy timeout and a bounded retry, so concurrent ``fabricscope bench`` runs
(or a benchmark script and the exporter) never lose a result. Readers never block writers (WAL).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import platformdirs
from pydantic import ValidationError

from fabricscope.bench.results.schema import BenchResult, params_key
from fabricscope.errors import FabricscopeError
from fabricscope.store.migrations import MIGRATIONS, SCHEMA_VERSION

ENV_VAR = "FABRICSCOPE_DB"
DB_FILENAME = "history.sqlite3"
BUSY_TIMEOUT_S = 30.0
MAX_LOCK_WAIT_S = 60.0
BASELINE_NAME_MAX = 100


class StoreError(FabricscopeError):
    """The history database cannot be used (corrupt, newer schema, unwritable, unknown id)."""


class MissingHistory(StoreError):
    """A read of a history that does not exist (nothing was ever stored at that path)."""


@dataclass(frozen=True)
class StoredRun:
    """A result as kept in the store; ``result.run_id`` equals ``id``."""

    id: int
    saved: datetime
    result: BenchResult


@dataclass(frozen=True)
class Baseline:
    """A named set of runs of one kind; statistics are computed by :mod:`fabricscope.bench.results.history`."""

    name: str
    kind: str
    run_ids: tuple[int, ...]
    created: datetime
    note: str | None = None


def default_db_path() -> Path:
    """``$FABRICSCOPE_DB`` when set and non-empty, else ``<user data dir>/fabricscope/history.sqlite3``."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return platformdirs.user_data_path("fabricscope", appauthor=False) / DB_FILENAME


class Store:
    """The history. Open with ``Store.open()`` (or ``Store(path)``); use as a context manager.

    API: :meth:`save` -> id, :meth:`get`, :meth:`list`, :meth:`save_baseline`,
    :meth:`get_baseline`, :meth:`list_baselines`, :meth:`delete_baseline`, :meth:`results`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        if self.path.is_dir():
            raise StoreError(f"history database {self.path} is a directory")
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"history database directory {self.path.parent}: {exc.strerror or exc}"
                ) from None
        elif not self.path.exists():
            raise MissingHistory(f"no history at {self.path} (nothing stored yet)")
        try:
            # mode=rw: a read never creates the file, even if it vanished since the check above
            uri = f"file:{quote(str(self.path.absolute()))}?mode={'rwc' if create else 'rw'}"
            self._conn = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"history database {self.path}: {exc}") from None
        try:
            self._retry(self._setup)
        except StoreError:
            self._conn.close()
            raise

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Store:
        """The history at ``path`` (default :func:`default_db_path`). Commands that only read pass
        ``create=False``: a history that does not exist raises :class:`MissingHistory` and nothing
        (no directory, no file) is created on the way."""
        return cls(path, create=create)

    # ----- connection management ----------------------------------------------------------
    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _setup(self) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise StoreError(f"history database {self.path}: cannot switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"history database {self.path} has schema version {version}, newer than this "
                f"fabricscope understands ({SCHEMA_VERSION}); upgrade fabricscope"
            )
        if version < SCHEMA_VERSION:
            with self._write() as cur:
                # Re-read inside the write lock: another process may have migrated meanwhile.
                current = cur.execute("PRAGMA user_version").fetchone()[0]
                for number in range(current, SCHEMA_VERSION):
                    migration = MIGRATIONS[number]
                    if callable(migration):
                        migration(cur)
                        continue
                    for statement in migration.split(";"):
                        if statement.strip():
                            cur.execute(statement)
                if current < SCHEMA_VERSION:
                    cur.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")

    @property
    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")

    def _retry(self, func: Any, *args: Any) -> Any:
        """Run ``func`` retrying on lock contention (busy timeout covers most; this covers the rest)."""
        deadline = time.monotonic() + MAX_LOCK_WAIT_S
        while True:
            try:
                return func(*args)
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if ("locked" in text or "busy" in text) and time.monotonic() < deadline:
                    time.sleep(0.01 + random.random() * 0.05)
                    continue
                raise StoreError(f"history database {self.path}: {exc}") from None
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"history database {self.path}: {exc}") from None

    # ----- runs ---------------------------------------------------------------------------
    def save(self, result: BenchResult) -> int:
        """Store a result (any status) and return its run id; also sets ``result.run_id``."""
        doc = result.model_copy(update={"run_id": None}).to_json()
        row = (
            result.kind,
            result.status.value,
            result.started.isoformat(),
            result.duration_s,
            result.host.hostname,
            result.peer,
            params_key(result.params),
            doc,
            datetime.now(timezone.utc).isoformat(),
        )
        metrics = [(name, value) for name, value in result.metrics.items()]

        def insert() -> int:
            with self._write() as cur:
                cur.execute(
                    "INSERT INTO runs (kind, status, started, duration_s, hostname, peer, params_key, doc, saved)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                run_id = int(cur.lastrowid or 0)
                cur.executemany(
                    "INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)",
                    [(run_id, name, value) for name, value in metrics],
                )
                return run_id

        run_id = self._retry(insert)
        result.run_id = run_id
        return run_id

    def get(self, run_id: int) -> StoredRun:
        """The run with this id; :class:`StoreError` when there is none."""
        rows = self._retry(self._select, "WHERE id = ?", [int(run_id)], None) if _storable_id(run_id) else []
        if not rows:
            raise StoreError(f"no run with id {run_id} in {self.path}")
        return rows[0]

    def list(
        self,
        *,
        kind: str | None = None,
        status: str | None = None,
        hostname: str | None = None,
        peer: str | None = None,
        params: dict[str, Any] | None = None,
        since: datetime | None = None,
        ids: Sequence[int] | None = None,
        limit: int | None = 50,
    ) -> list[StoredRun]:
        """Runs matching every given filter, newest first.

        ``params`` matches runs whose parameters include these key/value pairs (a subset match:
        ``{"streams": 4}`` finds every 4-stream run whatever its duration).
        """
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("kind", kind), ("status", status), ("hostname", hostname), ("peer", peer)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            where.append("started >= ?")
            args.append(since.astimezone(timezone.utc).isoformat())
        if ids is not None:
            ids = [int(i) for i in ids if _storable_id(i)]  # 10**30 is no run, not an OverflowError
            if not ids:
                return []
            where.append(f"id IN ({','.join('?' * len(ids))})")
            args.extend(ids)
        clause = ("WHERE " + " AND ".join(where)) if where else ""
        # Filter params in Python after SQL narrowed the set; apply the limit afterwards then.
        rows = self._retry(self._select, clause, args, None if params else limit)
        if params:
            rows = [r for r in rows if _params_match(r.result.params, params)]
            if limit is not None:
                rows = rows[:limit]
        return rows

    def results(self, run_ids: Sequence[int]) -> list[StoredRun]:
        """The runs with these ids in the order given; :class:`StoreError` names any missing id."""
        found = {r.id: r for r in self.list(ids=run_ids, limit=None)}
        missing = [i for i in run_ids if int(i) not in found]
        if missing:
            raise StoreError(f"no run with id {', '.join(map(str, missing))} in {self.path}")
        return [found[int(i)] for i in run_ids]

    def count(self) -> int:
        return int(self._retry(lambda: self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]))

    def _select(self, clause: str, args: list[Any], limit: int | None) -> list[StoredRun]:
        sql = f"SELECT id, saved, doc FROM runs {clause} ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {max(0, int(limit))}"
        out = []
        for run_id, saved, doc in self._conn.execute(sql, args).fetchall():
            try:
                result = BenchResult.from_json(doc)
            except ValidationError as exc:
                raise StoreError(
                    f"run {run_id} in {self.path} is unreadable: {exc.errors()[0]['msg']}"
                ) from None
            result.run_id = run_id
            out.append(StoredRun(id=run_id, saved=datetime.fromisoformat(saved), result=result))
        return out

    # ----- baselines ----------------------------------------------------------------------
    def save_baseline(self, name: str, run_ids: Sequence[int], note: str | None = None) -> Baseline:
        """Create or replace the baseline ``name`` from these runs (all ok, all the same kind)."""
        name = name.strip()
        if not name or len(name) > BASELINE_NAME_MAX or not name.isprintable():
            raise StoreError(f"baseline name must be 1..{BASELINE_NAME_MAX} printable characters")
        if not run_ids:
            raise StoreError("a baseline needs at least one run")
        runs = self.results(run_ids)
        kinds = {r.result.kind for r in runs}
        if len(kinds) != 1:
            raise StoreError(f"baseline runs must be of one kind, got {', '.join(sorted(kinds))}")
        bad = [r.id for r in runs if r.result.status.value != "ok"]
        if bad:
            raise StoreError(f"baseline runs must have completed (status ok): {', '.join(map(str, bad))}")
        baseline = Baseline(
            name=name,
            kind=kinds.pop(),
            run_ids=tuple(int(i) for i in run_ids),
            created=datetime.now(timezone.utc),
            note=note,
        )

        def upsert() -> None:
            with self._write() as cur:
                cur.execute(
                    "INSERT OR REPLACE INTO baselines (name, kind, run_ids, created, note) VALUES (?, ?, ?, ?, ?)",
                    (
                        baseline.name,
                        baseline.kind,
                        json.dumps(list(baseline.run_ids)),
                        baseline.created.isoformat(),
                        note,
                    ),
                )

        self._retry(upsert)
        return baseline

    def get_baseline(self, name: str) -> Baseline:
        rows = self._retry(self._select_baselines, "WHERE name = ?", [name])
        if not rows:
            raise StoreError(f"no baseline named {name!r} in {self.path}")
        return rows[0]

    def list_baselines(self, kind: str | None = None) -> list[Baseline]:
        if kind is None:
            return self._retry(self._select_baselines, "", [])
        return self._retry(self._select_baselines, "WHERE kind = ?", [kind])

    def delete_baseline(self, name: str) -> bool:
        def delete() -> bool:
            with self._write() as cur:
                cur.execute("DELETE FROM baselines WHERE name = ?", (name,))
                return cur.rowcount > 0

        return bool(self._retry(delete))

    def _select_baselines(self, clause: str, args: list[Any]) -> list[Baseline]:
        rows = self._conn.execute(
            f"SELECT name, kind, run_ids, created, note FROM baselines {clause} ORDER BY name", args
        ).fetchall()
        return [
            Baseline(
                name=name,
                kind=kind,
                run_ids=tuple(int(i) for i in json.loads(ids)),
                created=datetime.fromisoformat(created),
                note=note,
            )
            for name, kind, ids, created, note in rows
        ]


def _storable_id(run_id: int) -> bool:
    """Whether ``run_id`` fits SQLite's INTEGER (a run id is 1..2**63-1; a larger one names no run)."""
    return 0 < int(run_id) < 2**63


def _params_match(params: dict[str, Any], wanted: dict[str, Any]) -> bool:
    for key, value in wanted.items():
        if key not in params:
            return False
        have = params[key]
        if have != value and str(have) != str(value):
            return False
    return True
