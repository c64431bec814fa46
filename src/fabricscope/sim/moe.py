"""MoE dispatch and combine: NCCL's all-to-all beside a DeepEP-style kernel (issue 23).

Per GPU, ``tokens`` tokens each go to ``topk`` experts spread evenly over the ``ep`` ranks of the
expert-parallel group (node-major, ``gpn`` per node, ``N`` nodes):

* NCCL all-to-all (``mode="nccl"``): every (token, expert) copy on another node crosses the network
  on its own: per GPU ``tokens x topk x (N - 1)/N`` rows of ``hidden x bytes``, in one message per
  peer (``rows / (ep - gpn)`` rows);
* DeepEP-style (``mode="deepep"``, DeepSeek's DeepEP README): its normal kernels send a token
  once per remote node it needs (RDMA to the GPU of the same index there), then forward it inside
  that node over NVLink; with node-limited routing (``groups``: DeepSeek-V3 picks 4 nodes) that is
  at most ``groups`` nodes. Expected remote nodes per token: ``(N - 1)(1 - (1 - 1/N)^k)`` with
  ``k = min(topk, groups)``. Its low-latency kernels (``ll=True``) send every (token, expert) copy
  straight to the expert's GPU, one message per token, no forwarding.

The NIC moves many small messages below its line rate: each message costs as much as
``MSG_OVERHEAD_BYTES`` of payload (work request, doorbell, completion), so a message of ``m`` bytes
runs at ``m / (m + MSG_OVERHEAD_BYTES)`` of the transport's rate. NVLink carries every copy that
lands on another GPU of the node. Time = ``MOE_ALPHA_S`` + the transport's per-hop latency + the
slower of the RDMA and the NVLink legs. ``MSG_OVERHEAD_BYTES`` and ``MOE_ALPHA_S`` are fitted to
the MoE rows of the calibration split (sim/published.py names them).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.sim.engine import Simulator

MSG_OVERHEAD_BYTES = 1024.0
MOE_ALPHA_S = 30e-6
MODES = ("nccl", "deepep")


@dataclass
class MoeTime:
    mode: str
    time_s: float
    rdma_bytes: float  # per GPU, over the network
    nvlink_bytes: float  # per GPU, inside the node
    rdma_s: float
    nvlink_s: float
    message_bytes: float
    nic_efficiency: float  # the small-message factor applied to the transport's rate
    limited_by: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def bandwidth_GBps(self, leg: str | None = None) -> float:
        """DeepEP's 'bottleneck bandwidth': the bytes of a leg (default: the slower) over the time."""
        b = self.rdma_bytes if (leg or self.limited_by) == "rdma" else self.nvlink_bytes
        return b / self.time_s / 1e9 if self.time_s > 0 else 0.0


def message_efficiency(m: float) -> float:
    return m / (m + MSG_OVERHEAD_BYTES) if m > 0 else 1.0


def alltoall(
    sim: Simulator,
    tokens: float,
    topk: int,
    hidden: int,
    elem_bytes: float,
    ep: int,
    mode: str = "nccl",
    groups: int | None = None,
    ll: bool = False,
    per_node: int | None = None,
) -> MoeTime:
    """One dispatch (or combine) of an MoE layer across an EP group of ``ep`` ranks, ``per_node`` of
    them on each node (default: as many as the node has GPUs)."""
    if mode not in MODES:
        raise FabricscopeError(f"--ep-mode is {' or '.join(MODES)}")
    if mode == "deepep" and sim.transport.name not in ("ib", "roce", "roce-lossy"):
        raise FabricscopeError(
            f"--ep-mode deepep needs RDMA with GPU-initiated sends (ib or roce), not "
            f"{sim.transport.name}: use --ep-mode nccl"
        )
    topo = sim.topo
    gpn = max(1, min(ep, per_node or topo.node.gpus_per_node))
    nodes = math.ceil(ep / gpn)
    row = hidden * elem_bytes
    copies = tokens * topk
    nvl_rate = topo.node.nvlink_GBps * 1e9 * sim.nvlink_efficiency
    nic_share = topo.node.nics_per_node / topo.node.gpus_per_node  # NICs per GPU (<= 1 as NCCL uses them)
    nic_rate = min(
        topo.nic_rate_Bps * sim.transport.efficiency, sim.transport.host_cap_Bps(topo.node.nics_per_node)
    )
    nic_rate *= min(
        1.0, nic_share
    )  # the NIC's rate, and for sockets the host's staging copies (sim/transport.py)
    if nodes > 1 and sim.transport.name in ("tcp", "udp"):  # kernel sockets: the per-flow cap binds first
        nic_rate = min(
            nic_rate, sim.transport.flow_cap_Bps(1e-4) * max(1, sim.transport.sockets) * (ep - gpn)
        )
    if mode == "deepep" and nodes > 1 and not ll:  # low-latency kernels send each (token, expert) directly
        k = min(topk, groups or topk)
        remote = (nodes - 1) * (1 - (1 - 1 / nodes) ** k)
        rdma_rows = tokens * remote
        msg = row if ll else rdma_rows * row / max(1, nodes - 1)
    else:
        rdma_rows = copies * (nodes - 1) / nodes
        msg = row if ll else rdma_rows * row / max(1, ep - gpn)
    rdma_bytes = rdma_rows * row
    nvlink_bytes = copies * row * (gpn - 1) / gpn if gpn > 1 else 0.0
    eff = message_efficiency(msg) if nodes > 1 else 1.0
    rdma_s = rdma_bytes / (nic_rate * eff) if rdma_bytes else 0.0
    nvlink_s = nvlink_bytes / nvl_rate if nvlink_bytes and math.isfinite(nvl_rate) else 0.0
    hop = sim.transport.alpha_s if sim.transport.nccl_hop_s is None else sim.transport.nccl_hop_s
    latency = MOE_ALPHA_S + (hop if nodes > 1 else 0.0)
    t = latency + max(rdma_s, nvlink_s)
    return MoeTime(
        mode,
        t,
        rdma_bytes,
        nvlink_bytes,
        rdma_s,
        nvlink_s,
        msg,
        eff,
        "rdma" if rdma_s >= nvlink_s and rdma_bytes else "nvlink",
    )
