"""Real torch.distributed runs on this machine (``--launch local:N``, gloo on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import skip_unless_ci

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _need_torch() -> None:
    try:
        import torch.distributed as dist

        if not dist.is_gloo_available():
            skip_unless_ci("torch without gloo")
    except ImportError:
        skip_unless_ci("torch is not installed (pip install 'fabricscope[torch]')")


def fs(*args: str, db, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "FABRICSCOPE_DB": str(db), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "op", ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"]
)
def test_every_op_is_correct_and_stored(op: str, tmp_path) -> None:
    proc = fs(
        "bench",
        "collective",
        "--launch",
        "local:3",
        "--op",
        op,
        "--sizes",
        "4K,96K",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--json",
        db=tmp_path / "h.db",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert (
        doc["schema"] == "fabricscope.bench/v1" and doc["kind"] == "collective" and doc["params"]["op"] == op
    )
    assert len(doc["entries"]) == 2 and all(e["wrong"] == 0 for e in doc["entries"])
    factor = {"all_reduce": 4 / 3, "broadcast": 1.0, "sendrecv": 1.0}.get(op, 2 / 3)
    for e in doc["entries"]:
        assert e["busbw_GBps"] == pytest.approx(e["algbw_GBps"] * factor)
        assert e["algbw_GBps"] == pytest.approx(e["size_bytes"] / e["time_s"] / 1e9)
        assert len(e["per_rank_time_s"]) == 3 and e["max_rank_time_s"] >= e["time_s"]
    from fabricscope.store import Store

    with Store.open(tmp_path / "h.db") as store:
        stored = store.get(doc["run_id"]).result
    assert stored.metrics["wrong_count"] == 0
    assert (
        stored.to_json_dict()["entries"] == doc["entries"] and stored.to_json_dict()["ranks"] == doc["ranks"]
    )


@pytest.mark.parametrize("dtype", ["half", "bfloat16", "uint8"])
def test_dtypes_are_checked_exactly(dtype: str, tmp_path) -> None:
    proc = fs(
        "bench",
        "collective",
        "--launch",
        "local:2",
        "--dtype",
        dtype,
        "--sizes",
        "64K",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--json",
        "--no-store",
        db=tmp_path / "h.db",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["entries"][0]["wrong"] == 0


def test_table_output_and_named_straggler(tmp_path) -> None:
    proc = fs(
        "bench",
        "collective",
        "--launch",
        "local:3",
        "--sizes",
        "256K",
        "--iters",
        "8",
        "--warmup",
        "1",
        "--straggle-rank",
        "1",
        "--straggle-ms",
        "60",
        "--no-store",
        db=tmp_path / "h.db",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "#       size         count" in proc.stdout and "out-of-place" in proc.stdout
    row = next(ln for ln in proc.stdout.splitlines() if ln.strip().startswith("262144"))
    assert (
        len(row.split()) == 9
    )  # nccl-tests' out-of-place row: size count type redop root time algbw busbw #wrong
    assert row in proc.stderr  # rank 0 printed it as the size completed (progress, through the launcher)
    assert "# straggler at 262144 B: rank 1 arrives" in proc.stdout


def test_single_process_without_launcher(tmp_path) -> None:
    env = {
        k: "" for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS")
    }
    env["MASTER_PORT"] = "29731"
    proc = fs(
        "bench",
        "collective",
        "--sizes",
        "1K",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--json",
        "--no-store",
        db=tmp_path / "h",
        env=env,
    )
    assert proc.returncode == 2 and "single process" in proc.stderr  # refused unless asked for (issue 26)
    proc = fs("bench", "collective", "--sizes", "1K", "--iters", "1", "--warmup", "0", "--json", "--no-store", "--single-rank",
              db=tmp_path / "h", env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (
        doc["params"]["world_size"] == 1 and doc["entries"][0]["busbw_GBps"] == 0.0
    )  # 2(n-1)/n = 0 at n = 1


def test_mpirun_without_master_addr_is_one_line_exit_2(tmp_path) -> None:
    env = {
        "OMPI_COMM_WORLD_RANK": "0",
        "OMPI_COMM_WORLD_SIZE": "2",
        "MASTER_ADDR": "",
        "RANK": "",
        "WORLD_SIZE": "",
    }
    proc = fs("bench", "collective", "--sizes", "1K", db=tmp_path / "h", env=env)
    assert proc.returncode == 2 and "MASTER_ADDR" in proc.stderr and proc.stderr.count("\n") == 1


def test_missing_peer_ends_with_error_within_timeout(tmp_path) -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29733"}
    proc = fs(
        "bench", "collective", "--sizes", "1K", "--timeout", "5", db=tmp_path / "h", env=env, timeout=90
    )
    assert proc.returncode == 2 and "cannot join the job" in proc.stderr and "Traceback" not in proc.stderr


def test_matrix_on_loopback(tmp_path) -> None:
    from tests.conftest import FIXTURE_HOSTS

    proc = fs(
        "bench",
        "matrix",
        "--launch",
        "local:3",
        "--duration",
        "0.3",
        "--warmup",
        "0.05",
        "--json",
        "--svg",
        str(tmp_path / "m.svg"),
        "--root",
        str(FIXTURE_HOSTS / "cloud-tcp"),
        db=tmp_path / "h.db",
        timeout=180,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "matrix" and doc["hosts"] == ["local0", "local1", "local2"]
    m = doc["matrix_gbps"]
    assert all(m[i][i] is None for i in range(3)) and all(
        m[i][j] > 0 for i in range(3) for j in range(3) if i != j
    )
    assert isinstance(doc["suspects"], list) and (tmp_path / "m.svg").read_text().startswith("<svg")
    assert doc["rdma"]["status"] == "skipped"  # a cloud host: no RDMA device, not an error
    assert (
        doc["rdma"]["reason"] == "no RDMA device (/sys/class/infiniband is empty) on local0, local1, local2"
    )
    from fabricscope.bench.results.schema import BenchResult
    from fabricscope.store import Store

    with Store.open(tmp_path / "h.db") as store:  # the history holds what was printed
        assert (
            store.get(doc["run_id"]).result.to_json_dict() == BenchResult.model_validate(doc).to_json_dict()
        )


def test_matrix_rounds_show_progress_under_launch(tmp_path) -> None:
    """Issue 26 item 3: a launched matrix said nothing for 21-36 s; rank 0 now prints each round
    (its stderr is a pipe to the launcher, which prefixes the rank)."""
    proc = fs("bench", "matrix", "--launch", "local:2", "--duration", "0.2", "--warmup", "0", "--no-rdma", "--no-retest",
              "--no-store", db=tmp_path / "h.db", timeout=180)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    rounds = [line for line in proc.stderr.splitlines() if line.startswith("[rank 0] # tcp phase ")]
    assert rounds and rounds[0].startswith("[rank 0] # tcp phase 1/2: local0->local1"), proc.stderr[-2000:]
