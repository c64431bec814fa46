"""Shape of the NCCL case corpus (tests/data/nccl_cases/): sources, files, split, vocabulary, counts.

This judges the corpus only, never the reader: whether fabricscope's verdicts match the
expectations is a separate test owned by the reader's authors.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nccl_cases"
SOURCE_LINE = re.compile(r"# source: (?P<repo>[\w.-]+/[\w.-]+) .*(?P<url>https://github\.com/\S+)\Z")
MIN_LOGS = 60
MIN_SCRIPTS = 20
VERDICT_KEYS = {"root_cause", "fatal", "transport", "summary"}


def _split_module():
    spec = importlib.util.spec_from_file_location("nccl_cases_split", CORPUS / "split.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPLIT = _split_module()
VOCAB = yaml.safe_load((CORPUS / "vocabulary.yaml").read_text(encoding="utf-8"))
CASES = [(split, case) for split in ("dev", "heldout") for case in SPLIT.load(split)]


def _first_line(path: Path) -> str:
    with path.open(encoding="utf-8") as fh:
        return fh.readline().rstrip("\n")


def test_ids_unique_and_files_claimed_once() -> None:
    ids = [case["id"] for _, case in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    claimed = [case["file"] for _, case in CASES]
    assert len(claimed) == len(set(claimed))
    on_disk = {str(p.relative_to(CORPUS)) for d in ("logs", "scripts") for p in (CORPUS / d).iterdir()}
    assert on_disk == set(claimed), {
        "unindexed": sorted(on_disk - set(claimed)),
        "missing": sorted(set(claimed) - on_disk),
    }


@pytest.mark.parametrize(("split", "case"), CASES, ids=[c["id"] for _, c in CASES])
def test_case_shape(split: str, case: dict) -> None:
    path = CORPUS / case["file"]
    assert path.is_file()
    assert case["kind"] in ("log", "script")
    assert case["file"].startswith("logs/" if case["kind"] == "log" else "scripts/")
    src = case["source"]
    assert {"repo", "url", "comment"} <= set(src)
    match = SOURCE_LINE.match(_first_line(path))
    assert match, f"{case['file']}: line 1 must be '# source: <owner/repo> ... <url>'"
    assert match["repo"] == src["repo"]
    assert src["url"] in _first_line(path)
    assert src["url"].startswith(f"https://github.com/{src['repo']}/")
    body = [ln for ln in path.read_text(encoding="utf-8").splitlines()[1:] if not ln.startswith("# note:")]
    assert any(ln.strip() for ln in body), "a case needs the pasted text, not only its header"
    assert case["split"] == split == SPLIT.split_of(src["url"])
    verdict = case["verdict"]
    assert set(verdict) == VERDICT_KEYS
    assert verdict["root_cause"] in VOCAB["root_cause"]
    assert verdict["fatal"] in (True, False, None)
    assert verdict["transport"] is None or verdict["transport"] in VOCAB["transport"]
    assert isinstance(verdict["summary"], str) and len(verdict["summary"]) > 20
    if case["kind"] == "script":
        lint = case["lint"]
        assert lint == "clean" or (isinstance(lint, list) and lint), "scripts say 'clean' or list findings"
        for item in [] if lint == "clean" else lint:
            assert {"variable", "finding", "why"} <= set(item) <= {"variable", "finding", "why", "basis"}
            assert item["finding"] in VOCAB["lint_finding"]
            assert item.get("basis", "thread") in VOCAB["lint_basis"]
            assert item["variable"] in path.read_text(encoding="utf-8")
    else:
        assert "lint" not in case


def test_split_matches_hash() -> None:
    assert SPLIT.misfiled() == []


def test_vocabulary_documented() -> None:
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for section in ("root_cause", "lint_finding", "lint_basis"):
        for term in VOCAB[section]:
            assert f"`{term}`" in readme, f"README.md does not document {section} {term}"


def test_counts() -> None:
    concluded = [case for _, case in CASES if case["verdict"]["root_cause"] != "unknown"]
    logs = sum(case["kind"] == "log" for case in concluded)
    scripts = sum(case["kind"] == "script" for case in concluded)
    assert logs >= MIN_LOGS and scripts >= MIN_SCRIPTS, f"{logs} logs, {scripts} scripts with a verdict"
    assert {split for split, _ in CASES} == {"dev", "heldout"}
