"""The generated dashboard against Grafana's own schema: the Dashboard type of the npm package
@grafana/schema (pinned in tests/monitor/grafana_schema/package.json), checked by the TypeScript
compiler. The JSON is written as an object literal typed ``Dashboard``, so every field is checked,
unknown fields are refused (excess-property check), and enum fields take their string values.

Needs node and ``npm ci --prefix tests/monitor/grafana_schema`` (test-only; CI runs it): skipped
elsewhere, a failure under CI=true."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess

from tests.conftest import skip_unless_ci
from tests.monitor.conftest import DASHBOARD_FILE, MONITOR_TESTS

CHECK_DIR = MONITOR_TESTS / "grafana_schema"
PRELUDE = """import type { Dashboard } from "@grafana/schema";
// JSON has no TypeScript enums: each enum-typed field takes the enum's string values.
type Json<T> = T extends string ? `${T}` : T extends number | boolean | null | undefined ? T
  : T extends Array<infer U> ? Array<Json<U>> : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
export const dashboard: Json<Dashboard> = """


def _tsc(doc: dict) -> subprocess.CompletedProcess:
    tsc = CHECK_DIR / "node_modules" / "typescript" / "bin" / "tsc"
    if (
        shutil.which("node") is None
        or not tsc.exists()
        or not (CHECK_DIR / "node_modules" / "@grafana" / "schema").exists()
    ):
        skip_unless_ci(
            "node and `npm ci --prefix tests/monitor/grafana_schema` are needed for the Grafana schema check"
        )
    # one check.ts for every caller: under pytest-xdist two tests would overwrite each other's
    with open(CHECK_DIR / ".check.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (CHECK_DIR / "check.ts").write_text(PRELUDE + json.dumps(doc, indent=1) + ";\n")
        return subprocess.run(
            ["node", str(tsc), "-p", str(CHECK_DIR / "tsconfig.json")],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=CHECK_DIR,
        )


def test_dashboard_is_valid_against_grafana_schema() -> None:
    proc = _tsc(json.loads(DASHBOARD_FILE.read_text()))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_check_refuses_what_grafana_does_not_know() -> None:
    """The check can fail: an unknown field, and a wrong enum value, are each refused."""
    doc = json.loads(DASHBOARD_FILE.read_text())
    doc["refresh_rate"] = "10s"
    proc = _tsc(doc)
    assert proc.returncode != 0 and "refresh_rate" in proc.stdout
    doc = json.loads(DASHBOARD_FILE.read_text())
    doc["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["mode"] = "relative-ish"
    proc = _tsc(doc)
    assert proc.returncode != 0 and "relative-ish" in proc.stdout
