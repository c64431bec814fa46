"""TCP_INFO of the benchmark's own sockets (Linux ``struct tcp_info``, include/uapi/linux/tcp.h).

Per-socket retransmits are exact for the run, unlike host-wide /proc/net/netstat deltas, which
also count every other connection on the host. Older kernels return a shorter struct: fields
beyond the returned length are simply absent.
"""

from __future__ import annotations

import socket
import struct

TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_INFO_BYTES = 232

# (name, struct format, byte offset) after the 8 leading u8 fields.
_U32_FIELDS = (
    "rto_us", "ato_us", "snd_mss", "rcv_mss",
    "unacked", "sacked", "lost", "retrans", "fackets",
    "last_data_sent_ms", "last_ack_sent_ms", "last_data_recv_ms", "last_ack_recv_ms",
    "pmtu", "rcv_ssthresh", "rtt_us", "rttvar_us", "snd_ssthresh", "snd_cwnd", "advmss", "reordering",
    "rcv_rtt_us", "rcv_space",
    "total_retrans",
)  # fmt: skip
_LATER_FIELDS = (
    ("pacing_rate_Bps", "Q", 104),
    ("max_pacing_rate_Bps", "Q", 112),
    ("bytes_acked", "Q", 120),
    ("bytes_received", "Q", 128),
    ("segs_out", "I", 136),
    ("segs_in", "I", 140),
    ("notsent_bytes", "I", 144),
    ("min_rtt_us", "I", 148),
    ("data_segs_in", "I", 152),
    ("data_segs_out", "I", 156),
    ("delivery_rate_Bps", "Q", 160),
    ("busy_time_us", "Q", 168),
    ("rwnd_limited_us", "Q", 176),
    ("sndbuf_limited_us", "Q", 184),
    ("delivered", "I", 192),
    ("delivered_ce", "I", 196),
    ("bytes_sent", "Q", 200),
    ("bytes_retrans", "Q", 208),
    ("dsack_dups", "I", 216),
    ("reord_seen", "I", 220),
    ("rcv_ooopack", "I", 224),
    ("snd_wnd", "I", 228),
)


def parse_tcp_info(raw: bytes) -> dict[str, int]:
    """Decode the bytes ``getsockopt(TCP_INFO)`` returned; only fields fully present are kept."""
    out: dict[str, int] = {}
    if len(raw) >= 8:
        out["state"] = raw[0]
        out["ca_state"] = raw[1]
    for index, name in enumerate(_U32_FIELDS):
        offset = 8 + 4 * index
        if len(raw) >= offset + 4:
            out[name] = struct.unpack_from("I", raw, offset)[0]
    for name, fmt, offset in _LATER_FIELDS:
        if len(raw) >= offset + struct.calcsize(fmt):
            out[name] = struct.unpack_from(fmt, raw, offset)[0]
    return out


def read_tcp_info(sock: socket.socket) -> dict[str, int]:
    """TCP_INFO of a connected socket; ``{}`` where the platform has none."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_BYTES)
    except OSError:
        return {}
    return parse_tcp_info(raw)
