#!/usr/bin/env python3
"""Accuracy of `nccl log` and `nccl lint` on the NCCL case corpus (tests/data/nccl_cases/), per split.

For a log: the reader's one-line verdict (fabricscope.nccl.log.summary) against the thread's
``root_cause`` and ``fatal``. For a script: the lint findings, as the corpus' ``lint_finding`` words
(:data:`LINT_WORDS`), against the thread's list (``clean`` = none). A case counts as right when its
root cause (logs) or its finding set (scripts) agrees; ``fatal`` is reported beside it. Cases
whose thread reached no conclusion (``unknown``) are left out.

Prints per split: cases, root-cause accuracy on logs, fatal agreement on logs, lint accuracy on
scripts, and overall. ``--show dev`` lists the dev cases it gets wrong (never the held-out ones:
their expectations are for the final measurement only).

Usage: PYTHONPATH=src python scripts/nccl_case_accuracy.py [--split dev|heldout|both] [--show dev] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "nccl_cases"
# Lint codes as the corpus' lint_finding words (codes not listed say nothing the corpus scores).
LINT_WORDS = {
    "NCCL001": "unknown_variable",
    "NCCL003": "bad_value",  # NCCL002 (renamed/removed) is no misspelling
    "NCCL008": "not_applied",
    "NCCL009": "unseen_source",
    "NCCL010": "wrong_device",
    "NCCL011": "wrong_device",
    "NCCL014": "wrong_device",
    "NCCL016": "bad_value",
    "NCCL020": "wrong_interface",
    "NCCL021": "wrong_interface",
    "NCCL023": "wrong_interface",
    "NCCL031": "wrong_gid_index",
    "NCCL032": "wrong_gid_index",
    "NCCL033": "wrong_gid_index",
    "NCCL034": "wrong_gid_index",
    "NCCL036": "wrong_gid_index",
    "NCCL037": "wrong_gid_index",
    "NCCL060": "disables_rdma",
    "NCCL061": "disables_rdma",
    "NCCL080": "bad_value",
}
SCORED_INFO = {
    "NCCL008",
    "NCCL009",
}  # info findings that still name a setting the job does not get as written


def load_split(split: str) -> list[dict]:
    spec = importlib.util.spec_from_file_location("nccl_cases_split", CORPUS / "split.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [c for c in module.load(split) if c["verdict"]["root_cause"] != "unknown"]


def judge_log(case: dict) -> dict:
    from fabricscope.nccl.log.read import read_files
    from fabricscope.nccl.log.report import build_report

    report = build_report(read_files([str(CORPUS / case["file"])], "auto", 1))
    want = case["verdict"]
    got = report.verdict
    return {
        "id": case["id"],
        "kind": "log",
        "right": got["root_cause"] == want["root_cause"],
        "fatal_right": got["fatal"] == want["fatal"],
        "got": got,
        "want": {k: want[k] for k in ("root_cause", "fatal", "transport")},
    }


def lint_words(text: str, path: str) -> set[tuple[str, str]]:
    """(variable, lint_finding) pairs `nccl lint` reports for a script, without a node."""
    from fabricscope.nccl.job import JobSources, lint_job

    _settings, found = lint_job(JobSources(scripts=[(path, text)]))
    out = set()
    for f in found:
        word = LINT_WORDS.get(f.id)
        if word and (f.severity.value in ("warn", "fail") or f.id in SCORED_INFO):
            out.add((f.subject, word))
    return out


def judge_script(case: dict) -> dict:
    path = CORPUS / case["file"]
    text = "\n".join(path.read_text(encoding="utf-8").splitlines()[1:])  # line 1 is the source line
    got = lint_words(text, path.name)
    want = set() if case["lint"] == "clean" else {(i["variable"], i["finding"]) for i in case["lint"]}
    return {
        "id": case["id"],
        "kind": "script",
        "right": got == want,
        "fatal_right": None,
        "got": sorted(got),
        "want": sorted(want),
    }


def judge(case: dict) -> dict:
    return judge_log(case) if case["kind"] == "log" else judge_script(case)


def accuracy(results: list[dict]) -> dict:
    logs = [r for r in results if r["kind"] == "log"]
    scripts = [r for r in results if r["kind"] == "script"]

    def share(items: list[dict], key: str) -> float | None:
        return round(sum(bool(r[key]) for r in items) / len(items), 3) if items else None

    return {
        "cases": len(results),
        "logs": len(logs),
        "scripts": len(scripts),
        "log_root_cause": share(logs, "right"),
        "log_fatal": share(logs, "fatal_right"),
        "script_lint": share(scripts, "right"),
        "overall": share(results, "right"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--split", choices=["dev", "heldout", "both"], default="both", help="developers run dev only"
    )
    parser.add_argument("--show", choices=["dev"], help="list the dev cases judged wrong")
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    out = {}
    for split in ("dev", "heldout") if ns.split == "both" else (ns.split,):
        results = [judge(c) for c in load_split(split)]
        out[split] = accuracy(results)
        if ns.show == split:
            for r in results:
                if not r["right"] or r["fatal_right"] is False:
                    print(f"  {r['id']}: got {r['got']}, want {r['want']}", file=sys.stderr)
    if ns.json:
        print(json.dumps(out, indent=2))
    else:
        for split, acc in out.items():
            print(
                f"{split}: {acc['cases']} cases; logs {acc['logs']}: root cause {acc['log_root_cause']}, fatal "
                f"{acc['log_fatal']}; scripts {acc['scripts']}: lint {acc['script_lint']}; overall {acc['overall']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
