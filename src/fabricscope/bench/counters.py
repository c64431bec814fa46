"""Counter correlation: NIC/port/TCP counters read before and after a run, through the host model.

A low number with its cause: the result carries the deltas of error counters, retransmits, PFC
pause frames, CNPs and out-of-sequence packets seen during the run. Host-wide counters (netstat,
ports, ethtool) also count other traffic on the host during the window; the per-socket TCP_INFO
figures in the result's metrics count only this run.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import socket

from fabricscope.bench.results.schema import CounterDeltas
from fabricscope.host import Root
from fabricscope.host.inventory import CounterSample, counter_deltas, read_counter_sample
from fabricscope.host.netclass import read_net_devices

# netstat counter -> highlight name
NETSTAT_HIGHLIGHTS = {
    "Tcp.RetransSegs": "host_tcp_retrans_segs_count",
    "TcpExt.TCPLostRetransmit": "host_tcp_lost_retransmit_count",
    "TcpExt.TCPTimeouts": "host_tcp_timeouts_count",
    "Tcp.InErrs": "host_tcp_in_errors_count",
    "TcpExt.ListenOverflows": "host_listen_overflows_count",
    "TcpExt.ListenDrops": "host_listen_drops_count",
    "Udp.RcvbufErrors": "host_udp_rcvbuf_errors_count",
    "Udp.SndbufErrors": "host_udp_sndbuf_errors_count",
    "Udp.InErrors": "host_udp_in_errors_count",
    "Udp.NoPorts": "host_udp_no_ports_count",
}
# RDMA port counters (IB counters/ and mlx5 hw_counters/) -> highlight name
PORT_HIGHLIGHTS = {
    "symbol_error": "port_errors_count",
    "port_rcv_errors": "port_errors_count",
    "port_rcv_remote_physical_errors": "port_errors_count",
    "local_link_integrity_errors": "port_errors_count",
    "excessive_buffer_overrun_errors": "port_errors_count",
    "port_xmit_constraint_errors": "port_errors_count",
    "port_rcv_constraint_errors": "port_errors_count",
    "link_error_recovery": "link_error_recovery_count",
    "link_downed": "link_downed_count",
    "port_xmit_discards": "port_xmit_discards_count",
    "port_xmit_wait": "port_xmit_wait_count",
    "out_of_sequence": "out_of_sequence_count",
    "packet_seq_err": "packet_seq_err_count",
    "np_cnp_sent": "cnp_sent_count",
    "rp_cnp_handled": "cnp_handled_count",
    "np_ecn_marked_roce_packets": "ecn_marked_count",
    "local_ack_timeout_err": "ack_timeout_count",
    "rnr_nak_retry_err": "rnr_nak_retry_count",
    "implied_nak_seq_err": "implied_nak_count",
}
_PAUSE_RX = re.compile(r"^rx_(?:prio\d+_)?pause(?:_ctrl_phy)?\Z")
_PAUSE_TX = re.compile(r"^tx_(?:prio\d+_)?pause(?:_ctrl_phy)?\Z")
ETHTOOL_HIGHLIGHTS = {
    "rx_discards_phy": "rx_discards_count",
    "rx_out_of_buffer": "rx_out_of_buffer_count",
    "tx_discards_phy": "tx_discards_count",
    "rx_crc_errors_phy": "rx_crc_errors_count",
    "rx_symbol_err_phy": "rx_symbol_errors_count",
    "rx_dropped": "rx_dropped_count",
    "tx_dropped": "tx_dropped_count",
}


def local_address_towards(host: str) -> str | None:
    """The local IP the kernel would use to reach ``host`` (a routing lookup; nothing is sent)."""
    try:
        infos = socket.getaddrinfo(host, 9, 0, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError):
        return None
    for family, _, _, _, sockaddr in infos:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect(sockaddr)
                return str(probe.getsockname()[0])
            except OSError:
                continue
    return None


def netdev_for_address(root: Root, address: str | None) -> str | None:
    """The interface holding ``address`` (``lo`` for loopback addresses)."""
    if address is None:
        return None
    try:
        if ipaddress.ip_address(address).is_loopback:
            return "lo"
    except ValueError:
        return None
    for dev in read_net_devices(root):
        if address in dev.ipv4 or address in dev.ipv6:
            return dev.name
    return None


def _nonzero_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counter_deltas(before, after).items() if v}


def _per_source(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], moved: dict[str, dict[str, int]]
) -> list[dict[str, int]]:
    """Each source's (port's, netdev's) non-zero deltas, in ``after``'s order; those that moved
    are also kept in ``moved``."""
    out = []
    for source, values in after.items():
        deltas = _nonzero_deltas(before.get(source, {}), values)
        if deltas:
            moved[source] = deltas
        out.append(deltas)
    return out


def summarize_deltas(before: CounterSample, after: CounterSample) -> CounterDeltas:
    """Non-zero deltas by source plus the named highlights (pure: testable on samples)."""
    out = CounterDeltas(window_s=round(after.taken_s - before.taken_s, 6))
    highlights: dict[str, int] = {}

    def bump(name: str, value: int) -> None:
        if value:
            highlights[name] = highlights.get(name, 0) + value

    netstat = _nonzero_deltas(before.netstat, after.netstat)
    out.netstat = netstat
    for counter, name in NETSTAT_HIGHLIGHTS.items():
        bump(name, netstat.get(counter, 0))
    for deltas in _per_source(before.ports, after.ports, out.ports):
        for counter, name in PORT_HIGHLIGHTS.items():
            bump(name, deltas.get(counter, 0))
    for deltas in _per_source(before.ethtool, after.ethtool, out.ethtool):
        for counter, value in deltas.items():
            if _PAUSE_RX.match(counter):
                bump("pause_rx_count", value)
            elif _PAUSE_TX.match(counter):
                bump("pause_tx_count", value)
            elif counter in ETHTOOL_HIGHLIGHTS:
                bump(ETHTOOL_HIGHLIGHTS[counter], value)
    out.highlights = highlights
    return out


class CounterProbe:
    """Read counters before and after a run: ``probe.before()``, run, ``deltas = probe.after()``.

    Never raises for unreadable counters: what could not be read is listed in ``unavailable``.
    """

    def __init__(
        self,
        peer_host: str | None,
        root: Root | None = None,
        netdev: str | None = None,
        port: str | None = None,
    ) -> None:
        self.root = root or Root.live()
        self.netdev: str | None = netdev
        self.port = port  # "mlx5_0/1": keep only this RDMA port's counters (others carry other jobs)
        self.local_address: str | None = None
        self.unavailable: list[str] = []
        self._before: CounterSample | None = None
        if peer_host is not None and netdev is None:
            self.local_address = local_address_towards(peer_host)
            self.netdev = netdev_for_address(self.root, self.local_address)
            if self.netdev is None:
                self.unavailable.append(f"no local interface found for the route to {peer_host}")

    def _sample(self) -> CounterSample | None:
        try:
            return read_counter_sample(
                self.root, [self.netdev] if self.netdev and self.netdev != "lo" else []
            )
        except Exception as exc:  # the host model should not raise; a run must not die of it
            self.unavailable.append(f"counters unreadable: {type(exc).__name__}: {exc}")
            return None

    def before(self) -> None:
        self._before = self._sample()

    def after(self) -> CounterDeltas:
        after = self._sample()
        if self._before is None or after is None:
            return CounterDeltas(unavailable=self.unavailable, interface=self.netdev)
        if self.port is not None:
            after = dataclasses.replace(after, ports={k: v for k, v in after.ports.items() if k == self.port})
        deltas = summarize_deltas(self._before, after)
        if self.netdev and self.netdev != "lo" and self.netdev not in after.ethtool:
            self.unavailable.append(f"ethtool -S {self.netdev}: not available")
        if not after.netstat:
            self.unavailable.append("/proc/net/netstat: not readable")
        for problem in self.root.problems[-5:]:
            self.unavailable.append(f"{problem.source}: {problem.reason}")
        deltas.unavailable = list(dict.fromkeys(self.unavailable))
        deltas.interface = self.netdev
        return deltas
