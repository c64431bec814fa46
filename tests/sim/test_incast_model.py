"""The incast models hold to their mechanisms: what each transport must do, by construction."""

from __future__ import annotations

import random

import pytest

from fabricscope.sim.cubic import Cubic
from fabricscope.sim.incast import TCP_RTO_MIN_S, IncastFabric, _roce_wire_bytes, simulate
from fabricscope.sim.incast_tcp import TcpRound, _Flow

KIB = 1024


def test_roce_pfc_is_the_wire_time_of_every_response_through_one_port() -> None:
    fabric = IncastFabric(link_bps=100e9, queue_bytes=1 << 20, mtu=4200, base_rtt_s=5e-6)
    point = simulate("roce-pfc", fabric, 16, 1 << 20, 3)
    wire = 16 * _roce_wire_bytes(fabric, 1 << 20)
    assert point.round_times_s == [pytest.approx(wire * 8 / 100e9 + 5e-6)] * 3
    assert point.timeouts == point.drops == 0


def test_tcp_with_a_deep_queue_fills_the_port_without_timeouts() -> None:
    fabric = IncastFabric(link_bps=200e6, queue_bytes=4 << 20, base_rtt_s=50e-6)
    point = simulate("tcp", fabric, 8, 256 * KIB, 10)
    assert point.timeouts == 0 and point.drops == 0
    payload_share = (1500 - 52) / (1500 + 14)
    assert point.goodput_bps == pytest.approx(200e6 * payload_share, rel=0.03)


def test_tcp_with_a_shallow_queue_collapses_on_the_minimum_rto() -> None:
    # 16 KiB: about 11 frames for 8 senders, fewer than one window each. (At 32 KiB, with frame-by-
    # frame drops, Linux in the lab kept 0.63 of one sender's goodput at 8 senders, and so does the
    # model with PRR and RACK's timer; it no longer collapses there.)
    fabric = IncastFabric(
        link_bps=200e6, queue_bytes=16 * KIB, base_rtt_s=50e-6, sender_bucket_bytes=128 * KIB
    )
    one = simulate("tcp", fabric, 1, 256 * KIB, 20)
    many = simulate("tcp", fabric, 8, 256 * KIB, 20)
    assert many.timeouts > 0 and many.drops > 0
    assert many.percentile_s(50) >= TCP_RTO_MIN_S  # most rounds wait for a timeout
    assert many.goodput_bps < 0.5 * one.goodput_bps


def test_roce_ecn_never_drops_and_never_beats_the_port() -> None:
    fabric = IncastFabric(link_bps=100e9, queue_bytes=1 << 20, mtu=4200, base_rtt_s=5e-6)
    ecn = simulate("roce-ecn", fabric, 8, 1 << 20, 1)
    pfc = simulate("roce-pfc", fabric, 8, 1 << 20, 1)
    assert ecn.drops == 0
    assert ecn.round_times_s[0] >= pfc.round_times_s[0] * 0.999


def test_the_tcp_model_is_deterministic_for_a_seed() -> None:
    fabric = IncastFabric(link_bps=1e9, queue_bytes=64 * KIB, base_rtt_s=20e-6)
    a = simulate("tcp", fabric, 4, 128 * KIB, 5, seed=7)
    b = simulate("tcp", fabric, 4, 128 * KIB, 5, seed=7)
    assert a.round_times_s == b.round_times_s and a.retransmits == b.retransmits


def test_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown incast transport"):
        simulate("udp", IncastFabric(link_bps=1e9, queue_bytes=1 << 16), 2, 1000, 1)


# ----- the Linux mechanisms the TCP model carries (each fails without its mechanism) -----------
def _lab_fabric(queue_bytes: int, gso_frames: int) -> IncastFabric:
    return IncastFabric(
        link_bps=200e6,
        queue_bytes=queue_bytes,
        base_rtt_s=50e-6,
        sender_bucket_bytes=128 * KIB,
        switch_gso_frames=gso_frames,
    )


def test_a_port_that_queues_gso_packets_whole_drops_them_whole() -> None:
    # The lab's tbf port takes a TSO packet of up to 9 frames as one (lab.plan.switch_gso_frames):
    # a drop there loses a run of segments, which recovery handles worse than single losses.
    per_frame = simulate("tcp", _lab_fabric(64 * KIB, 1), 4, 256 * KIB, 60)
    whole = simulate("tcp", _lab_fabric(64 * KIB, 9), 4, 256 * KIB, 60)
    assert whole.timeouts > per_frame.timeouts
    assert whole.goodput_bps < 0.9 * per_frame.goodput_bps


def test_tso_autosizing_sends_about_a_millisecond_of_the_pacing_rate() -> None:
    tcp_round = TcpRound(_lab_fabric(64 * KIB, 1), [], 1000, random.Random(1))
    flow = _Flow(index=0)
    assert tcp_round._tso_segs(flow) == 45  # no RTT sample yet: the pacing rate is unlimited, 64 KiB GSO
    flow.srtt, flow.cc.cwnd, flow.cc.ssthresh = 2.6e-3, 10, 7
    rate = 1448 * 10 / 2.6e-3 * 1.2  # tcp_update_pacing_rate in congestion avoidance
    assert tcp_round._tso_segs(flow) == int(rate / 1024 // 1448) == 4
    flow.cc.cwnd = 2
    assert tcp_round._tso_segs(flow) == 2  # tcp_min_tso_segs


def test_the_receiver_acknowledges_every_second_segment() -> None:
    acks = []

    class Counting(TcpRound):
        def _push(self, at: float, kind: str, flow: int, arg: object) -> None:
            if kind == "ack":
                acks.append(arg)
            super()._push(at, kind, flow, arg)

    fabric = IncastFabric(link_bps=1e9, queue_bytes=4 << 20, base_rtt_s=20e-6)  # a NIC: frame by frame
    Counting(fabric, [_Flow(index=0)], 100 * 1448, random.Random(1)).run()
    assert all(len(ack) == 2 for ack in acks[:-1]) and len(acks) in (49, 50)


def test_cubic_cuts_by_beta_and_remembers_the_window_with_fast_convergence() -> None:
    cubic = Cubic(100)
    cubic.on_loss()
    assert (cubic.ssthresh, cubic.cwnd, cubic.last_max_cwnd) == (70, 70, 100)  # 100 * 717 >> 10
    cubic.cwnd = 50
    cubic.on_loss()
    assert cubic.last_max_cwnd == 50 * (1024 + 717) // 2048  # below the last maximum: release some


def test_cubic_grows_at_the_reno_friendly_rate_when_the_rtt_is_short() -> None:
    # At a 1 ms RTT the cubic curve is flat for seconds; the window follows the Reno estimate,
    # one segment per 15/8 windows acknowledged: ~53 in 100 RTTs (Reno itself: 100).
    cubic = Cubic(20, ssthresh=20, last_max_cwnd=20, delay_min=1e-3)
    now = 0.0
    for _ in range(100):
        window = cubic.cwnd
        for _ in range(window):
            now += 1e-3 / window
            cubic.on_acked(now, 1)
    assert 45 <= cubic.cwnd - 20 <= 60


def test_hystart_ends_slow_start_at_16_segments_when_acks_come_in_a_train() -> None:
    cubic = Cubic(10)
    now = 0.0
    for rtt_round in range(10):
        window = cubic.cwnd
        for k in range(window):
            now += 240e-6  # four senders share the port: one ACK per 4 x 60 us
            cubic.on_rtt(
                now, 100e-6, rtt_round * 1000 + k, rtt_round * 1000 + window, 2 * window * 1448 / 100e-6
            )
            cubic.on_acked(now, 1)
        if cubic.found:
            break
    assert cubic.found and cubic.ssthresh == cubic.cwnd == 16


def test_prr_retransmits_at_once_as_recovery_begins_then_follows_the_pipe() -> None:
    tcp_round = TcpRound(_lab_fabric(64 * KIB, 1), [], 1000, random.Random(1))
    flow = _Flow(index=0)
    flow.cc.ssthresh, flow.prior_cwnd, flow.recovery_until = 7, 10, 20
    flow.in_flight = {s: 0.0 for s in range(7)}  # the pipe is at ssthresh already
    tcp_round._prr(flow, 1, 1, False)
    assert flow.cc.cwnd == 8  # "Force a fast retransmit upon entering fast recovery"
    flow.prr_out = 1
    tcp_round._prr(flow, 1, 0, False)
    assert flow.cc.cwnd == 7  # then no more than ssthresh
    flow.in_flight = {s: 0.0 for s in range(12)}
    flow.prr_delivered, flow.prr_out = 0, 0
    tcp_round._prr(flow, 10, 0, False)
    assert flow.cc.cwnd == 12 + 7  # above ssthresh: ssthresh/prior window of what was delivered


def test_rack_marks_a_loss_when_the_reordering_window_runs_out_without_another_ack() -> None:
    tcp_round = TcpRound(_lab_fabric(64 * KIB, 1), [], 1000, random.Random(1))
    flow = _Flow(index=0)
    tcp_round.flows = [flow]
    flow.total, flow.srtt, flow.min_rtt = 10, 100e-6, 100e-6
    flow.in_flight = {0: 0.0, 2: 50e-6}
    flow.acked, flow.rack, flow.rack_rtt = {1}, (1e-6, 1), 100e-6
    tcp_round._rack_detect(101e-6, flow)  # segment 0 sent 1 us before the delivered one: wait 25 us
    assert not flow.lost and tcp_round.events
    at, _, kind, _, gen = tcp_round.events[0]
    assert kind == "reo" and at == pytest.approx(0.0 + 100e-6 + 25e-6)  # sent + RACK RTT + min RTT / 4
    tcp_round._on_reo(at, flow, gen)
    assert (
        flow.recovery_until >= 0 and 0 not in flow.in_flight or flow.in_flight[0] == at
    )  # lost, then resent
    assert tcp_round.retransmits == 1 and 2 in flow.in_flight  # segment 2 was sent after: not lost
