"""bench rdma --loopback [--use-cuda] (issue 13 D25): each HCA to itself through GPU memory, run
for real as processes with a stand-in perftest that prints a real capture; skipped with the reason
when perftest has no CUDA."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from fabricscope.bench.rdma.loopback import run_loopback
from fabricscope.bench.rdma.run import RdmaParams, subprocess_runner
from fabricscope.bench.results.schema import Status
from fabricscope.host import Root
from tests.bench.conftest import run_cli
from tests.conftest import FIXTURE_HOSTS, samples_dir

STAND_IN = """#!{python}
import sys, pathlib
args = sys.argv[1:]
if "--help" in args:
    print("Usage: ib_write_bw [options] ...")
    print({help_line!r})
    sys.exit(0)
with open({log!r}, "a") as log:
    log.write(" ".join(args) + "\\n")
if {broken!r} in args:
    print(" Couldn't allocate MR on the GPU", file=sys.stderr)
    sys.exit(1)
print("\\n".join(pathlib.Path({sample!r}).read_text().splitlines()[2:]))
"""


def stand_in(tmp_path: Path, *, cuda: bool, broken: str = "none") -> tuple[Path, Path]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "ib_write_bw.args"
    help_line = (
        "      --use_cuda=<cuda device id>  Use CUDA specific device for GPUDirect RDMA testing"
        if cuda
        else "  -a, --all  Run sizes from 2 till 2^23"
    )
    script = bindir / "ib_write_bw"
    script.write_text(
        STAND_IN.format(
            python=sys.executable,
            help_line=help_line,
            log=str(log),
            broken=broken,
            sample=str(samples_dir() / "perftest_ib_write_bw_ib_sweep.txt"),
        )
    )
    script.chmod(0o755)
    return bindir, log


def run(tmp_path: Path, host: str, *, cuda: bool, use_cuda: bool = True, broken: str = "none"):
    bindir, log = stand_in(tmp_path, cuda=cuda, broken=broken)
    result = run_loopback(
        RdmaParams(use_cuda=use_cuda, duration_s=2, timeout_s=20),
        root=Root.at(FIXTURE_HOSTS / host),
        runner=subprocess_runner,
        which=lambda tool: shutil.which(tool, path=str(bindir)),
        sleep=lambda _s: None,
    )
    return result, (log.read_text().splitlines() if log.exists() else [])


def test_every_hca_to_itself_through_its_nearest_gpu(tmp_path: Path) -> None:
    result, calls = run(tmp_path, "ib-ndr-healthy", cuda=True)
    assert result.status is Status.OK, result.reason
    rows = result.detail["loopback"]
    assert [(r["device"], r["gpu"], r["ok"]) for r in rows] == [(f"mlx5_{i}", i, True) for i in range(8)]
    assert result.metrics["throughput_gbps"] > 0
    # A server and a client per HCA, same device, the client aimed at this node, GPU memory on both.
    assert len(calls) == 16
    clients = [c for c in calls if c.endswith("127.0.0.1")]
    assert len(clients) == 8 and all("--use_cuda=" in c for c in calls)
    assert "-d mlx5_3" in clients[3] and "--use_cuda=3" in clients[3]


def test_roce_loopback_uses_the_gid_and_reports_a_failing_hca(tmp_path: Path) -> None:
    result, calls = run(tmp_path, "roce-healthy", cuda=True, broken="mlx5_5")
    assert result.status is Status.FAILED and "mlx5_5/1" in result.reason
    assert all(" -x " in c for c in calls)
    assert [r["ok"] for r in result.detail["loopback"]].count(False) == 1


def test_perftest_without_cuda_is_skipped_with_the_reason(tmp_path: Path) -> None:
    result, calls = run(tmp_path, "ib-ndr-healthy", cuda=False)
    assert result.status is Status.SKIPPED and "--use_cuda" in result.reason and calls == []
    # Host memory needs no CUDA: the same perftest runs.
    plain, calls = run(tmp_path, "ib-ndr-healthy", cuda=False, use_cuda=False)
    assert plain.status is Status.OK and not any("--use_cuda" in c for c in calls)


def test_no_rdma_and_efa_hosts_skip(tmp_path: Path) -> None:
    for host in ("cloud-tcp", "efa-p4d"):
        result, _calls = run(tmp_path, host, cuda=True)
        assert result.status is Status.SKIPPED and "no active InfiniBand or RoCE port" in result.reason


def test_cli_rejects_loopback_with_a_peer() -> None:
    proc = run_cli("bench", "rdma", "--loopback", "--peer", "10.0.0.2")
    assert proc.returncode == 2 and "--loopback" in proc.stderr and "Traceback" not in proc.stderr
