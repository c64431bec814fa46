"""The model against published figures it was not fitted to (issue 10 item 8).

docs/sim.md prints two tables from ``fabricscope.sim.published``: the calibration inputs (what
each constant was fitted to) and the validation rows. Each validation row is run here and held in
its band (15% bandwidth, 30% small-message latency); a row the docs mark as off must stay off, so
its stated reason stays true. A validation figure that is also a calibration input fails the suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.sim import published

DOC = Path(__file__).resolve().parents[2] / "docs" / "sim.md"


def _block(name: str) -> str:
    text = DOC.read_text()
    return text.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")[0].strip()


@pytest.mark.parametrize("row", published.VALIDATION, ids=[v.case[:48] for v in published.VALIDATION])
def test_validation_row_in_its_band(row: published.Validation) -> None:
    ratio = published.model_figure(row) / row.figure
    if row.holds:
        assert abs(ratio - 1) <= row.band, f"{row.case}: model/published = {ratio:.3f}"
    else:
        assert abs(ratio - 1) > row.band, (
            f"{row.case} is documented as off but now holds ({ratio:.3f}): update the docs"
        )


def test_validation_spans_what_the_issue_asks() -> None:
    held = [v for v in published.VALIDATION if v.holds]
    assert len(held) >= 15
    assert any(v.unit == "us" for v in held)  # small-message latency across nodes
    text = " ".join(v.case + str(v.params) for v in held)
    for needle in (
        "H100, one node",
        "H200, one node",
        "A100, one node",
        "RoCE",
        "HDR IB",
        "alltoall",
        "nvlink_domain",
        "1,984 GPUs",
        "MFU",
        "iteration time",
    ):
        assert needle in text, needle


def test_no_validation_figure_is_a_calibration_input() -> None:
    inputs = {(c.source, c.figure) for c in published.CALIBRATION if c.figure}
    for v in published.VALIDATION:
        for source, figure in inputs:
            assert not (v.source == source and abs(v.figure - figure) <= 0.005 * figure), (
                f"{v.case}: {v.figure} from {v.source} is a calibration input"
            )


CORPUS = Path(__file__).resolve().parents[1] / "data" / "sim_validation"


def _corpus(split: str) -> list[dict]:
    import yaml

    return yaml.safe_load((CORPUS / f"{split}.yaml").read_text())


def test_no_held_out_figure_is_a_calibration_input() -> None:
    """Issue 23: constants are fitted on calibration.yaml only. Every table a constant names is a
    calibration table, none is held out, and no held-out figure is a fitted figure."""
    cal_tables = {r["table"] for r in _corpus("calibration")}
    held = _corpus("heldout")
    held_tables = {r["table"] for r in held}
    for c in published.CALIBRATION:
        for t in c.tables:
            assert t in cal_tables and t not in held_tables, (
                f"{c.constant} is fitted on {t}, not a calibration table"
            )
        if c.figure:
            for r in held:
                same_source = c.source in (r["source"]["url"], r["source"].get("repo"))
                assert not (same_source and abs(float(r["value"]) - c.figure) <= 0.005 * c.figure), (
                    f"{c.constant} is fitted to held-out figure {r['id']}"
                )


def test_the_corpus_guard_catches_a_held_out_table(monkeypatch) -> None:
    table = _corpus("heldout")[0]["table"]
    bad = published.Calibration("x", "1", 0.0, "", "", "", (table,))
    monkeypatch.setattr(published, "CALIBRATION", (*published.CALIBRATION, bad))
    with pytest.raises(AssertionError, match="not a calibration table"):
        test_no_held_out_figure_is_a_calibration_input()


def test_the_guard_catches_a_reused_figure(monkeypatch) -> None:
    cal = published.CALIBRATION[0]
    reused = published.Validation("ring in one node", cal.figure, "GB/s", cal.source, {})
    monkeypatch.setattr(published, "VALIDATION", (*published.VALIDATION, reused))
    with pytest.raises(AssertionError, match="calibration input"):
        test_no_validation_figure_is_a_calibration_input()


def test_docs_print_both_tables() -> None:
    cal, val = published.markdown()
    assert _block("sim-calibration") == cal, "docs/sim.md calibration table is stale:\n" + cal
    assert _block("sim-validation") == val, "docs/sim.md validation table is stale:\n" + val
