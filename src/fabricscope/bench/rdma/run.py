"""``bench rdma``: drive perftest with the device, port and GID index the inventory says to use.

Planning is pure (:func:`choose_port`, :func:`build_argv`), running goes through an injected
runner with a deadline (argv list, never a shell), parsing is :mod:`fabricscope.bench.rdma.perftest`.

The GID rule, applied identically on both ends (mismatched GID indexes are the classic perftest
failure): on RoCE, the lowest-index RoCE v2 GID holding an IPv4-mapped address, else the
lowest-index routable RoCE v2 IPv6 GID; on InfiniBand no ``-x`` (perftest uses the LID).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricscope.bench.counters import CounterProbe, local_address_towards, netdev_for_address
from fabricscope.bench.rdma.perftest import (
    PerftestOutput,
    PerftestParseError,
    failure_reason,
    gid_address,
    metrics_from,
    parse_json,
    parse_text,
)
from fabricscope.bench.results.schema import BenchResult, Stopwatch, new_result
from fabricscope.host import Inventory, Root, command, read_inventory
from fabricscope.host.infiniband import Gid, RdmaPort
from fabricscope.host.tempfiles import private_dir

TestName = Literal["write_bw", "read_bw", "send_bw", "write_lat", "send_lat"]
PERFTEST_DEFAULT_PORT = 18515
DISTANCE_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")


class RdmaPlanError(Exception):
    """The host cannot run this test as asked (no active port, no usable GID...)."""


class RdmaParams(BaseModel):
    """What ``bench rdma`` was asked to do. ``peer`` None means: be the perftest server."""

    model_config = ConfigDict(extra="forbid")

    test: TestName = "write_bw"
    peer: str | None = None
    device: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    ib_port: int | None = Field(default=None, ge=1, le=3)
    gid_index: int | None = Field(default=None, ge=0, le=1024)
    size_bytes: int | None = Field(default=None, ge=1, le=8 * 1024 * 1024)
    all_sizes: bool = False
    duration_s: int | None = Field(default=None, ge=1, le=3600)
    iterations: int | None = Field(default=None, ge=5, le=100_000_000)
    qps: int = Field(default=1, ge=1, le=16384)
    bidirectional: bool = False
    use_cuda: bool = False  # GPUDirect RDMA: GPU memory buffers (perftest --use_cuda)
    gpu: int | None = Field(default=None, ge=0, le=1024)  # which GPU; default the one nearest the NIC
    perftest_port: int = Field(default=PERFTEST_DEFAULT_PORT, ge=1024, le=65535)
    wait_s: float = Field(default=120.0, gt=0, le=3600)  # server side: how long to wait for the client
    timeout_s: float = Field(default=30.0, gt=0, le=600)  # beyond the expected run time

    @property
    def tool(self) -> str:
        return f"ib_{self.test}"

    @property
    def is_bw(self) -> bool:
        return self.test.endswith("_bw")

    def expected_s(self) -> float:
        return float(self.duration_s) if self.duration_s else 5.0


@dataclass(frozen=True)
class PortChoice:
    device: str
    port: int
    link_layer: str | None
    gid_index: int | None  # None: let perftest use the LID (InfiniBand)
    gid: str | None
    gid_ip: str | None
    netdev: str | None
    rate_gbps: float | None
    why: str


def choose_gid(port: RdmaPort) -> Gid | None:
    """The GID both ends pick by the same rule (see module docstring); None on InfiniBand."""
    if not port.is_roce:
        return None
    v2 = sorted(port.roce_v2_gids(), key=lambda g: g.index)
    with_ipv4 = [g for g in v2 if g.ipv4 is not None]
    if with_ipv4:
        return with_ipv4[0]
    return v2[0] if v2 else None


def choose_port(
    inv: Inventory,
    *,
    device: str | None = None,
    ib_port: int | None = None,
    gid_index: int | None = None,
    route_netdev: str | None = None,
) -> PortChoice:
    """Device, port and GID index for perftest; :class:`RdmaPlanError` says why none fits."""
    ports = inv.ports
    if device is not None:
        if inv.device(device) is None:
            names = ", ".join(d.name for d in inv.rdma_devices) or "none"
            raise RdmaPlanError(f"no RDMA device {device!r} here (have: {names})")
        ports = [p for p in ports if p.device == device]
    if ib_port is not None:
        ports = [p for p in ports if p.port == ib_port]
    active = [p for p in ports if p.is_active]
    if not active:
        listed = ", ".join(f"{p.name} {p.state or '?'}" for p in ports) or "no ports"
        raise RdmaPlanError(f"no ACTIVE RDMA port to test ({listed})")
    why = "first active port"
    chosen = active[0]
    if device is not None or ib_port is not None:
        why = "as asked"
    elif route_netdev is not None:
        routed = [
            p
            for p in active
            if route_netdev in {g.netdev for g in p.gids} or inv.port_netdev(p) == route_netdev
        ]
        if routed:
            chosen, why = routed[0], f"the port on {route_netdev}, the interface that routes to the peer"
    gid: Gid | None
    if gid_index is not None:
        gid = next((g for g in chosen.gids if g.index == gid_index), None)
        if gid is None:
            raise RdmaPlanError(f"{chosen.name} has no GID at index {gid_index}")
    else:
        gid = choose_gid(chosen)
        if chosen.is_roce and gid is None:
            netdev = inv.port_netdev(chosen) or "its netdev"
            raise RdmaPlanError(
                f"{chosen.name} is RoCE but has no RoCE v2 GID with an IP address: give {netdev} an address "
                "(or pass --gid-index)"
            )
    return PortChoice(
        device=chosen.device,
        port=chosen.port,
        link_layer=chosen.link_layer,
        gid_index=gid.index if (gid is not None and (chosen.is_roce or gid_index is not None)) else None,
        gid=gid.gid if gid is not None else None,
        gid_ip=(gid.ipv4 or str(gid.address)) if gid is not None and chosen.is_roce else None,
        netdev=inv.port_netdev(chosen),
        rate_gbps=chosen.rate_gbps,
        why=why,
    )


def plan_gpu(params: RdmaParams, inv: Inventory, choice: PortChoice) -> tuple[RdmaParams, str | None]:
    """With ``use_cuda``: the GPU asked for, or the GPU nearest the chosen NIC (PIX before SYS)."""
    if not params.use_cuda:
        return params, None
    if not inv.gpus:
        raise RdmaPlanError("--use-cuda: no GPU found on this host")
    if params.gpu is not None:
        if not any(g.index == params.gpu for g in inv.gpus):
            raise RdmaPlanError(
                f"--gpu {params.gpu}: no such GPU (have {', '.join(str(g.index) for g in inv.gpus)})"
            )
        near = next((a for a in inv.affinity if a.gpu_index == params.gpu), None)
        if near is not None and near.nic == choice.device:
            return params, f"GPU {params.gpu} is {near.distance} to {choice.device}"
        return params, f"GPU {params.gpu} is not the GPU nearest {choice.device}: expect lower bandwidth"
    ranked = sorted(
        (a for a in inv.affinity if a.nic == choice.device and a.distance is not None),
        key=lambda a: (DISTANCE_ORDER.index(a.distance) if a.distance in DISTANCE_ORDER else 99, a.gpu_index),
    )
    if not ranked:
        gpu = inv.gpus[0].index
        return params.model_copy(update={"gpu": gpu}), f"no GPU is near {choice.device}; using GPU {gpu}"
    best = ranked[0]
    return params.model_copy(
        update={"gpu": best.gpu_index}
    ), f"GPU {best.gpu_index} is {best.distance} to {choice.device}"


def build_argv(
    params: RdmaParams, choice: PortChoice, tool_path: str, json_file: str | None = None
) -> list[str]:
    """The perftest command line (an argv list; the peer is validated as a host name/address)."""
    argv = [tool_path, "-d", choice.device, "-i", str(choice.port), "-p", str(params.perftest_port), "-F"]
    if choice.gid_index is not None:
        argv += ["-x", str(choice.gid_index)]
    if params.all_sizes:
        argv.append("-a")
    elif params.size_bytes is not None:
        argv += ["-s", str(params.size_bytes)]
    if params.duration_s is not None:
        argv += ["-D", str(params.duration_s)]
    elif params.iterations is not None:
        argv += ["-n", str(params.iterations)]
    if params.is_bw:
        argv.append("--report_gbits")
        if params.qps > 1:
            argv += ["-q", str(params.qps)]
        if params.bidirectional:
            argv.append("-b")
    if params.use_cuda:
        argv.append(f"--use_cuda={params.gpu if params.gpu is not None else 0}")
    if json_file is not None:
        argv += ["--out_json", f"--out_json_file={json_file}"]
    if params.peer is not None:
        argv.append(_safe_host(params.peer))
    return argv


def _safe_host(peer: str) -> str:
    host = peer.strip()
    if not host or host.startswith("-") or any(ch.isspace() for ch in host) or len(host) > 255:
        raise RdmaPlanError(f"--peer {peer!r} is not a host name or address")
    return host


@dataclass(frozen=True)
class CommandOutcome:
    rc: int | None  # None when it had to be killed
    stdout: str
    stderr: str
    timed_out: bool = False


Runner = Callable[[list[str], float], CommandOutcome]
STOP_GRACE_S = 2.0  # perftest releases its QPs on SIGTERM; SIGKILL after this


def subprocess_runner(argv: list[str], timeout_s: float) -> CommandOutcome:
    """Run perftest with a deadline; stop it and its process group (and report) when it passes."""
    try:
        done = command.run(argv, timeout_s, grace_s=STOP_GRACE_S)
    except OSError as exc:
        return CommandOutcome(rc=127, stdout="", stderr=f"{argv[0]}: {exc.strerror or exc}")
    return from_outcome(done)


def from_outcome(done: command.Outcome) -> CommandOutcome:
    return CommandOutcome(
        rc=done.rc, stdout=done.stdout_text, stderr=done.stderr_text, timed_out=done.rc is None
    )


def supports_json(tool_path: str, runner: Runner) -> bool:
    """perftest >= 2023 has ``--out_json``; older builds reject it, so ask ``--help`` first."""
    help_out = runner([tool_path, "--help"], 10.0)
    return "out_json" in (help_out.stdout + help_out.stderr)


def run_rdma(
    params: RdmaParams,
    *,
    root: Root | None = None,
    runner: Runner = subprocess_runner,
    which: Callable[[str], str | None] = shutil.which,
    probe: CounterProbe | None = None,
) -> BenchResult:
    """Plan, run and parse one perftest test. Skips cleanly where RDMA or perftest is absent."""
    root = root or Root.live()
    result = new_result("rdma", params)
    inv = read_inventory(root)
    if not inv.rdma_devices:
        return result.skip("no RDMA device on this host (/sys/class/infiniband is empty)")
    tool_path = which(params.tool)
    if tool_path is None:
        return result.skip(
            f"perftest is not installed: {params.tool} not found on PATH (Debian/Ubuntu package: perftest)"
        )
    route = None
    if params.peer is not None:
        route = netdev_for_address(root, local_address_towards(params.peer))
    try:
        choice = choose_port(
            inv, device=params.device, ib_port=params.ib_port, gid_index=params.gid_index, route_netdev=route
        )
        params, gpu_note = plan_gpu(params, inv, choice)
        with private_dir("perftest") as tmp:
            json_file = str(tmp / "perftest.json") if supports_json(tool_path, runner) else None
            argv = build_argv(params, choice, tool_path, json_file)
            resolved = params.model_copy(
                update={"device": choice.device, "ib_port": choice.port, "gid_index": choice.gid_index}
            )
            result.params = resolved.model_dump(mode="json")
            result.detail["plan"] = {**asdict(choice), "argv": argv, "gpu": gpu_note}
            probe = probe or CounterProbe(
                None, root=root, netdev=choice.netdev, port=f"{choice.device}/{choice.port}"
            )
            probe.before()
            watch = Stopwatch()
            budget = (params.wait_s if params.peer is None else 0.0) + params.expected_s() + params.timeout_s
            outcome = runner(argv, budget)
            result.counters = probe.after()
            result.duration_s = round(watch.elapsed_s(), 6)
            json_text = (
                Path(json_file).read_text(errors="replace")
                if json_file and Path(json_file).is_file()
                else None
            )
    except RdmaPlanError as exc:
        return result.fail(str(exc))
    return _judge_outcome(result, params, choice, outcome, budget, json_text)


def _judge_outcome(
    result: BenchResult,
    params: RdmaParams,
    choice: PortChoice,
    outcome: CommandOutcome,
    budget: float,
    json_text: str | None,
) -> BenchResult:
    """perftest's exit and output as the result: JSON numbers where it wrote them, the text for the rest."""
    text = outcome.stdout + ("\n" + outcome.stderr if outcome.stderr else "")
    result.detail["output_tail"] = text.strip().splitlines()[-40:]
    if outcome.timed_out:
        side = "no client connected" if params.peer is None else "the peer did not answer"
        return result.fail(f"{params.tool} did not finish within {budget:g} s ({side}); stopped it")
    if outcome.rc != 0:
        return result.fail(f"{params.tool} exited with status {outcome.rc}: {failure_reason(text)}")
    parsed, source = _parse_output(result, json_text, outcome.stdout)
    if isinstance(parsed, PerftestParseError):
        return result.fail(f"{params.tool} output not understood: {parsed}")
    if not parsed.rows:
        return result.fail(f"{params.tool} printed no result rows: {failure_reason(text)}")
    result.finish(metrics_from(parsed, choice.rate_gbps))
    result.detail.update(
        {
            "parsed_from": source,
            "test": parsed.test,
            "rows": parsed.rows,
            "header": parsed.header,
            "local": {**parsed.local, "gid_ip": gid_address(parsed.local.get("GID"))},
            "remote": {**parsed.remote, "gid_ip": gid_address(parsed.remote.get("GID"))},
            "warnings": parsed.warnings[:20],
        }
    )
    if parsed.gid_index is not None and choice.gid_index is not None and parsed.gid_index != choice.gid_index:
        result.detail["gid_mismatch"] = (
            f"asked for GID index {choice.gid_index}, perftest reports {parsed.gid_index}"
        )
    return result


def _parse_output(
    result: BenchResult, json_text: str | None, stdout: str
) -> tuple[PerftestOutput | PerftestParseError, str]:
    """perftest's JSON file where it wrote one (the numbers), its text for addresses and warnings; or why neither reads."""
    parsed: PerftestOutput | None = None
    source = "text"
    try:
        if json_text:
            parsed, source = parse_json(json_text, "Gb/sec"), "json"
    except PerftestParseError as exc:
        result.detail["json_problem"] = str(exc)
    try:
        text_parsed = parse_text(stdout)
    except PerftestParseError as exc:
        return (parsed, source) if parsed is not None else (exc, source)
    if parsed is None:
        return text_parsed, source
    parsed.local, parsed.remote, parsed.warnings = text_parsed.local, text_parsed.remote, text_parsed.warnings
    return parsed, source
