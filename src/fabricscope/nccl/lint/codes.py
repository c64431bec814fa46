"""The codes of `nccl lint`, as one table (ruff's rule registry is the model), and what every rule
shares: the context it reads and the one way it builds a finding.

``CODES[code] = (severity, summary)``: the severity is the worst one the code reports (a rule may
report less, e.g. NCCL001 is a warn with a near name and an info without); the summary is the line
docs/nccl.md's code table shows. A rule emits a code only through :func:`finding`, which refuses a
code that is not in the table or a severity above the table's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import Inventory
from fabricscope.nccl.settings import Setting, SettingSet

CODES: dict[str, tuple[str, str]] = {
    "NCCL001": ("warn", "unknown variable (with the nearest real name when one is close)"),
    "NCCL002": ("warn", "deprecated, renamed or removed variable"),
    "NCCL003": ("fail", "value of the wrong type or out of range (fail where NCCL rejects it at init)"),
    "NCCL004": ("info", "value uses shell expansion and was not checked"),
    "NCCL005": ("info", "a setting hidden by another source (environment over NCCL_CONF_FILE over /etc/nccl.conf)"),
    "NCCL006": ("warn", "a line of an env or conf file that is not NAME=VALUE"),
    "NCCL007": ("warn", "NCCL_CONF_FILE names a file that does not exist on the node"),
    "NCCL010": ("fail", "NCCL_IB_HCA matches no RDMA device on the node"),
    "NCCL011": ("fail", "NCCL_IB_HCA selects a port that is not ACTIVE"),
    "NCCL012": ("warn", "prefix trap: an NCCL_IB_HCA token also matches longer device names (mlx5_1 -> mlx5_10..)"),
    "NCCL013": ("warn", "the selected RDMA ports mix InfiniBand and RoCE"),
    "NCCL014": ("fail", "NCCL_IB_HCA names a port the device does not have"),
    "NCCL015": ("warn", "NCCL_IB_HCA unset on a node whose active ports mix link layers"),
    "NCCL016": ("fail", "a blank in an NCCL_IB_HCA / NCCL_SOCKET_IFNAME list: NCCL keeps it, so that entry matches nothing"),
    "NCCL020": ("fail", "NCCL_SOCKET_IFNAME matches no interface"),
    "NCCL021": ("fail", "NCCL_SOCKET_IFNAME selects an interface that is down or has no address"),
    "NCCL022": ("warn", "prefix trap: an NCCL_SOCKET_IFNAME token also matches other interfaces"),
    "NCCL023": ("warn", "NCCL_SOCKET_IFNAME selects loopback or a container/virtual interface"),
    "NCCL030": ("info", "NCCL_IB_GID_INDEX on a node without RoCE ports (ignored)"),
    "NCCL031": ("fail", "NCCL_IB_GID_INDEX points at an empty GID slot"),
    "NCCL032": ("fail", "NCCL_IB_GID_INDEX points at a RoCE v1 entry"),
    "NCCL033": ("fail", "NCCL_IB_GID_INDEX points at a link-local (fe80::) entry"),
    "NCCL034": ("fail", "the right GID index differs between NICs"),
    "NCCL035": ("info", "NCCL_IB_GID_INDEX set where NCCL's automatic choice (2.21+) is the better default"),
    "NCCL036": ("fail", "NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM or NCCL_IB_ADDR_RANGE leave a selected RoCE port without a GID NCCL may use"),
    "NCCL037": ("warn", "NCCL older than 2.21 on RoCE with NCCL_IB_GID_INDEX unset: it uses index 0, not the RoCE v2 IPv4 entry"),
    "NCCL040": ("info", "NCCL_IB_TC on a node without RoCE ports (ignored)"),
    "NCCL041": ("fail", "NCCL_IB_TC's DSCP maps to a priority without PFC"),
    "NCCL042": ("warn", "trust mode pcp: the DSCP in NCCL_IB_TC does not choose the priority"),
    "NCCL043": ("fail", "ECN bits of NCCL_IB_TC disagree with the ECN setup"),
    "NCCL044": ("info", "NCCL_IB_TC decoded (DSCP, ECN, priority)"),
    "NCCL045": ("warn", "NCCL_IB_TC unset on RoCE with PFC: RDMA traffic goes to priority 0"),
    "NCCL050": ("info", "NCCL_NET_GDR_LEVEL numeric value explained"),
    "NCCL051": ("warn", "NCCL_NET_GDR_LEVEL that the PCIe topology makes useless or harmful (below P2C on Grace/C2C nodes)"),
    "NCCL052": ("info", "GPUDirect RDMA needs nvidia-peermem or DMA-BUF"),
    "NCCL060": ("fail", "NCCL_IB_DISABLE=1 on a node with working RDMA: forces TCP sockets"),
    "NCCL061": ("fail", "NCCL_NET=Socket on a node with working RDMA: forces TCP sockets"),
    "NCCL062": ("warn", "P2P or SHM transport disabled (a debugging setting left in)"),
    "NCCL063": ("warn", "NCCL_ALGO or NCCL_PROTO restricted to a list (warn) or excluding one (info): a debugging setting left in"),
    "NCCL064": ("warn", "NCCL_DEBUG=INFO or TRACE"),
    "NCCL065": ("info", "another setting from the guide's Debugging section"),
    "NCCL070": ("warn", "NCCL_IB_TIMEOUT in seconds, with its retry count"),
    "NCCL071": ("info", "NCCL_IB_QPS_PER_CONNECTION against the fabric (ECMP entropy vs adaptive routing)"),
    "NCCL072": ("info", "RDMA settings on a node without RDMA devices (ignored)"),
    "NCCL080": ("fail", "AWS EFA: FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA, NCCL_NET_PLUGIN and NCCL_NET against an EFA node (aws-ofi-nccl)"),
}


@dataclass
class LintContext:
    settings: SettingSet
    inventory: Inventory | None = None
    nccl_version: tuple[int, ...] | None = None  # None: assume a current NCCL
    production: bool = True


def finding(code: str, severity: str, setting: Setting | None, subject: str, message: str, fix: str | None = None, **evidence: Any) -> Finding:
    """A lint finding: the setting's value and source as evidence, then the rule's own items."""
    worst, _ = CODES[code]
    level = Severity(severity)
    if level.rank > Severity(worst).rank:
        raise ValueError(f"{code} is registered as at most {worst}, not {severity}")
    ev: dict[str, Any] = {}
    if setting is not None:
        ev["value"] = setting.value
        ev["source"] = setting.where
    ev.update({k: v for k, v in evidence.items() if v is not None})
    return Finding(code, level, subject, message, ev, fix)


def names(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def code_table() -> str:
    """docs/nccl.md's code table, generated from :data:`CODES`."""
    rows = ["| code | worst severity | finding |", "|---|---|---|"]
    rows += [f"| {code} | {severity} | {summary} |" for code, (severity, summary) in CODES.items()]
    return "\n".join(rows)
