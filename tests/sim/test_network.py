"""Which network for a workload (issue 23): candidates side by side, ratio to the best, the reason,
and a note where the answer rests on an unvalidated part of the model."""

from __future__ import annotations

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.network import compare, parse_candidate

TRAIN = {
    "model": "llama3-8b",
    "gpus": 32,
    "tp": 8,
    "seq_len": 4096,
    "tokens_per_step": 32 * 4096,
    "system": "dgx-h100",
}


def test_candidates_are_ranked_with_ratio_reason_and_notes() -> None:
    d = compare("train", TRAIN, ["tcp:1x100G", "ib:8x400G", "roce:8x400G"])
    rows = d["rows"]
    assert [r["tokens_per_s"] for r in rows] == sorted((r["tokens_per_s"] for r in rows), reverse=True)
    assert rows[0]["ratio"] == 1.0 and d["best"] == rows[0]["candidate"]
    tcp = next(r for r in rows if r["transport"] == "tcp")
    assert tcp["ratio"] < 1 and tcp["nics_per_node"] == 1 and tcp["nic_gbps"] == 100
    assert "upper bound" in tcp["unvalidated"][0]
    assert all(r["reason"] for r in rows)
    assert not next(r for r in rows if r["transport"] == "ib")["unvalidated"]


def test_inference_candidates() -> None:
    d = compare("infer", {"model": "llama3-70b", "tp": 16, "batch": 16, "system": "dgx-h100"}, ["ib", "tcp"])
    assert {r["transport"] for r in d["rows"]} == {"ib", "tcp"}
    assert d["rows"][0]["transport"] == "ib"  # TP across two nodes feels the network
    assert "TP communication" in d["rows"][-1]["reason"]


@pytest.mark.parametrize("spec", ["carrier-pigeon", "ib:8x", "tcp:x100G"])
def test_bad_candidate(spec: str) -> None:
    with pytest.raises(FabricscopeError, match="TRANSPORT"):
        parse_candidate(spec)


def test_candidate_spec() -> None:
    assert parse_candidate("tcp:2x200G") == {"transport": "tcp", "nics_per_node": 2, "nic_rate": "200G"}
    assert parse_candidate("efa") == {"transport": "efa"}
