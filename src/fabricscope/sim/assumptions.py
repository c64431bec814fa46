"""The defaults an answer rests on: which of them changed it, where each comes from, and how to
override it (issue 23 item 8). Every ``sim`` document carries the list (``assumptions``); the
text output prints the ones that changed the answer, ``--explain`` all of them.

An assumption "changed the answer" when the result shows its effect: a per-flow cap that is the
slowest flows' bottleneck, a DCQCN adjustment the solver applied, ECMP routing with a fabric link
as the bottleneck (another seed, other collisions), a pipeline ramp that is more than 5% of the
time, and so on. The rest are listed as used but not decisive.
"""

from __future__ import annotations

from typing import Any

from fabricscope.sim import transport as tr_mod
from fabricscope.sim.engine import Simulator
from fabricscope.sim.params import NVLINK_EFFICIENCY

RAMP_SHARE = 0.05


def _a(name: str, value: str, source: str, override: str, changed: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "source": source, "override": override, "changed": bool(changed)}


def collect(sim: Simulator, given: dict[str, Any], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assumptions of one simulator over the results it produced (collective results' dicts)."""
    limited = {r.get("limited_by", "") for r in results}
    adjustments = {a for r in results for ph in r.get("phases", []) for a in ph.get("adjustments", [])}
    bott_kinds = {b.get("kind") for r in results for b in r.get("bottlenecks", [])}
    return (
        _transport(sim, given, limited, adjustments)
        + _solver(sim, results, limited, bott_kinds)
        + _system(sim, given)
    )


def _transport(
    sim: Simulator, given: dict[str, Any], limited: set[str], adjustments: set[str]
) -> list[dict[str, Any]]:
    """The transport model's figures: efficiency, hop latency, per-flow cap, host memory, DCQCN."""
    t = sim.transport
    out = []
    if "efficiency" not in given:
        out.append(
            _a(
                "transport efficiency",
                f"{t.efficiency:.3f} ({t.name})",
                "wire overhead x NCCL's per-NIC figures (docs/sim.md, Transport models)",
                "--efficiency",
                any("bandwidth" in x for x in limited),
            )
        )
    if "alpha_us" not in given:
        hop = t.alpha_s if t.nccl_hop_s is None else t.nccl_hop_s
        src = {
            "tcp": "fitted: NCCL over sockets, calibration split (TCP_NCCL_HOP_S)",
            "efa": "fitted: 2x p5 sweeps, calibration split",
            "tcpx": "fitted: A3 High sweep, calibration split",
            "tcpxo": "fitted: A3 Mega sweeps, calibration split",
        }.get(t.name, "NCCL's tuning model, src/graph/tuning.cc")
        out.append(
            _a(
                "per network hop latency",
                f"{hop * 1e6:g} us",
                src,
                "--alpha-us",
                any(x.startswith("latency") for x in limited),
            )
        )
    if t.name in ("tcp", "tcpx", "udp") and "per_core_gbps" not in given:
        out.append(
            _a(
                "per-flow (per-core) cap",
                f"{t.per_flow_cap_Bps * 8 / 1e9:g} Gb/s x {t.sockets} socket(s), {t.threads} thread(s)",
                "one core's copy rate (Cai et al., SIGCOMM 2021); measure with "
                "fabricscope bench tcp --streams 1",
                "--per-core-gbps, --nsocks-perthread, --socket-nthreads",
                "per-flow cap of the transport" in limited,
            )
        )
    if t.name == "tcp" and "host_mem_GBps" not in given and sim.topo.node.gpu != "none":
        out.append(
            _a(
                "host memory for NCCL's staging copies",
                f"{t.host_mem_GBps:g} GB/s per node",
                "fitted: TCP rows of the calibration split (TCP_HOST_MEM_GBPS)",
                "--host-mem-GBps",
                "access bandwidth" in " ".join(limited),
            )
        )
    if t.upper_bound and sim.topo.node.gpu != "none":
        out.append(
            _a(
                "TCP host model",
                "upper bound",
                "fitted on 2-node cloud VMs, not validated on large multi-GPU TCP clusters",
                "--calibrate RUN with your own measurement",
                True,
            )
        )
    if any(a.startswith("DCQCN") for a in adjustments):
        out.append(
            _a(
                "DCQCN on contended links",
                f"{t.dcqcn_efficiency:g} of capacity",
                "Barre, USENIX ATC 2025 (1/1.15)",
                "--no-ecn (PFC only) or --transport ib",
                True,
            )
        )
    return out


def _solver(
    sim: Simulator, results: list[dict[str, Any]], limited: set[str], bott_kinds: set[Any]
) -> list[dict[str, Any]]:
    """How the flows were placed and timed: the ECMP draw, NVLink efficiency, the pipeline ramp."""
    out = []
    if sim.routing == "ecmp" and "fabric" in bott_kinds:
        out.append(
            _a(
                "ECMP hash seed",
                str(sim.seed),
                "a seeded flow hash: these collisions are one draw",
                "--seed N (another draw), --routing adaptive",
                True,
            )
        )
    if sim.nvlink_efficiency == NVLINK_EFFICIENCY:
        out.append(
            _a(
                "NVLink efficiency",
                f"{NVLINK_EFFICIENCY:g}",
                "NCCL ring in one H100 node, nccl-tests#212",
                "--nvlink-GBps (the rate), calibration",
                "nvlink bandwidth" in limited,
            )
        )
    ramp = max(
        (
            r.get("solver", {}).get("pipeline", {}).get("extra_s", 0.0) / r["time_s"]
            for r in results
            if r.get("time_s")
        ),
        default=0.0,
    )
    if ramp > 0:
        out.append(
            _a(
                "pipeline ramp",
                f"up to {ramp:.0%} of the time",
                "NCCL v2.30.7-1's chunking (sim/pipeline.py)",
                "none (NCCL_BUFFSIZE, NCCL_NVLS_CHUNKSIZE change it in NCCL)",
                ramp > RAMP_SHARE,
            )
        )
    return out


def _system(sim: Simulator, given: dict[str, Any]) -> list[dict[str, Any]]:
    """What the system was taken to be where the command line did not say."""
    out = []
    if not given.get("system") and "gpu" not in given and sim.topo.node.gpu == "h100":
        out.append(_a("GPU", "h100", "the default GPU (sim/gpus.py)", "--gpu or --system", True))
    if (
        given.get("system")
        and given.get("gpus_per_node")
        and sim.topo.node.gpus_per_node != given["gpus_per_node"]
    ):
        out.append(
            _a(
                "NVLink domain",
                f"{sim.topo.node.gpus_per_node} GPUs per domain",
                f"--system {given['system']}: trays of {given['gpus_per_node']} are one NVLink domain",
                "--nvlink-domain N",
                True,
            )
        )
    return out


def notes_for(name: str) -> str:
    """The notes of a transport, for the which-network report."""
    return "; ".join(tr_mod.make_transport(name).notes)
