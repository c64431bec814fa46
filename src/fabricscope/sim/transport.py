"""Transport models: what a byte on the wire costs each protocol, and what loss does to it.

Every transport reduces to four things the flow model can use (equations and sources in
docs/sim.md):

* ``efficiency``: goodput per unit of link rate on network links (headers, framing, the
  NIC/NCCL pipeline), ``wire_efficiency * endpoint_efficiency``;
* ``alpha_s``: fixed time per message per network hop (software, NIC, protocol handshake);
* ``flow_cap_Bps(rtt)``: a per-flow ceiling (TCP/UDP per-core limit; the Mathis/Padhye bound
  when TCP sees loss);
* ``inflation(window)``: link bytes per goodput byte (retransmissions under loss), and
  ``step_penalty_s``: expected stall per step from timeouts.

Congestion behaviour that depends on the solved rates (DCQCN efficiency on contended links,
PFC head-of-line blocking) is applied by the engine, driven by the flags here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fabricscope.errors import FabricscopeError

TRANSPORTS = ("ib", "roce", "roce-lossy", "tcp", "udp", "efa", "tcpx", "tcpxo")

# RoCE v2 per-packet overhead on Ethernet: preamble+SFD 8, Ethernet header 14, IPv4 20,
# UDP 8, IB BTH 12, ICRC 4, FCS 4, inter-frame gap 12 = 82 bytes (IBTA RoCEv2 annex A17).
ROCE_OVERHEAD_BYTES = 82
# InfiniBand: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 bytes per packet (IBTA vol. 1, ch. 7).
IB_OVERHEAD_BYTES = 26
# Ethernet framing around an IP packet: preamble 8 + header 14 + FCS 4 + IFG 12 = 38 bytes.
ETH_FRAMING_BYTES = 38
# A tc tbf shaper on a veth counts skb->len, which includes the 14-byte Ethernet header only.
TBF_FRAMING_BYTES = 14


@dataclass
class Transport:
    name: str
    wire_efficiency: float
    endpoint_efficiency: float
    alpha_s: float
    mtu_bytes: int
    payload_bytes: int
    default_routing: str
    lossless: bool  # PFC (RoCE) or credit-based (IB) link-level flow control
    ecn: bool  # ECN-driven congestion control (DCQCN) reacts at contended links
    retransmission: str  # "go-back-n", "tcp", "app"
    loss: float = 0.0
    per_flow_cap_Bps: float = math.inf  # per-core limit of a kernel-stack flow
    rto_s: float | None = None  # None = derived from RTT (adaptive retransmission)
    min_rto_s: float = 0.0
    dcqcn_efficiency: float = 1.0  # bandwidth utilisation of a contended link under DCQCN
    sockets: int = (
        1  # TCP sockets one NCCL connection stripes over (NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS)
    )
    threads: int = 1  # helper threads (cores) that serve them; the proxy thread alone when 0 were asked
    # Host side of NCCL's socket transport: every byte is staged through host memory (the GPU writes
    # it to a pinned bounce buffer, the kernel copies it into the socket, the NIC reads it: 4 memory
    # touches per byte each way). inf: no host limit (RDMA, GPUDirect transports).
    host_mem_GBps: float = math.inf  # memory bandwidth of one node the staging copies get
    bounce_touches: int = 4
    upper_bound: bool = False  # answers rest on a part of the model not validated on multi-GPU points
    nccl_hop_s: float | None = None  # NCCL's per-network-hop latency on this transport (None: alpha_s)
    qps: int = 1  # RDMA: queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION), each its own ECMP hash

    @property
    def stripes(self) -> int:
        """Flows one connection is cut into on the wire: sockets (TCP) or queue pairs (RDMA)."""
        return max(self.sockets, self.qps)

    notes: list[str] = field(default_factory=list)

    def host_cap_Bps(self, nics_per_node: int) -> float:
        """Per NIC and direction: the node's staging bandwidth shared by its NICs, both directions busy."""
        if not math.isfinite(self.host_mem_GBps):
            return math.inf
        return self.host_mem_GBps * 1e9 / (self.bounce_touches * 2 * max(1, nics_per_node))

    @property
    def efficiency(self) -> float:
        return self.wire_efficiency * self.endpoint_efficiency

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["efficiency"] = self.efficiency
        d["per_flow_cap_gbps"] = (
            None if math.isinf(self.per_flow_cap_Bps) else self.per_flow_cap_Bps * 8 / 1e9
        )
        d.pop("per_flow_cap_Bps")
        d["host_mem_GBps"] = None if math.isinf(self.host_mem_GBps) else self.host_mem_GBps
        return d

    # -- loss ---------------------------------------------------------------------------------
    def rto(self, rtt_s: float) -> float:
        if self.rto_s is not None:
            return self.rto_s
        return max(self.min_rto_s, 4.0 * rtt_s)

    def inflation(self, window_pkts: float) -> float:
        """Link bytes sent per goodput byte.

        go-back-N: each loss (probability p per packet) discards the ~W packets in flight behind
        it, so per delivered packet 1 + W p / (1 - p) are sent. TCP (SACK) and application-level
        recovery resend only what was lost: 1 / (1 - p).
        """
        p = self.loss
        if p <= 0:
            return 1.0
        if self.retransmission == "go-back-n":
            return 1.0 + max(window_pkts, 1.0) * p / (1.0 - p)
        return 1.0 / (1.0 - p)

    def flow_cap_Bps(self, rtt_s: float) -> float:
        """Per-flow ceiling: the per-core cap, and for TCP under loss the Padhye et al. bound."""
        cap = self.per_flow_cap_Bps
        if self.sockets > 1:  # T threads copy for S sockets: each socket gets min(S, T)/S of a core's rate
            cap = cap * min(self.sockets, self.threads) / self.sockets
        if self.retransmission == "tcp" and self.loss > 0:
            cap = min(cap, padhye_Bps(self.payload_bytes, rtt_s, self.loss, self.rto(rtt_s)))
        return cap

    def message_timeout_probability(self, packets: float) -> float:
        """Chance that one message (one flow's bytes of one step) ends in a retransmission timeout.

        go-back-N: only a lost *last* packet (or its lost NAK) has nothing behind it to reveal the
        gap, so the sender waits for its ACK timer: ~p. Application-level recovery over UDP must
        time out whenever any packet of the message is lost: 1 - (1 - p)^packets. TCP's timeouts
        are inside the Padhye bound already.
        """
        p = self.loss
        if p <= 0 or self.retransmission == "tcp":
            return 0.0
        if self.retransmission == "go-back-n":
            return p
        return 1.0 - (1.0 - p) ** max(packets, 1.0)


MAX_SOCKETS, MAX_THREADS = 64, 16  # src/transport/net_socket.cc


def socket_striping(nsocks_perthread: int | None, nthreads: int | None) -> tuple[int, int]:
    """(sockets, threads) of one connection of NCCL's socket transport (NVIDIA NCCL v2.30.7-1,
    src/transport/net_socket.cc, ncclNetSocketGetNsockNthread): NCCL_SOCKET_NTHREADS helper threads
    (at most 16) each drive NCCL_NSOCKS_PERTHREAD sockets (at most 64 in all) and a message is cut
    into one task per socket. Auto-detection gives 0 threads and 1 socket per thread (2 x 8 on AWS,
    4 x 1 on GCP); 0 sockets means the data rides the proxy thread's control socket alone."""
    nt = 0 if nthreads is None else int(nthreads)
    ns = 1 if nsocks_perthread is None else int(nsocks_perthread)
    if nt < 0 or ns < 0:
        raise FabricscopeError("--nsocks-perthread and --socket-nthreads must be >= 0")
    nt = min(nt, MAX_THREADS)
    if ns * nt > MAX_SOCKETS:
        ns = MAX_SOCKETS // nt
    sockets = ns * nt
    return (sockets, nt) if sockets > 0 else (1, 1)


def mathis_Bps(mss_bytes: float, rtt_s: float, p: float) -> float:
    """Mathis et al. 1997: BW = MSS / RTT * sqrt(3 / (2 p))."""
    return mss_bytes / rtt_s * math.sqrt(1.5 / p)


def padhye_Bps(mss_bytes: float, rtt_s: float, p: float, rto_s: float, b: int = 1) -> float:
    """Padhye et al. 1998 (SIGCOMM), full model with timeouts:

    B = MSS / (RTT sqrt(2bp/3) + T0 min(1, 3 sqrt(3bp/8)) p (1 + 32 p^2)).
    """
    denom = rtt_s * math.sqrt(2 * b * p / 3) + rto_s * min(1.0, 3 * math.sqrt(3 * b * p / 8)) * p * (
        1 + 32 * p * p
    )
    return mss_bytes / denom


# Cloud transports (issue 23). Their constants are fitted to whole sweeps of the calibration split
# (sim/published.py CALIBRATION names the tables) and printed with every answer that uses them.
# EFA (AWS): SRD over Ethernet, packets sprayed over many paths and resent by the NIC, through
# aws-ofi-nccl; jumbo 8900-byte MTU. TCPX (GCP A3 High): kernel TCP with header split, payloads
# received straight into GPU memory and sent from it (no host bounce). TCPXO (GCP A3 Mega): the
# same data path offloaded to the NIC (FasTrak).
CLOUD = {
    # name: (mtu, per-packet overhead bytes, endpoint efficiency, alpha s, per-flow cap Gb/s or None)
    "efa": (8900, ROCE_OVERHEAD_BYTES, 0.96, 30e-6, None),
    "tcpx": (8244, 52 + ETH_FRAMING_BYTES, 1.0, 250e-6, 60.0),
    "tcpxo": (8244, ROCE_OVERHEAD_BYTES, 0.808, 60e-6, None),
}
TCP_ALPHA_S = 15e-6  # one kernel socket round trip per message (the flow model's, and gloo's on CPU hosts)
# NCCL's socket transport per network hop of NCCL's latency model (proxy thread, send/recv calls,
# wake-ups, the virtual NIC): fitted to the calibration split's TCP sweeps (sim/published.py).
TCP_NCCL_HOP_S = 250e-6
# Host memory bandwidth one node's staging copies get (GB/s): fitted on the same sweeps.
TCP_HOST_MEM_GBPS = 120.0


def make_transport(
    name: str,
    *,
    loss: float = 0.0,
    mtu_bytes: int | None = None,
    ecn: bool = True,
    per_core_gbps: float | None = None,
    rto_s: float | None = None,
    alpha_s: float | None = None,
    efficiency: float | None = None,
    framing: str = "ethernet",
    nsocks_perthread: int | None = None,
    socket_nthreads: int | None = None,
    host_mem_GBps: float | None = None,
    qps_per_connection: int | None = None,
) -> Transport:
    """The named transport with documented defaults; every default can be overridden (and
    calibrated from measurements with ``fabricscope sim --calibrate``)."""
    key = name.lower()
    if key not in TRANSPORTS:
        raise FabricscopeError(f"unknown transport {name!r} (choose from {', '.join(TRANSPORTS)})")
    if not 0.0 <= loss < 1.0:
        raise FabricscopeError("--loss must be in [0, 1)")
    if framing not in ("ethernet", "tbf"):
        raise FabricscopeError("--framing is ethernet or tbf")
    eth = ETH_FRAMING_BYTES if framing == "ethernet" else TBF_FRAMING_BYTES
    if key in CLOUD:
        t = _cloud(key, mtu_bytes, loss, rto_s, per_core_gbps)
    elif key == "ib":
        t = _verbs(
            key,
            mtu_bytes,
            IB_OVERHEAD_BYTES,
            3.0e-6,
            "adaptive",
            loss,
            rto_s,
            lossless=True,
            ecn=True,
            notes=["credit-based lossless links; adaptive routing by default; RC go-back-N if --loss is set"],
        )
    elif key in ("roce", "roce-lossy"):
        t = _roce(key, mtu_bytes, ecn, loss, rto_s)
    else:
        t = _socket(key, mtu_bytes, eth, loss, rto_s, per_core_gbps)
    _override(t, per_core_gbps, alpha_s, efficiency, nsocks_perthread, socket_nthreads)
    if qps_per_connection is not None:
        if key not in ("ib", "roce", "roce-lossy") or not 1 <= int(qps_per_connection) <= 128:
            raise FabricscopeError(
                "--qps-per-connection applies to ib and roce, 1 to 128 (NCCL_IB_QPS_PER_CONNECTION)"
            )
        t.qps = int(qps_per_connection)
        t.notes.append(f"{t.qps} queue pair(s) per connection, each hashed by ECMP on its own")
    if host_mem_GBps is not None:
        if key != "tcp":
            raise FabricscopeError(
                "--host-mem-GBps applies to tcp (NCCL's socket transport stages through host memory)"
            )
        t.host_mem_GBps = float(host_mem_GBps)
    return t


def _verbs(
    key: str,
    mtu_bytes: int | None,
    overhead: int,
    alpha_s: float,
    routing: str,
    loss: float,
    rto_s: float | None,
    *,
    lossless: bool,
    ecn: bool,
    notes: list[str],
    dcqcn_efficiency: float = 1.0,
) -> Transport:
    """RC verbs, InfiniBand's or RoCE's: a 4096-byte MTU unless given, all of it payload, 96 % at
    the endpoints, go-back-N recovery from a 4 us minimum timeout."""
    mtu = mtu_bytes or 4096
    return Transport(
        name=key,
        wire_efficiency=mtu / (mtu + overhead),
        endpoint_efficiency=0.96,
        alpha_s=alpha_s,
        mtu_bytes=mtu,
        payload_bytes=mtu,
        default_routing=routing,
        retransmission="go-back-n",
        loss=loss,
        rto_s=rto_s,
        min_rto_s=4e-6,
        lossless=lossless,
        ecn=ecn,
        dcqcn_efficiency=dcqcn_efficiency,
        notes=notes,
    )


def _roce(key: str, mtu_bytes: int | None, ecn: bool, loss: float, rto_s: float | None) -> Transport:
    lossless = key == "roce"
    return _verbs(
        key,
        mtu_bytes,
        ROCE_OVERHEAD_BYTES,
        3.5e-6,
        "ecmp",
        loss,
        rto_s,
        lossless=lossless,
        ecn=ecn,
        dcqcn_efficiency=0.87 if ecn else 1.0,
        notes=[
            "PFC lossless, DCQCN on ECN"
            if lossless and ecn
            else "PFC only (no ECN): head-of-line blocking under incast"
            if lossless
            else "no PFC: losses recovered by go-back-N"
        ],
    )


def _socket(
    key: str, mtu_bytes: int | None, eth: int, loss: float, rto_s: float | None, per_core_gbps: float | None
) -> Transport:
    """Kernel TCP (NCCL's socket transport) or UDP with application-level recovery."""
    mtu = mtu_bytes or 1500
    own: dict[str, Any]
    if key == "tcp":
        payload = mtu - 52  # IPv4 20 + TCP 20 + timestamps option 12
        own = dict(
            alpha_s=TCP_ALPHA_S,
            retransmission="tcp",
            per_flow_cap_Bps=(per_core_gbps or 40.0) * 1e9 / 8,
            min_rto_s=0.2,
            upper_bound=True,
            nccl_hop_s=TCP_NCCL_HOP_S,
            host_mem_GBps=TCP_HOST_MEM_GBPS,
            notes=[
                "kernel TCP: per-flow cap = one core's copy rate; Padhye bound under loss (RTOmin 200 ms)"
            ],
        )
    else:
        payload = mtu - 28  # IPv4 20 + UDP 8
        own = dict(
            alpha_s=10e-6,
            retransmission="app",
            per_flow_cap_Bps=(per_core_gbps or 15.0) * 1e9 / 8,
            min_rto_s=1e-3,
            notes=["application-level loss recovery: resend lost datagrams after a timer (default 1 ms)"],
        )
    return Transport(
        name=key,
        wire_efficiency=payload / (mtu + eth),
        endpoint_efficiency=1.0,
        mtu_bytes=mtu,
        payload_bytes=payload,
        default_routing="ecmp",
        lossless=False,
        ecn=False,
        loss=loss,
        rto_s=rto_s,
        **own,
    )


def _cloud(
    key: str, mtu_bytes: int | None, loss: float, rto_s: float | None, per_core_gbps: float | None
) -> Transport:
    mtu0, overhead, endpoint, alpha, cap = CLOUD[key]
    mtu = mtu_bytes or mtu0
    payload = mtu - (52 if key == "tcpx" else 0)
    flow_cap = (per_core_gbps or cap) * 1e9 / 8 if cap else math.inf
    if per_core_gbps is not None and not cap:
        raise FabricscopeError(f"--per-core-gbps applies to tcp, tcpx and udp, not {key}")
    notes = {
        "efa": "AWS EFA: SRD sprays each flow over many paths (adaptive routing) and the NIC resends lost packets",
        "tcpx": "GPUDirect-TCPX: kernel TCP, header split into GPU memory (no host bounce); per-flow cap = one core",
        "tcpxo": "GPUDirect-TCPXO: the TCPX data path offloaded to the NIC",
    }[key]
    return Transport(
        name=key,
        wire_efficiency=payload / (mtu + overhead),
        endpoint_efficiency=endpoint,
        alpha_s=alpha,
        mtu_bytes=mtu,
        payload_bytes=payload,
        default_routing="adaptive" if key == "efa" else "ecmp",
        lossless=False,
        ecn=False,
        retransmission="tcp" if key == "tcpx" else "app",
        loss=loss,
        per_flow_cap_Bps=flow_cap,
        rto_s=rto_s,
        min_rto_s=0.2 if key == "tcpx" else 1e-4,
        notes=[notes],
    )


def _override(
    t: Transport,
    per_core_gbps: float | None,
    alpha_s: float | None,
    efficiency: float | None,
    nsocks_perthread: int | None,
    socket_nthreads: int | None,
) -> None:
    """The user's (or the calibration's) overrides of a transport's defaults, each checked."""
    key = t.name
    if per_core_gbps is not None and key in ("ib", "roce", "roce-lossy", "efa", "tcpxo"):
        raise FabricscopeError("--per-core-gbps applies to tcp and udp only (RDMA bypasses the kernel)")
    if alpha_s is not None:
        if alpha_s < 0:
            raise FabricscopeError("alpha must be >= 0")
        t.alpha_s = alpha_s
        t.nccl_hop_s = None  # the given alpha is the per-hop cost NCCL's latency model is charged too
    if efficiency is not None:
        if not 0 < efficiency <= 1:
            raise FabricscopeError("efficiency must be in (0, 1]")
        t.endpoint_efficiency = efficiency / t.wire_efficiency if efficiency <= t.wire_efficiency else 1.0
        if efficiency > t.wire_efficiency:
            t.wire_efficiency = efficiency
    if nsocks_perthread is not None or socket_nthreads is not None:
        if key not in ("tcp", "tcpx"):
            raise FabricscopeError(
                "--nsocks-perthread and --socket-nthreads apply to tcp and tcpx (socket transports)"
            )
        t.sockets, t.threads = socket_striping(nsocks_perthread, socket_nthreads)
        t.notes.append(f"NCCL socket transport: {t.sockets} socket(s) per connection, {t.threads} thread(s)")
    if t.mtu_bytes < 256 or t.mtu_bytes > 65536:
        raise FabricscopeError("--mtu must be between 256 and 65536 bytes")
