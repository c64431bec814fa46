"""Which network for this workload? (issue 23): the same training step or inference server on each
candidate network (IB, RoCE, TCP, a cloud transport; NIC count and rate per node), its throughput
as a ratio of the best, the reason (the communication that decides it, and what limits that), and
a note where the answer rests on a part of the model that is not validated (TCP's host side, the
cloud transports fitted on 2-node sweeps).

A candidate is ``TRANSPORT[:NxRATE]``: ``ib``, ``roce:8x400G``, ``tcp:2x200G``, ``efa``. Without
``NxRATE`` it keeps the fabric's NICs (the --system's, or the options given).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.sim.engine import SCHEMA
from fabricscope.sim.params import DEFAULTS, InferPlan, TrainPlan
from fabricscope.sim.transport import TRANSPORTS

SPEC = re.compile(r"(?P<t>[a-z-]+)(?::(?P<n>\d+)x(?P<r>[0-9.]+[a-zA-Z]*))?\Z")
DEFAULT_CANDIDATES = ("ib", "roce", "tcp")
UNVALIDATED = {
    "tcp": "TCP host side (staging copies, per-hop cost) fitted on 2-node cloud VMs: an upper bound",
    "efa": "EFA constants fitted on 2-node p5 sweeps",
    "tcpx": "TCPX constants fitted on one 2-node A3 High sweep",
    "tcpxo": "TCPXO constants fitted on 2-node A3 Mega sweeps",
}


def parse_candidate(spec: str) -> dict[str, Any]:
    m = SPEC.match(str(spec).strip().lower())
    if not m or m["t"] not in TRANSPORTS:
        raise FabricscopeError(
            f"--candidate {spec!r}: TRANSPORT[:NxRATE], e.g. ib, roce:8x400G, tcp:2x200G "
            f"(transports: {', '.join(TRANSPORTS)})"
        )
    out: dict[str, Any] = {"transport": m["t"]}
    if m["n"]:
        out.update(nics_per_node=int(m["n"]), nic_rate=m["r"].upper())
    return out


def _reason(doc: dict[str, Any], workload: str, best: dict[str, Any] | None = None) -> str:
    """The communication that costs this candidate the most time against the best one (or, for the
    best, the most time outright), and what limits it."""
    if workload == "train":
        comm = doc.get("comm") or {}
        if not comm or doc["exposed_comm_s"] <= 0:
            return "compute-bound: the network is hidden"
        ref = (best or {}).get("comm") or {}
        name, c = max(
            comm.items(),
            key=lambda kv: kv[1].get("exposed_s", 0.0) - ref.get(kv[0], {}).get("exposed_s", 0.0),
        )
        extra = c.get("exposed_s", 0.0) - ref.get(name, {}).get("exposed_s", 0.0)
        lead = (
            f"{name} exposes {extra:.3g} s more per step than on the best"
            if best is not None and extra > 0
            else f"{name} exposes {c['exposed_s']:.3g} s of {doc['step_time_s']:.3g} s per step"
        )
        return f"{lead}, {c.get('algo', '')}/{c.get('proto', '')} limited by {c.get('limited_by')}"
    parts = [(k, doc.get(f"{k}_comm_per_token_s", 0.0)) for k in ("tp", "ep", "pp")]
    name, t = max(parts, key=lambda kv: kv[1])
    if t <= 0:
        return "decode-bound: no communication per token"
    key = {"tp": "tensor_parallel", "ep": "expert_parallel", "pp": "pipeline_parallel"}[name]
    lim = (doc.get(key) or {}).get("per_call", {}).get("limited_by") or (doc.get(key) or {}).get("limited_by")
    return (
        f"{name.upper()} communication {t * 1e3:.3g} ms of {doc['time_per_output_token_s'] * 1e3:.3g} ms per token, "
        f"limited by {lim}"
    )


def compare(
    workload: str,
    params: dict[str, Any],
    candidates: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every candidate network for one workload; rows sorted by throughput, ratio to the best.
    ``progress`` gets one line as each candidate is done."""
    from fabricscope.sim.infer import run_infer
    from fabricscope.sim.workloads import run_train

    if workload not in ("train", "infer"):
        raise FabricscopeError("--workload is train or infer")
    keep = set(DEFAULTS) | set(TrainPlan.model_fields if workload == "train" else InferPlan.model_fields)
    base = {k: v for k, v in params.items() if k in keep and v is not None}
    specs = list(candidates or DEFAULT_CANDIDATES)
    rows = []
    for k, spec in enumerate(specs):
        cand = parse_candidate(spec)
        p = {**base, **cand}
        socket = cand["transport"] in ("tcp", "tcpx", "udp")
        for key in (
            ("host_mem_GBps", "per_core_gbps", "nsocks_perthread", "socket_nthreads") if not socket else ()
        ):
            p.pop(key, None)  # options of the socket transports apply to their rows only
        if cand["transport"] not in ("ib", "roce", "roce-lossy"):
            p.pop("qps_per_connection", None)
        unvalidated = [UNVALIDATED[cand["transport"]]] if cand["transport"] in UNVALIDATED else []
        if str(p.get("ep_mode", "")).lower() == "deepep" and cand["transport"] not in (
            "ib",
            "roce",
            "roce-lossy",
        ):
            p["ep_mode"] = "nccl"  # DeepEP needs RDMA: this network runs NCCL's all-to-all instead
            unvalidated.append("DeepEP needs RDMA: this row runs NCCL's all-to-all")
        doc = run_train(p) if workload == "train" else run_infer(p)
        if progress:
            progress(f"sim network {k + 1}/{len(specs)} done: {spec}")
        metric = doc["tokens_per_s"]
        rows.append(
            {
                "candidate": spec,
                "transport": cand["transport"],
                "nics_per_node": doc["model"]["topology"]["nics_per_node"],
                "nic_gbps": doc["model"]["topology"]["nic_gbps"],
                "tokens_per_s": metric,
                "time_s": doc["time_s"],
                "unvalidated": unvalidated,
                "_doc": doc,
                "assumptions": [a for a in doc.get("assumptions", []) if a.get("changed")],
            }
        )
    rows.sort(key=lambda r: -r["tokens_per_s"])
    best = rows[0]["tokens_per_s"]
    for i, r in enumerate(rows):
        r["ratio"] = r["tokens_per_s"] / best if best > 0 else 0.0
        r["reason"] = _reason(r["_doc"], workload, None if i == 0 else rows[0]["_doc"])
    for r in rows:
        r.pop("_doc")
    return {
        "schema": SCHEMA,
        "kind": "network",
        "workload": workload,
        "base": base,
        "rows": rows,
        "best": rows[0]["candidate"],
    }
