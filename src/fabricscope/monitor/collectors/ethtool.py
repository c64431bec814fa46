"""PFC pause frames and durations per priority, pause storms, discards per priority and the
physical port's drop counters, from ``ethtool -S`` output refreshed in the background."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from fabricscope.host import Root
from fabricscope.host.ethtool import EthtoolStatsResult, ethtool_commands, read_ethtool_stats_result
from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Families, ScrapeContext, note_task
from fabricscope.monitor.names import PORT_GAUGES, PORT_STATS, PRIO_STATS
from fabricscope.monitor.topology import Topology

_PRIO = re.compile(r"^(rx|tx)_prio([0-7])_(\w+)\Z")

EthtoolSnapshot = dict[str, EthtoolStatsResult]
ETHTOOL_TIMEOUT_S = 5.0  # all netdevs at once: one hung ethtool costs this once, not per netdev


def poll_ethtool(root: Root, topology: Callable[[], Topology | None]) -> EthtoolSnapshot:
    """``ethtool -S`` of every reported netdev (commands: background thread only)."""
    topo = topology()
    if topo is None:
        return {}
    scoped = dataclasses.replace(root, problems=[])
    with scoped.commands_ahead([ethtool_commands(name)[0] for name in topo.netdevs], ETHTOOL_TIMEOUT_S):
        return {name: read_ethtool_stats_result(scoped, name, ETHTOOL_TIMEOUT_S) for name in topo.netdevs}


class EthtoolCollector:
    name = "ethtool"
    uses_topology = True

    def __init__(self, task: Periodic[EthtoolSnapshot]) -> None:
        self.task = task

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        outcome = self.task.outcome
        note_task(
            ctx,
            "ethtool -S",
            self.task,
            failed="last refresh failed",
            stale="statistics are {age:.0f} s old (refresh stuck or failing)",
        )
        age = self.task.age_s()
        if age is not None:
            out.gauge(
                "ethtool_stats_age_seconds",
                "Age of the ethtool statistics shown (they are refreshed in the background).",
                {},
                age,
            )
        for netdev, result in (outcome.value or {}).items():
            if result.problem is not None:
                ctx.root.note(f"ethtool -S {netdev}", result.problem)
            if not result.stats:
                continue
            for stat, value in result.stats.items():
                match = _PRIO.match(stat)
                if match is not None:
                    mapped = PRIO_STATS.get((match.group(1), match.group(3)))
                    if mapped is not None:
                        out.counter(
                            mapped.name,
                            mapped.help,
                            {"netdev": netdev, "priority": match.group(2)},
                            value * mapped.scale,
                        )
                    continue
                mapped = PORT_STATS.get(stat)
                if mapped is not None:
                    out.counter(mapped.name, mapped.help, {"netdev": netdev}, value * mapped.scale)
                gauge = PORT_GAUGES.get(stat)
                if gauge is not None:
                    out.gauge(gauge.name, gauge.help, {"netdev": netdev}, value * gauge.scale)
