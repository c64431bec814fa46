"""Matrix scheduling, blame and the heat map: pure functions."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricscope.bench.matrix import (
    analyze,
    confirm,
    pack_phases,
    phases,
    retest_flows,
    round_robin,
)
from fabricscope.report.plots import heatmap_svg

HOSTS8 = [f"h{i}" for i in range(1, 9)]


@given(st.integers(min_value=2, max_value=40))
def test_round_robin_covers_every_pair_once_in_disjoint_rounds(n: int) -> None:
    rounds = round_robin(n)
    seen = [p for r in rounds for p in r]
    assert sorted(seen) == sorted((a, b) for a in range(n) for b in range(a + 1, n))
    for r in rounds:
        hosts = [h for p in r for h in p]
        assert len(hosts) == len(set(hosts))
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    assert len(phases(n)) == 2 * len(rounds)


def test_pack_phases_never_uses_a_host_twice() -> None:
    flows = [(0, 1), (1, 0), (0, 2), (2, 0), (3, 4), (4, 3)]
    packed = pack_phases(flows)
    assert sorted(f for ph in packed for f in ph) == sorted(flows)
    for ph in packed:
        hosts = [h for f in ph for h in f]
        assert len(hosts) == len(set(hosts))


def _matrix(n: int, base: float = 1.0, noise: float = 0.02, seed: int = 1):
    rng = random.Random(seed)
    return [[None if i == j else base * (1 + rng.uniform(-noise, noise)) for j in range(n)] for i in range(n)]


def test_healthy_fleet_has_no_suspects() -> None:
    assert analyze(HOSTS8, _matrix(8)).suspects == []


def test_slow_host_is_named_not_its_partners() -> None:
    m = _matrix(8)
    for j in range(8):
        if j != 2:
            m[2][j] = 0.25
            m[j][2] = 0.25
    verdict = analyze(HOSTS8, m)
    assert [(s.kind, s.host) for s in verdict.suspects] == [("host", "h3")]
    assert "25%" in verdict.suspects[0].reason


def test_lossy_host_found_by_retransmits_at_full_rate() -> None:
    m = _matrix(8)
    retx = [[None if i == j else 0.01 for j in range(8)] for i in range(8)]
    for j in range(8):
        if j != 5:
            retx[5][j] = 2.3
            retx[j][5] = 2.1
    verdict = analyze(HOSTS8, m, retx)
    assert [s.host for s in verdict.suspects] == ["h6"] and "retransmits" in verdict.suspects[0].reason


def test_single_bad_pair_points_at_the_link() -> None:
    m = _matrix(8)
    m[1][6] = m[6][1] = 0.3
    verdict = analyze(HOSTS8, m)
    assert [(s.kind, s.host, s.peer) for s in verdict.suspects] == [("link", "h2", "h7")]


def test_two_hosts_cannot_blame_a_host() -> None:
    verdict = analyze(["a", "b"], [[None, 0.1], [0.1, None]])
    assert all(s.kind != "host" for s in verdict.suspects)


def test_retest_uses_best_good_peers_and_confirms() -> None:
    m = _matrix(8)
    for j in range(8):
        if j != 2:
            m[2][j] = m[j][2] = 0.25
    verdict = analyze(HOSTS8, m)
    plan = retest_flows(HOSTS8, verdict, peers=2)
    flows = plan["host:h3:"]
    assert len(flows) == 4 and all(2 in f for f in flows)
    results = {f: {"gbps": 0.25, "retx_pct": 0.0} for f in flows}
    confirmed, cleared = confirm(verdict, plan, results)
    assert [s.host for s in confirmed] == ["h3"] and confirmed[0].confirmed
    results = {f: {"gbps": 1.0, "retx_pct": 0.0} for f in flows}  # transient: fine on retest
    verdict = analyze(HOSTS8, m)
    confirmed, cleared = confirm(verdict, retest_flows(HOSTS8, verdict, 2), results)
    assert confirmed == [] and [s.host for s in cleared] == ["h3"]


def test_heatmap_is_valid_svg_with_every_cell() -> None:
    m = _matrix(4)
    m[0][1] = None  # a failed pair
    svg = heatmap_svg(["h1", "h2", "h3", "<h4>"], m)
    root = ET.fromstring(svg)
    rects = [e for e in root.iter() if e.tag.endswith("rect")]
    assert len(rects) == 16
    assert "&lt;h4&gt;" in svg


@pytest.mark.parametrize("n", [3, 4, 5])
def test_small_fleets(n: int) -> None:
    m = _matrix(n)
    for j in range(n):
        if j != 0:
            m[0][j] = m[j][0] = 0.2
    assert [s.host for s in analyze([f"h{i}" for i in range(n)], m).suspects if s.kind == "host"] == ["h0"]
