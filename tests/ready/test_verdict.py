"""The readiness verdict, step by step, on real doctor and lint findings from the fixture hosts
and on measured/predicted figures chosen around each threshold."""

from __future__ import annotations

import pytest

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Finding, Severity
from fabricscope.host import Root
from fabricscope.host.inventory import read_inventory
from fabricscope.nccl.job import JobSources, lint_job
from fabricscope.ready.predict import Degradation
from fabricscope.ready.verdict import (
    FAIL_BELOW,
    FAR_BELOW,
    NOT_READY,
    READY,
    WARN_BELOW,
    WARNINGS,
    Step,
    judge_doctor,
    judge_lint,
    judge_matrix,
    judge_measured,
    verdict,
)
from tests.conftest import FIXTURE_HOSTS


def _doctor(name: str) -> list[Finding]:
    return [f for f in run_doctor(Root.at(FIXTURE_HOSTS / name)).findings if f.severity is not Severity.PASS]


def test_doctor_step_names_the_failing_node_with_its_finding_and_fix() -> None:
    degraded = _doctor("ib-degraded")
    step = judge_doctor([("n1", _doctor("ib-ndr-healthy")), ("n2", degraded)])
    assert step.status == "fail"
    assert [c.name for c in step.culprits if c.kind == "node"] == ["n2"]
    worst = max(degraded, key=lambda f: f.severity.rank)
    assert step.culprits[0].finding == worst.id and step.culprits[0].fix


def test_doctor_step_passes_healthy_nodes_and_warns_on_warnings() -> None:
    healthy = _doctor("ib-ndr-healthy")
    assert all(f.severity.rank < Severity.WARN.rank for f in healthy)  # the fixture's own promise
    assert judge_doctor([("a", healthy), ("b", healthy)]).status == "pass"
    warn = Finding(
        "fleet.firmware",
        Severity.WARN,
        "mlx5_0",
        "28.38.1900 where 7 of 8 nodes run 28.39.1002",
        {},
        "update it",
    )
    step = judge_doctor([("a", healthy), ("b", [*healthy, warn])])
    assert step.status == "warn" and [c.name for c in step.culprits] == ["b"]


def _lint(setting: str) -> list[Finding]:
    root = Root.at(FIXTURE_HOSTS / "roce-healthy")
    return lint_job(JobSources(env_files=[("job.env", setting)]), root, read_inventory(root))[1]


def test_lint_step_blames_the_setting_on_every_node_it_fails_on() -> None:
    bad = _lint("NCCL_IB_HCA=mlx5_9\n")
    step = judge_lint([("h1", bad), ("h2", bad)], ["job.env"])
    assert step.status == "fail"
    culprit = next(c for c in step.culprits if c.finding == "NCCL010")
    assert culprit.kind == "setting" and "NCCL_IB_HCA" in culprit.name and culprit.nodes == ("h1", "h2")


def test_lint_step_passes_a_good_setting_and_skips_without_one() -> None:
    good = _lint("NCCL_IB_HCA=mlx5_0,mlx5_1\n")
    assert all(f.severity.rank < Severity.FAIL.rank for f in good)
    assert judge_lint([("h1", good)], ["job.env"]).status in ("pass", "warn")
    assert judge_lint([], []).status == "skipped"


def test_lint_step_fails_a_node_that_cannot_be_linted() -> None:
    step = judge_lint([("h1", "cannot read /nonexistent")], ["job.sh"])
    assert step.status == "fail" and step.culprits[0].kind == "node" and step.culprits[0].name == "h1"


SLOW = Degradation("host", "h3", 250e6, 1e9, "topology")


@pytest.mark.parametrize(("ratio", "status"), [(1.0, "pass"), (WARN_BELOW + 0.01, "pass"), (WARN_BELOW - 0.01, "warn"),
                                               (FAIL_BELOW - 0.01, "fail")])  # fmt: skip
def test_measured_step_against_the_fabric_as_built(ratio: float, status: str) -> None:
    step = judge_measured(
        "collective", "GB/s", predicted=ratio * 10, measured=ratio * 10, expected=10.0, degradations=[SLOW]
    )
    assert step.status == status
    assert ([c.name for c in step.culprits] == ["h3"]) == (
        status != "pass"
    )  # the known slow host, only when it matters
    assert step.error_pct == pytest.approx(0.0)


def test_far_below_the_prediction_says_something_unknown_differs() -> None:
    step = judge_measured(
        "collective",
        "GB/s",
        predicted=10.0,
        measured=10.0 * (FAR_BELOW - 0.05),
        expected=None,
        degradations=[],
    )
    assert step.status == "fail" and step.culprits[0].kind == "fabric"
    assert step.error_pct == pytest.approx((FAR_BELOW - 0.05 - 1) * 100)
    near = judge_measured("collective", "GB/s", predicted=10.0, measured=9.5, expected=10.0, degradations=[])
    assert near.status == "pass" and not near.culprits


class _Suspect:
    kind, host, reason, peer, link, alternatives = "host", "h3", "row and column low", None, None, None


def test_matrix_step_judges_the_slowest_pair_and_merges_blame() -> None:
    hosts = ["h1", "h2", "h3"]
    expected = [[None, 1.0, 1.0], [1.0, None, 1.0], [1.0, 1.0, None]]
    predicted = [[None, 1.0, 0.25], [1.0, None, 0.25], [0.25, 0.25, None]]
    measured = [[None, 0.97, 0.24], [0.96, None, 0.245], [0.24, 0.24, None]]
    step = judge_matrix(hosts, measured, predicted, expected, [SLOW], [_Suspect()])
    assert step.status == "fail"
    assert [(c.kind, c.name) for c in step.culprits] == [
        ("node", "h3")
    ]  # the topology's slow host and the matrix's suspect: one
    assert "row and column low" in step.culprits[0].problem and "250M" in step.culprits[0].problem
    assert step.details["pairs_within_10pct"] == 6


def test_verdict_word_exit_codes_and_drain_list() -> None:
    ok = Step("doctor", "pass", "")
    warn = Step("lint", "warn", "")
    fail = judge_measured(
        "collective",
        "GB/s",
        10.0,
        2.0,
        10.0,
        [SLOW, Degradation("link", "leaf2-spine", 1e8, 4e8, "topology")],
    )
    assert verdict([ok]).word == READY and verdict([ok]).exit_code() == 0
    assert verdict([ok, warn]).word == WARNINGS and verdict([ok, warn]).exit_code() == 0
    assert verdict([ok, warn]).exit_code(fail_on_warn=True) == 1
    v = verdict([ok, warn, fail])
    assert v.word == NOT_READY and v.exit_code() == 1
    assert [d["node"] for d in v.drain] == ["h3"]  # a cable is not drained; a slow host is
    assert (
        v.drain[0]["command"][:3] == ["scontrol", "update", "NodeName=h3"]
        and "State=DRAIN" in v.drain[0]["command"]
    )
    assert verdict([ok, Step("matrix", "error", "rank 2 sent nothing")]).exit_code() == 2
    assert not verdict(
        [
            warn,
            Step(
                "matrix", "warn", "", judge_doctor([("h9", [Finding("x", Severity.WARN, "s", "m")])]).culprits
            ),
        ]
    ).drain


def test_one_noisy_pair_is_no_warning_one_slow_pair_fails() -> None:
    hosts = ["h1", "h2", "h3"]
    built = [[None, 1.0, 1.0], [1.0, None, 1.0], [1.0, 1.0, None]]
    noisy = [
        [None, 0.99, 0.98],
        [0.89, None, 0.97],
        [0.99, 0.98, None],
    ]  # h2->h1 at 89%: within the matrix's own noise
    assert judge_matrix(hosts, noisy, built, built, [], []).status == "pass"
    slow = [
        [None, 0.99, 0.98],
        [0.70, None, 0.97],
        [0.99, 0.98, None],
    ]  # h2->h1 at 70% of what it should carry
    step = judge_matrix(hosts, slow, built, built, [], [])
    assert step.status == "fail" and "h2->h1" in step.summary
    assert [(c.kind, c.name) for c in step.culprits] == [
        ("link", "h2->h1")
    ]  # nothing else known: the pair is the culprit
