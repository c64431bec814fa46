"""The result history: bench results in SQLite at ``$FABRICSCOPE_DB`` or the user data dir.

Typical use (any module that produces a :class:`~fabricscope.bench.results.schema.BenchResult`)::

    from fabricscope.store import Store
    with Store.open() as store:          # or Store.open(path)
        run_id = store.save(result)      # any status; returns the new run id
        runs = store.list(kind="tcp", params={"streams": 4}, limit=20)   # newest first
        run = store.get(run_id).result
        store.save_baseline("fabric-a", [3, 4, 5])

Errors (corrupt file, newer schema, unknown id) raise :class:`StoreError`, a
:class:`~fabricscope.errors.FabricscopeError` (exit status 2, one line).
"""

from fabricscope.store.migrations import SCHEMA_VERSION
from fabricscope.store.sqlite import (
    Baseline,
    MissingHistory,
    Store,
    StoredRun,
    StoreError,
    default_db_path,
    params_key,
)

__all__ = [
    "SCHEMA_VERSION",
    "Baseline",
    "MissingHistory",
    "Store",
    "StoreError",
    "StoredRun",
    "default_db_path",
    "params_key",
]
