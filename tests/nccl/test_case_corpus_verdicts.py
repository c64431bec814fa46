"""The reader and lint against the NCCL case corpus (issue 22): every case runs, its verdict is in
the corpus vocabulary, and the accuracy per split is reported (``-s`` prints it; the junit report
carries it as properties). The dev split holds a floor: the accuracy reached while developing
against dev, so a change that loses dev cases fails here. The held-out split has no floor: its
expectations were not read while developing; its accuracy is measured, not tuned for.

    PYTHONPATH=src python scripts/nccl_case_accuracy.py      # both accuracies, from the command line
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "nccl_case_accuracy", ROOT / "scripts" / "nccl_case_accuracy.py"
)
assert _spec and _spec.loader
accuracy_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accuracy_script)
VOCAB = yaml.safe_load((accuracy_script.CORPUS / "vocabulary.yaml").read_text(encoding="utf-8"))
# Reached on dev (scripts/nccl_case_accuracy.py --split dev): logs' root cause 27/49, fatal 38/49,
# scripts' lint 11/17 (25/42 and 33/42 before the 7 dev logs added 2026-12-05, unseen by the reader,
# of which it got 2 right). A floor, not a target.
DEV_FLOOR = {"log_root_cause": 0.55, "log_fatal": 0.77, "script_lint": 0.64}


@pytest.mark.parametrize("split", ["dev", "heldout"])
def test_case_corpus_accuracy(split: str, record_property) -> None:
    cases = accuracy_script.load_split(split)
    assert cases, f"no {split} cases"
    results = [accuracy_script.judge(case) for case in cases]
    for r in results:
        if r["kind"] == "log":
            assert r["got"]["root_cause"] in VOCAB["root_cause"], r["id"]
            assert r["got"]["fatal"] in (True, False, None), r["id"]
            assert r["got"]["transport"] is None or r["got"]["transport"] in VOCAB["transport"], r["id"]
        else:
            assert all(word in VOCAB["lint_finding"] for _var, word in r["got"]), r["id"]
    acc = accuracy_script.accuracy(results)
    for key, value in acc.items():
        record_property(f"{split}_{key}", value)
    print(f"\n{split}: {acc}")
    if split == "dev":
        for key, floor in DEV_FLOOR.items():
            assert acc[key] >= floor, f"dev {key} fell to {acc[key]} (floor {floor})"


def test_lint_words_name_real_codes() -> None:
    from fabricscope.nccl.lint import CODES

    assert set(accuracy_script.LINT_WORDS) <= set(CODES)
    assert set(accuracy_script.LINT_WORDS.values()) <= set(VOCAB["lint_finding"])
