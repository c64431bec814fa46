"""What the transport does to a routed pattern: ONE function for both solver paths.

The per-transfer max-min solve (``Simulator.solve_pattern``) and the per-link aggregation of large
alltoalls (``alltoall.solve``) used to apply loss, per-flow caps, timeouts and DCQCN each in its
own way; a transport effect added to one was missing from the other. Both now call ``apply``
before they solve and ``congestion`` after a first solve:

* ``apply``: retransmissions inflate the bytes each network flow puts on the links (go-back-N
  resends the window behind a loss, TCP and UDP resend what was lost), each flow gets the
  transport's per-flow ceiling (per-core copy rate, NCCL's socket striping, the Padhye bound under
  loss), and its retransmission timeout;
* ``congestion``: DCQCN's loss on the contended switch egresses (a queue builds where two or more
  input ports feed a saturated egress; never a NIC's own egress, which paces itself).

A "flow" is whatever the caller solves: a striped socket row (engine) or a shared network leg
(alltoall), whose ``mult`` transfers each are one connection over all its sockets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabricscope.sim.fabrics import KIND_ACCESS, KIND_FABRIC, KIND_NVLINK, Routes
from fabricscope.sim.topology import Topology
from fabricscope.sim.transport import Transport


@dataclass
class Effects:
    coef: np.ndarray  # per incidence entry: link bytes per goodput byte of its flow
    flow_cap: np.ndarray  # per flow, bytes/s (inf: none)
    rto: np.ndarray  # per flow, seconds (0 without loss)
    notes: list[str] = field(default_factory=list)


def apply(
    topo: Topology,
    tr: Transport,
    routes: Routes,
    coef: np.ndarray,
    network: np.ndarray,
    rtt: np.ndarray,
    per_connection: bool = False,
) -> Effects:
    """Loss inflation, per-flow caps and timeouts of the flows ``network`` marks (per flow, with
    their round-trip times ``rtt``). ``per_connection``: a flow is one whole connection striped over
    the transport's sockets (alltoall legs), not one socket (the engine's striped rows)."""
    n = len(network)
    coef = coef.copy()
    notes: list[str] = []
    flow_cap = np.full(n, np.inf)
    rto = np.zeros(n)
    if not network.any():
        return Effects(coef, flow_cap, rto, notes)
    if tr.loss > 0:
        window = np.ceil(topo.nic_rate_Bps * rtt / tr.mtu_bytes) + 1.0
        uniq = np.unique(window)
        infl = np.array([tr.inflation(w) for w in uniq])[np.searchsorted(uniq, window)]
        on_net = network[routes.flow] & (topo.link_kind[routes.link] != KIND_NVLINK)
        coef[on_net] *= infl[routes.flow[on_net]]
        notes.append(
            f"loss {tr.loss:g}: links carry {float(infl[network].mean()):.3g}x the goodput ({tr.retransmission})"
        )
        rto[network] = [tr.rto(r) for r in rtt[network]]
    if np.isfinite(tr.per_flow_cap_Bps) or tr.loss > 0:
        scale = tr.sockets if per_connection else 1
        flow_cap[network] = [tr.flow_cap_Bps(r) * scale for r in rtt[network]]
    return Effects(coef, flow_cap, rto, notes)


def switch_egress(topo: Topology) -> np.ndarray:
    """Network links that leave a switch port. A NIC's own egress (the first n_nics fabric links,
    nic->switch) queues in the NIC, which paces itself: no switch queue, no ECN mark."""
    k = topo.link_kind
    out: np.ndarray = (k == KIND_ACCESS) | (k == KIND_FABRIC)
    out[topo.o_fabric : topo.o_fabric + topo.n_nics] = False
    return out


def dcqcn_active(tr: Transport) -> bool:
    return tr.name in ("roce", "roce-lossy") and tr.ecn and tr.dcqcn_efficiency < 1


def congestion(tr: Transport, cap: np.ndarray, contended: np.ndarray) -> tuple[np.ndarray, str | None]:
    """Capacities after DCQCN's rate oscillation on the contended links (Zhu et al., SIGCOMM 2015;
    the share from Barre, ATC 2025: docs/sim.md), and the note saying so; unchanged otherwise."""
    if not dcqcn_active(tr) or not contended.any():
        return cap, None
    out = cap.copy()
    out[contended] *= tr.dcqcn_efficiency
    return out, f"DCQCN: {int(contended.sum())} contended link(s) at {tr.dcqcn_efficiency:g} of capacity"
