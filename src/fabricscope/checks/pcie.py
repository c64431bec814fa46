"""PCIe and GPUDirect: link training, GPU-NIC locality, GPUDirect RDMA module, ACS, IOMMU."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated, not_evaluated_on
from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import Inventory
from fabricscope.host.iommu import TRANSLATED
from fabricscope.host.pci import bridges_between, switch_upstream_ports
from fabricscope.host.procfs import GPUDIRECT_MODULES
from fabricscope.nccl.node import gpudirect_without_module

IOMMU_PARAMS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict")
# Command-line flags that switch DMA translation on.
IOMMU_ON = (
    "intel_iommu=on",
    "amd_iommu=on",
    "amd_iommu=force_isolation",
    "iommu=nopt",
    "iommu.passthrough=0",
)
IOMMU_FIX = "add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX) and reboot"


def nic_addresses(inv: Inventory) -> list[tuple[str, str]]:
    """(name, PCI address) of every RDMA NIC, else of every physical NIC: the devices that feed
    the network."""
    nics = [(d.name, d.pci_address) for d in inv.rdma_devices if d.pci_address]
    if not nics:
        nics = [(n.name, n.pci_address) for n in inv.net_devices if n.pci_address and not n.is_loopback]
    return nics


def _link_text(width: int | None, speed_gts: float | None) -> str:
    """ "x16 32 GT/s", leaving out what sysfs did not say."""
    parts = [f"x{width}" if width is not None else "", f"{speed_gts:g} GT/s" if speed_gts is not None else ""]
    return " ".join(p for p in parts if p) or "unknown"


@check("pcie.link", "PCIe links trained at their maximum")
def pcie_link(ctx: CheckContext) -> Iterator[Finding]:
    """A NIC or GPU whose PCIe link trained below its maximum width (x8 instead of x16) or speed
    cannot feed its port: a 400G NIC needs Gen5 x16. GPUs lower their link speed when idle to
    save power, so a GPU below maximum speed (but at full width) is only reported as info."""
    inv = ctx.inventory
    subjects = [(name, addr, "NIC") for name, addr in nic_addresses(inv)]
    subjects += [(f"GPU{g.index}", g.pci_address, "GPU") for g in inv.gpus]
    good = 0
    unknown = []
    for name, addr, kind in subjects:
        dev = inv.pci.get(addr)
        if (
            dev is None
            or (dev.current_link_width is None and dev.current_link_speed_gts is None)
            or (dev.max_link_width is None and dev.max_link_speed_gts is None)
        ):
            unknown.append(name)
            continue
        evidence = {
            "pci": addr,
            "speed_gts": dev.current_link_speed_gts,
            "max_speed_gts": dev.max_link_speed_gts,
            "width": dev.current_link_width,
            "max_width": dev.max_link_width,
        }
        if not dev.link_degraded:
            good += 1
            continue
        narrow = (
            dev.current_link_width is not None
            and dev.max_link_width is not None
            and 0 < dev.current_link_width < dev.max_link_width
        )
        link = _link_text(dev.current_link_width, dev.current_link_speed_gts)
        best = _link_text(dev.max_link_width, dev.max_link_speed_gts)
        fix = f"reseat the {kind} or its riser, check the slot in the BIOS (bifurcation, Gen setting); `lspci -vv -s {addr} | grep LnkSta`"
        if narrow or kind == "NIC":
            yield Finding(
                "pcie.link",
                Severity.FAIL,
                f"{name} ({addr})",
                f"{kind} PCIe link at {link}, capable of {best}",
                evidence,
                fix,
            )
        else:  # degraded at full width: a GPU below its maximum speed
            yield Finding(
                "pcie.link",
                Severity.INFO,
                f"{name} ({addr})",
                f"GPU PCIe link at {link} (max {best}); normal when the GPU is idle, a fault if it stays so under load",
                evidence,
                "rerun doctor while a job runs; if still below maximum: " + fix,
            )
    uplinks: list[Finding] = []
    good_uplinks = _switch_uplinks(inv, [addr for _n, addr, _k in subjects], uplinks)
    yield from uplinks
    if unknown:
        yield not_evaluated_on(
            "pcie.link",
            "PCIe link width/speed unreadable for",
            unknown,
            "devices",
            "`lspci -vv | grep -E 'LnkCap|LnkSta'` as root",
        )
    if good:
        uplink_text = f" and {good_uplinks} PCIe switch uplink(s)" if good_uplinks else ""
        yield Finding(
            "pcie.link", Severity.PASS, "pcie", f"{good} NIC/GPU link(s){uplink_text} at full width and speed"
        )


def _switch_uplinks(inv: Inventory, addresses: list[str | None], out: list[Finding]) -> int:
    """Judge the upstream link of every PCIe switch above the NICs and GPUs: a switch uplink at x8
    halves what every device below it can move, however well the endpoints trained. Appends the
    findings to ``out``; returns how many uplinks are at full width and speed."""
    below: dict[str, list[str]] = {}
    for addr in addresses:
        dev = inv.pci.get(addr) if addr else None
        for usp in switch_upstream_ports(dev.upstream, inv.pci) if dev else []:
            below.setdefault(usp, []).append(addr)
    good = 0
    for usp, devices in sorted(below.items()):
        port = inv.pci.get(usp)
        if port is None or port.current_link_width is None:
            continue
        if not port.link_degraded:
            good += 1
            continue
        narrow = port.max_link_width is not None and 0 < port.current_link_width < port.max_link_width
        link = _link_text(port.current_link_width, port.current_link_speed_gts)
        best = _link_text(port.max_link_width, port.max_link_speed_gts)
        evidence = {
            "pci": usp,
            "width": port.current_link_width,
            "max_width": port.max_link_width,
            "speed_gts": port.current_link_speed_gts,
            "max_speed_gts": port.max_link_speed_gts,
            "below": devices,
        }
        fix = f"reseat the PCIe switch board/riser or its cable, check the slot's bifurcation and Gen setting in the BIOS; `lspci -vv -s {usp} | grep LnkSta`"
        message = (
            f"PCIe switch uplink at {link}, capable of {best}: shared by {len(devices)} device(s) below it"
        )
        if narrow:
            out.append(Finding("pcie.link", Severity.FAIL, f"switch uplink {usp}", message, evidence, fix))
        else:
            out.append(
                Finding(
                    "pcie.link",
                    Severity.WARN,
                    f"switch uplink {usp}",
                    message + " (power saving lowers idle links; a fault if it stays so under load)",
                    evidence,
                    fix,
                )
            )
    return good


@check("pcie.affinity", "Each GPU has a near NIC")
def affinity(ctx: CheckContext) -> Iterator[Finding]:
    """GPUDirect RDMA is only used up to NCCL_NET_GDR_LEVEL (PXB by default): a GPU whose nearest
    RDMA NIC is behind the CPU (PHB, NODE, SYS) stages every transfer through host memory, and a
    NIC on another NUMA node crosses the socket interconnect."""
    inv = ctx.inventory
    if not inv.rdma_devices or not inv.gpus:
        return
    good = 0
    for aff in inv.affinity:
        subject = f"GPU{aff.gpu_index} ({aff.gpu_pci})"
        evidence = {
            "nic": aff.nic,
            "distance": aff.distance,
            "gpu_numa": aff.gpu_numa,
            "nic_numa": aff.nic_numa,
        }
        if aff.distance is None:
            yield Finding(
                "pcie.affinity",
                Severity.INFO,
                subject,
                "GPU-NIC distance unknown (PCIe tree not readable)",
                evidence,
            )
            continue
        if aff.distance not in ("PIX", "PXB"):
            yield Finding(
                "pcie.affinity",
                Severity.WARN,
                subject,
                f"nearest RDMA NIC {aff.nic} is at {aff.distance}: GPUDirect RDMA will not be used by default",
                evidence,
                "install the GPU and NIC under one PCIe switch (see the server's topology guide), or accept staging through host memory",
            )
        elif aff.gpu_numa is not None and aff.nic_numa is not None and aff.gpu_numa != aff.nic_numa:
            yield Finding(
                "pcie.affinity",
                Severity.WARN,
                subject,
                f"GPU on NUMA node {aff.gpu_numa}, its NIC {aff.nic} on NUMA node {aff.nic_numa}",
                evidence,
                "check the BIOS NUMA settings and slot placement; pin the rank's CPU threads to the NIC's NUMA node",
            )
        else:
            good += 1
    if good == len(inv.affinity) and good:
        yield Finding(
            "pcie.affinity",
            Severity.PASS,
            "gpus",
            f"all {good} GPU(s) have a NIC at PIX/PXB on their NUMA node",
        )


@check("pcie.gpudirect", "GPUDirect RDMA module loaded")
def gpudirect(ctx: CheckContext) -> Iterator[Finding]:
    """With GPUs and RDMA NICs present, the NIC reads and writes GPU memory either through DMA-BUF
    (NCCL >= 2.13, the open GPU kernel module, kernel >= 5.12) or through nvidia_peermem (or the
    legacy nv_peer_mem; both need MLNX_OFED/DOCA's ib_core); with neither, every transfer bounces
    through host memory. A host that can use DMA-BUF is never told to load nvidia-peermem."""
    inv = ctx.inventory
    if not inv.gpus or not inv.rdma_devices:
        return
    if not inv.kernel.modules_known:
        yield Finding(
            "pcie.gpudirect", Severity.INFO, "kernel", "loaded modules unknown (/proc/modules unreadable)", {}
        )
        return
    loaded = [m for m in GPUDIRECT_MODULES if m in inv.kernel.modules]
    if loaded:
        yield Finding("pcie.gpudirect", Severity.PASS, "kernel", f"{loaded[0]} loaded", {"modules": loaded})
        return
    dmabuf, advice = gpudirect_without_module(inv)
    evidence = {"gpus": len(inv.gpus), "rdma_devices": len(inv.rdma_devices)}
    if dmabuf:
        yield Finding(
            "pcie.gpudirect",
            Severity.PASS,
            "kernel",
            f"no peer-memory module loaded, none needed: {advice}",
            evidence,
        )
        return
    yield Finding(
        "pcie.gpudirect",
        Severity.WARN,
        "kernel",
        "GPUs and RDMA NICs present but no GPUDirect RDMA module (nvidia_peermem / nv_peer_mem) is loaded",
        evidence,
        advice,
    )


@check("pcie.acs", "ACS off between GPU and NIC")
def acs(ctx: CheckContext) -> Iterator[Finding]:
    """ACS request/completion redirect on a PCIe switch port forces peer-to-peer traffic up to the
    root complex: GPUDirect RDMA between a GPU and a NIC under the same switch either slows down or
    fails (NCCL "local protection error", status 4). ACS control lives in the extended config
    space, which only root can read: without it the check says it was not evaluated."""
    inv = ctx.inventory
    if not inv.rdma_devices or not inv.gpus:
        return
    nic_pci = {d.name: d.pci_address for d in inv.rdma_devices}
    flagged: set[str] = set()
    checked: set[str] = set()
    unknown: set[str] = set()
    for aff in inv.affinity:
        gdev, ndev = inv.pci.get(aff.gpu_pci), inv.pci.get(nic_pci.get(aff.nic or ""))
        if gdev is None or ndev is None or aff.distance not in ("PIX", "PXB"):
            continue
        for bdf in bridges_between(gdev, ndev):
            bridge = inv.pci.get(bdf)
            if bridge is None or not bridge.capabilities_known:
                unknown.add(bdf)
                continue
            checked.add(bdf)
            if bridge.acs is not None and bridge.acs.redirects_p2p and bdf not in flagged:
                flagged.add(bdf)
                yield Finding(
                    "pcie.acs",
                    Severity.WARN,
                    bdf,
                    f"ACS redirect enabled on a bridge between GPU{aff.gpu_index} and {aff.nic}: GPUDirect traffic goes through the CPU root complex",
                    {
                        "request_redirect": bridge.acs.request_redirect,
                        "completion_redirect": bridge.acs.completion_redirect,
                    },
                    f"setpci -s {bdf} ECAP_ACS+0x6.w=0000 (at boot, e.g. a systemd unit), or disable ACS in the BIOS; keep it on in VMs that need isolation",
                )
    if unknown:
        truncated = sorted(b for b in unknown if (inv.pci.get(b) is not None and inv.pci[b].config_truncated))
        why = f"ACS control of {len(unknown)} bridge(s) between GPUs and NICs unknown: " + (
            "PCI config space truncated to its 64-byte header (reading it whole needs root)"
            if truncated
            else "config space unreadable"
        )
        yield not_evaluated(
            "pcie.acs",
            "pcie",
            why,
            {"bridges": sorted(unknown)},
            "run `fabricscope doctor` (or the snapshot) as root",
        )
    elif checked and not flagged:
        yield Finding(
            "pcie.acs",
            Severity.PASS,
            "pcie",
            f"no ACS redirect on the {len(checked)} bridge(s) between GPUs and their NICs",
        )


@check("pcie.iommu", "IOMMU in passthrough for GPUDirect")
def iommu(ctx: CheckContext) -> Iterator[Finding]:
    """With the IOMMU translating DMA for GPUs and NICs, NIC peer-to-peer access to GPU memory goes
    through translation and is slow or fails. The evidence is each device's IOMMU group type
    (/sys/kernel/iommu_groups/N/type: DMA or DMA-FQ translate, identity does not), not the kernel
    command line alone: the IOMMU can be on by default (CONFIG_INTEL_IOMMU_DEFAULT_ON, AMD) with
    no flag there. Without visible groups the command line decides only a warning; it never passes."""
    inv = ctx.inventory
    if not inv.rdma_devices or not inv.gpus:
        return
    cmdline = inv.kernel.cmdline
    args = cmdline.split() if cmdline is not None else []
    on = [a for a in args if a in IOMMU_ON]
    # Only the IOMMU parameters: the rest of /proc/cmdline may carry secrets, and doctor documents
    # travel (fleet collect, support tickets) unscrubbed.
    evidence: dict = {
        "cmdline": " ".join(a for a in args if a.split("=", 1)[0] in IOMMU_PARAMS)
        if cmdline is not None
        else None
    }
    if inv.iommu.visible:
        yield _iommu_by_groups(inv, on, evidence)
    elif cmdline is None:
        yield not_evaluated(
            "pcie.iommu", "kernel", "neither /sys/kernel/iommu_groups nor /proc/cmdline readable"
        )
    else:
        yield _iommu_by_cmdline(args, on, evidence)


def _iommu_by_groups(inv: Inventory, on: list[str], evidence: dict) -> Finding:
    """The verdict from the GPUs' and NICs' IOMMU group types: what the kernel really does."""
    devices = [(f"GPU{g.index}", g.pci_address) for g in inv.gpus] + [
        (d.name, d.pci_address) for d in inv.rdma_devices if d.pci_address
    ]
    types = {
        name: inv.iommu.type_of(dev.iommu_group) if (dev := inv.pci.get(addr)) else None
        for name, addr in devices
    }
    translated = {n: t for n, t in types.items() if t in TRANSLATED}
    evidence["group_types"] = {
        t: sorted(n for n, v in types.items() if v == t) for t in sorted({str(v) for v in types.values()})
    }
    if translated:
        kinds = "/".join(sorted(set(translated.values())))
        because = (
            f" ({' '.join(on)} on the command line)"
            if on
            else " with no IOMMU flag on the command line: it is on by default in this kernel"
        )
        return Finding(
            "pcie.iommu",
            Severity.WARN,
            "kernel",
            f"IOMMU translates DMA ({kinds}) for {len(translated)} GPU/NIC device(s){because}",
            evidence,
            IOMMU_FIX,
        )
    if not inv.iommu.types:
        return Finding("pcie.iommu", Severity.PASS, "kernel", "IOMMU off (no IOMMU groups)", evidence)
    if all(t == "identity" for t in types.values()):
        return Finding(
            "pcie.iommu",
            Severity.PASS,
            "kernel",
            "IOMMU in passthrough (identity) for every GPU and NIC",
            evidence,
        )
    odd = sorted(n for n, t in types.items() if t != "identity")
    return not_evaluated(
        "pcie.iommu", "kernel", f"IOMMU group type unknown or unusual for {', '.join(odd)}", evidence
    )


def _iommu_by_cmdline(args: list[str], on: list[str], evidence: dict) -> Finding:
    """Without visible groups the command line alone: a warning or a pass on iommu=pt, never a pass
    for its silence (the IOMMU can be on by default)."""
    passthrough = "iommu=pt" in args or "iommu.passthrough=1" in args
    if on and not passthrough:
        return Finding(
            "pcie.iommu",
            Severity.WARN,
            "kernel",
            f"IOMMU translation enabled ({' '.join(on)}) without iommu=pt",
            evidence,
            IOMMU_FIX,
        )
    if passthrough:
        return Finding(
            "pcie.iommu",
            Severity.PASS,
            "kernel",
            "iommu=pt on the kernel command line (IOMMU groups not visible)",
            evidence,
        )
    return not_evaluated(
        "pcie.iommu",
        "kernel",
        "/sys/kernel/iommu_groups not visible and the command line sets no IOMMU mode: the IOMMU may be on by default",
        evidence,
        "check `cat /sys/kernel/iommu_groups/*/type` on the node; add iommu=pt to be sure",
    )
