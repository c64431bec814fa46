"""Incast: N senders answer one receiver at once, in synchronized rounds of a fixed response size.

This is the partition/aggregate pattern of inference fan-in and of gradient or KV gathers. All
responses cross one switch egress port, towards the receiver; its queue decides the outcome.

Three transports, each modelled from its mechanism, with the constants named where they come from:

``tcp``
    A packet-level event simulation of Linux TCP over a drop-tail queue (sim/incast_tcp.py, with
    CUBIC in sim/cubic.py): GSO packets sized as tcp_tso_autosize does, delayed ACKs, RACK with
    its reordering timer (RFC 8985), tail loss probes, PRR in recovery (RFC 6937), CUBIC with
    HyStart, and a retransmission timeout of at least 200 ms (Linux TCP_RTO_MIN). A round ends
    when the receiver holds every response; when a whole window is lost, the sender waits for the
    timeout, and the round with it: that is TCP incast collapse (Phanishayee et al., FAST 2008;
    Vasudevan et al., SIGCOMM 2009).
``roce-pfc``
    Lossless RoCE: PFC pauses the senders instead of dropping (IEEE 802.1Qbb), and RDMA starts
    at line rate with no window to grow, so a round lasts the responses' wire time through the
    one egress plus a round trip. What this rests on, and leaves out: the pause spreads
    head-of-line blocking to other flows that share the paused upstream ports (see
    docs/sim.md); with one incast and nothing else on the fabric there are none.
``roce-ecn``
    DCQCN (Zhu et al., SIGCOMM 2015) on a lossless fabric: a fluid model of the egress queue
    marking ECN between Kmin and Kmax with probability up to Pmax, CNPs at most every 50 us per
    flow, the rate cut R *= (1 - alpha/2) with alpha's gain g = 1/256, and fast recovery and
    additive increase every 55 us by R_AI = 40 Mb/s: the paper's constants (section 5.1). PFC
    still stops loss. With one incast the senders share the port at close to line rate; the
    model shows the cost of the rate cuts when the queue builds.

The models take the fabric's own settings (link rate, queue depth, MTU, base round-trip time);
nothing here is fitted to a measurement. tests/sim/test_incast_lab.py holds the TCP model to a
lab run of ``bench incast``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabricscope.sim.incast_tcp import TCP_HEADER_BYTES, TCP_RTO_MIN_S, run_rounds

__all__ = ["TCP_RTO_MIN_S", "TRANSPORTS", "IncastFabric", "IncastPoint", "simulate"]

# DCQCN constants, Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015
DCQCN_KMIN_BYTES = 5 * 1024
DCQCN_KMAX_BYTES = 200 * 1024
DCQCN_PMAX = 0.01
DCQCN_G = 1 / 256
DCQCN_CNP_INTERVAL_S = 50e-6
DCQCN_RATE_TIMER_S = 55e-6
DCQCN_RAI_BPS = 40e6
ROCE_HEADER_BYTES = 14 + 20 + 8 + 12 + 4 + 4  # Ethernet, IPv4, UDP, BTH, ICRC, FCS (RoCE v2)

TRANSPORTS = ("tcp", "roce-pfc", "roce-ecn")


@dataclass(frozen=True)
class IncastFabric:
    """The bottleneck: every sender and the receiver at ``link_bps``; the receiver's port queue."""

    link_bps: float
    queue_bytes: int
    mtu: int = 1500
    base_rtt_s: float = 50e-6  # propagation and processing, without queueing
    # A sender's NIC releases at most this many bytes back to back, then runs at link_bps. A
    # physical NIC serializes every packet at line rate (one packet); a lab host's egress is a
    # tc token bucket whose bucket (lab.plan.tbf_args) lets a burst out at memory speed.
    sender_bucket_bytes: int = 0
    # The largest GSO packet, in frames, the receiver's port queues (or drops) whole. A physical
    # switch sees frames (1); the lab's tbf port takes a GSO packet that fits its bucket whole
    # (lab.plan.switch_gso_frames), so a drop there loses several consecutive segments at once.
    switch_gso_frames: int = 1

    @property
    def mss(self) -> int:
        return self.mtu - TCP_HEADER_BYTES


@dataclass
class IncastPoint:
    """One sender count: what each round took, and what the transport had to do."""

    senders: int
    response_bytes: int
    rounds: int
    round_times_s: list[float]
    retransmits: int = 0
    timeouts: int = 0
    drops: int = 0  # packets the egress queue dropped

    @property
    def goodput_bps(self) -> float:
        total = sum(self.round_times_s)
        return self.senders * self.response_bytes * self.rounds * 8 / total if total > 0 else 0.0

    def percentile_s(self, pct: float) -> float:
        """Linear interpolation, as numpy's default and bench's measured percentiles."""
        return float(np.percentile(self.round_times_s, pct))


# ----- TCP: a packet-level simulation (sim/incast_tcp.py) -------------------------------------
def simulate_tcp(
    fabric: IncastFabric, senders: int, response_bytes: int, rounds: int, *, seed: int = 1
) -> IncastPoint:
    """TCP incast: ``rounds`` synchronized rounds of ``senders`` x ``response_bytes``."""
    times, retransmits, timeouts, drops = run_rounds(fabric, senders, response_bytes, rounds, seed)
    return IncastPoint(senders, response_bytes, rounds, times, retransmits, timeouts, drops)


# ----- RoCE ----------------------------------------------------------------------------------
def _roce_wire_bytes(fabric: IncastFabric, payload: int) -> int:
    per_packet = max(256, min(4096, 1 << (max(256, fabric.mtu - 100).bit_length() - 1)))  # RDMA MTU
    packets = math.ceil(payload / per_packet)
    return payload + packets * ROCE_HEADER_BYTES


def simulate_roce_pfc(fabric: IncastFabric, senders: int, response_bytes: int, rounds: int) -> IncastPoint:
    """Lossless RoCE: the egress drains every response at line rate; PFC holds the rest upstream."""
    wire = senders * _roce_wire_bytes(fabric, response_bytes)
    round_s = wire * 8 / fabric.link_bps + fabric.base_rtt_s
    return IncastPoint(senders, response_bytes, rounds, [round_s] * rounds)


def simulate_roce_ecn(
    fabric: IncastFabric, senders: int, response_bytes: int, rounds: int, *, step_s: float = 1e-6
) -> IncastPoint:
    """DCQCN fluid model: senders start at line rate; the queue marks, CNPs cut, timers recover."""
    c = fabric.link_bps / 8  # bytes/s
    need = _roce_wire_bytes(fabric, response_bytes)
    rate = [c] * senders
    target = [c] * senders
    alpha = [1.0] * senders
    left = [float(need)] * senders
    last_cnp = [-1.0] * senders
    marked = [0.0] * senders  # expected ECN-marked packets not yet answered by a CNP
    next_timer = [DCQCN_RATE_TIMER_S] * senders
    packet = fabric.mtu + ROCE_HEADER_BYTES
    queue = 0.0
    t = 0.0
    while any(x > 0 for x in left):
        active = [i for i in range(senders) if left[i] > 0]
        sent = {i: min(rate[i] * step_s, left[i]) for i in active}
        for i in active:
            left[i] -= sent[i]
        queue = max(0.0, queue + sum(sent.values()) - c * step_s)
        if queue >= DCQCN_KMAX_BYTES:
            mark = 1.0
        elif queue > DCQCN_KMIN_BYTES:
            mark = (queue - DCQCN_KMIN_BYTES) / (DCQCN_KMAX_BYTES - DCQCN_KMIN_BYTES) * DCQCN_PMAX
        else:
            mark = 0.0
        for i in active:
            marked[i] += sent[i] / packet * mark
            if marked[i] >= 1.0 and t - last_cnp[i] >= DCQCN_CNP_INTERVAL_S:  # the receiver sends a CNP
                marked[i] = 0.0
                last_cnp[i] = t
                target[i] = rate[i]
                rate[i] *= 1 - alpha[i] / 2
                alpha[i] = (1 - DCQCN_G) * alpha[i] + DCQCN_G
                next_timer[i] = t + DCQCN_RATE_TIMER_S
            elif t >= next_timer[i]:
                alpha[i] = (1 - DCQCN_G) * alpha[i]
                target[i] = min(c, target[i] + DCQCN_RAI_BPS / 8)
                rate[i] = min(c, (rate[i] + target[i]) / 2)
                next_timer[i] = t + DCQCN_RATE_TIMER_S
        t += step_s
    round_s = t + queue / c + fabric.base_rtt_s
    return IncastPoint(senders, response_bytes, rounds, [round_s] * rounds)


def simulate(
    transport: str, fabric: IncastFabric, senders: int, response_bytes: int, rounds: int, *, seed: int = 1
) -> IncastPoint:
    if transport == "tcp":
        return simulate_tcp(fabric, senders, response_bytes, rounds, seed=seed)
    if transport == "roce-pfc":
        return simulate_roce_pfc(fabric, senders, response_bytes, rounds)
    if transport == "roce-ecn":
        return simulate_roce_ecn(fabric, senders, response_bytes, rounds)
    raise ValueError(f"unknown incast transport {transport!r} (use {', '.join(TRANSPORTS)})")
