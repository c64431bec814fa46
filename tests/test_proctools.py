"""The test helpers' process markers survive being passed on as a float option."""

from __future__ import annotations

from tests.proctools import new_marker


def test_marker_is_its_own_float_text() -> None:
    """``bench collective --timeout MARK`` hands ranks ``str(float(MARK))``: the ranks carry the
    marker only if that text is the marker itself (a trailing 0 was dropped: CI flake)."""
    for _ in range(20_000):
        mark = new_marker()
        assert str(float(mark)) == mark, mark
