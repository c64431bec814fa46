"""Counter correlation (pure deltas and highlights) and TCP_INFO of our own sockets."""

from __future__ import annotations

import socket
import struct
import threading
import time

from fabricscope.bench.counters import CounterProbe, summarize_deltas
from fabricscope.bench.results.schema import new_result
from fabricscope.bench.sockets.tcpinfo import TCP_INFO_BYTES, parse_tcp_info, read_tcp_info
from fabricscope.host import Root
from fabricscope.host.inventory import CounterSample
from fabricscope.report.bench import counter_lines
from tests.conftest import FIXTURE_HOSTS


def _sample(t: float, netstat: dict, ports: dict, ethtool: dict) -> CounterSample:
    return CounterSample(taken_s=t, ports=ports, ethtool=ethtool, netstat=netstat)


def test_highlights_name_the_causes() -> None:
    before = _sample(
        10.0,
        {"Tcp.RetransSegs": 100, "TcpExt.TCPTimeouts": 5, "Udp.RcvbufErrors": 0},
        {
            "mlx5_0/1": {
                "port_xmit_discards": 1,
                "np_cnp_sent": 10,
                "out_of_sequence": 0,
                "symbol_error": 2,
                "port_rcv_errors": 0,
            }
        },
        {
            "ens1": {
                "rx_prio3_pause": 50,
                "tx_prio3_pause": 5,
                "rx_pause_ctrl_phy": 7,
                "rx_discards_phy": 0,
                "rx_bytes": 10,
            }
        },
    )
    after = _sample(
        12.5,
        {"Tcp.RetransSegs": 3518, "TcpExt.TCPTimeouts": 5, "Udp.RcvbufErrors": 9},
        {
            "mlx5_0/1": {
                "port_xmit_discards": 1,
                "np_cnp_sent": 250,
                "out_of_sequence": 4,
                "symbol_error": 3,
                "port_rcv_errors": 2,
            }
        },
        {
            "ens1": {
                "rx_prio3_pause": 80,
                "tx_prio3_pause": 5,
                "rx_pause_ctrl_phy": 9,
                "rx_discards_phy": 12,
                "rx_bytes": 99,
            }
        },
    )
    deltas = summarize_deltas(before, after)
    assert deltas.window_s == 2.5
    assert deltas.highlights == {
        "host_tcp_retrans_segs_count": 3418,
        "host_udp_rcvbuf_errors_count": 9,
        "cnp_sent_count": 240,
        "out_of_sequence_count": 4,
        "port_errors_count": 3,
        "pause_rx_count": 32,
        "rx_discards_count": 12,
    }
    assert deltas.ports == {
        "mlx5_0/1": {"np_cnp_sent": 240, "out_of_sequence": 4, "symbol_error": 1, "port_rcv_errors": 2}
    }
    assert "TcpExt.TCPTimeouts" not in deltas.netstat  # zero deltas are dropped
    result = new_result("tcp", {"peer": "x"})
    result.counters = deltas
    text = " ".join(counter_lines(result))
    assert (
        "3,418 TCP segments retransmitted host-wide" in text
        and "240 CNPs sent" in text
        and "32 pause frames received" in text
    )


def test_a_counter_reset_is_not_negative() -> None:
    before = _sample(0, {"Tcp.RetransSegs": 500}, {}, {})
    after = _sample(1, {"Tcp.RetransSegs": 20}, {}, {})
    assert summarize_deltas(before, after).netstat == {"Tcp.RetransSegs": 20}


def test_probe_on_a_fixture_host_reads_port_counters() -> None:
    probe = CounterProbe(
        None, root=Root.at(FIXTURE_HOSTS / "roce-healthy"), netdev="ens0np0", port="mlx5_0/1"
    )
    probe.before()
    deltas = probe.after()
    assert deltas.window_s is not None and deltas.interface == "ens0np0"
    assert deltas.highlights == {}  # a snapshot does not move


def test_probe_live_loopback_sees_what_happened_in_its_window() -> None:
    """Datagrams to a closed loopback port in the window count as Udp.NoPorts (RFC 1213 udpNoPorts;
    /proc/net/snmp is per network namespace, so other traffic can only add to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as holder:
        holder.bind(("127.0.0.1", 0))
        closed_port = holder.getsockname()[1]
    probe = CounterProbe("127.0.0.1")
    assert probe.netdev == "lo" and probe.local_address == "127.0.0.1"
    started = time.monotonic()
    probe.before()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for _ in range(20):
            sender.sendto(b"x", ("127.0.0.1", closed_port))
    time.sleep(0.05)
    deltas = probe.after()
    elapsed = time.monotonic() - started
    assert deltas.interface == "lo"
    assert deltas.window_s is not None and 0.05 <= deltas.window_s <= elapsed
    assert deltas.netstat.get("Udp.NoPorts", 0) >= 20
    assert deltas.highlights["host_udp_no_ports_count"] == deltas.netstat["Udp.NoPorts"]
    assert all(value > 0 for value in deltas.netstat.values())  # only counters that moved, never negative


def test_parse_tcp_info_layout() -> None:
    raw = bytearray(TCP_INFO_BYTES)
    raw[0] = 1  # ESTABLISHED
    struct.pack_into("I", raw, 8 + 4 * 15, 250)  # rtt_us
    struct.pack_into("I", raw, 8 + 4 * 23, 17)  # total_retrans
    struct.pack_into("Q", raw, 120, 123456789)  # bytes_acked
    struct.pack_into("Q", raw, 208, 4242)  # bytes_retrans
    info = parse_tcp_info(bytes(raw))
    assert info["state"] == 1 and info["rtt_us"] == 250 and info["total_retrans"] == 17
    assert info["bytes_acked"] == 123456789 and info["bytes_retrans"] == 4242
    old_kernel = parse_tcp_info(bytes(raw[:104]))  # struct before 4.1: up to total_retrans
    assert old_kernel["total_retrans"] == 17 and "bytes_acked" not in old_kernel


def test_read_tcp_info_of_a_live_socket() -> None:
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        accepted = []
        thread = threading.Thread(target=lambda: accepted.append(lst.accept()[0]))
        thread.start()
        with socket.create_connection(lst.getsockname()) as client:
            thread.join(5)
            client.sendall(b"x" * 100000)
            info = read_tcp_info(client)
            accepted[0].close()
    assert info["state"] == 1 and info["total_retrans"] >= 0 and info["bytes_acked"] > 0
