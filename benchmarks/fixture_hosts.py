"""The generated fixture hosts (tests/fixtures/make_hosts.py), built on first use by a benchmark."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def fixture_hosts() -> Path:
    """tests/fixtures/hosts, built (or rebuilt after a change of its source) before it is read."""
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    from make_hosts import ensure_built

    return ensure_built()
