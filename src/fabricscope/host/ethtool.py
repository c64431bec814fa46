"""ethtool outputs: statistics (-S), offload features (-k) and transceiver data (-m)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricscope.host.root import Root

# ethtool -S statistics of a RoCE (mlx5) port that count link faults and drops and stay at zero on
# a healthy one: the "Error" counters of the kernel's mlx5 counters.rst
# (Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst). One definition:
# doctor's link.phy_errors judges them and the exporter (monitor/names.py) exports them with
# these meanings as help text.
LINK_ERROR_STATS: dict[str, str] = {
    "rx_crc_errors_phy": "Frames received with a bad CRC.",
    "rx_symbol_err_phy": "Symbol errors on the physical port.",
    "link_down_events_phy": "Times the physical link went down.",
    "rx_discards_phy": "Received packets dropped for lack of buffers on the physical port.",
    "rx_out_of_buffer": "Packets dropped because a receive queue had no software buffer.",
    "tx_pause_storm_warning_events": "Times the device kept sending pause frames for a long time.",
    "tx_pause_storm_error_events": "Pause storms that reached the timeout: pause transmission was disabled (drops follow).",
}
PRIO_DISCARDS_HELP = "Packets discarded for lack of receive buffers."  # rx_prio<N>_discards
_PRIO_DISCARDS = re.compile(r"^rx_prio[0-7]_discards\Z")
_STAT = re.compile(r"^\s*([^:]+?):\s*(-?\d+)\s*$")
_TEMP = re.compile(r"(-?\d+(?:\.\d+)?)\s*degrees C")


@dataclass(frozen=True)
class ModuleInfo:
    """What ``ethtool -m`` says about a transceiver."""

    identifier: str | None
    temperature_c: float | None
    alarms: tuple[str, ...]  # names of alarm/warning flags that are On
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EthtoolData:
    stats: dict[str, int] | None = None  # None: ethtool -S not available
    features: dict[str, bool] | None = None
    module: ModuleInfo | None = None


def parse_stats(text: str) -> dict[str, int]:
    stats: dict[str, int] = {}
    for line in text.splitlines():
        match = _STAT.match(line)
        if match:
            stats[match.group(1).strip()] = int(match.group(2))
    return stats


def parse_features(text: str) -> dict[str, bool]:
    features: dict[str, bool] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if not sep or " " in name:
            continue
        state = value.split()
        if state and state[0] in ("on", "off"):
            features[name] = state[0] == "on"
    return features


def parse_module(text: str) -> ModuleInfo | None:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" : ")
        if not sep:
            key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[" ".join(key.split())] = value.strip()
    if not fields:
        return None
    temp = None
    for key, value in fields.items():
        if key.lower() == "module temperature":
            match = _TEMP.search(value)
            temp = float(match.group(1)) if match else None
    alarms = tuple(
        key
        for key, value in fields.items()
        if ("alarm" in key.lower() or "warning" in key.lower()) and value.lower() == "on"
    )
    return ModuleInfo(identifier=fields.get("Identifier"), temperature_c=temp, alarms=alarms, fields=fields)


def ethtool_commands(netdev: str) -> list[list[str]]:
    """What :func:`read_ethtool` runs for one netdev: statistics, features, transceiver."""
    return [["ethtool", "-S", netdev], ["ethtool", "-k", netdev], ["ethtool", "-m", netdev]]


def read_ethtool(root: Root, netdev: str) -> EthtoolData:
    stats_cmd, features_cmd, module_cmd = ethtool_commands(netdev)
    stats = features = module = None
    result = root.run(stats_cmd)
    if result.ok:
        stats = parse_stats(result.stdout)
    result = root.run(features_cmd)
    if result.ok:
        features = parse_features(result.stdout)
    result = root.run(module_cmd)
    if result.ok:
        module = parse_module(result.stdout)
    return EthtoolData(stats=stats, features=features, module=module)


@dataclass(frozen=True)
class EthtoolStatsResult:
    """``ethtool -S`` of one netdev. ``stats`` is None when there is nothing to show; ``problem``
    says why when that is a fault (garbled output, command failed), and is None when the source is
    simply not there (not captured in a snapshot)."""

    netdev: str
    stats: dict[str, int] | None
    problem: str | None = None


def read_ethtool_stats_result(root: Root, netdev: str, timeout_s: float | None = None) -> EthtoolStatsResult:
    """``ethtool -S NETDEV`` parsed, with the reason when it failed. Runs a command: an exporter
    calls it from a background thread, never from a scrape."""
    result = root.run(ethtool_commands(netdev)[0], timeout_s=timeout_s)
    if not result.available:
        if not root.is_live and result.reason == "not captured in snapshot":
            return EthtoolStatsResult(netdev, None)
        return EthtoolStatsResult(netdev, None, str(result.reason))
    if result.rc != 0:
        return EthtoolStatsResult(netdev, None, f"exit status {result.rc}")
    stats = parse_stats(result.stdout)
    if not stats:
        return EthtoolStatsResult(netdev, None, "no statistics recognised in output")
    return EthtoolStatsResult(netdev, stats)


def read_ethtool_stats(root: Root, netdev: str) -> dict[str, int] | None:
    return read_ethtool_stats_result(root, netdev).stats


def link_error_stats(stats: dict[str, int]) -> dict[str, int]:
    """The link-fault and drop statistics among ``ethtool -S`` values (LINK_ERROR_STATS and
    rx_prio<N>_discards), in the order ethtool printed them."""
    return {k: v for k, v in stats.items() if k in LINK_ERROR_STATS or _PRIO_DISCARDS.match(k)}
