"""The history database schema, as an ordered list of migrations.

``PRAGMA user_version`` holds the number of migrations applied. To change the schema, append a
migration (never edit an old one): existing databases are upgraded in place, inside one
``BEGIN IMMEDIATE`` transaction, so concurrent openers never see a half-migrated schema.
A migration is SQL text (statements separated by ``;``) or a function of the cursor, for data
that SQL cannot reshape. Migrations work on the stored JSON as it was when they were written,
never through today's model classes.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from typing import Any

Migration = str | Callable[[sqlite3.Cursor], None]

# The per-size metric suffixes collective runs were stored with -> the entry field each became.
_ENTRY_FIELD = {
    "time_s": "time_s",
    "max_rank_time_s": "max_rank_time_s",
    "algbw_GBps": "algbw_GBps",
    "busbw_GBps": "busbw_GBps",
    "wrong_count": "wrong",
}
_SIZE_METRIC = re.compile(r"^size_(\d+)_(" + "|".join(_ENTRY_FIELD) + r")\Z")


def _legacy_entries(doc: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Per-size entries of a collective run stored before v1 had ``entries``, from its metrics."""
    sizes: dict[int, dict[str, Any]] = {}
    for name, value in (doc.get("metrics") or {}).items():
        match = _SIZE_METRIC.match(name)
        if match and value is not None:
            sizes.setdefault(int(match.group(1)), {})[_ENTRY_FIELD[match.group(2)]] = value
    entries = []
    for size, fields in sorted(sizes.items()):
        if not {"time_s", "algbw_GBps", "busbw_GBps"} <= fields.keys():
            continue
        wrong = fields.get("wrong")
        entries.append(
            {
                "size_bytes": size,
                "time_s": float(fields["time_s"]),
                "max_rank_time_s": fields.get("max_rank_time_s"),
                "algbw_GBps": float(fields["algbw_GBps"]),
                "busbw_GBps": float(fields["busbw_GBps"]),
                "wrong": int(wrong) if wrong is not None else None,
            }
        )
    return entries or None


def _legacy_matrix(doc: dict[str, Any]) -> tuple[list[str], list[list[float | None]]] | None:
    """Hosts and the N x N matrix of a matrix run stored as ``pair_<a>_to_<b>_gbps`` metrics."""
    hosts = (doc.get("params") or {}).get("hosts")
    metrics = doc.get("metrics") or {}
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        return None
    matrix: list[list[float | None]] = [
        [None if i == j else metrics.get(f"pair_{a}_to_{b}_gbps") for j, b in enumerate(hosts)]
        for i, a in enumerate(hosts)
    ]
    if not any(v is not None for row in matrix for v in row):
        return None
    return list(hosts), matrix


def structure_legacy_runs(cur: sqlite3.Cursor) -> None:
    """Migration 3: collective and matrix runs get the structured fields v1 gained.

    Collective runs get ``entries`` (and ``ranks`` from ``params.hosts``) rebuilt from their
    ``size_<N>_*`` metrics; matrix runs get ``hosts`` and ``matrix_gbps`` from their
    ``pair_<a>_to_<b>_gbps`` metrics. Only fields are added: metrics, the metrics table and
    every other key stay as they were. Suspects were never stored before, so old matrix runs
    have none (``null``: unknown). A document that does not parse is left untouched. The
    schema version also tells an older fabricscope that it cannot read the new documents.
    """
    rows = cur.execute("SELECT id, kind, doc FROM runs WHERE kind IN ('collective', 'matrix')").fetchall()
    for run_id, kind, text in rows:
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        changed = False
        if kind == "collective" and doc.get("entries") is None:
            entries = _legacy_entries(doc)
            if entries is not None:
                doc["entries"] = entries
                changed = True
            hosts = (doc.get("params") or {}).get("hosts")
            if (
                doc.get("ranks") is None
                and isinstance(hosts, list)
                and hosts
                and all(isinstance(h, str) for h in hosts)
            ):
                doc["ranks"] = [{"rank": r, "host": h} for r, h in enumerate(hosts)]
                changed = True
        elif kind == "matrix" and doc.get("matrix_gbps") is None:
            found = _legacy_matrix(doc)
            if found is not None:
                doc["hosts"], doc["matrix_gbps"] = found
                changed = True
        if changed:
            cur.execute(
                "UPDATE runs SET doc = ? WHERE id = ?", (json.dumps(doc, separators=(",", ":")), run_id)
            )


MIGRATIONS: tuple[Migration, ...] = (
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
    # 3: structured per-size entries and matrices in the stored documents (fields added to v1).
    structure_legacy_runs,
)

SCHEMA_VERSION = len(MIGRATIONS)
