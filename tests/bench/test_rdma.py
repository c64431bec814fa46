"""bench rdma: device/port/GID choice on fixture hosts, and perftest run for real as a process
(a stand-in executable that prints a real capture), including failures, timeouts and skips."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from fabricscope.bench.rdma.run import (
    RdmaParams,
    RdmaPlanError,
    build_argv,
    choose_port,
    run_rdma,
    subprocess_runner,
)
from fabricscope.bench.results.schema import Status
from fabricscope.host import Root, read_inventory
from fabricscope.report.bench import rdma_lines
from tests.bench.conftest import run_cli
from tests.conftest import FIXTURE_HOSTS, samples_dir

FAKE = """#!{python}
import sys, time, pathlib
args = sys.argv[1:]
if "--help" in args:
    print("usage: {json_help}")
    sys.exit(0)
pathlib.Path({log!r}).write_text(" ".join(args))
mode = {mode!r}
if mode == "fail":
    print(" Couldn't connect to " + args[-1] + ":18515", file=sys.stderr)
    print("Unable to init the socket connection", file=sys.stderr)
    sys.exit(1)
if mode == "hang":
    time.sleep(60)
if mode == "json":
    path = [a.split("=", 1)[1] for a in args if a.startswith("--out_json_file=")][0]
    pathlib.Path(path).write_text({json_doc!r})
text = pathlib.Path({sample!r}).read_text().splitlines()[2:]
print("\\n".join(text))
"""


def _fake_perftest(
    tmp_path: Path,
    tool: str = "ib_write_bw",
    mode: str = "ok",
    sample: str = "perftest_ib_write_bw_ib_sweep.txt",
    json_doc: str = "",
) -> tuple[Path, Path]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / f"{tool}.args"
    script = bindir / tool
    script.write_text(
        FAKE.format(
            python=sys.executable, log=str(log), mode=mode, sample=str(samples_dir() / sample), json_doc=json_doc,
            json_help="--out_json --out_json_file" if mode == "json" else "",
        )
    )  # fmt: skip
    script.chmod(0o755)
    return bindir, log


def _which(bindir: Path):
    return lambda tool: shutil.which(tool, path=str(bindir))


def _inv(host: str):
    return read_inventory(Root.at(FIXTURE_HOSTS / host))


def test_roce_picks_the_v2_ipv4_gid() -> None:
    choice = choose_port(_inv("roce-healthy"))
    assert (choice.device, choice.port, choice.gid_index, choice.gid_ip) == ("mlx5_0", 1, 3, "10.20.0.11")
    assert choice.link_layer == "Ethernet" and choice.rate_gbps == 400.0
    routed = choose_port(_inv("roce-healthy"), route_netdev="ens3np0")
    assert routed.device == "mlx5_3" and routed.gid_index == 3 and "routes to the peer" in routed.why


def test_infiniband_uses_the_lid() -> None:
    choice = choose_port(_inv("ib-ndr-healthy"))
    assert choice.link_layer == "InfiniBand" and choice.gid_index is None
    argv = build_argv(RdmaParams(peer="node2"), choice, "ib_write_bw")
    assert "-x" not in argv and argv[-1] == "node2" and "--report_gbits" in argv


def test_plan_errors() -> None:
    with pytest.raises(RdmaPlanError, match="no RoCE v2 GID with an IP"):
        choose_port(_inv("roce-broken"), device="mlx5_1")
    with pytest.raises(RdmaPlanError, match="no ACTIVE RDMA port"):
        choose_port(_inv("ib-degraded"), device="mlx5_5")
    with pytest.raises(RdmaPlanError, match="no RDMA device 'mlx9_9'"):
        choose_port(_inv("roce-healthy"), device="mlx9_9")
    with pytest.raises(RdmaPlanError, match="no GID at index 7"):
        choose_port(_inv("roce-healthy"), gid_index=7)


def test_argv_is_a_list_and_rejects_option_like_peers() -> None:
    choice = choose_port(_inv("roce-healthy"))
    argv = build_argv(
        RdmaParams(peer="10.0.0.2", size_bytes=4096, duration_s=3, qps=4, use_cuda=True, gpu=2),
        choice,
        "/usr/bin/ib_write_bw",
    )
    assert argv[:9] == ["/usr/bin/ib_write_bw", "-d", "mlx5_0", "-i", "1", "-p", "18515", "-F", "-x"]
    assert (
        ["-s", "4096"] == argv[argv.index("-s") : argv.index("-s") + 2]
        and "--use_cuda=2" in argv
        and ["-q", "4"] == argv[argv.index("-q") : argv.index("-q") + 2]
    )
    with pytest.raises(RdmaPlanError):
        build_argv(RdmaParams(peer="--help"), choice, "ib_write_bw")
    with pytest.raises(RdmaPlanError):
        build_argv(RdmaParams(peer="a b"), choice, "ib_write_bw")


def test_run_parses_real_output(tmp_path: Path) -> None:
    bindir, log = _fake_perftest(tmp_path)
    result = run_rdma(
        RdmaParams(peer="10.20.0.12", all_sizes=True),
        root=Root.at(FIXTURE_HOSTS / "roce-healthy"),
        which=_which(bindir),
    )
    assert result.status == Status.OK, result.reason
    assert result.metrics["throughput_gbps"] == 0.17 and result.metrics["msg_size_bytes"] == 8
    assert result.params["device"] == "mlx5_0" and result.params["gid_index"] == 3
    assert log.read_text().split() == [
        "-d",
        "mlx5_0",
        "-i",
        "1",
        "-p",
        "18515",
        "-F",
        "-x",
        "3",
        "-a",
        "--report_gbits",
        "10.20.0.12",
    ]
    assert result.detail["parsed_from"] == "text" and len(result.detail["rows"]) == 3
    assert result.counters.window_s is not None
    assert "write_bw on mlx5_0/1 GID 3 (10.20.0.11)" in rdma_lines(result)[0]


def test_run_prefers_json_when_perftest_writes_it(tmp_path: Path) -> None:
    doc = json.dumps(
        {
            "test_info": {"test": "RDMA_Write_BW_Test"},
            "results": {
                "MsgSize": 65536,
                "n_iterations": 5000,
                "BW_peak": 391.0,
                "BW_average": 390.5,
                "MsgRate": 0.744,
            },
        }
    )
    bindir, log = _fake_perftest(tmp_path, mode="json", json_doc=doc)
    result = run_rdma(
        RdmaParams(peer="10.20.0.12"), root=Root.at(FIXTURE_HOSTS / "ib-ndr-healthy"), which=_which(bindir)
    )
    assert result.status == Status.OK, result.reason
    assert result.detail["parsed_from"] == "json" and result.metrics["throughput_gbps"] == 390.5
    assert result.metrics["link_utilization_pct"] == pytest.approx(97.625)
    assert "--out_json" in log.read_text()


def test_perftest_failure_is_a_failed_result(tmp_path: Path) -> None:
    bindir, _ = _fake_perftest(tmp_path, mode="fail")
    result = run_rdma(
        RdmaParams(peer="10.20.0.99"), root=Root.at(FIXTURE_HOSTS / "roce-healthy"), which=_which(bindir)
    )
    assert result.status == Status.FAILED
    assert "exited with status 1" in result.reason and "Unable to init the socket connection" in result.reason


def test_perftest_that_hangs_is_stopped(tmp_path: Path) -> None:
    bindir, _ = _fake_perftest(tmp_path, mode="hang")
    params = RdmaParams(peer="10.20.0.99", duration_s=1, timeout_s=1)
    result = run_rdma(
        params, root=Root.at(FIXTURE_HOSTS / "roce-healthy"), which=_which(bindir), runner=subprocess_runner
    )
    assert result.status == Status.FAILED and "did not finish within 2 s" in result.reason


def test_clean_skips(tmp_path: Path) -> None:
    absent = run_rdma(
        RdmaParams(peer="x"), root=Root.at(FIXTURE_HOSTS / "roce-healthy"), which=lambda tool: None
    )
    assert absent.status == Status.SKIPPED and "perftest is not installed" in absent.reason
    no_rdma = run_rdma(RdmaParams(peer="x"), root=Root.at(FIXTURE_HOSTS / "cloud-tcp"))
    assert no_rdma.status == Status.SKIPPED and "no RDMA device" in no_rdma.reason


def test_use_cuda_picks_the_nearest_gpu(tmp_path: Path) -> None:
    bindir, log = _fake_perftest(tmp_path)
    result = run_rdma(
        RdmaParams(peer="10.20.3.12", device="mlx5_3", use_cuda=True),
        root=Root.at(FIXTURE_HOSTS / "roce-healthy"),
        which=_which(bindir),
    )
    assert result.status == Status.OK, result.reason
    assert "--use_cuda=3" in log.read_text() and result.detail["plan"]["gpu"] == "GPU 3 is PIX to mlx5_3"


def test_cli_skip_exits_0_and_is_stored(isolated_db, tmp_path: Path) -> None:
    # An empty PATH: no perftest whatever this machine has; without RDMA devices the reason is that.
    empty = tmp_path / "empty-path"
    empty.mkdir()
    proc = run_cli("bench", "rdma", "--peer", "192.0.2.1", "--json", timeout=60, env={"PATH": str(empty)})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "skipped" and doc["kind"] == "rdma" and doc["run_id"] == 1
    rdma_here = os.path.isdir("/sys/class/infiniband") and bool(os.listdir("/sys/class/infiniband"))
    assert ("perftest is not installed" if rdma_here else "no RDMA device") in doc["reason"]
