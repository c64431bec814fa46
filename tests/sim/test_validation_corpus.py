"""The corpus of published figures the simulator is fitted and judged on (issue 23, Validation).

tests/data/sim_validation/ holds published figures only (schema: its README.md). These tests check
the corpus's shape, never the simulator: every figure names its source and system, the split into
calibration and held-out parts follows the fixed hash (so nobody can move a figure after seeing
how the model does on it), rows of one published table never straddle the split, units and
metrics come from a closed vocabulary, and no figure repeats one fabricscope.sim.published
already holds.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from fabricscope.sim import published

CORPUS = Path(__file__).resolve().parents[1] / "data" / "sim_validation"

UNITS = {"us", "ms", "s", "GB/s", "Gb/s", "TFLOP/s", "%", "tokens/s", "tokens/s/GPU", "tokens/s/node"}
METRIC_UNITS = {
    "time": {"us"},  # nccl-tests' time column (out-of-place)
    "busbw": {"GB/s", "Gb/s"},  # nccl-tests' bus bandwidth (or as a report quotes it)
    "algbw": {"GB/s"},
    "latency": {"us"},  # one MoE dispatch/combine kernel
    "bandwidth": {"GB/s"},  # MoE dispatch/combine bandwidth as the library reports it
    "tokens_per_s": {"tokens/s"},
    "tokens_per_s_per_gpu": {"tokens/s/GPU"},
    "tokens_per_s_per_node": {"tokens/s/node"},
    "tflops_per_gpu": {"TFLOP/s"},
    "mfu": {"%"},
    "step_time": {"s", "ms"},
}
TRANSPORTS = {"nvlink", "ib", "roce", "rdma", "tcp", "efa", "tcpx", "tcpxo"}
KINDS = {
    "collective",
    "moe_dispatch",
    "moe_combine",
    "training",
    "inference",
    "inference_prefill",
    "inference_decode",
}
GPUS = {None, "v100", "a100", "h100", "h200", "h800", "b200", "gb200"}
COLLECTIVES = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"}


def load(name: str) -> list[dict]:
    doc = yaml.safe_load((CORPUS / name).read_text())
    assert isinstance(doc, list), f"{name}: a list of records"
    return doc


FIGURES = load("figures.yaml")


def split_key(rec: dict) -> str:
    """The string the split hashes: a table's source for its rows, else source|system|metric|size."""
    if rec.get("table"):
        return f"{rec['source']['url']}#{rec['table']}"
    return (
        f"{rec['source']['url']}|{rec['system']['name']}|{rec['metric']}|{rec['workload'].get('size_label')}"
    )


def expected_split(key: str) -> str:
    return "heldout" if int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0 else "calibration"


def test_enough_new_figures() -> None:
    assert len(FIGURES) >= 40
    assert len({r["id"] for r in FIGURES}) == len(FIGURES), "ids are unique"


@pytest.mark.parametrize("rec", FIGURES, ids=[r["id"] for r in FIGURES])
def test_record_shape(rec: dict) -> None:
    src, system, work = rec["source"], rec["system"], rec["workload"]
    assert src["url"].startswith("https://") and src["where"].strip(), "source: url and where in it"
    if src.get("repo"):
        assert src["url"].startswith(f"https://github.com/{src['repo']}/")
        assert src.get("commit") is None or len(src["commit"]) == 40
    assert system["name"] and system["transport"] in TRANSPORTS and system["transport_basis"]
    assert system["scale_up"] == "nvlink" and system["gpu"] in GPUS
    assert rec["metric"] in METRIC_UNITS and rec["unit"] in UNITS
    assert rec["unit"] in METRIC_UNITS[rec["metric"]], f"{rec['metric']} in {rec['unit']}"
    assert isinstance(rec["value"], float) and rec["value"] > 0
    assert isinstance(rec["read_off_plot"], bool) and isinstance(rec.get("reported_problem", False), bool)
    assert work["kind"] in KINDS
    if work["kind"] == "collective":
        assert work["collective"] in COLLECTIVES
        assert work["size_label"] and (work["size_bytes"] is None or work["size_bytes"] > 0)
    for key in ("nodes", "gpus_per_node", "ranks"):
        assert system.get(key) is None or (isinstance(system[key], int) and system[key] > 0)
    if system.get("nodes") and system.get("gpus_per_node") and system.get("ranks"):
        assert system["ranks"] == system["nodes"] * system["gpus_per_node"]


BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
}


def row_disagreements(rec: dict) -> list[str]:
    """An nccl-tests row's own columns must agree: algbw = size / time, busbw = algbw x the collective's
    factor for the record's rank count. A mistyped number or a wrong rank count shows here."""
    cols, work = rec.get("columns") or {}, rec["workload"]
    if rec["metric"] != "time" or "algbw_GBps" not in cols:
        return []
    found = []
    for time, alg in (
        (rec["value"], cols["algbw_GBps"]),
        (cols["inplace_time_us"], cols["inplace_algbw_GBps"]),
    ):
        if abs(work["size_bytes"] / (time * 1e3) - alg) > 0.011 + 0.02 * alg:
            found.append(f"{rec['id']}: {work['size_bytes']} B in {time} us is not {alg} GB/s")
    ranks, factor = rec["system"].get("ranks"), BUS_FACTOR.get(work["collective"])
    if ranks and factor and cols["algbw_GBps"] >= 1:
        expected = cols["algbw_GBps"] * factor(ranks)
        if abs(expected - cols["busbw_GBps"]) > 0.011 + 0.01 * cols["busbw_GBps"]:
            found.append(f"{rec['id']}: busbw {cols['busbw_GBps']} is not algbw x factor for {ranks} ranks")
    return found


def test_nccl_tests_rows_agree_with_themselves() -> None:
    assert not [d for r in FIGURES for d in row_disagreements(r)]


def test_the_row_check_catches_a_typo() -> None:
    rec = next(r for r in FIGURES if r["metric"] == "time" and r["columns"]["algbw_GBps"] > 10)
    typo = {**rec, "value": rec["value"] * 1.3}
    assert row_disagreements(typo)
    wrong_ranks = {**rec, "system": {**rec["system"], "ranks": 2}}
    assert row_disagreements(wrong_ranks)


def test_split_follows_the_fixed_hash() -> None:
    wrong = [
        r["id"]
        for r in FIGURES
        if r["split_key"] != split_key(r) or r["split"] != expected_split(r["split_key"])
    ]
    assert not wrong, wrong


def test_a_table_is_never_half_fitted() -> None:
    splits: dict[str, set[str]] = defaultdict(set)
    for r in FIGURES:
        if r.get("table"):
            splits[r["table"]].add(r["split"])
    assert all(len(s) == 1 for s in splits.values()), {t: s for t, s in splits.items() if len(s) > 1}


def test_split_files_are_the_two_parts() -> None:
    cal, held = load("calibration.yaml"), load("heldout.yaml")
    assert all(r["split"] == "calibration" for r in cal) and all(r["split"] == "heldout" for r in held)
    assert sorted(cal + held, key=lambda r: r["id"]) == sorted(FIGURES, key=lambda r: r["id"])
    assert cal and held


def test_the_readme_index_lists_every_table_with_its_split() -> None:
    text = (CORPUS / "README.md").read_text()
    block = text.split("<!-- tables:start -->")[1].split("<!-- tables:end -->")[0]
    listed = {
        cells[0]: (cells[1], int(cells[2]))
        for line in block.strip().splitlines()[2:]
        for cells in [[c.strip() for c in line.strip().strip("|").split("|")]]
    }
    actual: dict[str, tuple[str, int]] = {}
    for r in FIGURES:
        key = r.get("table") or r["id"]
        actual[key] = (r["split"], actual.get(key, (r["split"], 0))[1] + 1)
    assert listed == actual


def published_figures() -> list[tuple[str, float, str]]:
    """(source, figure, unit) of every figure fabricscope.sim.published holds."""
    return [(v.source, v.figure, v.unit) for v in published.VALIDATION] + [
        (c.source, c.figure, c.unit) for c in published.CALIBRATION if c.figure
    ]


def repository(url: str) -> str:
    """owner/name of a GitHub address (issue, pull request or file), else the address itself."""
    m = re.search(r"github\.com/([^/\s]+/[^/\s#]+)", url)
    return m.group(1) if m else url.split(" ")[0]


UNIT_OF_PUBLISHED = {"%": "% MFU"}


def numbers(rec: dict) -> list[tuple[float, str]]:
    """The record's value and the bus bandwidths of its row, with their units."""
    found = [(rec["value"], UNIT_OF_PUBLISHED.get(rec.get("unit", ""), rec.get("unit", "")))]
    cols = rec.get("columns") or {}
    found += [(cols[k], "GB/s") for k in ("busbw_GBps", "inplace_busbw_GBps") if cols.get(k)]
    return found


def duplicates(records: list[dict], known: list[tuple[str, float, str]]) -> list[str]:
    """Records from a repository (or page) published.py cites holding a number within 0.5% of one of
    its figures in the same unit: the same measurement, even when quoted from another file or commit."""
    found = []
    for r in records:
        repo = repository(r["source"]["url"])
        for source, figure, unit in known:
            if repository(source) != repo:
                continue
            for value, value_unit in numbers(r):
                if value_unit == unit and abs(value - figure) <= 0.005 * figure:
                    found.append(
                        f"{r['id']}: {value} {unit} from {r['source']['url']} is {figure} of {source}"
                    )
    return found


def test_no_figure_repeats_one_published_py_holds() -> None:
    assert not duplicates(FIGURES, published_figures())


def test_the_duplicate_guard_catches_a_repeat() -> None:
    v = next(v for v in published.VALIDATION if v.unit == "GB/s")
    planted = {
        "id": "planted",
        "source": {"url": v.source},
        "value": 1.0,
        "unit": "us",
        "columns": {"busbw_GBps": v.figure},
    }
    assert duplicates([planted], published_figures())
    elsewhere = {**planted, "source": {"url": "https://github.com/someone/else/blob/0/README.md"}}
    assert not duplicates([elsewhere], published_figures())


def test_the_split_guard_catches_a_moved_figure() -> None:
    rec = dict(FIGURES[0])
    rec["split"] = "calibration" if rec["split"] == "heldout" else "heldout"
    assert rec["split"] != expected_split(split_key(rec))
