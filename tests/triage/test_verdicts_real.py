"""Verdicts on real dumps from gloo jobs in the lab (tests/data/job/lab, tests/triage/train_job.py),
one planted fault each; the culprit is named exactly, and no innocent rank or host."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fabricscope.triage.collect import collect
from fabricscope.triage.document import build, exit_code
from tests.triage.conftest import DATA


def _doc(path, *extra) -> dict:
    return build(collect([path, *extra]))


def _culprits(doc: dict) -> list[tuple[int, str]]:
    return [(c["rank"], c["host"]) for c in doc["verdict"]["culprits"]]


def test_healthy_job(case) -> None:
    doc = _doc(case("healthy"))
    assert doc["verdict"]["class"] == "healthy" and exit_code(doc) == 0 and not doc["verdict"]["culprits"]


def test_skipped_collective_names_the_skipper_not_the_rank_that_crashed(case) -> None:
    doc = _doc(case("skip"))
    v = doc["verdict"]
    assert v["class"] == "never_entered" and _culprits(doc) == [(2, "h3")], v
    assert "skipped" in v["culprits"][0]["why"] and exit_code(doc) == 1
    assert doc["next_action"]["kind"] == "application"


def test_size_mismatch_names_the_odd_rank(case) -> None:
    doc = _doc(case("size"))
    v = doc["verdict"]
    assert v["class"] == "mismatch" and _culprits(doc) == [(1, "h2")], v
    assert "65537" in v["culprits"][0]["why"] and "65536" in v["culprits"][0]["why"]


def test_size_mismatch_without_the_culprits_dump_names_no_innocent(case) -> None:
    """The size case as CI once left it: the culprit (rank 1, h2) ended before its dump held the
    odd call. gloo's receive-size lines in stderr still say mismatch; h1, whose process gloo ended
    by SIGABRT for receiving the odd size, is not called dead (it was before: `died`, rank 0)."""
    base = case("size")
    for dump in (base / "h2").iterdir():
        dump.unlink()
    doc = _doc(base)
    v = doc["verdict"]
    assert v["class"] == "mismatch" and not v["culprits"] and exit_code(doc) == 1, v
    assert v["evidence"][:2] == [
        "h1: received 32772 B where its call expects 32768 B",
        "h2: received 32768 B where its call expects 32744 B",
    ]
    assert doc["next_action"]["kind"] == "application" and "every rank" in doc["next_action"]["text"]


def test_sigstopped_rank_is_named_from_its_stale_dump(case) -> None:
    doc = _doc(case("stop"))
    v = doc["verdict"]
    assert v["class"] == "stopped" and _culprits(doc) == [(2, "h3")], v
    assert sorted(v["waiting_ranks"]) == [0, 1, 3]


def test_killed_rank_died_from_the_launcher_log(case) -> None:
    doc = _doc(case("kill"))
    v = doc["verdict"]
    assert v["class"] == "died" and _culprits(doc) == [(2, "h3")], v
    assert "SIGKILL" in v["culprits"][0]["why"] and doc["next_action"]["kind"] == "drain"


def test_nccl_watchdog_timeout_on_h200(tmp_path) -> None:
    (tmp_path / "nccl_trace_rank_0").write_bytes((DATA / "h200" / "timeout_nccl_trace_rank_0").read_bytes())
    doc = _doc(tmp_path, DATA / "h200" / "timeout_stderr.txt")
    assert doc["verdict"]["class"] == "network_hang" and doc["verdict"]["collective"] == 7
    assert doc["rests_on"]["ranks"] == [0]
    assert (
        "log: rank 0: PyTorch's watchdog timed out in collective 7 (ALLREDUCE)" in doc["verdict"]["evidence"]
    )


def test_cli_json_exit_codes_and_bad_input(case, tmp_path) -> None:
    run = [sys.executable, "-m", "fabricscope", "job", "diagnose"]
    proc = subprocess.run([*run, str(case("skip")), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.job/v1" and doc["verdict"]["culprits"][0]["rank"] == 2
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "rank0.pkl").write_bytes(b"\x80\x04garbage")
    proc = subprocess.run([*run, str(tmp_path / "junk")], capture_output=True, text=True, timeout=120)
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("fabricscope: error:")
        and "Traceback" not in proc.stderr
    )
    assert len(proc.stderr.strip().splitlines()) == 1


def test_drain_goes_through_fleets_slurm_layer_and_only_for_the_named_host(case) -> None:
    from fabricscope.triage.drain import drain_named

    doc = _doc(case("kill"))
    calls: list[list[str]] = []
    actions = drain_named(
        doc, ["h3", "h1"], apply=True, runner=lambda argv: calls.append(argv) or (0, "", "")
    )
    assert calls == [
        [
            "scontrol",
            "update",
            "NodeName=h3",
            "State=DRAIN",
            f"Reason=fabricscope: job.died rank 2 collective {doc['verdict']['collective']}",
        ]
    ]
    assert [(a["host"], a["done"]) for a in actions] == [("h3", True), ("h1", False)]
    assert (
        drain_named(
            doc, ["h3"], apply=False, runner=lambda argv: (_ for _ in ()).throw(AssertionError("ran"))
        )[0]["done"]
        is False
    )


@pytest.mark.parametrize("name", ["slowhost", "slowhost2"])
def test_link_shaped_host_is_named_not_its_ring_neighbour(case, name) -> None:
    """h3's link shaped to a tenth (100 of 1,000 Mbit/s): rank 1 (h2, sending into h3) arrives last most
    often, and rank 2 (h3) too; their ring flows h2 -> h3 and h3 -> h4 are slow, h1 -> h2 and h4 -> h1
    on time, so h3 alone explains them. No compute straggler is named."""
    doc = _doc(case(name, with_log=False))
    v = doc["verdict"]
    assert v["class"] == "slow_link" and v["elements"] == ["h3"] and _culprits(doc) == [(2, "h3")], v
    assert doc["next_action"]["kind"] == "retest_link" and doc["next_action"]["hosts"] == ["h2", "h3", "h4"]


def test_slow_leaf_uplink_is_named_through_the_topology(case) -> None:
    """leaf2's uplink shaped to 100 Mbit/s in a 3-leaf lab (h1 h2 | h3 h4 | h5 h6): the ring flows
    h2 -> h3 and h4 -> h5 cross it. Without a topology no host explains both: not a slow link (none
    is named) but undetermined slow flows, with their hosts to retest; with one, the uplink is named."""
    from fabricscope.triage.collect import collect as read

    path = case("slowleaf", with_log=False)
    bare = build(read([path]))
    v = bare["verdict"]
    assert v["class"] == "undetermined" and v["elements"] == [] and not v["culprits"], v
    assert "h2 -> h3" in v["headline"] and "h4 -> h5" in v["headline"] and exit_code(bare) == 1
    assert bare["next_action"]["kind"] == "retest_link"
    assert bare["next_action"]["hosts"] == ["h2", "h3", "h4", "h5"]
    doc = build(read([path]), topology=str(DATA / "lab_leaf_spine_3x2.yaml"))
    assert doc["verdict"]["class"] == "slow_link" and doc["verdict"]["elements"] == ["leaf2 - spine"], doc[
        "verdict"
    ]
    assert not doc["verdict"]["culprits"]  # no host blamed


def test_compute_straggler_is_named_with_its_slowdown(case) -> None:
    """Rank 1 computes 0.15 s a step, the others 0.05 s: it arrives ~100 ms late at the collective after
    compute, the others together. Slowdown T / (T - lateness) with T the time between steps."""
    doc = _doc(case("straggler", with_log=False))
    v = doc["verdict"]
    assert v["class"] == "straggler" and _culprits(doc) == [(1, "h2")], v
    # a step is 0.15 s of compute plus the collectives; without the straggler it would be ~0.1 s shorter
    assert 1.8 < v["slowdown"] < 3.5, v["slowdown"]


def test_torchrun_failure_table_names_the_dead_rank_and_host() -> None:
    from fabricscope.triage.joblog import read_log

    ev = read_log((DATA / "torchrun_childfailed_sigkill.txt").read_text().splitlines(), "torchrun.txt")
    host = "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"
    assert ev.dead_ranks == {0: f"torchrun: rank 0 on {host} exited -9 (SIGKILL)"} and ev.rank_hosts == {
        0: host
    }
