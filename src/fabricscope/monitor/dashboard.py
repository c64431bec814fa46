"""The Grafana dashboard, generated: ``python -m fabricscope.monitor.dashboard > assets/fabricscope-dashboard.json``.

Written as code so that every panel follows one layout and one datasource rule, and so that a test
can hold every query to the metrics the exporter really produces. Rows: communication time (NCCL
Inspector against the expected bandwidth), PCIe saturation and link errors first, then the
correlation row (NCCL warnings, PFC, ECN/CNP, port errors); link health, congestion,
PFC/ECN, PCIe, NCCL, findings, exporter health. The datasource is a template variable
(``${datasource}``), so the JSON imports into any Grafana without editing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

UID = "fabricscope-fabric"
TITLE = "fabricscope: GPU fabric health"
DS = {"type": "prometheus", "uid": "${datasource}"}
I = 'instance=~"$instance"'  # noqa: E741 - short on purpose: it is in every query
D = f'{I},device=~"$device"'
N = f'{I},netdev=~"$netdev"'
WIDTH = 24


@dataclass
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass
class Panel:
    title: str
    queries: list[Query]
    kind: str = "timeseries"  # timeseries, stat, table
    unit: str = "short"
    width: int = 12
    height: int = 8
    description: str = ""
    thresholds: list[tuple[float | None, str]] = field(default_factory=list)
    overrides: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Row:
    title: str
    panels: list[Panel]


# NIC traffic over its PCIe link's capacity, per RDMA device (either direction; PCIe is full duplex).
_NIC_SATURATION = (
    "max by (instance, device) (rate(fabricscope_rdma_port_{dir}_bytes_total{{{d}}}[$__rate_interval]))"
    " / on (instance, device) max by (instance, device) "
    '(fabricscope_pcie_link_capacity_bytes_per_second{{{i},kind="nic"}})'
)


def _link_errors(**layout: Any) -> Panel:
    """Port error counters per interval: in the first row beside communication time, and in Link health."""
    counters = (
        ("symbol_errors", "symbol errors"),
        ("link_downed", "link downed"),
        ("link_error_recoveries", "error recoveries"),
        ("receive_errors", "receive errors"),
    )
    queries = [
        Query(
            f"increase(fabricscope_rdma_port_{name}_total{{{D}}}[$__rate_interval])",
            f"{{{{device}}}}/{{{{port}}}} {legend}",
        )
        for name, legend in counters
    ]
    return Panel("Link errors (per interval)", queries, **layout)


def _pfc_paused(title: str, **layout: Any) -> Panel:
    """The share of time each priority was paused, each way: in the correlation row and in PFC / ECN."""
    queries = [
        Query(
            f"rate(fabricscope_pfc_pause_duration_{way}_seconds_total{{{N}}}[$__rate_interval])",
            f"{{{{netdev}}}} prio {{{{priority}}}} {legend}",
        )
        for way, legend in (("received", "paused by peer"), ("transmitted", "pausing peer"))
    ]
    return Panel(title, queries, unit="percentunit", **layout)


def _first_rows() -> list[Row]:
    """What users track, then what explains a spike on the same time axis."""
    return [
        Row(
            "Communication time, PCIe saturation, link errors",
            [
                Panel(
                    "NCCL bus bandwidth against expected (per rank)",
                    [
                        Query(f"fabricscope_nccl_rank_busbw_ratio{{{I}}}", "{{node}} rank {{rank}} {{nic}}"),
                        Query(
                            f"rate(fabricscope_nccl_collective_duration_seconds_sum{{{I}}}[$__rate_interval]) "
                            f"/ rate(fabricscope_nccl_collective_duration_seconds_count{{{I}}}[$__rate_interval])",
                            "{{comm}} {{collective}} mean time (s)",
                        ),
                    ],
                    unit="percentunit",
                    width=8,
                    thresholds=[(None, "red"), (0.7, "orange"), (0.9, "green")],
                    description="NCCL Inspector bus bandwidth over what fabricscope's simulator expects for the "
                    "communicator's shape with this node's GPU model and NICs (on the --topology fabric when given; "
                    "1 = 100%), with the mean collective time.",
                ),
                Panel(
                    "PCIe saturation (traffic / link capacity)",
                    [
                        Query(_NIC_SATURATION.format(dir="transmitted", d=D, i=I), "{{device}} tx"),
                        Query(_NIC_SATURATION.format(dir="received", d=D, i=I), "{{device}} rx"),
                        Query(
                            f'max by (instance, device, direction) (fabricscope_pcie_throughput_bytes_per_second{{{I},kind="gpu"}})'
                            " / on (instance, device) group_left max by (instance, device) "
                            f'(fabricscope_pcie_link_capacity_bytes_per_second{{{I},kind="gpu"}})',
                            "{{device}} {{direction}}",
                        ),
                        Query(
                            f"rate(fabricscope_nic_pcie_outbound_stalled_read_seconds_total{{{N}}}[$__rate_interval]) "
                            f"+ rate(fabricscope_nic_pcie_outbound_stalled_write_seconds_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} stalled seconds/s",
                        ),
                    ],
                    unit="percentunit",
                    width=8,
                    description="NIC: RDMA bytes each way over the PCIe link's capacity (speed x width after encoding); "
                    "GPU: nvidia-smi's PCIe throughput where available; the NIC's outbound PCIe stalls (mlx5).",
                ),
                _link_errors(width=8),
            ],
        ),
        Row(
            "Correlation: NCCL warnings, PFC, ECN/CNP, port errors",
            [
                Panel(
                    "NCCL fallbacks and WARNs (per interval)",
                    [
                        Query(
                            f"increase(fabricscope_nccl_socket_fallbacks_total{{{I}}}[$__rate_interval])",
                            "{{instance}} socket fallbacks",
                        ),
                        Query(
                            f"sum by (instance, kind) (increase(fabricscope_nccl_warnings_total{{{I}}}[$__rate_interval]))",
                            "{{instance}} {{kind}}",
                        ),
                    ],
                    width=6,
                ),
                _pfc_paused("PFC pause (share of time)", width=6),
                Panel(
                    "ECN marks and CNPs (per second)",
                    [
                        Query(
                            f"rate(fabricscope_roce_ecn_marked_packets_received_total{{{D}}}[$__rate_interval])",
                            "{{device}} ECN marked",
                        ),
                        Query(
                            f"rate(fabricscope_roce_cnp_handled_total{{{D}}}[$__rate_interval])",
                            "{{device}} CNP handled",
                        ),
                        Query(
                            f"rate(fabricscope_roce_cnp_sent_total{{{D}}}[$__rate_interval])",
                            "{{device}} CNP sent",
                        ),
                    ],
                    width=6,
                ),
                Panel(
                    "Port errors and discards (per interval)",
                    [
                        Query(
                            f"increase(fabricscope_rdma_port_transmit_discards_total{{{D}}}[$__rate_interval])",
                            "{{device}} transmit discards",
                        ),
                        Query(
                            f"increase(fabricscope_rdma_port_receive_errors_total{{{D}}}[$__rate_interval])",
                            "{{device}} receive errors",
                        ),
                        Query(
                            f"increase(fabricscope_rdma_out_of_sequence_packets_received_total{{{D}}}[$__rate_interval])",
                            "{{device}} out of sequence",
                        ),
                    ],
                    width=6,
                ),
            ],
        ),
    ]


def _rows() -> list[Row]:
    return [
        *_first_rows(),
        Row(
            "Link health",
            [
                Panel(
                    "RDMA ports not ACTIVE",
                    [Query(f"count(fabricscope_rdma_port_state_id{{{D}}} != 4) or vector(0)", instant=True)],
                    kind="stat",
                    width=6,
                    height=5,
                    thresholds=[(None, "green"), (1, "red")],
                    description="Ports whose state is not ACTIVE (4). NCCL does not use them.",
                ),
                Panel(
                    "Ports below their siblings' rate",
                    [
                        Query(
                            f"count((fabricscope_rdma_port_rate_bytes_per_second{{{D}}} "
                            f"< fabricscope_rdma_port_expected_rate_bytes_per_second{{{D}}}) "
                            f"and fabricscope_rdma_port_state_id{{{D}}} == 4) or vector(0)",
                            instant=True,
                        )
                    ],
                    kind="stat",
                    width=6,
                    height=5,
                    thresholds=[(None, "green"), (1, "orange")],
                    description="Active ports that negotiated fewer lanes or a lower speed than the best port of the same model.",
                ),
                Panel(
                    "Port state and rate",
                    [
                        Query(f"fabricscope_rdma_port_state_id{{{D}}}", "state", instant=True),
                        Query(f"fabricscope_rdma_port_physical_state_id{{{D}}}", "phys", instant=True),
                        Query(
                            f"fabricscope_rdma_port_rate_bytes_per_second{{{D}}} * 8", "rate", instant=True
                        ),
                        Query(
                            f"fabricscope_rdma_port_expected_rate_bytes_per_second{{{D}}} * 8",
                            "expected",
                            instant=True,
                        ),
                    ],
                    kind="table",
                    width=12,
                    height=5,
                    description="State 4 = ACTIVE; physical state 5 = LinkUp, 2 = Polling (no partner), 3 = Disabled. Rates in bit/s.",
                ),
                Panel(
                    "RDMA throughput per port (bit/s)",
                    [
                        Query(
                            f"rate(fabricscope_rdma_port_transmitted_bytes_total{{{D}}}[$__rate_interval]) * 8",
                            "{{instance}} {{device}}/{{port}} tx",
                        ),
                        Query(
                            f"-rate(fabricscope_rdma_port_received_bytes_total{{{D}}}[$__rate_interval]) * 8",
                            "{{instance}} {{device}}/{{port}} rx",
                        ),
                    ],
                    unit="bps",
                    description="Transmit up, receive down (negated).",
                ),
                _link_errors(description="Any steady increase means a cable, optics or switch-port problem."),
            ],
        ),
        Row(
            "Congestion",
            [
                Panel(
                    "ECN-marked RoCE packets received /s",
                    [
                        Query(
                            f"rate(fabricscope_roce_ecn_marked_packets_received_total{{{D}}}[$__rate_interval])",
                            "{{instance}} {{device}}/{{port}}",
                        )
                    ],
                    unit="pps",
                    description="Switches marked congestion on packets arriving here (this port is the notification point).",
                ),
                Panel(
                    "CNPs sent, handled, ignored /s",
                    [
                        Query(
                            f"rate(fabricscope_roce_cnp_sent_total{{{D}}}[$__rate_interval])",
                            "{{device}}/{{port}} sent",
                        ),
                        Query(
                            f"rate(fabricscope_roce_cnp_handled_total{{{D}}}[$__rate_interval])",
                            "{{device}}/{{port}} handled",
                        ),
                        Query(
                            f"rate(fabricscope_roce_cnp_ignored_total{{{D}}}[$__rate_interval])",
                            "{{device}}/{{port}} IGNORED",
                        ),
                    ],
                    unit="pps",
                    description="Ignored CNPs mean congestion control is off on that priority (alert FabricscopeRoceCnpIgnored).",
                ),
                Panel(
                    "InfiniBand transmit wait (ticks/s)",
                    [
                        Query(
                            f"rate(fabricscope_rdma_port_transmit_wait_total{{{D}}}[$__rate_interval])",
                            "{{instance}} {{device}}/{{port}}",
                        )
                    ],
                    description="Ticks with data to send but no credits: the InfiniBand congestion signal.",
                ),
                Panel(
                    "RDMA retransmissions and timeouts /s",
                    [
                        Query(
                            f"rate(fabricscope_rdma_local_ack_timeouts_total{{{D}}}[$__rate_interval])",
                            "{{device}}/{{port}} ack timeouts",
                        ),
                        Query(
                            f"rate(fabricscope_rdma_out_of_sequence_packets_received_total{{{D}}}[$__rate_interval])",
                            "{{device}}/{{port}} out of sequence",
                        ),
                        Query(
                            f"rate(fabricscope_rdma_packet_sequence_errors_total{{{D}}}[$__rate_interval])",
                            "{{device}}/{{port}} NAK seq errors",
                        ),
                        Query(
                            f"rate(fabricscope_roce_adaptive_retransmissions_total{{{D}}}[$__rate_interval])",
                            "{{device}}/{{port}} adaptive retrans",
                        ),
                    ],
                    description="Loss shows up here first: timeouts are the precursor of NCCL completion status 12.",
                ),
                Panel(
                    "TCP retransmitted share of segments sent",
                    [
                        Query(
                            f"rate(fabricscope_tcp_retransmitted_segments_total{{{I}}}[$__rate_interval]) "
                            f"/ rate(fabricscope_tcp_sent_segments_total{{{I}}}[$__rate_interval])",
                            "{{instance}}",
                        )
                    ],
                    unit="percentunit",
                ),
                Panel(
                    "TCP timeouts and resets /s",
                    [
                        Query(
                            f"rate(fabricscope_tcp_timeouts_total{{{I}}}[$__rate_interval])",
                            "{{instance}} timeouts",
                        ),
                        Query(
                            f"rate(fabricscope_tcp_resets_sent_total{{{I}}}[$__rate_interval])",
                            "{{instance}} resets sent",
                        ),
                        Query(
                            f"rate(fabricscope_tcp_established_resets_total{{{I}}}[$__rate_interval])",
                            "{{instance}} established resets",
                        ),
                    ],
                ),
                Panel(
                    "Cloud NIC allowance exceeded /s (ENA)",
                    [
                        Query(
                            f"rate(fabricscope_nic_bw_in_allowance_exceeded_total{{{N}}}[$__rate_interval])",
                            "{{instance}} {{netdev}} bw in",
                        ),
                        Query(
                            f"rate(fabricscope_nic_bw_out_allowance_exceeded_total{{{N}}}[$__rate_interval])",
                            "{{instance}} {{netdev}} bw out",
                        ),
                        Query(
                            f"rate(fabricscope_nic_pps_allowance_exceeded_total{{{N}}}[$__rate_interval])",
                            "{{instance}} {{netdev}} pps",
                        ),
                    ],
                    unit="pps",
                    width=24,
                    height=6,
                    description="TCP-only cloud nodes: packets the hypervisor queued or dropped because the instance exceeded its bandwidth or packet-rate allowance.",
                ),
            ],
        ),
        Row(
            "PFC / ECN",
            [
                Panel(
                    "PFC pause frames received /s (peer pauses us)",
                    [
                        Query(
                            f"rate(fabricscope_pfc_pause_frames_received_total{{{N}}}[$__rate_interval])",
                            "{{instance}} {{netdev}} prio {{priority}}",
                        )
                    ],
                    unit="pps",
                ),
                Panel(
                    "PFC pause frames sent /s (we pause the peer)",
                    [
                        Query(
                            f"rate(fabricscope_pfc_pause_frames_transmitted_total{{{N}}}[$__rate_interval])",
                            "{{instance}} {{netdev}} prio {{priority}}",
                        )
                    ],
                    unit="pps",
                ),
                _pfc_paused(
                    "Share of time paused, per priority",
                    description="Above 50% for minutes is a pause storm in the making (alert FabricscopePfcPauseStorm).",
                ),
                Panel(
                    "Pause storms and discards (per interval)",
                    [
                        Query(
                            f"increase(fabricscope_pfc_pause_storm_warning_events_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} storm warning",
                        ),
                        Query(
                            f"increase(fabricscope_pfc_pause_storm_error_events_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} storm ERROR",
                        ),
                        Query(
                            f"increase(fabricscope_prio_discards_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} prio {{priority}} discards",
                        ),
                        Query(
                            f"increase(fabricscope_prio_buffer_discards_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} prio {{priority}} buffer discards",
                        ),
                        Query(
                            f"increase(fabricscope_nic_phy_received_discards_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} rx discards (phy)",
                        ),
                    ],
                ),
                Panel(
                    "Traffic per priority (bit/s)",
                    [
                        Query(
                            f"rate(fabricscope_prio_transmitted_bytes_total{{{N}}}[$__rate_interval]) * 8",
                            "{{netdev}} prio {{priority}} tx",
                        ),
                        Query(
                            f"-rate(fabricscope_prio_received_bytes_total{{{N}}}[$__rate_interval]) * 8",
                            "{{netdev}} prio {{priority}} rx",
                        ),
                    ],
                    unit="bps",
                    description="RoCE traffic should sit on the PFC-enabled priority; traffic on priority 0 means no DSCP/PCP mapping is in effect.",
                ),
                Panel(
                    "QoS configuration",
                    [
                        Query(f"fabricscope_pfc_enabled{{{N}}} == 1", "PFC on", instant=True),
                        Query(f"fabricscope_roce_ecn_np_enabled{{{N}}} == 1", "ECN NP on", instant=True),
                        Query(f"fabricscope_roce_ecn_rp_enabled{{{N}}} == 1", "ECN RP on", instant=True),
                        Query(f"fabricscope_qos_trust_info{{{N}}}", "trust", instant=True),
                        Query(f"fabricscope_netdev_mtu_bytes{{{N}}}", "MTU", instant=True),
                    ],
                    kind="table",
                    description="Priorities with PFC and ECN (NP: CNP generation, RP: rate reduction) enabled, trust mode and MTU per netdev.",
                ),
            ],
        ),
        Row(
            "PCIe",
            [
                Panel(
                    "PCIe links below their maximum",
                    [
                        Query(
                            f"count((fabricscope_pcie_link_width_lanes{{{I}}} < fabricscope_pcie_max_link_width_lanes{{{I}}}) "
                            f'or (fabricscope_pcie_link_speed_transfers_per_second{{{I},kind="nic"}} '
                            f'< fabricscope_pcie_max_link_speed_transfers_per_second{{{I},kind="nic"}})) or vector(0)',
                            instant=True,
                        )
                    ],
                    kind="stat",
                    width=6,
                    thresholds=[(None, "green"), (1, "orange")],
                    description="NICs below maximum width or speed, GPUs below maximum width (idle GPUs lower their speed on purpose).",
                ),
                Panel(
                    "PCIe link width and speed",
                    [
                        Query(f"fabricscope_pcie_link_width_lanes{{{I}}}", "width", instant=True),
                        Query(f"fabricscope_pcie_max_link_width_lanes{{{I}}}", "max width", instant=True),
                        Query(
                            f"fabricscope_pcie_link_speed_transfers_per_second{{{I}}} / 1e9",
                            "GT/s",
                            instant=True,
                        ),
                        Query(
                            f"fabricscope_pcie_max_link_speed_transfers_per_second{{{I}}} / 1e9",
                            "max GT/s",
                            instant=True,
                        ),
                    ],
                    kind="table",
                    width=18,
                ),
                Panel(
                    "NIC PCIe trouble (per interval)",
                    [
                        Query(
                            f"increase(fabricscope_nic_pcie_outbound_buffer_overflows_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} outbound buffer overflow",
                        ),
                        Query(
                            f"increase(fabricscope_nic_pcie_rx_signal_integrity_errors_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} rx signal integrity",
                        ),
                        Query(
                            f"increase(fabricscope_nic_pcie_tx_signal_integrity_errors_total{{{N}}}[$__rate_interval])",
                            "{{netdev}} tx signal integrity",
                        ),
                    ],
                    width=24,
                ),
            ],
        ),
        Row(
            "NCCL",
            [
                Panel(
                    "NCCL fell back to sockets (per interval)",
                    [
                        Query(
                            f"increase(fabricscope_nccl_socket_fallbacks_total{{{I}}}[$__rate_interval])",
                            "{{instance}}",
                        )
                    ],
                    kind="timeseries",
                    width=8,
                    description="Ranks that chose 'Using network Socket': TCP instead of RDMA.",
                ),
                Panel(
                    "NCCL WARNs by kind (per interval)",
                    [
                        Query(
                            f"increase(fabricscope_nccl_warnings_total{{{I}}}[$__rate_interval]) > 0",
                            "{{instance}} {{kind}}",
                        )
                    ],
                    width=8,
                ),
                Panel(
                    "NCCL completion errors by status (per interval)",
                    [
                        Query(
                            f"increase(fabricscope_nccl_completion_errors_total{{{I}}}[$__rate_interval]) > 0",
                            "{{instance}} {{status}} {{status_name}}",
                        )
                    ],
                    width=8,
                    description="12 RETRY_EXC_ERR: ACK timeouts; 4 LOC_PROT_ERR: ACS/GPUDirect; 5 WR_FLUSH_ERR follows an earlier error.",
                ),
                Panel(
                    "NCCL log lines read /s and files followed",
                    [
                        Query(
                            f"rate(fabricscope_nccl_log_lines_total{{{I}}}[$__rate_interval])",
                            "{{instance}} lines/s",
                        ),
                        Query(f"fabricscope_nccl_log_files{{{I}}}", "{{instance}} files"),
                    ],
                    width=24,
                    height=6,
                ),
            ],
        ),
        Row(
            "Findings",
            [
                Panel(
                    "Doctor findings by severity",
                    [
                        Query(
                            f'sum by (severity) (fabricscope_findings{{{I},severity=~"warn|fail"}})',
                            "{{severity}}",
                            instant=True,
                        )
                    ],
                    kind="stat",
                    width=6,
                    thresholds=[(None, "green"), (1, "orange")],
                ),
                Panel(
                    "Warn and fail findings",
                    [Query(f'fabricscope_finding{{{I},severity=~"warn|fail"}}', instant=True)],
                    kind="table",
                    width=18,
                    description="Run `fabricscope doctor` on the node for each finding's evidence and fix.",
                ),
            ],
        ),
        Row(
            "Exporter",
            [
                Panel(
                    "Collector success",
                    [
                        Query(
                            f"fabricscope_collector_success{{{I}}}",
                            "{{instance}} {{collector}}",
                            instant=True,
                        )
                    ],
                    kind="table",
                    width=8,
                    description="0: a source was missing, garbled or stale (see the exporter's log).",
                ),
                Panel(
                    "Collector duration",
                    [Query(f"fabricscope_collector_duration_seconds{{{I}}}", "{{instance}} {{collector}}")],
                    unit="s",
                    width=8,
                ),
                Panel(
                    "Background data age",
                    [Query(f"fabricscope_refresh_age_seconds{{{I}}}", "{{instance}} {{task}}")],
                    unit="s",
                    width=8,
                ),
            ],
        ),
    ]


def _panel_json(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    targets = []
    for i, query in enumerate(panel.queries):
        target: dict[str, Any] = {"datasource": DS, "expr": query.expr, "refId": chr(ord("A") + i)}
        if query.legend:
            target["legendFormat"] = query.legend
        if query.instant or panel.kind == "table":
            target["instant"] = True
            target["range"] = False
        if panel.kind == "table":
            target["format"] = "table"
        targets.append(target)
    steps = [{"color": color, "value": value} for value, color in (panel.thresholds or [(None, "green")])]
    out: dict[str, Any] = {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "datasource": DS,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {
            "defaults": {"unit": panel.unit, "thresholds": {"mode": "absolute", "steps": steps}},
            "overrides": panel.overrides,
        },
        "options": {},
    }
    if panel.description:
        out["description"] = panel.description
    if panel.kind == "table":
        out["transformations"] = [{"id": "merge", "options": {}}]
    if panel.kind == "stat":
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"}
    return out


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def build_dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    pid = 1
    y = 0
    for row in _rows():
        panels.append(
            {
                "id": pid,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": WIDTH, "x": 0, "y": y},
                "panels": [],
            }
        )
        pid += 1
        y += 1
        x = 0
        line_height = 0
        for panel in row.panels:
            if x + panel.width > WIDTH:
                x = 0
                y += line_height
                line_height = 0
            panels.append(_panel_json(panel, pid, x, y))
            pid += 1
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    return {
        "uid": UID,
        "title": TITLE,
        "description": "RDMA link health, RoCE congestion control, PFC/ECN, PCIe, NCCL and doctor findings from the fabricscope exporter.",
        "tags": ["fabricscope", "rdma", "roce", "infiniband", "nccl"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "refresh": 1,
                    "hide": 0,
                },
                _variable("instance", "Node", "label_values(fabricscope_exporter_build_info, instance)"),
                _variable(
                    "device",
                    "RDMA device",
                    'label_values(fabricscope_rdma_port_info{instance=~"$instance"}, device)',
                ),
                _variable(
                    "netdev",
                    "Interface",
                    'label_values(fabricscope_netdev_up{instance=~"$instance"}, netdev)',
                ),
            ]
        },
        "panels": panels,
    }


def render() -> str:
    return json.dumps(build_dashboard(), indent=2) + "\n"


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression in a dashboard: panel targets and query variables."""
    found = []
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            if target.get("expr"):
                found.append(target["expr"])
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var.get("query")
            found.append(query.get("query") if isinstance(query, dict) else query)
    return found


def first_row_text(dashboard: dict[str, Any] | None = None) -> str:
    """The dashboard's first row as text, from the JSON Grafana imports: each panel's title, kind,
    width, unit and thresholds, then its queries with their legends. docs/monitoring.md shows it
    (a test keeps the two equal); it is the panels' definition, not a picture of them."""
    panels = (dashboard or build_dashboard())["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    end = rows[1] if len(rows) > 1 else len(panels)
    lines = [f"Row: {panels[rows[0]]['title']}"]
    for panel in panels[rows[0] + 1 : end]:
        defaults = panel["fieldConfig"]["defaults"]
        steps = defaults["thresholds"]["steps"]
        bands = " | ".join(
            f"{s['color']} from {s['value']:g}" if s["value"] is not None else s["color"] for s in steps
        )
        grid = panel["gridPos"]
        lines += [
            "",
            f"[{panel['title']}]",
            f"  {panel['type']}, columns {grid['x']}-{grid['x'] + grid['w']} of {WIDTH}, unit {defaults['unit']}, "
            f"thresholds: {bands}",
        ]
        for target in panel["targets"]:
            lines.append(f"  {target.get('legendFormat', '')!r}:")
            lines.append(f"      {target['expr']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(first_row_text() if sys.argv[1:] == ["--first-row"] else render())
