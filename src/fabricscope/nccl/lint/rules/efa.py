"""`nccl lint` rules for AWS EFA: NCCL reaches EFA only through a net plugin (aws-ofi-nccl over
libfabric), so the libfabric and plugin settings a job carries decide whether it gets RDMA.

Sources: NCCL v2.30.7-1 src/transport/net_ib/init.cc skips ports whose link layer is neither
InfiniBand nor Ethernet (EFA's is neither: sysfs says "Unknown"), and src/plugin/net.cc loads
NCCL_NET_PLUGIN (``none`` loads no plugin; unset loads libnccl-net.so, which aws-ofi-nccl
installs); aws-ofi-nccl doc/efa-env-var.md for FI_PROVIDER and FI_EFA_USE_DEVICE_RDMA; libfabric
fi_efa(7) for FI_EFA_USE_DEVICE_RDMA=0 (the device's RDMA features are ignored).
"""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.findings import Finding
from fabricscope.host.inventory import Inventory
from fabricscope.nccl.lint.codes import LintContext, finding
from fabricscope.nccl.lint.codes import names as _names

# Non-NCCL variables the job sources are read for: libfabric (FI_*) and aws-ofi-nccl (OFI_NCCL_*).
EFA_PREFIXES = ("FI_", "OFI_NCCL_")


def efa_ports(inv: Inventory) -> list[str]:
    """Ports of EFA devices, as the host model recognises them (the efa driver, or the link layer
    EFA reports: neither InfiniBand nor Ethernet)."""
    return [f"{d.name}:{p.port}" for d in inv.rdma_devices for p in d.ports if d.is_efa or p.is_unspecified]


def check_efa(ctx: LintContext) -> Iterator[Finding]:
    st = ctx.settings
    efa = efa_ports(ctx.inventory) if ctx.inventory is not None else []
    on = f" on this EFA node ({_names(efa, 4)})" if efa else ""
    s = st.effective.get("FI_PROVIDER")
    if s is not None and s.value.strip().lower() == "efa":
        yield finding(
            "NCCL080",
            "info",
            s,
            s.name,
            "FI_PROVIDER=efa is needed only with aws-ofi-nccl 1.5.0 and older; newer plugins pick the EFA provider themselves",
            "remove it with aws-ofi-nccl >= 1.6",
        )
    elif s is not None and s.value.strip():
        severity = "fail" if efa else "warn"
        yield finding(
            "NCCL080",
            severity,
            s,
            s.name,
            f"FI_PROVIDER={s.value} limits libfabric to that provider{on}: aws-ofi-nccl then runs over it instead of EFA's RDMA",
            "remove FI_PROVIDER (or set FI_PROVIDER=efa with aws-ofi-nccl <= 1.5.0)",
        )
    s = st.effective.get("FI_EFA_USE_DEVICE_RDMA")
    if s is not None and s.value.strip() == "1":
        yield finding(
            "NCCL080",
            "info",
            s,
            s.name,
            "FI_EFA_USE_DEVICE_RDMA=1 is not needed with libfabric >= 1.18.0 and aws-ofi-nccl >= 1.7.0 (harmless on p4/p5)",
            None,
        )
    elif s is not None and s.value.strip().lower() in ("0", "false", "no"):
        yield finding(
            "NCCL080",
            "warn",
            s,
            s.name,
            f"FI_EFA_USE_DEVICE_RDMA={s.value} makes libfabric ignore the EFA device's RDMA features{on}: no GPUDirect RDMA through EFA",
            "remove it",
        )
    s = st.effective.get("NCCL_NET_PLUGIN")
    if s is not None and efa and s.value.strip().lower() in ("none", ""):
        yield finding(
            "NCCL080",
            "fail",
            s,
            s.name,
            f"NCCL_NET_PLUGIN={s.value or '(empty)'} loads no net plugin{on}; NCCL's own IB transport skips EFA ports (their link layer is neither InfiniBand nor Ethernet), so inter-node traffic falls back to TCP sockets",
            "unset NCCL_NET_PLUGIN (NCCL then loads libnccl-net.so from aws-ofi-nccl) or set NCCL_NET_PLUGIN=ofi",
        )
    s = st.effective.get("NCCL_NET")
    if s is not None and efa and s.value.strip().lower() == "socket":
        yield finding(
            "NCCL080",
            "fail",
            s,
            s.name,
            f"NCCL_NET=Socket{on} forces TCP sockets instead of EFA through aws-ofi-nccl",
            "remove NCCL_NET (or set NCCL_NET='AWS Libfabric')",
        )
