"""The history database schema, as an ordered list of migrations.

``PRAGMA user_version`` holds the number of migrations applied. To change the schema, append a
migration (never edit an old one): existing databases are upgraded in place, inside one
``BEGIN IMMEDIATE`` transaction, so concurrent openers never see a half-migrated schema.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: runs and their metrics (metrics duplicated out of the JSON for SQL queries).
    """
    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        kind        TEXT NOT NULL,
        status      TEXT NOT NULL,
        started     TEXT NOT NULL,
        duration_s  REAL,
        hostname    TEXT,
        peer        TEXT,
        params_key  TEXT NOT NULL,
        doc         TEXT NOT NULL,
        saved       TEXT NOT NULL
    );
    CREATE INDEX runs_kind_started ON runs(kind, started);
    CREATE TABLE metrics (
        run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name    TEXT NOT NULL,
        value   REAL,
        PRIMARY KEY (run_id, name)
    );
    CREATE INDEX metrics_name ON metrics(name);
    """,
    # 2: named baselines (a chosen set of runs of one kind).
    """
    CREATE TABLE baselines (
        name     TEXT PRIMARY KEY,
        kind     TEXT NOT NULL,
        run_ids  TEXT NOT NULL,
        created  TEXT NOT NULL,
        note     TEXT
    );
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
