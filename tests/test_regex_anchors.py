"""Whole-string regexes full-match (issue 15 item 10). Python's ``$`` also matches before a final
newline, so ``^[a-z]+$`` let the lab name "t1\\n" through to ``ip netns add``. In src/, a pattern
written as a whole string (``^...``) ends in ``\\Z`` (or is used with ``fullmatch``); ``\\s*$``
stays, as it already swallows the newline. pydantic's ``Field(pattern=...)`` runs Rust's regex,
whose ``$`` is the end of the text: the tests below hold each such field to that."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

SRC = Path(__file__).resolve().parents[1] / "src" / "fabricscope"
RE_FUNCS = {"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer"}


def _whole_string_patterns_ending_in_dollar() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in RE_FUNCS or not (
                isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
            ):
                continue
            if (
                not node.args
                or not isinstance(node.args[0], ast.Constant)
                or not isinstance(node.args[0].value, str)
            ):
                continue
            pattern = node.args[0].value
            if not pattern.startswith("^"):
                continue  # a search inside a line (nccl/log/parse.py's), not a whole-string check
            for alternative in pattern.split("|^"):
                if re.search(r"(?<!\\)\$$", alternative) and not alternative.endswith(r"\s*$"):
                    bad.append(f"{path.relative_to(SRC)}:{node.lineno}: {pattern[-40:]!r}")
    return bad


def test_no_whole_string_pattern_ends_in_dollar() -> None:
    assert _whole_string_patterns_ending_in_dollar() == []


def test_the_scan_finds_a_dollar_anchor(tmp_path: Path, monkeypatch) -> None:
    """The scan itself: a module with the old lab regex is reported."""
    (tmp_path / "m.py").write_text('import re\nNAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")\n')
    monkeypatch.setattr(f"{__name__}.SRC", tmp_path)
    assert len(_whole_string_patterns_ending_in_dollar()) == 1


def test_converted_patterns_refuse_a_trailing_newline() -> None:
    from fabricscope.host import pci
    from fabricscope.lab import spec

    assert spec.NAME_RE.fullmatch("t1") and not spec.NAME_RE.fullmatch("t1\n")
    assert pci._BDF.match("0000:3b:00.0") and not pci._BDF.match("0000:3b:00.0\n")


def test_pydantic_patterns_refuse_a_trailing_newline() -> None:
    from fabricscope.bench.matrix.schedule import MatrixParams
    from fabricscope.bench.rdma.run import RdmaParams

    RdmaParams(test="write_bw", device="mlx5_0")
    with pytest.raises(ValidationError):
        RdmaParams(test="write_bw", device="mlx5_0\n")  # reaches perftest's -d
    with pytest.raises(ValidationError):
        MatrixParams(rdma_device="mlx5_0\n")


def test_units_port_refuses_a_trailing_newline() -> None:
    from fabricscope.units import UnitError, parse_port

    assert parse_port("5211") == 5211
    for text in ("5211\n", "²", "٥٢١١"):
        with pytest.raises(UnitError):
            parse_port(text)
