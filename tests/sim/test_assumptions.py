"""Every answer names the defaults it rests on (issue 23 item 8): which changed it, their source,
and how to override them."""

from __future__ import annotations

from fabricscope.report.sim import assumption_lines
from fabricscope.sim.scenario import run_collective


def _changed(doc: dict) -> dict[str, dict]:
    return {a["name"]: a for a in doc["assumptions"] if a["changed"]}


def test_ecmp_collisions_name_the_seed_and_dcqcn_its_factor() -> None:
    d = run_collective(
        {"topology": "fat-tree", "nodes": 128, "transport": "roce", "size": "1G", "seed": 1, "algo": "ring"}
    )
    ch = _changed(d)
    assert d["limited_by"] == "fabric bandwidth"
    assert ch["ECMP hash seed"]["value"] == "1" and "--seed" in ch["ECMP hash seed"]["override"]
    assert "DCQCN on contended links" in ch and "Barre" in ch["DCQCN on contended links"]["source"]
    adaptive = run_collective(
        {"topology": "fat-tree", "nodes": 128, "transport": "ib", "size": "1G", "algo": "ring"}
    )
    assert "ECMP hash seed" not in _changed(adaptive) and "DCQCN on contended links" not in _changed(adaptive)


def test_tcp_answers_say_they_are_upper_bounds_and_what_they_rest_on() -> None:
    d = run_collective({"system": "dgx-h100", "nodes": 2, "transport": "tcp", "size": "8M"})
    ch = _changed(d)
    assert ch["TCP host model"]["value"] == "upper bound"
    names = {a["name"] for a in d["assumptions"]}
    assert {
        "per-flow (per-core) cap",
        "host memory for NCCL's staging copies",
        "per network hop latency",
    } <= names
    given = run_collective(
        {
            "system": "dgx-h100",
            "nodes": 2,
            "transport": "tcp",
            "size": "8M",
            "host_mem_GBps": 500,
            "alpha_us": 20,
        }
    )
    names = {a["name"] for a in given["assumptions"]}
    assert "host memory for NCCL's staging copies" not in names and "per network hop latency" not in names


def test_text_prints_the_changed_ones_and_explain_all() -> None:
    d = run_collective({"system": "dgx-h100", "nodes": 2, "transport": "tcp", "size": "8M"})
    short, full = assumption_lines(d), assumption_lines(d, explain=True)
    assert len(full) > len(short) > 1
    assert all("override:" in line for line in full[1:])
