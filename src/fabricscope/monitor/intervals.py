"""The exporter's background intervals and their accepted ranges, declared once (issue 26 item 5):
``ExporterOptions`` validates with them and ``fabricscope exporter``'s options say and check the
same ranges. Free of prometheus_client, so the CLI reads it without the ``exporter`` extra."""

from __future__ import annotations

from fabricscope.units import Bounds

INTERVAL_BOUNDS: dict[str, Bounds] = {
    "doctor_interval_s": Bounds(10.0, 86400, off=0.0, unit="seconds"),
    "ethtool_interval_s": Bounds(1.0, 3600, unit="seconds"),
    "topology_interval_s": Bounds(5.0, 86400, unit="seconds"),
}


def option_name(field: str) -> str:
    """``ethtool_interval_s`` -> ``--ethtool-interval``."""
    return "--" + field.removesuffix("_s").replace("_", "-")
