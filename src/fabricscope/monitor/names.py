"""Metric names: one table from each source's own names (sysfs files, ethtool statistics, procfs
counters) to Prometheus names, so naming is reviewed in one place and documented from it.

Conventions (https://prometheus.io/docs/practices/naming/): prefix ``fabricscope_``, base units in
the name (``_bytes``, ``_seconds``, ``_bytes_per_second``), ``_total`` on counters, labels
``device``/``port`` (RDMA port), ``netdev`` (network interface), ``priority`` (802.1p 0-7).
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricscope.host.ethtool import LINK_ERROR_STATS, PRIO_DISCARDS_HELP

PREFIX = "fabricscope_"


@dataclass(frozen=True)
class CounterName:
    """A source counter exported as ``PREFIX + name`` (a counter: ``_total`` is part of ``name``)."""

    name: str
    help: str
    scale: float = 1.0


# /sys/class/infiniband/<dev>/ports/<n>/counters/* (IBA PortCounters; meanings from the kernel ABI).
PORT_COUNTERS: dict[str, CounterName] = {
    "port_xmit_data": CounterName(
        "rdma_port_transmitted_bytes_total",
        "Data octets transmitted on all VLs (sysfs counts 4-byte words; multiplied by 4).",
        4.0,
    ),
    "port_rcv_data": CounterName(
        "rdma_port_received_bytes_total",
        "Data octets received on all VLs (sysfs counts 4-byte words; multiplied by 4).",
        4.0,
    ),
    "port_xmit_packets": CounterName(
        "rdma_port_transmitted_packets_total", "Packets transmitted on all VLs, errors included."
    ),
    "port_rcv_packets": CounterName(
        "rdma_port_received_packets_total", "Packets received on all VLs, errors included."
    ),
    "unicast_xmit_packets": CounterName(
        "rdma_port_unicast_transmitted_packets_total", "Unicast packets transmitted."
    ),
    "unicast_rcv_packets": CounterName(
        "rdma_port_unicast_received_packets_total", "Unicast packets received."
    ),
    "multicast_xmit_packets": CounterName(
        "rdma_port_multicast_transmitted_packets_total", "Multicast packets transmitted."
    ),
    "multicast_rcv_packets": CounterName(
        "rdma_port_multicast_received_packets_total", "Multicast packets received."
    ),
    "symbol_error": CounterName(
        "rdma_port_symbol_errors_total",
        "Minor link errors on one or more physical lanes (cable or optics quality). 16-bit, saturates.",
    ),
    "link_error_recovery": CounterName(
        "rdma_port_link_error_recoveries_total",
        "Times the link training state machine recovered from an error (a flap).",
    ),
    "link_downed": CounterName(
        "rdma_port_link_downed_total", "Times the link failed to recover from an error and went down."
    ),
    "port_rcv_errors": CounterName("rdma_port_receive_errors_total", "Received packets containing an error."),
    "port_rcv_remote_physical_errors": CounterName(
        "rdma_port_receive_remote_physical_errors_total",
        "Received packets marked with the End-of-Bad-Packet delimiter.",
    ),
    "port_rcv_switch_relay_errors": CounterName(
        "rdma_port_receive_switch_relay_errors_total",
        "Received packets discarded because they could not be forwarded.",
    ),
    "port_xmit_discards": CounterName(
        "rdma_port_transmit_discards_total",
        "Outbound packets discarded because the port was down or congested.",
    ),
    "port_rcv_discards": CounterName(
        "rdma_port_receive_discards_total", "Inbound packets discarded (driver specific)."
    ),
    "port_xmit_constraint_errors": CounterName(
        "rdma_port_transmit_constraint_errors_total",
        "Outbound packets dropped by partition or raw filtering.",
    ),
    "port_rcv_constraint_errors": CounterName(
        "rdma_port_receive_constraint_errors_total", "Inbound packets dropped by partition or raw filtering."
    ),
    "local_link_integrity_errors": CounterName(
        "rdma_port_local_link_integrity_errors_total",
        "Times local physical errors exceeded the LocalPhyErrors threshold.",
    ),
    "excessive_buffer_overrun_errors": CounterName(
        "rdma_port_excessive_buffer_overrun_errors_total",
        "Consecutive flow-control update periods with an input buffer overrun.",
    ),
    "VL15_dropped": CounterName(
        "rdma_port_vl15_dropped_packets_total", "Subnet-management (VL15) packets dropped."
    ),
    "port_xmit_wait": CounterName(
        "rdma_port_transmit_wait_total",
        "Ticks in which the port had data to send but sent nothing (no credits): InfiniBand congestion.",
    ),
}

# /sys/class/infiniband/<dev>/ports/<n>/hw_counters/* (mlx5 names; meanings from NVIDIA's counter docs).
HW_COUNTERS: dict[str, CounterName] = {
    # RoCE congestion control (DCQCN): NP = receiver of marked packets, RP = sender that throttles.
    "np_ecn_marked_roce_packets": CounterName(
        "roce_ecn_marked_packets_received_total",
        "RoCEv2 packets received with ECN CE marking (fabric congestion).",
    ),
    "np_cnp_sent": CounterName(
        "roce_cnp_sent_total", "Congestion notification packets sent in reply to CE-marked packets."
    ),
    "rp_cnp_handled": CounterName(
        "roce_cnp_handled_total", "Congestion notification packets received and acted on (rate cut)."
    ),
    "rp_cnp_ignored": CounterName(
        "roce_cnp_ignored_total",
        "Congestion notification packets received but ignored: congestion control is off for that priority.",
    ),
    # Retransmission and timeouts.
    "out_of_sequence": CounterName(
        "rdma_out_of_sequence_packets_received_total",
        "Out-of-sequence packets received (loss upstream or reordering).",
    ),
    "packet_seq_err": CounterName(
        "rdma_packet_sequence_errors_total", "NAK sequence error packets received."
    ),
    "implied_nak_seq_err": CounterName(
        "rdma_implied_nak_sequence_errors_total", "Implied NAK sequence errors detected."
    ),
    "local_ack_timeout_err": CounterName(
        "rdma_local_ack_timeouts_total", "QP ACK timer expirations at the sender (retransmission by timeout)."
    ),
    "duplicate_request": CounterName(
        "rdma_duplicate_requests_received_total", "Duplicate (retransmitted) requests received."
    ),
    "rnr_nak_retry_err": CounterName("rdma_rnr_naks_received_total", "Receiver-not-ready NAKs received."),
    "req_transport_retries_exceeded": CounterName(
        "rdma_transport_retries_exceeded_total",
        "QPs that exceeded the transport retry limit (fatal for the QP).",
    ),
    "req_rnr_retries_exceeded": CounterName(
        "rdma_rnr_retries_exceeded_total", "QPs that exceeded the RNR retry limit (fatal for the QP)."
    ),
    "roce_adp_retrans": CounterName(
        "roce_adaptive_retransmissions_total", "Adaptive retransmissions (RoCE)."
    ),
    "roce_adp_retrans_to": CounterName(
        "roce_adaptive_retransmission_timeouts_total", "Adaptive retransmissions that timed out (RoCE)."
    ),
    "roce_slow_restart": CounterName("roce_slow_restarts_total", "Times slow restart was used (RoCE)."),
    "roce_slow_restart_cnps": CounterName(
        "roce_slow_restart_cnps_total", "CNPs generated by slow restart (RoCE)."
    ),
    "roce_slow_restart_trans": CounterName(
        "roce_slow_restart_transitions_total", "Transitions to slow restart (RoCE)."
    ),
    "rx_icrc_encapsulated": CounterName("roce_icrc_errors_total", "RoCE packets received with ICRC errors."),
    "out_of_buffer": CounterName(
        "rdma_out_of_buffer_drops_total", "Packets dropped for lack of receive WQEs."
    ),
    # Completion errors.
    "req_cqe_error": CounterName("rdma_requester_cqe_errors_total", "Requester completions with error."),
    "resp_cqe_error": CounterName("rdma_responder_cqe_errors_total", "Responder completions with error."),
    "req_cqe_flush_error": CounterName(
        "rdma_requester_cqe_flush_errors_total", "Requester completions flushed (QP in error)."
    ),
    "resp_cqe_flush_error": CounterName(
        "rdma_responder_cqe_flush_errors_total", "Responder completions flushed (QP in error)."
    ),
    "req_remote_access_errors": CounterName(
        "rdma_requester_remote_access_errors_total", "Requester remote access errors."
    ),
    "resp_remote_access_errors": CounterName(
        "rdma_responder_remote_access_errors_total", "Responder remote access errors."
    ),
    "req_remote_invalid_request": CounterName(
        "rdma_requester_remote_invalid_requests_total", "Requester remote invalid request errors."
    ),
    "resp_local_length_error": CounterName(
        "rdma_responder_local_length_errors_total", "Responder local length errors."
    ),
    # Requests received.
    "rx_read_requests": CounterName("rdma_read_requests_received_total", "RDMA READ requests received."),
    "rx_write_requests": CounterName("rdma_write_requests_received_total", "RDMA WRITE requests received."),
    "rx_atomic_requests": CounterName("rdma_atomic_requests_received_total", "Atomic requests received."),
    "rx_dct_connect": CounterName("rdma_dct_connects_received_total", "DCT connect requests received."),
}

OTHER_PORT_COUNTER = "rdma_port_stat_total"  # unmapped counters/* files, label ``counter``
OTHER_HW_COUNTER = "rdma_hw_stat_total"  # unmapped hw_counters/* files, label ``counter`` (promtool: a name must not say "counter")

# ethtool -S per-priority statistics (mlx5 names ``rx_prio3_pause``), keyed by (direction, stat).
PRIO_STATS: dict[tuple[str, str], CounterName] = {
    ("rx", "bytes"): CounterName(
        "prio_received_bytes_total", "Bytes received on this 802.1p priority (physical port)."
    ),
    ("rx", "packets"): CounterName("prio_received_packets_total", "Packets received on this priority."),
    ("tx", "bytes"): CounterName("prio_transmitted_bytes_total", "Bytes transmitted on this priority."),
    ("tx", "packets"): CounterName("prio_transmitted_packets_total", "Packets transmitted on this priority."),
    ("rx", "pause"): CounterName(
        "pfc_pause_frames_received_total",
        "PFC pause frames received: the peer asks us to stop sending on this priority.",
    ),
    ("tx", "pause"): CounterName(
        "pfc_pause_frames_transmitted_total",
        "PFC pause frames sent: this NIC cannot absorb what arrives on this priority.",
    ),
    ("rx", "pause_duration"): CounterName(
        "pfc_pause_duration_received_seconds_total",
        "Time this port did not send on the priority because of received pause (ethtool reports microseconds).",
        1e-6,
    ),
    ("tx", "pause_duration"): CounterName(
        "pfc_pause_duration_transmitted_seconds_total",
        "Pause time this port requested from its peer on the priority (ethtool reports microseconds).",
        1e-6,
    ),
    ("rx", "pause_transition"): CounterName(
        "pfc_pause_transitions_received_total", "XOFF to XON transitions of received pause on this priority."
    ),
    ("rx", "buf_discard"): CounterName(
        "prio_buffer_discards_total", "Packets discarded for lack of per-host buffer."
    ),
    ("rx", "cong_discard"): CounterName(
        "prio_congestion_discards_total", "Packets discarded by per-host congestion."
    ),
    ("rx", "discards"): CounterName("prio_discards_total", PRIO_DISCARDS_HELP),
    ("rx", "marked"): CounterName(
        "prio_ecn_marked_packets_total", "Packets ECN-marked by the device on this priority."
    ),
}

# ethtool -S port-level statistics (labels: netdev).
PORT_STATS: dict[str, CounterName] = {
    "tx_pause_storm_warning_events": CounterName(
        "pfc_pause_storm_warning_events_total", LINK_ERROR_STATS["tx_pause_storm_warning_events"]
    ),
    "tx_pause_storm_error_events": CounterName(
        "pfc_pause_storm_error_events_total", LINK_ERROR_STATS["tx_pause_storm_error_events"]
    ),
    "rx_discards_phy": CounterName("nic_phy_received_discards_total", LINK_ERROR_STATS["rx_discards_phy"]),
    "tx_discards_phy": CounterName(
        "nic_phy_transmitted_discards_total", "Transmitted packets dropped on the physical port."
    ),
    "rx_pause_ctrl_phy": CounterName(
        "nic_phy_pause_frames_received_total", "Link-level pause frames received."
    ),
    "tx_pause_ctrl_phy": CounterName(
        "nic_phy_pause_frames_transmitted_total", "Link-level pause frames transmitted."
    ),
    "rx_crc_errors_phy": CounterName("nic_phy_crc_errors_total", LINK_ERROR_STATS["rx_crc_errors_phy"]),
    "rx_symbol_err_phy": CounterName("nic_phy_symbol_errors_total", LINK_ERROR_STATS["rx_symbol_err_phy"]),
    "rx_corrected_bits_phy": CounterName(
        "nic_phy_fec_corrected_errors_total", "Bit errors corrected by FEC (rx_corrected_bits_phy)."
    ),
    "link_down_events_phy": CounterName(
        "nic_phy_link_down_events_total", LINK_ERROR_STATS["link_down_events_phy"]
    ),
    "rx_out_of_buffer": CounterName("nic_rx_out_of_buffer_drops_total", LINK_ERROR_STATS["rx_out_of_buffer"]),
    "rx_buffer_passed_thres_phy": CounterName(
        "nic_phy_receive_buffer_threshold_events_total",
        "Events where the port receive buffer was over 85% full.",
    ),
    "dev_out_of_buffer": CounterName(
        "nic_device_out_of_buffer_drops_total", "Packets dropped for lack of device buffer."
    ),
    "outbound_pci_buffer_overflow": CounterName(
        "nic_pcie_outbound_buffer_overflows_total",
        "Packets dropped because the outbound PCIe buffer overflowed.",
    ),
    "rx_pci_signal_integrity": CounterName(
        "nic_pcie_rx_signal_integrity_errors_total", "PCIe physical-layer errors received."
    ),
    "tx_pci_signal_integrity": CounterName(
        "nic_pcie_tx_signal_integrity_errors_total", "PCIe physical-layer errors reported by the peer."
    ),
    # mlx5 counters.rst: seconds in which outbound_pci_stalled_rd/wr was above 30%.
    "outbound_pci_stalled_rd_events": CounterName(
        "nic_pcie_outbound_stalled_read_seconds_total",
        "Seconds in which the NIC's outbound non-posted PCIe reads were stalled more than 30% of the time (no credits).",
    ),
    "outbound_pci_stalled_wr_events": CounterName(
        "nic_pcie_outbound_stalled_write_seconds_total",
        "Seconds in which the NIC's outbound posted PCIe writes were stalled more than 30% of the time (no credits).",
    ),
    # AWS ENA (cloud TCP nodes): packets queued or dropped because the instance exceeded an allowance.
    "bw_in_allowance_exceeded": CounterName(
        "nic_bw_in_allowance_exceeded_total",
        "Packets queued or dropped: inbound bandwidth above the instance allowance (ENA).",
    ),
    "bw_out_allowance_exceeded": CounterName(
        "nic_bw_out_allowance_exceeded_total",
        "Packets queued or dropped: outbound bandwidth above the instance allowance (ENA).",
    ),
    "pps_allowance_exceeded": CounterName(
        "nic_pps_allowance_exceeded_total",
        "Packets queued or dropped: packet rate above the instance allowance (ENA).",
    ),
    "conntrack_allowance_exceeded": CounterName(
        "nic_conntrack_allowance_exceeded_total",
        "Packets dropped: connection tracking above the instance allowance (ENA).",
    ),
    "linklocal_allowance_exceeded": CounterName(
        "nic_linklocal_allowance_exceeded_total",
        "Packets dropped: traffic to link-local services above the allowance (ENA).",
    ),
}

# /proc/net/snmp and /proc/net/netstat (labels: none).
TCP_COUNTERS: dict[str, CounterName] = {
    "Tcp.InSegs": CounterName("tcp_received_segments_total", "TCP segments received."),
    "Tcp.OutSegs": CounterName("tcp_sent_segments_total", "TCP segments sent (retransmissions excluded)."),
    "Tcp.RetransSegs": CounterName("tcp_retransmitted_segments_total", "TCP segments retransmitted."),
    "Tcp.OutRsts": CounterName("tcp_resets_sent_total", "TCP segments sent with the RST flag."),
    "Tcp.EstabResets": CounterName("tcp_established_resets_total", "Established TCP connections reset."),
    "Tcp.AttemptFails": CounterName(
        "tcp_connection_attempt_failures_total", "Failed TCP connection attempts."
    ),
    "Tcp.InErrs": CounterName("tcp_receive_errors_total", "TCP segments received in error."),
    "TcpExt.TCPTimeouts": CounterName("tcp_timeouts_total", "TCP retransmission timeouts."),
    "TcpExt.TCPSynRetrans": CounterName("tcp_syn_retransmits_total", "SYN and SYN/ACK retransmissions."),
    "TcpExt.TCPLostRetransmit": CounterName(
        "tcp_lost_retransmits_total", "Retransmissions that were lost again."
    ),
    "TcpExt.TCPFastRetrans": CounterName("tcp_fast_retransmits_total", "Fast retransmissions."),
    "TcpExt.TCPSlowStartRetrans": CounterName(
        "tcp_slow_start_retransmits_total", "Retransmissions in slow start."
    ),
    "TcpExt.TCPAbortOnTimeout": CounterName(
        "tcp_aborts_on_timeout_total", "Connections aborted after too many timeouts."
    ),
    "TcpExt.TCPAbortOnData": CounterName(
        "tcp_aborts_on_data_total", "Connections reset because of unexpected data."
    ),
    "TcpExt.TCPAbortOnClose": CounterName(
        "tcp_aborts_on_close_total", "Connections reset at close with unread data."
    ),
    "TcpExt.ListenOverflows": CounterName(
        "tcp_listen_overflows_total", "Connections dropped: listen queue full."
    ),
    "TcpExt.ListenDrops": CounterName("tcp_listen_drops_total", "Connection requests dropped by listeners."),
}
TCP_REQUIRED = "Tcp.RetransSegs"

# libibverbs ``enum ibv_wc_status``: NCCL prints the number in "Got completion ... status=N".
WC_STATUS_NAMES: dict[int, str] = {
    1: "LOC_LEN_ERR",
    2: "LOC_QP_OP_ERR",
    3: "LOC_EEC_OP_ERR",
    4: "LOC_PROT_ERR",
    5: "WR_FLUSH_ERR",
    6: "MW_BIND_ERR",
    7: "BAD_RESP_ERR",
    8: "LOC_ACCESS_ERR",
    9: "REM_INV_REQ_ERR",
    10: "REM_ACCESS_ERR",
    11: "REM_OP_ERR",
    12: "RETRY_EXC_ERR",
    13: "RNR_RETRY_EXC_ERR",
    14: "LOC_RDD_VIOL_ERR",
    15: "REM_INV_RD_REQ_ERR",
    16: "REM_ABORT_ERR",
    17: "INV_EECN_ERR",
    18: "INV_EEC_STATE_ERR",
    19: "FATAL_ERR",
    20: "RESP_TIMEOUT_ERR",
    21: "GENERAL_ERR",
}


# ``ethtool -S`` values that are not counters: mlx5's outbound_pci_stalled_rd/wr are the percentage
# (0-100) of the last second the NIC had outbound reads/writes it could not issue for lack of PCIe
# credits (kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst).
PORT_GAUGES: dict[str, CounterName] = {
    "outbound_pci_stalled_rd": CounterName(
        "nic_pcie_outbound_stalled_read_ratio",
        "Share of the last second the NIC's outbound PCIe reads were stalled for lack of credits (0-1).",
        0.01,
    ),
    "outbound_pci_stalled_wr": CounterName(
        "nic_pcie_outbound_stalled_write_ratio",
        "Share of the last second the NIC's outbound PCIe writes were stalled for lack of credits (0-1).",
        0.01,
    ),
}
