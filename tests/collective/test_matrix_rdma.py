"""The RDMA half of ``bench matrix`` without RDMA hardware.

perftest is replaced by a stand-in executable (as in tests/bench/test_rdma.py) that behaves
like it where the matrix depends on it: the server listens on ``-p``, the client connects to
``HOST -p`` and fails at once ("Couldn't connect") when nobody listens yet, both print
perftest's real header (from a capture in tests/data/samples) and a result row in perftest's
``--report_gbits`` format. Its bandwidth is min(rate of the client's host, rate of the
server's host) from a table the test writes, so a slow host can be planted. The inventory
(device, port, GID) comes from the fixture hosts. What this cannot show: that real perftest
reaches line rate on a real NIC; docs/lab.md says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricscope.bench.matrix import rdma as matrix_rdma
from fabricscope.bench.rdma.run import CommandOutcome
from fabricscope.bench.results.schema import BenchResult
from fabricscope.host import Root
from fabricscope.jobs.launch import free_port
from tests.conftest import FIXTURE_HOSTS, samples_dir, skip_unless_ci

STAND_IN = r'''#!{python}
"""Stand-in for perftest's ib_*_bw (see tests/collective/test_matrix_rdma.py)."""
import json, os, socket, sys, time
args = sys.argv[1:]
conf = json.load(open({conf!r}))
me = os.environ.get("FABRICSCOPE_HOST", "?")
with open(conf["log"], "a") as log:
    log.write(json.dumps({{"host": me, "argv": args}}) + "\n")
opt = lambda flag, default=None: args[args.index(flag) + 1] if flag in args else default
port = int(opt("-p", "18515"))
peer = None if args[-1].startswith("-") else args[-1]  # bench's argv ends with the peer or an option
header = [ln for ln in open(conf["sample"]).read().splitlines()[2:] if "Waiting for client" not in ln and not set(ln) <= {{"*"}}]
header = [ln.replace("mlx5_0", opt("-d", "?")).replace("[MB/sec]", "[Gb/sec]").replace("GID index       : 3", "GID index       : " + str(opt("-x", "-"))) for ln in header]
if conf.get("mode") == "server-hangs" and peer is None:
    time.sleep(120)
if peer is None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(60)
    conn, _ = srv.accept()
    f = conn.makefile("rw")
    other = json.loads(f.readline())
    f.write(json.dumps({{"host": me, "gid_index": opt("-x")}}) + "\n")
    f.flush()
    f.readline()
    rate = min(conf["rates"].get(me, conf["default"]), conf["rates"].get(other["host"], conf["default"]))
else:
    try:
        conn = socket.create_connection((peer, port), timeout=5)
    except OSError:
        print(" Couldn't connect to " + peer + ":" + str(port), file=sys.stderr)
        print("Unable to init the socket connection", file=sys.stderr)
        sys.exit(1)
    f = conn.makefile("rw")
    f.write(json.dumps({{"host": me, "gid_index": opt("-x")}}) + "\n")
    f.flush()
    other = json.loads(f.readline())
    if me in conf.get("fail_as_client", []):
        print(" Failed to modify QP 0x0108 to RTR", file=sys.stderr)
        print(" Unable to Connect the HCA's through the link", file=sys.stderr)
        sys.exit(1)
    if other["gid_index"] != opt("-x"):
        print("Failed to modify QP to RTR (GID index {{}} against {{}})".format(opt("-x"), other["gid_index"]), file=sys.stderr)
        sys.exit(1)
    time.sleep(0.05)
    f.write("done\n")
    f.flush()
    rate = min(conf["rates"].get(me, conf["default"]), conf["rates"].get(other["host"], conf["default"]))
print("\n".join(header))
print(" %-10s %-14s %-18.2f %-18.2f %-.6f" % (65536, 1000 * int(opt("-D", "1")), 0.0, rate, rate * 1e9 / 8 / 65536 / 1e6))
print("-" * 87)
'''


def stand_in(
    tmp_path: Path,
    rates: dict[str, float],
    default: float = 90.0,
    mode: str = "ok",
    fail_as_client: tuple[str, ...] = (),
) -> tuple[Path, Path]:
    """A bin directory with ib_write_bw (the stand-in) and the file it logs its argv to."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "perftest.log"
    conf = tmp_path / "perftest.json"
    sample = samples_dir() / "perftest_ib_write_bw_roce_gid3_header.txt"
    conf.write_text(json.dumps({"rates": rates, "default": default, "log": str(log), "sample": str(sample), "mode": mode,
                                "fail_as_client": list(fail_as_client)}))  # fmt: skip
    script = bindir / "ib_write_bw"
    script.write_text(STAND_IN.format(python=sys.executable, conf=str(conf)))
    script.chmod(0o755)
    return bindir, log


def _ready(host: str = "roce-healthy", **kw) -> matrix_rdma.Readiness:
    return matrix_rdma.readiness("write_bw", root=Root.at(FIXTURE_HOSTS / host), address="127.0.0.1", **kw)


# ----- readiness and skip reasons -------------------------------------------------------------
def test_readiness_picks_the_roce_v2_gid_like_bench_rdma(tmp_path: Path) -> None:
    bindir, _ = stand_in(tmp_path, {})
    ready = _ready(which=lambda tool: str(bindir / tool))
    assert ready.ok and ready.choice is not None
    public = ready.public()
    assert public["endpoint"]["device"] == "mlx5_0" and public["endpoint"]["gid_index"] == 3
    assert public["endpoint"]["gid_ip"] == "10.20.0.11" and "tool" not in json.dumps(public)
    server = matrix_rdma.server_argv(ready, "write_bw", 2, 18600)
    client = matrix_rdma.client_argv(ready, "write_bw", 2, 18600, "10.0.0.7")
    for argv in (server, client):  # the same device, port and GID index on both ends
        assert argv[1:9] == ["-d", "mlx5_0", "-i", "1", "-p", "18600", "-F", "-x"] and argv[9] == "3"
        assert ["-D", "2"] == argv[argv.index("-D") : argv.index("-D") + 2] and "--report_gbits" in argv
    assert client[-1] == "10.0.0.7" and server[-1] == "--report_gbits"
    ib = _ready("ib-ndr-healthy", which=lambda tool: "/usr/bin/" + tool)
    assert ib.ok and "-x" not in matrix_rdma.server_argv(ib, "write_bw", 1, 18600)  # InfiniBand: the LID


def test_not_ready_says_why_and_skip_names_the_hosts() -> None:
    no_device = _ready("cloud-tcp", which=lambda tool: "/usr/bin/" + tool)
    no_tool = _ready(which=lambda tool: None)
    no_port = _ready("ib-degraded", which=lambda tool: "/usr/bin/" + tool, device="mlx5_5")
    assert not no_device.ok and "no RDMA device" in (no_device.reason or "")
    assert not no_tool.ok and "perftest is not installed (ib_write_bw not found" in (no_tool.reason or "")
    assert not no_port.ok and "no ACTIVE RDMA port" in (no_port.reason or "")
    ok = {"ok": True, "reason": None, "endpoint": {}}
    assert matrix_rdma.skip_reason(["h1", "h2"], [ok, ok]) is None
    why = matrix_rdma.skip_reason(["h1", "h2", "h3"], [no_tool.public(), ok, no_tool.public()])
    assert why is not None and why.startswith("perftest is not installed") and why.endswith("on h1, h3")


# ----- one flow: client retries, server stops, outputs become figures or errors -------------------
def test_client_retries_until_the_server_listens() -> None:
    calls: list[list[str]] = []
    refused = CommandOutcome(
        1, "", " Couldn't connect to 10.0.0.2:18515\nUnable to init the socket connection"
    )
    ok = CommandOutcome(0, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                           " 65536      1000             0.00               88.50		   0.168800\n", "")  # fmt: skip
    answers = [refused, refused, ok]

    def runner(argv: list[str], timeout: float) -> CommandOutcome:
        calls.append(argv)
        return answers.pop(0)

    flow = matrix_rdma.send_flow(["ib_write_bw", "10.0.0.2"], 1, runner=runner, sleep=lambda s: None)
    assert flow == {"gbps": 88.5} and len(calls) == 3
    never = matrix_rdma.send_flow(["ib_write_bw", "x"], 1, runner=lambda a, t: refused, connect_window_s=0.3,
                                  sleep=lambda s: time.sleep(0.05))  # fmt: skip
    assert "exited with status 1: Unable to init the socket connection" in never["error"]
    assert "no perftest server answered within 0.3 s" in never["error"]
    other = matrix_rdma.send_flow(["ib_write_bw", "x"], 1, runner=lambda a, t: CommandOutcome(0, "hello", ""))
    assert "output not understood" in other["error"]
    hung = matrix_rdma.outcome_to_flow(CommandOutcome(None, "", "", timed_out=True), "ib_write_bw", 31)
    assert hung == {"error": "ib_write_bw did not finish within 31 s; stopped it"}


def test_server_is_stopped_once_the_sender_gave_up(tmp_path: Path) -> None:
    bindir, _ = stand_in(tmp_path, {}, mode="server-hangs")
    started: list[bool] = []
    t0 = time.monotonic()
    ready = _ready(which=lambda tool: str(bindir / tool))
    res = matrix_rdma.serve_flow(
        matrix_rdma.server_argv(ready, "write_bw", 1, free_port()),
        1,
        started=lambda: started.append(True),
        sender_done=lambda: time.monotonic() - t0 > 0.5,
        grace_s=0.5,
    )
    assert res == {} and started == [True] and time.monotonic() - t0 < 10
    missing = matrix_rdma.serve_flow(
        [str(tmp_path / "nope")], 1, started=lambda: None, sender_done=lambda: True
    )
    assert "server could not start" in missing["error"]


# ----- the whole matrix over torch.distributed with the stand-in ----------------------------------
def _need_torch() -> None:
    try:
        import torch.distributed as dist

        if not dist.is_available():
            skip_unless_ci("torch without torch.distributed")
    except ImportError:
        skip_unless_ci("torch is not installed (pip install 'fabricscope[torch]')")


def _matrix(tmp_path: Path, *args: str, path: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FABRICSCOPE_DB": str(tmp_path / "h.db"), "PATH": path}
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", "bench", "matrix", "--duration", "0.3", "--warmup", "0.05", *args],
        capture_output=True, text=True, env=env, timeout=timeout,
    )  # fmt: skip


@pytest.mark.slow
def test_rdma_matrix_names_the_slow_rdma_host(tmp_path: Path) -> None:
    _need_torch()
    bindir, log = stand_in(tmp_path, {"local3": 20.0}, default=90.0)
    port = next(p for p in iter(free_port, None) if p <= 60000 - 8)  # --rdma-port takes 1024..60000
    proc = _matrix(tmp_path, "--launch", "local:4", "--json", "--root", str(FIXTURE_HOSTS / "roce-healthy"),
                   "--rdma-port", str(port), path=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # a confirmed suspect
    doc = json.loads(proc.stdout)
    rdma = doc["rdma"]
    assert rdma["status"] == "ok" and rdma["test"] == "write_bw" and rdma["duration_s"] == 1
    assert [(e["host"], e["device"], e["port"], e["gid_index"]) for e in rdma["endpoints"]] == [
        (f"local{i}", "mlx5_0", 1, 3) for i in range(4)
    ]
    m = rdma["matrix_gbps"]
    for i in range(4):
        for j in range(4):
            expected = None if i == j else (20.0 if 3 in (i, j) else 90.0)
            assert m[i][j] == expected, (i, j, m)
    rdma_suspects = [s for s in doc["suspects"] if s["transport"] == "rdma"]
    assert [(s["host"], s["kind"], s["confirmed"]) for s in rdma_suspects] == [("local3", "host", True)]
    assert rdma_suspects[0]["reason"].startswith("RDMA: ") and rdma_suspects[0]["retest_gbps"] == 20.0
    assert {(r["from"], r["to"]) for r in doc["retests"] if r["transport"] == "rdma"} >= {
        ("local3", "local0"),
        ("local0", "local3"),
    }
    assert doc["metrics"]["rdma_all_pairs_median_gbps"] == 55.0  # six pairs at 20, six at 90
    assert rdma["thresholds_gbps"]["fleet_median"] == 90.0  # blame's reference: pairs among the better half
    assert doc["params"]["transport"] == "tcp+rdma" and doc["metrics"]["rdma_failed_pairs_count"] == 0
    # every perftest process got the fixture's device, port and GID index; one server per receiver port
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    main = 12 * 2  # 12 directed pairs, a server and a client each, before the retests
    assert len(calls) >= main and all(
        c["argv"][:9] == ["-d", "mlx5_0", "-i", "1", "-p", c["argv"][5], "-F", "-x", "3"] for c in calls
    )
    servers = [c for c in calls if c["argv"][-1] == "--report_gbits"]
    assert {c["host"]: int(c["argv"][5]) - port for c in servers} == {f"local{i}": i for i in range(4)}
    # stored as printed, and the history shows the RDMA matrix
    from fabricscope.store import Store

    with Store.open(tmp_path / "h.db") as store:
        stored = store.get(doc["run_id"]).result
    assert stored.to_json_dict() == BenchResult.model_validate(doc).to_json_dict()
    show = subprocess.run([sys.executable, "-m", "fabricscope", "history", "show", str(doc["run_id"])],
                          capture_output=True, text=True, env={**os.environ, "FABRICSCOPE_DB": str(tmp_path / "h.db")})  # fmt: skip
    assert (
        "pairwise RDMA bandwidth (ib_write_bw)" in show.stdout
        and "host local3: RDMA: its transfers" in show.stdout
    )


@pytest.mark.slow
def test_matrix_says_rdma_was_skipped_and_why(tmp_path: Path) -> None:
    _need_torch()
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _matrix(tmp_path, "--launch", "local:2", "--json", "--no-store", "--root", str(FIXTURE_HOSTS / "roce-healthy"),
                   path=str(empty))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["rdma"]["status"] == "skipped" and doc["params"]["transport"] == "tcp"
    assert doc["rdma"]["reason"] == (
        "perftest is not installed (ib_write_bw not found on PATH; Debian/Ubuntu package perftest) on local0, local1"
    )
    assert doc["rdma"]["matrix_gbps"] is None and "rdma_all_pairs_median_gbps" not in doc["metrics"]
    assert all(s["transport"] == "tcp" for s in doc["suspects"])


@pytest.mark.slow
def test_failing_rdma_flows_are_named_and_end_the_run_with_status_2(tmp_path: Path) -> None:
    _need_torch()
    bindir, _ = stand_in(tmp_path, {}, fail_as_client=("local1",))
    t0 = time.monotonic()
    proc = _matrix(tmp_path, "--launch", "local:3", "--json", "--root", str(FIXTURE_HOSTS / "roce-healthy"), "--no-retest",
                   "--rdma-port", str(free_port()), path=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]  # pairs could not be measured
    assert (
        time.monotonic() - t0 < 120
    )  # the servers of the failed flows were stopped, nothing waited out a deadline
    doc = json.loads(proc.stdout)
    rdma = doc["rdma"]
    assert rdma["status"] == "ok" and rdma["matrix_gbps"][0][1] == 90.0 and rdma["matrix_gbps"][1][0] is None
    assert sorted(f.split(":")[0] for f in rdma["failures"]) == ["local1 -> local0", "local1 -> local2"]
    assert all(
        "ib_write_bw exited with status 1: Unable to Connect the HCA's through the link" in f
        for f in rdma["failures"]
    )
    assert doc["metrics"]["rdma_failed_pairs_count"] == 2 and doc["failures"] == []  # TCP was fine
