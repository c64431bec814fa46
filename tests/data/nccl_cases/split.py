"""Recompute the dev / held-out split of the NCCL case corpus from each case's source URL.

The split is a fixed hash so nobody chooses which cases are held out:
heldout when int(sha256(url), 16) % 3 == 0, dev otherwise. Run it to check the index files:
    python tests/data/nccl_cases/split.py          # exit 1 on any case filed under the wrong split
    python tests/data/nccl_cases/split.py URL ...  # print the split of each URL
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
INDEXES = {"dev": HERE / "dev.yaml", "heldout": HERE / "heldout.yaml"}


def split_of(key: str) -> str:
    """The split of a case whose source URL (or id, for a case without one) is key."""
    return "heldout" if int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0 else "dev"


def load(split: str) -> list[dict]:
    """The expectation records of one split (dev or heldout)."""
    data = yaml.safe_load(INDEXES[split].read_text(encoding="utf-8")) or {}
    return list(data.get("cases") or [])


def misfiled() -> list[str]:
    """One line per case whose file, split field and hash disagree."""
    bad = []
    for split in INDEXES:
        for case in load(split):
            want = split_of(case["source"]["url"])
            if case.get("split") != split or want != split:
                bad.append(f"{case['id']}: filed {split}, field {case.get('split')}, hash {want}")
    return bad


def main(argv: list[str]) -> int:
    if argv:
        for key in argv:
            print(f"{split_of(key)}\t{key}")
        return 0
    bad = misfiled()
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
