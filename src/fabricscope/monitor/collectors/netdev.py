"""Network interfaces: MTU, speed, state, and the RoCE QoS configuration per priority (ECN
enables from sysfs each scrape; PFC and trust from mlnx_qos/dcb, refreshed with the topology)."""

from __future__ import annotations

from fabricscope.host.netclass import read_net_device
from fabricscope.monitor.collectors.base import Families, ScrapeContext

MBPS_TO_BYTES_PER_S = 1e6 / 8


class NetdevCollector:
    name = "netdev"
    uses_topology = True

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        topo = ctx.topology
        for name in topo.netdevs:
            status = read_net_device(ctx.root, name, identity=False)
            if status is None:
                continue
            labels = {"netdev": name}
            out.gauge("netdev_mtu_bytes", "Interface MTU in bytes.", labels, status.mtu_bytes)
            if status.speed_mbps is not None:
                out.gauge(
                    "netdev_speed_bytes_per_second",
                    "Negotiated interface speed in bytes per second (absent when unknown or down).",
                    labels,
                    status.speed_mbps * MBPS_TO_BYTES_PER_S,
                )
            out.gauge(
                "netdev_up",
                "1 when the interface's operational state is up.",
                labels,
                1 if status.operstate == "up" else 0,
            )
            for family, help_text, states in (
                (
                    "roce_ecn_np_enabled",
                    "RoCE ECN notification point (CNP generation) enabled on this priority (MLNX_OFED sysfs).",
                    status.ecn_np_enabled,
                ),
                (
                    "roce_ecn_rp_enabled",
                    "RoCE ECN reaction point (rate reduction on CNP) enabled on this priority (MLNX_OFED sysfs).",
                    status.ecn_rp_enabled,
                ),
            ):
                for prio, enabled in sorted(states.items()):
                    out.gauge(family, help_text, {"netdev": name, "priority": str(prio)}, 1 if enabled else 0)
            qos = topo.qos.get(name)
            trust = status.qos_trust or (qos.trust if qos is not None else None)
            if trust:
                out.gauge(
                    "qos_trust_info",
                    "Which header field selects the priority of received packets (pcp or dscp); value is always 1.",
                    {"netdev": name, "trust": trust},
                    1,
                )
            if qos is not None and qos.pfc_enabled is not None:
                for prio, enabled in enumerate(qos.pfc_enabled):
                    out.gauge(
                        "pfc_enabled",
                        "Priority flow control enabled on this priority (from mlnx_qos or dcb, refreshed with the topology).",
                        {"netdev": name, "priority": str(prio)},
                        1 if enabled else 0,
                    )
