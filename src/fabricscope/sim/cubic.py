"""Linux CUBIC's window growth, for the packet-level TCP incast model.

The incast model needs how fast a sender's window grows between losses, since that decides how
often a shallow queue overflows and how large each round's opening burst is. At data-centre
round-trip times Linux CUBIC does not grow like Reno (one segment per RTT): the cubic curve is
flat for seconds around its origin, and the Reno-friendly estimate it falls back to grows by
about one segment per 1.9 RTTs. Slow start ends early too: HyStart's ACK-train test fires as
soon as the window reaches 16 segments when the RTT is short. Every rule and constant here is
Linux's, from net/ipv4/tcp_cubic.c (bictcp_update, cubictcp_recalc_ssthresh, hystart_update,
cubictcp_state) and net/ipv4/tcp_cong.c (tcp_slow_start, tcp_cong_avoid_ai); time runs
continuously instead of in jiffies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BETA = 717  # tcp_cubic.c: beta = 717, over BICTCP_BETA_SCALE 1024 (RFC 8312's 0.7)
BICTCP_HZ = 10  # tcp_cubic.c: time in 1/1024 s for the curve
CUBE_RTT_SCALE = 41 * 10  # tcp_cubic.c: bic_scale * 10 (C = 0.4)
CUBE_FACTOR = (
    1 << (10 + 3 * BICTCP_HZ)
) // CUBE_RTT_SCALE  # tcp_cubic.c: 2^(10+3*BICTCP_HZ) / (bic_scale * 10)
BETA_SCALE = 8 * (1024 + 717) // 3 // (1024 - 717)  # tcp_cubic.c: beta_scale, Reno-friendly estimate
HYSTART_LOW_WINDOW = 16  # tcp_cubic.c: hystart_low_window
HYSTART_ACK_DELTA_S = 2e-3  # tcp_cubic.c: hystart_ack_delta_us = 2000
HYSTART_ACK_DELAY_MAX_S = 1e-3  # tcp_cubic.c hystart_ack_delay: at most USEC_PER_MSEC
GSO_MAX_SIZE = 65536  # sk_gso_max_size of a veth or a TSO NIC (GSO_LEGACY_MAX_SIZE)
HYSTART_DELAY_MIN_S, HYSTART_DELAY_MAX_S = 4e-3, 16e-3  # tcp_cubic.c: HYSTART_DELAY_MIN/MAX
HYSTART_MIN_SAMPLES = 8  # tcp_cubic.c: HYSTART_MIN_SAMPLES
HZ = 250  # the kernel's tick (CONFIG_HZ, 250 in distribution kernels): bictcp_update counts time in it


@dataclass
class Cubic:
    """One connection's window: an integer count of segments, grown per acknowledged segment."""

    cwnd: int
    ssthresh: float = math.inf
    cwnd_cnt: int = 0  # tcp_sock.snd_cwnd_cnt: acked segments towards the next +1
    last_max_cwnd: int = 0
    epoch_start: int | None = None  # in ticks, as the fields below
    origin: int = 0
    k: int = 0  # in 1/1024 s (BICTCP_HZ)
    ack_cnt: int = 0
    tcp_cwnd: int = 0
    cnt: int = 0  # ca->cnt: acked segments per +1, recomputed only when the window changed
    last_cwnd: int = 0
    last_time: float = -math.inf  # in seconds (usec in Linux)
    delay_min: float = 0.0  # tcp_cubic.c ca->delay_min: the smallest RTT seen, 0 before any
    # HyStart, per RTT round of slow start
    found: bool = False
    round_start: float = 0.0
    last_ack: float = 0.0
    end_seq: int = -1
    curr_rtt: float = math.inf
    sample_cnt: int = 0

    def on_rtt(self, now: float, rtt: float, acked_seq: int, next_seq: int, pacing_Bps: float) -> None:
        """An RTT sample from a newly acknowledged segment (cubictcp_acked, cubictcp_cong_avoid's reset)."""
        if self.epoch_start is not None and math.floor(now * HZ) - self.epoch_start < HZ:
            return  # "Discard delay samples right after fast recovery" (for HZ jiffies: a second)
        self.delay_min = rtt if self.delay_min == 0 else min(self.delay_min, rtt)
        if self.cwnd >= self.ssthresh or self.found:
            return
        if acked_seq > self.end_seq:  # bictcp_hystart_reset: a new round of slow start
            self.round_start = self.last_ack = now
            self.end_seq, self.curr_rtt, self.sample_cnt = next_seq, math.inf, 0
        if self.cwnd >= HYSTART_LOW_WINDOW:
            self._hystart(now, rtt, pacing_Bps)

    def _hystart(self, now: float, rtt: float, pacing_Bps: float) -> None:
        """hystart_update: leave slow start when an ACK train spans half the minimum RTT, or the RTT rises."""
        if now - self.last_ack <= HYSTART_ACK_DELTA_S:
            self.last_ack = now
            # hystart_ack_delay: what a TSO burst of 4 x 64 KiB at the pacing rate takes, at most
            # 1 ms; without pacing (no fq: the lab's hosts and a plain NIC) the threshold is halved.
            ack_delay = min(HYSTART_ACK_DELAY_MAX_S, 4 * GSO_MAX_SIZE / pacing_Bps) if pacing_Bps > 0 else 0.0
            threshold = (self.delay_min + ack_delay) / 2
            if now - self.round_start > threshold:
                self.found, self.ssthresh = True, self.cwnd
                return
        if self.sample_cnt < HYSTART_MIN_SAMPLES:
            self.curr_rtt = min(self.curr_rtt, rtt)
            self.sample_cnt += 1
        elif self.curr_rtt > self.delay_min + min(
            max(self.delay_min / 8, HYSTART_DELAY_MIN_S), HYSTART_DELAY_MAX_S
        ):
            self.found, self.ssthresh = True, self.cwnd

    def on_acked(self, now: float, acked: int) -> None:
        """cubictcp_cong_avoid, called only while the window limits the sender (tcp_is_cwnd_limited)."""
        if self.cwnd < self.ssthresh:  # tcp_slow_start: +1 per acked segment, up to ssthresh
            grown = int(min(self.cwnd + acked, max(self.cwnd, self.ssthresh)))
            acked -= grown - self.cwnd
            self.cwnd = grown
            if acked <= 0:
                return
        self._update(now, acked)
        cnt = self.cnt  # tcp_cong_avoid_ai
        if self.cwnd_cnt >= cnt:  # "If credits accumulated at a higher w, apply them gently now."
            self.cwnd_cnt, self.cwnd = 0, self.cwnd + 1
        self.cwnd_cnt += acked
        if self.cwnd_cnt >= cnt:
            self.cwnd += self.cwnd_cnt // cnt
            self.cwnd_cnt %= cnt

    def _update(self, now: float, acked: int) -> None:
        """bictcp_update: acked segments per +1 of the window, from the cubic curve and the Reno estimate."""
        self.ack_cnt += acked
        cwnd = self.cwnd
        # Linux 6.11+ ("tcp_cubic: switch ca->last_time to usec resolution"): the curve is looked at
        # again when the window moved or 1/32 s passed, and at most once per millisecond.
        since = now - self.last_time
        if self.last_cwnd == cwnd and since <= 1 / 32:
            return
        if self.epoch_start is not None and since < 1e-3:
            self._friendliness(self.cnt)
            return
        self.last_cwnd, self.last_time = cwnd, now
        jiffy = math.floor(now * HZ)  # the epoch still counts in ticks
        # The kernel's integer arithmetic, kept: at windows of a few segments its rounding decides
        # whether the curve asks for one more segment right after a loss.
        if self.epoch_start is None:
            self.epoch_start, self.ack_cnt, self.tcp_cwnd = jiffy, acked, cwnd
            if self.last_max_cwnd <= cwnd:
                self.k, self.origin = 0, cwnd
            else:
                self.k = _cubic_root(CUBE_FACTOR * (self.last_max_cwnd - cwnd))
                self.origin = self.last_max_cwnd
        t = ((jiffy - self.epoch_start + math.ceil(self.delay_min * HZ)) << BICTCP_HZ) // HZ
        offs = abs(t - self.k)
        delta = (CUBE_RTT_SCALE * offs**3) >> (10 + 3 * BICTCP_HZ)
        target = self.origin - delta if t < self.k else self.origin + delta
        cnt = cwnd // (target - cwnd) if target > cwnd else 100 * cwnd
        if self.last_max_cwnd == 0 and cnt > 20:
            cnt = 20  # "increase cwnd 5% per RTT" while the bandwidth is unknown
        self._friendliness(cnt)

    def _friendliness(self, cnt: int) -> None:
        """tcp_friendliness: never grow slower than the window Reno would have."""
        cwnd = self.cwnd
        delta = cwnd * BETA_SCALE // 8
        while self.ack_cnt > delta:
            self.ack_cnt -= delta
            self.tcp_cwnd += 1
        if self.tcp_cwnd > cwnd:
            cnt = min(cnt, cwnd // (self.tcp_cwnd - cwnd))
        self.cnt = max(cnt, 2)  # at most 1.5x per RTT

    def on_loss(self) -> None:
        """Fast recovery's reduction (cubictcp_recalc_ssthresh, with fast convergence); the window drops to it."""
        self.epoch_start, self.last_cwnd = None, 0
        if self.cwnd < self.last_max_cwnd:
            self.last_max_cwnd = self.cwnd * (1024 + BETA) // 2048
        else:
            self.last_max_cwnd = self.cwnd
        self.ssthresh = max(self.cwnd * BETA >> 10, 2)
        self.cwnd, self.cwnd_cnt = int(self.ssthresh), 0

    def on_timeout(self) -> None:
        """An RTO: ssthresh from the window, then cubictcp_state(TCP_CA_Loss) forgets CUBIC's state."""
        self.on_loss()
        self.cwnd, self.cwnd_cnt = 1, 0
        self.last_max_cwnd, self.epoch_start, self.delay_min = 0, None, 0.0
        self.found, self.end_seq = False, -1


def _cubic_root(a: int) -> int:
    """tcp_cubic.c cubic_root: the integer cube root (the kernel's is within 0.2% of it)."""
    root = round(a ** (1 / 3))
    while root**3 > a:
        root -= 1
    while (root + 1) ** 3 <= a:
        root += 1
    return root
