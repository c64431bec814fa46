"""bench matrix --topology: paths on a fabric, tomography over them, and the matrix's verdict
(pure; the lab tests in test_lab_localize.py run the same on real namespaces)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricscope.bench.matrix import tomography
from fabricscope.bench.matrix.blame import analyze, retest_flows
from fabricscope.bench.matrix.localize import place
from fabricscope.bench.matrix.tomography import Observation, localize
from fabricscope.topology.model import TopologyError
from fabricscope.topology.paths import FabricPaths, element_label, link_element, match_hosts
from fabricscope.topology.view import view_from_document

DATA = Path(__file__).parent.parent / "data" / "matrix"


def leaf_spine(leaves: int, per_leaf: int, spines: int = 1) -> dict:
    """The sim's explicit graph of a leaf-spine: hosts h1.. in leaf order, every leaf to every spine."""
    n = leaves * per_leaf
    spine_names = ["spine"] if spines == 1 else [f"spine{j + 1}" for j in range(spines)]
    return {
        "name": f"ls{leaves}x{per_leaf}", "nodes": n, "nics_per_node": 1, "gpus_per_node": 1, "gpu": "none",
        "switches": [f"leaf{i + 1}" for i in range(leaves)] + spine_names,
        "links": [{"a": f"leaf{i + 1}", "b": s} for i in range(leaves) for s in spine_names],
        "attach": {f"leaf{i + 1}": [f"{i * per_leaf}-{i * per_leaf + per_leaf - 1}"] for i in range(leaves)},
        "hosts": [f"h{i + 1}" for i in range(n)],
    }  # fmt: skip


def fat_tree() -> dict:
    """Three tiers: 4 leaves of 2 hosts, 2 pods of 2 aggregation switches, 2 cores (ECMP at two levels)."""
    links = []
    for leaf in range(4):
        pod = leaf // 2
        links += [{"a": f"leaf{leaf + 1}", "b": f"agg{pod + 1}{k + 1}"} for k in range(2)]
    for pod in range(2):
        links += [{"a": f"agg{pod + 1}{k + 1}", "b": f"core{k + 1}"} for k in range(2)]
    return {
        "name": "ft", "nodes": 8, "nics_per_node": 1, "gpus_per_node": 1, "gpu": "none",
        "switches": [f"leaf{i + 1}" for i in range(4)] + [f"agg{p}{k}" for p in (1, 2) for k in (1, 2)] + ["core1", "core2"],
        "links": links,
        "attach": {f"leaf{i + 1}": [f"{2 * i}-{2 * i + 1}"] for i in range(4)},
        "hosts": [f"h{i + 1}" for i in range(8)],
    }  # fmt: skip


def observe(doc: dict, bad_elements: set, ecmp_pick=None) -> list[Observation]:
    """Every directed flow; bad when it crosses a bad element (on the path ``ecmp_pick`` chose)."""
    view = view_from_document(doc)
    paths = FabricPaths(view)
    out = []
    for i, a in enumerate(view.hosts):
        for j, b in enumerate(view.hosts):
            if i != j:
                c = paths.crossing(a, b)
                taken = ecmp_pick(i, j, c) if ecmp_pick else c.must
                out.append(Observation((i, j), bool(taken & bad_elements), c.must, c.may))
    return out


def labels(loc: tomography.Localization) -> list[list[str]]:
    return [[element_label(e) for e in b.elements] for b in loc.blamed]


# ----- paths -----------------------------------------------------------------------------------
def test_a_leaf_spine_path_crosses_both_uplinks_and_the_spine() -> None:
    paths = FabricPaths(view_from_document(leaf_spine(3, 2)))
    c = paths.crossing("h1", "h3")
    assert c.paths == 1 and c.must == c.may
    assert c.must == {
        ("host", "h1"),
        ("host", "h3"),
        ("switch", "leaf1"),
        ("switch", "leaf2"),
        ("switch", "spine"),
        link_element("leaf1", "spine"),
        link_element("leaf2", "spine"),
    }
    same_leaf = paths.crossing("h1", "h2")
    assert same_leaf.must == {("host", "h1"), ("host", "h2"), ("switch", "leaf1")}


def test_ecmp_paths_are_counted_and_only_common_parts_are_certain() -> None:
    paths = FabricPaths(view_from_document(fat_tree()))
    across = paths.crossing("h1", "h8")  # leaf1 -> 2 aggs -> 2 cores -> 2 aggs -> leaf4
    assert across.paths == 2  # agg k of each pod reaches core k only: two planes
    assert link_element("leaf1", "agg11") in across.may and link_element("leaf1", "agg11") not in across.must
    assert {("switch", "leaf1"), ("switch", "leaf4")} <= across.must
    assert not any(e[0] == "switch" and e[1].startswith(("agg", "core")) for e in across.must)
    in_pod = paths.crossing("h1", "h3")
    assert in_pod.paths == 2 and not any(e[1].startswith("core") for e in in_pod.may)


def test_hosts_are_matched_by_name_or_short_name_and_a_missing_one_is_named() -> None:
    view = view_from_document(leaf_spine(2, 2))
    assert match_hosts(["h1.cluster", "h2", "h3/r0"], view, "f.yaml") == {
        "h1.cluster": "h1",
        "h2": "h2",
        "h3/r0": "h3",
    }
    with pytest.raises(
        TopologyError, match=r"host\(s\) node9 of the matrix are not in the topology f.yaml"
    ) as err:
        match_hosts(["h1", "node9"], view, "f.yaml")
    assert "\n" not in str(err.value)


# ----- tomography ------------------------------------------------------------------------------
def test_one_bad_uplink_is_named_and_no_host() -> None:
    loc = localize(observe(leaf_spine(3, 3), {link_element("leaf2", "spine")}))
    assert labels(loc) == [["leaf2 - spine"]] and not loc.unexplained
    b = loc.blamed[0]
    assert (b.through, b.slow, len(b.flows)) == (36, 36, 36)  # 3 hosts x 6 others, both ways


def test_one_bad_host_is_named_and_no_link() -> None:
    loc = localize(observe(leaf_spine(3, 3), {("host", "h5")}))
    assert labels(loc) == [["h5"]]


def test_a_bad_uplink_and_a_bad_host_are_both_named() -> None:
    loc = localize(observe(leaf_spine(3, 3), {link_element("leaf2", "spine"), ("host", "h3")}))
    assert sorted(map(tuple, labels(loc))) == [("h3",), ("leaf2 - spine",)]
    assert loc.exact and loc.alternatives == 1


def test_two_leaves_on_one_spine_cannot_be_told_apart_and_say_so() -> None:
    loc = localize(observe(leaf_spine(2, 4), {link_element("leaf2", "spine")}))
    assert labels(loc) == [["leaf1 - spine", "leaf2 - spine", "switch spine"]]
    assert loc.blamed[0].ambiguous and loc.blamed[0].needed == 1


def test_ecmp_ambiguity_keeps_the_bad_link_among_its_leafs_uplinks() -> None:
    """leaf1-agg12 is bad; a flow's hash (unknown to tomography) picks its first hop."""
    bad = link_element("leaf1", "agg12")

    def pick(i: int, j: int, c) -> frozenset:
        hop = "agg12" if (i + j) % 2 else "agg11"
        first = link_element("leaf1", hop) if i < 2 or j < 2 else None
        return c.must | ({first} if first and first in c.may else set())

    loc = localize(observe(fat_tree(), {bad}, pick))
    found = labels(loc)
    assert found == [
        ["agg11 - leaf1", "agg12 - leaf1", "switch agg11", "switch agg12"]
    ]  # leaf1's uplinks: one of them
    assert element_label(bad) in found[0]
    assert loc.blamed[0].may_slow > 0  # its evidence is "may cross", said as such


def test_slow_flows_that_nothing_explains_are_reported_as_such() -> None:
    obs = observe(leaf_spine(3, 2), set())
    obs = [
        Observation(o.flow, o.flow == (0, 2), o.must, o.may) for o in obs
    ]  # one slow flow, all its parts proven good
    loc = localize(obs)
    assert loc.blamed == [] and loc.unexplained == [(0, 2)]


def test_too_many_candidates_fall_back_to_greedy_and_say_so(monkeypatch) -> None:
    monkeypatch.setattr(tomography, "EXACT_BUDGET", 0)
    loc = localize(observe(leaf_spine(3, 3), {link_element("leaf2", "spine"), ("host", "h3")}))
    assert not loc.exact and sorted(map(tuple, labels(loc))) == [("h3",), ("leaf2 - spine",)]


# ----- the matrix's verdict, on real lab matrices ------------------------------------------------
def _lab_run() -> dict:
    return json.loads((DATA / "lab-leaf2-uplink-and-h3.json").read_text())


def test_a_lab_matrix_names_the_uplink_and_the_host_not_the_uplinks_hosts() -> None:
    doc = _lab_run()
    fabric = place(doc["hosts"], doc["topology"], "lab:tomo")
    verdict = analyze(doc["hosts"], doc["matrix_gbps"], doc["retransmit_pct"], fabric=fabric)
    assert [(s.kind, s.host, s.peer) for s in verdict.suspects] == [
        ("host", "h3", None),
        ("link", "leaf2", "spine"),
    ]
    link = verdict.suspects[1]
    assert link.link == ["leaf2", "spine"] and link.flows_slow == 30 and link.flows_through == 30
    assert link.reason == "leaf2 -> spine uplink: 30 of 30 flows through it slow, no good flow through it"
    # without the fabric the same matrix blames the uplink's hosts
    plain = analyze(doc["hosts"], doc["matrix_gbps"], doc["retransmit_pct"])
    assert {"h4", "h5", "h6"} & {s.host for s in plain.suspects if s.kind == "host"}


def test_the_retest_of_a_link_crosses_it_and_no_other_suspect() -> None:
    doc = _lab_run()
    fabric = place(doc["hosts"], doc["topology"], "lab:tomo")
    verdict = analyze(doc["hosts"], doc["matrix_gbps"], doc["retransmit_pct"], fabric=fabric)
    plan = retest_flows(doc["hosts"], verdict, peers=2)
    link_flows = plan["link:leaf2:spine"]
    assert len(link_flows) == 4
    for a, b in link_flows:
        c = fabric.crossings[(a, b)]
        assert link_element("leaf2", "spine") in c.must and ("host", "h3") not in c.may
    host_flows = plan["host:h3:"]
    assert host_flows and all(
        link_element("leaf2", "spine") not in fabric.crossings[f].may for f in host_flows
    )


def _printed_matrix(path: Path) -> tuple[list[str], list[list[float | None]]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    hosts = lines[0].split()
    rows = [[None if v == "-" else float(v) for v in line.split()[1:]] for line in lines[1:]]
    return hosts, rows


def test_a_two_leaf_lab_matrix_says_which_parts_it_cannot_tell_apart() -> None:
    hosts, matrix = _printed_matrix(DATA / "lab-two-leaves-leaf2-uplink.txt")
    doc = leaf_spine(2, 4)
    verdict = analyze(hosts, matrix, None, fabric=place(hosts, doc, "lab:tomo2"))
    assert len(verdict.suspects) == 1
    s = verdict.suspects[0]
    assert s.alternatives == ["leaf1 - spine", "leaf2 - spine", "switch spine"]
    assert s.reason.startswith(
        "one of leaf1 - spine, leaf2 - spine, switch spine: together they explain 32 slow flow(s)"
    )
    assert not any(x.kind == "host" for x in verdict.suspects)


# ----- the result, its text and its drawing ------------------------------------------------------
def _lab_result():
    from datetime import datetime, timezone

    from fabricscope.bench.matrix import MatrixParams, MatrixRun, RdmaPart, Survey, to_bench_result
    from fabricscope.store import StoredRun

    doc = _lab_run()
    fabric = place(doc["hosts"], doc["topology"], "lab:tomo")
    v = analyze(doc["hosts"], doc["matrix_gbps"], doc["retransmit_pct"], fabric=fabric)
    run = MatrixRun(
        MatrixParams(duration_s=0.5, topology="lab:tomo"),
        doc["hosts"],
        list(range(8)),
        Survey("tcp", doc["matrix_gbps"], doc["retransmit_pct"], v, v.suspects, [], []),
        RdmaPart("skipped", "not asked (--no-rdma)"),
        "lab",
        30.0,
        fabric,
    )
    result = to_bench_result(run)
    return result, StoredRun(1, datetime.now(timezone.utc), result)


def test_the_result_carries_the_fabric_and_round_trips() -> None:
    from fabricscope.bench.results.schema import BenchResult

    result, _ = _lab_result()
    again = BenchResult.model_validate(json.loads(json.dumps(result.to_json_dict())))
    assert again.topology == result.topology and again.topology["hosts"] == [f"h{i}" for i in range(1, 9)]
    assert [s.link for s in again.suspects] == [None, ["leaf2", "spine"]]
    assert again.notes[0].startswith("topology lab:tomo: h1 on leaf1, h2 on leaf1, h3 on leaf1, h4 on leaf2")


def test_text_and_html_name_and_draw_the_suspect_link() -> None:
    from fabricscope.report.bench import matrix_lines
    from fabricscope.report.html import render_report

    result, stored = _lab_result()
    text = "\n".join(matrix_lines(result))
    assert "  link leaf2 <-> spine: leaf2 -> spine uplink: 30 of 30 flows through it slow" in text
    assert "note: topology lab:tomo: h1 on leaf1" in text
    html = render_report([stored])
    assert "Fabric (suspects in red)" in html
    red = [line for line in html.split("<line ") if 'class="cable suspect"' in line]
    assert len(red) == 1 and "leaf2 - spine" in red[0]
    red_nics = [line for line in html.split("<line ") if 'class="nic suspect"' in line]
    assert len(red_nics) == 1 and "h3 NIC" in red_nics[0]


# ----- the command --------------------------------------------------------------------------------
def _fs(*args: str, timeout: float = 120):
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "FABRICSCOPE_DB": os.devnull},
    )


def test_an_unreadable_topology_is_one_line_and_exit_2(tmp_path) -> None:
    proc = _fs("bench", "matrix", "--topology", str(tmp_path / "none.yaml"), "--no-store")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--topology" in proc.stderr and "cannot read topology file" in proc.stderr
    family = tmp_path / "family.yaml"
    family.write_text("kind: fat-tree\nnodes: 8\n")
    proc = _fs("bench", "matrix", "--topology", str(family), "--no-store")
    assert proc.returncode == 2 and "describes the family" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_hosts_missing_from_the_topology_end_every_rank_with_one_reason(tmp_path) -> None:
    import yaml

    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(_lab_run()["topology"]))
    proc = _fs(
        "bench",
        "matrix",
        "--launch",
        "local:2",
        "--topology",
        str(path),
        "--no-store",
        "--no-rdma",
        "--duration",
        "0.2",
    )
    assert proc.returncode == 2, proc.stderr
    assert "host(s) local0, local1 of the matrix are not in the topology" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_local_job_on_its_own_topology_reports_it(tmp_path) -> None:
    doc = leaf_spine(1, 2)
    doc["hosts"] = ["local0", "local1"]
    import yaml

    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(doc))
    proc = _fs(
        "bench",
        "matrix",
        "--launch",
        "local:2",
        "--topology",
        str(path),
        "--no-store",
        "--no-rdma",
        "--duration",
        "0.2",
        "--warmup",
        "0",
        "--json",
    )
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    assert out["params"]["topology"] == str(path) and out["topology"]["hosts"] == ["local0", "local1"]
    assert out["notes"][0] == f"topology {path}: local0 on leaf1, local1 on leaf1"


@pytest.mark.slow
def test_discovery_that_finds_no_lldp_ends_every_rank_with_one_reason(tmp_path) -> None:
    sock = str(tmp_path / "absent-{host}.sock")  # no lldpd answers here, whatever runs on this machine
    proc = _fs(
        "bench",
        "matrix",
        "--launch",
        "local:2",
        "--topology",
        "discover",
        "--lldp-socket",
        sock,
        "--no-store",
        "--no-rdma",
        "--duration",
        "0.2",
    )
    assert proc.returncode == 2, proc.stderr
    assert (
        "--topology discover: discovery: local0: no LLDP reading" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_a_bad_spine_is_named_as_the_switch_not_as_its_uplinks() -> None:
    loc = localize(observe(leaf_spine(3, 3), {("switch", "spine")}))
    assert labels(loc) == [["switch spine"]]  # each uplink explains only part of what the spine explains


def test_a_suspect_switch_is_drawn_with_all_its_cables_in_red() -> None:
    from fabricscope.bench.results.schema import MatrixSuspect
    from fabricscope.report.html import render_report

    result, stored = _lab_result()
    result.suspects = [
        MatrixSuspect(host="spine", kind="switch", reason="switch spine: 42 of 42 flows through it slow")
    ]
    html = render_report([stored])
    red = [line for line in html.split("<line ") if 'class="cable suspect"' in line]
    assert len(red) == 3 and all("spine" in line for line in red)


def test_a_switch_suspect_reads_once_as_a_switch_in_text() -> None:
    from fabricscope.report.bench import matrix_lines

    hosts = [f"h{i}" for i in range(1, 10)]
    doc = leaf_spine(3, 3)
    m = [
        [None if i == j else (0.02 if i // 3 != j // 3 else 0.19) for j in range(9)] for i in range(9)
    ]  # the spine: every cross-leaf flow
    fabric = place(hosts, doc, "f.yaml")
    verdict = analyze(hosts, m, None, fabric=fabric)
    assert [(s.kind, s.host) for s in verdict.suspects] == [("switch", "spine")]
    result, _ = _lab_result()
    result.suspects = verdict.suspects
    text = "\n".join(matrix_lines(result))
    assert (
        "  switch spine: switch spine: 54 of 54 flows through it slow, no good flow through it (not retested)"
        in text
    )
