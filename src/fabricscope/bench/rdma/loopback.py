"""``bench rdma --loopback [--use-cuda]``: ib_write_bw from each HCA to itself, through GPU memory
with ``--use-cuda`` (a GPUDirect RDMA functional check on one node, no peer needed).

Each active InfiniBand/RoCE port runs a perftest server and a client against 127.0.0.1 on the same
device, port and GID (the choice :func:`~fabricscope.bench.rdma.run.choose_port` makes), with the GPU
nearest the HCA (:func:`~fabricscope.bench.rdma.run.plan_gpu`). GPU buffers need a perftest built with
CUDA: its ``--help`` then lists ``--use_cuda`` (perftest README, "--use_cuda=<cuda device id>");
otherwise the run is skipped with that reason, never reported as a pass. EFA ports are left out:
NCCL reaches them through libfabric, not through verbs tools like these.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from fabricscope.bench.rdma.perftest import PerftestParseError, failure_reason, metrics_from, parse_text
from fabricscope.bench.rdma.run import (
    RdmaParams,
    RdmaPlanError,
    Runner,
    build_argv,
    choose_port,
    plan_gpu,
    subprocess_runner,
)
from fabricscope.bench.results.schema import BenchResult, Stopwatch, new_result
from fabricscope.host import Root, read_inventory
from fabricscope.host.command import result_of

LOOPBACK_PEER = "127.0.0.1"
SERVER_HEAD_START_S = 1.0  # the server must listen before the client connects (perftest does not retry)


def cuda_supported(tool_path: str, runner: Runner) -> bool:
    """perftest built with CUDA lists --use_cuda in its help; without it the option does not exist."""
    out = runner([tool_path, "--help"], 10.0)
    return "use_cuda" in (out.stdout + out.stderr)


def _one_port(
    params: RdmaParams,
    inv,
    tool_path: str,
    device: str,
    port: int,
    runner: Runner,
    sleep: Callable[[float], None],
) -> dict:
    """Server and client of one HCA port against itself; the row for the result's table."""
    choice = choose_port(inv, device=device, ib_port=port)
    planned, gpu_note = plan_gpu(params, inv, choice)
    server = build_argv(planned.model_copy(update={"peer": None}), choice, tool_path)
    client = build_argv(planned.model_copy(update={"peer": LOOPBACK_PEER}), choice, tool_path)
    budget = planned.expected_s() + planned.timeout_s
    row: dict = {
        "device": device,
        "port": port,
        "gpu": planned.gpu if planned.use_cuda else None,
        "gpu_note": gpu_note,
        "argv": client,
    }
    with ThreadPoolExecutor(max_workers=1) as pool:
        served = pool.submit(runner, server, budget + SERVER_HEAD_START_S)
        sleep(SERVER_HEAD_START_S)
        outcome = runner(client, budget)
        server_outcome = result_of(served)
    text = outcome.stdout + ("\n" + outcome.stderr if outcome.stderr else "")
    if outcome.timed_out or outcome.rc != 0:
        why = "timed out" if outcome.timed_out else f"exit status {outcome.rc}: {failure_reason(text)}"
        if server_outcome.rc not in (0, None):
            why += f" (server: {failure_reason(server_outcome.stdout + server_outcome.stderr)})"
        return {**row, "ok": False, "reason": why}
    try:
        parsed = parse_text(outcome.stdout)
    except PerftestParseError as exc:
        return {**row, "ok": False, "reason": f"output not understood: {exc}"}
    metrics = metrics_from(parsed, choice.rate_gbps)
    if metrics.get("throughput_gbps") is None:
        return {**row, "ok": False, "reason": f"no result rows: {failure_reason(text)}"}
    return {**row, "ok": True, "gbps": metrics["throughput_gbps"]}


def run_loopback(
    params: RdmaParams,
    *,
    root: Root | None = None,
    runner: Runner = subprocess_runner,
    which: Callable[[str], str | None] = shutil.which,
    sleep: Callable[[float], None] = time.sleep,
) -> BenchResult:
    """Every active IB/RoCE HCA port to itself; skipped (with the reason) where it cannot run."""
    params = params.model_copy(update={"test": "write_bw", "peer": None})
    result = new_result("rdma", params)
    inv = read_inventory(root or Root.live())
    ports = [
        (p.device, p.port)
        for d in inv.rdma_devices
        if not d.is_efa
        for p in d.ports
        if p.is_active and (p.is_ib or p.is_roce)
    ]
    if not ports:
        return result.skip("no active InfiniBand or RoCE port on this host")
    tool_path = which(params.tool)
    if tool_path is None:
        return result.skip(
            f"perftest is not installed: {params.tool} not found on PATH (Debian/Ubuntu package: perftest)"
        )
    if params.use_cuda and not inv.gpus:
        return result.skip("--use-cuda: no GPU found on this host")
    if params.use_cuda and not cuda_supported(tool_path, runner):
        return result.skip(
            f"perftest was built without CUDA ({params.tool} --help lists no --use_cuda): GPU memory cannot be tested; "
            "build perftest with CUDA (./configure CUDA_H_PATH=/usr/local/cuda/include/cuda.h)"
        )
    watch = Stopwatch()
    rows = []
    for device, port in ports:
        try:
            rows.append(_one_port(params, inv, tool_path, device, port, runner, sleep))
        except RdmaPlanError as exc:
            rows.append({"device": device, "port": port, "ok": False, "reason": str(exc)})
    result.duration_s = round(watch.elapsed_s(), 6)
    result.detail["loopback"] = rows
    good = [r["gbps"] for r in rows if r["ok"]]
    metrics = {
        "throughput_gbps": min(good) if good else None,
        "max_throughput_gbps": max(good) if good else None,
    }
    failed = [r for r in rows if not r["ok"]]
    if failed:
        result.metrics.update({k: v for k, v in metrics.items() if v is not None})
        return result.fail(
            "loopback failed on " + "; ".join(f"{r['device']}/{r['port']}: {r['reason']}" for r in failed)
        )
    return result.finish(metrics)
