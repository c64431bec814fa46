#!/usr/bin/env python3
"""The model against published figures (issue 23, Validation): one row per figure, per table the
share within its band (+-15% bandwidth, +-30% small-message latency, +-20% throughput) and the
median ratio model / published.

Constants are fitted on the calibration split only; the held-out split is judged, never fitted:

    PYTHONPATH=src .venv/bin/python benchmarks/sim_validation.py --split calibration
    PYTHONPATH=src .venv/bin/python benchmarks/sim_validation.py --split heldout --json > heldout.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "sim_validation"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("calibration", "heldout"), default="calibration")
    ap.add_argument("--table", action="append", help="only these tables (repeatable)")
    ap.add_argument("--rows", action="store_true", help="print every row, not only the per-table summary")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--markdown", action="store_true", help="one row per table, as docs/sim.md's validation table"
    )
    args = ap.parse_args()
    from fabricscope.sim.figures import evaluate

    records = yaml.safe_load((DATA / f"{args.split}.yaml").read_text())
    if args.table:
        records = [r for r in records if r["table"] in args.table]
    results = [evaluate(r) for r in records]
    if args.json:
        json.dump(results, sys.stdout, indent=1, default=str)
        return 0
    tables: dict[str, list[dict]] = {}
    for r in results:
        tables.setdefault(r["table"] or r["id"], []).append(r)
    judged = [r for r in results if "ratio" in r]
    if args.markdown:
        print(markdown(args.split, tables, judged))
        return 0
    for name, rows in tables.items():
        ok = [r for r in rows if "ratio" in r]
        if not ok:
            print(f"{name}: skipped ({rows[0]['skipped']})")
            continue
        held = sum(r["holds"] for r in ok)
        med = statistics.median(r["ratio"] for r in ok)
        print(f"{name}: {held}/{len(ok)} within band, median model/published {med:.2f}")
        if args.rows:
            for r in ok:
                print(
                    f"    {r['id']:<48} {r['algo']:>16} model {r['model']:>10.4g} published {r['published']:>10.4g} "
                    f"ratio {r['ratio']:.2f} {'ok' if r['holds'] else 'off'} ({r['band']})"
                )
    held = sum(r["holds"] for r in judged)
    print(
        f"all: {held}/{len(judged)} within band ({held / max(1, len(judged)):.0%}); "
        f"{len(results) - len(judged)} figure(s) the model cannot express yet"
    )
    return 0


def markdown(split: str, tables: dict[str, list[dict]], judged: list[dict]) -> str:
    rows = [
        f"| Table ({split}) | Metric | Rows judged | Within band | Median model/published | Range | Not expressible |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for name, rs in tables.items():
        ok = [r for r in rs if "ratio" in r]
        skipped = {r["skipped"] for r in rs if "skipped" in r}
        if ok:
            ratios = sorted(r["ratio"] for r in ok)
            rows.append(
                f"| {name} | {ok[0]['metric']} ({ok[0]['band']}) | {len(ok)} | {sum(r['holds'] for r in ok)} | "
                f"{statistics.median(ratios):.2f} | {ratios[0]:.2f}-{ratios[-1]:.2f} | "
                f"{'; '.join(sorted(skipped)) if skipped else ''} |"
            )
        else:
            rows.append(f"| {name} | {rs[0]['metric']} | 0 | - | - | - | {'; '.join(sorted(skipped))} |")
    held = sum(r["holds"] for r in judged)
    rows.append(f"| **all** | | {len(judged)} | {held} ({held / max(1, len(judged)):.0%}) | | | |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
