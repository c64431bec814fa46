"""TCP incast as Linux does it: a packet-level event simulation of N flows through one drop-tail port.

What travels is what Linux hands the wire: a sender builds GSO packets (skbs) of several segments
(net/ipv4/tcp_output.c tcp_tso_autosize: about a millisecond of its pacing rate, at least
tcp_min_tso_segs = 2), and the receiver acknowledges each skb it takes in, or every second
full-sized segment, at once when data arrives out of order or fills a hole, else after the
delayed-ACK timer (net/ipv4/tcp_input.c __tcp_ack_snd_check; TCP_DELACK_MIN). A NIC puts each
segment on the wire at line rate; a lab host's egress is a tc token bucket that lets a whole skb
out at once. Whether a switch port takes an skb whole depends on the port: a physical switch sees
frames, the lab's tbf port admits (or drops) a GSO packet of up to ``switch_gso_frames`` frames as
one, because tbf splits only packets larger than its bucket (net/sched/sch_tbf.c tbf_enqueue).

Loss recovery: SACK with RACK (RFC 8985; Linux net.ipv4.tcp_recovery=1), the window cut by CUBIC
(sim/cubic.py), a tail loss probe after max(2 SRTT, 10 ms) outside recovery (tcp_schedule_loss_probe)
and the retransmission timeout of at least 200 ms (TCP_RTO_MIN), doubling on repeats. The window
persists across rounds: the connection stays open and the gap between rounds is shorter than the
RTO, so Linux does not restart it.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Protocol

from fabricscope.sim.cubic import Cubic

TCP_RTO_MIN_S = 0.200  # Linux include/net/tcp.h: TCP_RTO_MIN ((unsigned)(HZ / 5))
TCP_INIT_CWND = 10  # Linux include/net/tcp.h: TCP_INIT_CWND 10 (RFC 6928)
TLP_MIN_S = 0.010  # Linux net/ipv4/tcp_output.c tcp_schedule_loss_probe: at least 10 ms
TCP_DELACK_MIN_S = 0.040  # Linux include/net/tcp.h: TCP_DELACK_MIN ((unsigned)(HZ / 25))
TCP_HEADER_BYTES = 52  # IPv4 20 + TCP 20 + timestamps option 12
ETH_HEADER_BYTES = 14  # what tc and a switch queue count besides the IP packet
MAX_RTO_S = 120.0  # Linux TCP_RTO_MAX
TSO_MIN_SEGS = 2  # Linux net.ipv4.tcp_min_tso_segs default
PACING_SHIFT = 10  # Linux sk_pacing_shift: TSO autosizing sends about 1/1024 s of the pacing rate
PACING_SS_RATIO, PACING_CA_RATIO = 2.0, 1.2  # Linux net.ipv4.tcp_pacing_ss_ratio 200, tcp_pacing_ca_ratio 120
START_SPREAD_S = 20e-6  # the requests leave one after another and each sender's kernel wakes it
GSO_MAX_BYTES = 65536 - 1 - 320  # Linux GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER (tcp_tso_autosize)


class Fabric(Protocol):
    link_bps: float
    queue_bytes: int
    mtu: int
    base_rtt_s: float
    sender_bucket_bytes: int
    switch_gso_frames: int


@dataclass
class _Flow:
    """One sender's TCP state (and its receiver's); it outlives a round, as the connection does."""

    index: int
    cc: Cubic = field(default_factory=lambda: Cubic(TCP_INIT_CWND))
    srtt: float | None = None
    rttvar: float = 0.0
    backoff: int = 0
    min_rtt: float = math.inf
    cwnd_limited: bool = True
    # per round
    total: int = 0  # segments in this response
    next_new: int = 0  # next never-sent segment
    una: int = 0
    in_flight: dict[int, float] = field(default_factory=dict)  # segment -> send time (not yet acked/lost)
    lost: set[int] = field(default_factory=set)
    recovery_until: int = -1
    highest_sent: int = -1
    acked: set[int] = field(default_factory=set)  # the sender's scoreboard: cumulatively acked or SACKed
    rack: tuple[float, int] = (-math.inf, -1)  # RACK: send time and segment of the latest-sent delivered one
    rack_rtt: float = 0.0
    reo_gen: int = 0
    prior_cwnd: int = 0  # PRR (RFC 6937): the window when recovery began,
    prr_delivered: int = 0  # segments delivered since,
    prr_out: int = 0  # and segments sent since
    nic_free: float = 0.0
    tokens: float = 0.0
    timer_gen: int = 0  # invalidates stale RTO/TLP events
    # the receiver's side
    delivered: set[int] = field(default_factory=set)
    rcv_nxt: int = 0
    unacked: list[int] = field(default_factory=list)  # received, not yet acknowledged
    delack_gen: int = 0


class TcpRound:
    """Event loop for one round of N flows through one drop-tail egress queue."""

    def __init__(self, fabric: Fabric, flows: list[_Flow], response_bytes: int, rng: random.Random) -> None:
        self.fab = fabric
        self.flows = flows
        self.events: list[tuple[float, int, str, int, object]] = []
        self.seq = 0
        self.queue_bytes = 0
        self.port_free = 0.0
        self.wire = fabric.mtu + ETH_HEADER_BYTES
        self.mss = fabric.mtu - TCP_HEADER_BYTES
        self.ser = self.wire * 8 / fabric.link_bps
        self.rate_Bps = fabric.link_bps / 8
        self.bucket = float(max(self.wire, fabric.sender_bucket_bytes))
        self.one_way = fabric.base_rtt_s / 2
        self.retransmits = self.drops = self.timeouts = 0
        self.done_at = 0.0
        self.remaining = len(flows)
        segments = max(1, math.ceil(response_bytes / self.mss))
        for flow in flows:
            flow.total, flow.next_new, flow.una, flow.highest_sent = segments, 0, 0, -1
            flow.delivered, flow.in_flight, flow.lost, flow.unacked = set(), {}, set(), []
            flow.recovery_until, flow.rcv_nxt, flow.acked, flow.rack = -1, 0, set(), (-math.inf, -1)
            flow.nic_free, flow.tokens = 0.0, self.bucket  # the bucket refilled during the idle gap
            # the requests leave the receiver one after another; the kernel wakes each sender
            self._push(self.one_way + rng.uniform(0, START_SPREAD_S), "start", flow.index, 0)

    def _push(self, at: float, kind: str, flow: int, arg: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, flow, arg))

    def run(self) -> float:
        while self.events and self.remaining:
            at, _, kind, index, arg = heapq.heappop(self.events)
            getattr(self, "_on_" + kind)(at, self.flows[index], arg)
        if self.remaining:
            raise RuntimeError("incast model ended a round with data undelivered")  # a model bug
        return self.done_at

    # -- sender
    def _rto(self, flow: _Flow) -> float:
        base = TCP_RTO_MIN_S if flow.srtt is None else max(TCP_RTO_MIN_S, flow.srtt + 4 * flow.rttvar)
        return min(MAX_RTO_S, base * (2**flow.backoff))

    def _arm(self, now: float, flow: _Flow) -> None:
        flow.timer_gen += 1
        if not flow.in_flight and not flow.lost and flow.next_new >= flow.total:
            return
        self._push(now + self._rto(flow), "rto", flow.index, flow.timer_gen)
        if flow.recovery_until < 0 and not flow.lost:
            srtt = flow.srtt if flow.srtt is not None else self.fab.base_rtt_s
            self._push(now + max(2 * srtt, TLP_MIN_S), "tlp", flow.index, flow.timer_gen)

    def _pacing_Bps(self, flow: _Flow) -> float:
        """tcp_update_pacing_rate: the window per smoothed RTT, x2 in slow start, x1.2 after; unset: unlimited."""
        if flow.srtt is None:
            return math.inf
        cc = flow.cc
        ratio = PACING_SS_RATIO if cc.cwnd < cc.ssthresh / 2 else PACING_CA_RATIO
        return self.mss * max(cc.cwnd, len(flow.in_flight)) / flow.srtt * ratio

    def _tso_segs(self, flow: _Flow) -> int:
        """tcp_tso_autosize: segments per skb, about 1/1024 s of the pacing rate, at least 2."""
        return max(
            TSO_MIN_SEGS, int(min(self._pacing_Bps(flow) / (1 << PACING_SHIFT), GSO_MAX_BYTES) // self.mss)
        )

    def _send(self, now: float, flow: _Flow, skb: tuple[int, ...]) -> None:
        """Hand one skb to the host's egress: a token bucket of ``sender_bucket_bytes`` at the link rate."""
        for segment in skb:
            flow.in_flight[segment] = now  # the skb's timestamp is when TCP transmits it
            flow.highest_sent = max(flow.highest_sent, segment)
        size = len(skb) * self.wire
        units = [skb] if size <= self.bucket else [(s,) for s in skb]  # a NIC segments at line rate
        for unit in units:
            need = len(unit) * self.wire
            start = max(now, flow.nic_free)
            tokens = min(self.bucket, flow.tokens + (start - flow.nic_free) * self.rate_Bps)
            depart = start if tokens >= need else start + (need - tokens) / self.rate_Bps
            flow.tokens, flow.nic_free = max(0.0, tokens - need), depart
            self._push(depart + self.one_way / 2, "arrive", flow.index, unit)

    def _fill(self, now: float, flow: _Flow) -> None:
        flow.cwnd_limited = bool(flow.lost) or flow.next_new < flow.total
        picked: list[int] = []
        while len(flow.in_flight) + len(picked) < flow.cc.cwnd:
            if flow.lost:
                segment = min(flow.lost)
                flow.lost.discard(segment)
                self.retransmits += 1
            elif flow.next_new < flow.total:
                segment = flow.next_new
                flow.next_new += 1
            else:
                flow.cwnd_limited = False
                break
            picked.append(segment)
        if flow.recovery_until >= 0:
            flow.prr_out += len(picked)
        size, skb = self._tso_segs(flow), []
        for segment in picked:  # consecutive segments share an skb, up to the autosized count
            if skb and (segment != skb[-1] + 1 or len(skb) >= size):
                self._send(now, flow, tuple(skb))
                skb = []
            skb.append(segment)
        if skb:
            self._send(now, flow, tuple(skb))

    def _on_start(self, now: float, flow: _Flow, _: object) -> None:
        self._fill(now, flow)
        self._arm(now, flow)

    # -- switch egress
    def _on_arrive(self, now: float, flow: _Flow, unit: tuple[int, ...]) -> None:
        if len(unit) > self.fab.switch_gso_frames:
            for segment in unit:  # the port splits it (tbf_segment) and queues frame by frame
                self._enqueue(now, flow, (segment,))
        else:
            self._enqueue(now, flow, unit)

    def _enqueue(self, now: float, flow: _Flow, unit: tuple[int, ...]) -> None:
        size = len(unit) * self.wire
        if self.queue_bytes + size > self.fab.queue_bytes:
            self.drops += len(unit)
            return  # tail drop, of the whole packet as the queue sees it
        self.queue_bytes += size
        self.port_free = max(now, self.port_free) + len(unit) * self.ser
        self._push(self.port_free, "dequeue", flow.index, unit)

    # -- receiver
    def _on_dequeue(self, now: float, flow: _Flow, unit: tuple[int, ...]) -> None:
        self.queue_bytes -= len(unit) * self.wire
        at = now + self.one_way / 2
        had_hole = len(flow.delivered) > flow.rcv_nxt
        new = [s for s in unit if s not in flow.delivered]
        duplicate = len(new) < len(unit)
        in_order = unit[0] == flow.rcv_nxt
        flow.delivered.update(unit)
        while flow.rcv_nxt in flow.delivered:
            flow.rcv_nxt += 1
        if new and len(flow.delivered) == flow.total:
            self.remaining -= 1
            self.done_at = max(self.done_at, at)
        flow.unacked.extend(unit)
        # __tcp_ack_snd_check: at once for more than one full segment, out-of-order data, a filled hole
        if len(flow.unacked) >= 2 or not in_order or had_hole or duplicate:
            self._ack_now(at, flow)
        else:
            flow.delack_gen += 1
            self._push(at + TCP_DELACK_MIN_S, "delack", flow.index, flow.delack_gen)

    def _ack_now(self, at: float, flow: _Flow) -> None:
        flow.delack_gen += 1
        self._push(at + self.one_way, "ack", flow.index, tuple(flow.unacked))
        flow.unacked = []

    def _on_delack(self, now: float, flow: _Flow, gen: object) -> None:
        if gen == flow.delack_gen and flow.unacked:
            self._ack_now(now, flow)

    # -- ACKs (cumulative + SACK: the sender learns exactly which segments arrived)
    def _on_ack(self, now: float, flow: _Flow, segments: tuple[int, ...]) -> None:
        newest, fresh = (-math.inf, -1), 0
        for segment in segments:
            sent_at = flow.in_flight.pop(segment, None)
            if sent_at is not None:
                newest = max(newest, (sent_at, segment))
            if sent_at is not None or segment in flow.lost:
                fresh += 1
            flow.lost.discard(segment)
            flow.acked.add(segment)
        if newest[1] >= 0:
            self._rtt_sample(now, flow, now - newest[0], max(segments))
            if newest > flow.rack:  # tcp_rack_advance
                flow.rack, flow.rack_rtt = newest, now - newest[0]
        progressed = False
        while flow.una in flow.acked:
            flow.una += 1
            progressed = True
        if progressed:
            flow.backoff = 0
            if 0 <= flow.recovery_until < flow.una:
                flow.recovery_until = -1
                flow.cc.cwnd = max(2, int(flow.cc.ssthresh))  # tcp_end_cwnd_reduction
        # Growth per newly delivered segment (acked or SACKed), outside recovery, and only while
        # the window is what limits the sender (Linux tcp_is_cwnd_limited, RFC 7661).
        if fresh and flow.recovery_until < 0 and flow.cwnd_limited:
            flow.cc.on_acked(now, fresh)
        lost = self._rack_detect(now, flow)
        if flow.recovery_until >= 0 and fresh:
            self._prr(flow, fresh, lost, progressed)
        self._fill(now, flow)
        self._arm(now, flow)

    def _reo_wnd(self, flow: _Flow) -> float:
        """tcp_rack_reo_wnd: with no reordering seen (none on this path), none in recovery or once
        three segments are SACKed (the DupThresh rule), else min RTT / 4, at most the SRTT."""
        sacked = len(flow.acked) - flow.una
        if flow.recovery_until >= 0 or sacked >= 3:
            return 0.0
        return min(flow.min_rtt / 4, flow.srtt or 0.0)

    def _rack_detect(self, now: float, flow: _Flow) -> None:
        """tcp_rack_detect_loss (RFC 8985 6.2): a segment sent before the latest delivered one is lost
        once its RTT plus the reordering window has passed; if that is still ahead, a timer waits."""
        reo_wnd = self._reo_wnd(flow)
        newly_lost, wait = [], 0.0
        for segment, sent_at in flow.in_flight.items():
            if (sent_at, segment) >= flow.rack:
                continue
            remaining = sent_at + flow.rack_rtt + reo_wnd - now
            if remaining <= 0:
                newly_lost.append(segment)
            else:
                wait = max(wait, remaining)
        if newly_lost:
            for segment in newly_lost:
                del flow.in_flight[segment]
                flow.lost.add(segment)
            if flow.recovery_until < 0:  # tcp_enter_recovery, tcp_init_cwnd_reduction
                flow.prior_cwnd, flow.prr_delivered, flow.prr_out = flow.cc.cwnd, 0, 0
                flow.cc.on_loss()
                flow.recovery_until = flow.highest_sent
        flow.reo_gen += 1
        if wait > 0:
            self._push(now + wait, "reo", flow.index, flow.reo_gen)
        return len(newly_lost)

    def _prr(self, flow: _Flow, delivered: int, lost: int, una_advanced: bool) -> None:
        """tcp_cwnd_reduction (RFC 6937 PRR): while the pipe is above ssthresh, send in proportion
        ssthresh / prior window of what is delivered; below it, grow back by what is delivered
        (+1 when the cumulative ACK moved and nothing new was lost), never past ssthresh; and
        retransmit at least once as recovery begins."""
        cc = flow.cc
        flow.prr_delivered += delivered
        pipe = len(flow.in_flight)
        ssthresh = int(cc.ssthresh)
        delta = ssthresh - pipe
        if delta < 0:
            sndcnt = (ssthresh * flow.prr_delivered + flow.prior_cwnd - 1) // flow.prior_cwnd - flow.prr_out
        else:
            sndcnt = max(flow.prr_delivered - flow.prr_out, delivered) + (
                1 if una_advanced and not lost else 0
            )
            sndcnt = min(delta, sndcnt)
        sndcnt = max(sndcnt, 0 if flow.prr_out else 1)
        cc.cwnd = pipe + sndcnt

    def _on_reo(self, now: float, flow: _Flow, gen: object) -> None:
        """tcp_rack_reo_timeout: the reordering window ran out."""
        if gen == flow.reo_gen:
            was_open = flow.recovery_until < 0
            if self._rack_detect(now, flow) and was_open:
                self._prr(flow, 1, 0, False)
            self._fill(now, flow)
            self._arm(now, flow)

    def _rtt_sample(self, now: float, flow: _Flow, sample: float, segment: int) -> None:
        flow.cc.on_rtt(now, sample, segment, flow.next_new, self._pacing_Bps(flow))
        flow.min_rtt = min(flow.min_rtt, sample)
        if flow.srtt is None:
            flow.srtt, flow.rttvar = sample, sample / 2
        else:
            flow.rttvar = 0.75 * flow.rttvar + 0.25 * abs(flow.srtt - sample)
            flow.srtt = 0.875 * flow.srtt + 0.125 * sample

    def _on_tlp(self, now: float, flow: _Flow, gen: object) -> None:
        if gen != flow.timer_gen or not flow.in_flight:
            return
        self.retransmits += 1
        self._send(now, flow, (max(flow.in_flight),))  # the probe: resend the last segment to draw a SACK

    def _on_rto(self, now: float, flow: _Flow, gen: object) -> None:
        if gen != flow.timer_gen:
            return
        self.timeouts += 1
        flow.cc.on_timeout()
        flow.lost.update(flow.in_flight)
        flow.in_flight.clear()
        flow.recovery_until = -1
        flow.backoff += 1
        self._fill(now, flow)
        self._arm(now, flow)


def run_rounds(
    fabric: Fabric, senders: int, response_bytes: int, rounds: int, seed: int
) -> tuple[list[float], int, int, int]:
    """Round times (each plus the request's way there), retransmits, timeouts and drops."""
    rng = random.Random(seed)
    flows = [_Flow(index=i) for i in range(senders)]
    times: list[float] = []
    retransmits = timeouts = drops = 0
    for _ in range(rounds):
        sim = TcpRound(fabric, flows, response_bytes, rng)
        times.append(sim.run() + fabric.base_rtt_s / 2)
        retransmits, timeouts, drops = (
            retransmits + sim.retransmits,
            timeouts + sim.timeouts,
            drops + sim.drops,
        )
    return times, retransmits, timeouts, drops
