"""The kernel log (dmesg or the journal): link flaps per port, NVIDIA Xid errors, mlx5 firmware
and health events. What sysfs shows now can look fine while the log says the link dropped five
times in the last hour or the GPU fell off the bus."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated_where
from fabricscope.checks.xid_catalog import CATALOG_URL, xid_meaning
from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import Inventory
from fabricscope.host.kernel_log import LinkEvent

# Link state changes in the first minutes after boot are the links training, not flaps.
BOOT_SETTLE_S = 300.0
# A port that went down this often within the window is flapping now (fail); fewer is a warning.
FLAP_WINDOW_S = 3600.0
FLAP_FAIL_COUNT = 3
_SEVERITY = {"info": Severity.INFO, "warn": Severity.WARN, "fail": Severity.FAIL}


def _missing(check_id: str, inv: Inventory, relevant: object) -> list[Finding]:
    """Without a kernel log: not evaluated where the node has what the check judges, else nothing."""
    return not_evaluated_where(
        relevant,
        check_id,
        "kernel log",
        f"no kernel log read ({inv.kernel_log_problem or 'not captured in this snapshot'})",
        "run doctor as root (dmesg needs it where kernel.dmesg_restrict=1), or give read access to the journal",
    )


@check("kernel.link_flaps", "Link flaps in the kernel log")
def link_flaps(ctx: CheckContext) -> Iterator[Finding]:
    """The driver logs every port state change (mlx5: `Port: 1 Link DOWN` for InfiniBand ports,
    `<netdev>: Link down` for Ethernet). A port that went down after boot lost its link at least
    once: in-flight RDMA operations fail and NCCL jobs abort. Down events more than 300 s after
    boot are counted per port: any warns; 3 or more within one hour is a flapping link and fails."""
    inv = ctx.inventory
    log = inv.kernel_log
    if log is None:
        yield from _missing("kernel.link_flaps", inv, inv.rdma_devices)
        return
    downs: dict[str, list[LinkEvent]] = defaultdict(list)
    for event in log.links:
        if (
            not event.up
            and event.state.lower() == "down"
            and (event.at_s is None or event.at_s >= BOOT_SETTLE_S)
        ):
            downs[event.port].append(event)
    for port, events in sorted(downs.items()):
        stamps = [e.at_s for e in events if e.at_s is not None]
        recent = [t for t in stamps if log.last_s is not None and t >= log.last_s - FLAP_WINDOW_S]
        evidence = {
            "downs": len(events),
            "in_last_hour": len(recent),
            "at_s": stamps[-10:],
            "pci": events[0].pci,
            "source": log.source,
        }
        fix = (
            f"check the cable, transceiver and switch port of {port} (`mlxlink -d {events[0].pci} -m` for its eye and BER, "
            "the switch's port counters); replace the optic or cable if the errors follow it"
        )
        if len(recent) >= FLAP_FAIL_COUNT:
            yield Finding(
                "kernel.link_flaps",
                Severity.FAIL,
                port,
                f"link went down {len(recent)} times within the last hour of the kernel log: the link is flapping",
                evidence,
                fix,
            )
        else:
            last = f", last {stamps[-1]:.0f} s after boot" if stamps else ""
            yield Finding(
                "kernel.link_flaps",
                Severity.WARN,
                port,
                f"link went down {len(events)} time(s) since boot{last}",
                evidence,
                fix,
            )
    if not downs:
        ports = sorted({e.port for e in log.links})
        yield Finding(
            "kernel.link_flaps",
            Severity.PASS,
            "kernel log",
            f"no link went down after boot ({len(ports)} port(s) logged state changes; {log.source}, {log.lines} lines)",
        )


def _gpu_label(inv: Inventory, pci: str) -> str:
    """NVRM prints "0000:01:00" (no function): match it to a GPU of the inventory."""
    for gpu in inv.gpus:
        if gpu.pci_address.lower().startswith(pci.lower()):
            return f"GPU{gpu.index} ({gpu.pci_address})"
    return f"GPU {pci}"


@check("kernel.xid", "NVIDIA Xid errors")
def xid_errors(ctx: CheckContext) -> Iterator[Finding]:
    """The NVIDIA driver reports GPU faults as `NVRM: Xid (PCI:<bus>): <code>, ...` lines. Each is
    judged by NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors): double-bit ECC (48), NVLink
    (74, 144-150 when Fatal), GPU fallen off the bus (79, also when the driver logs it without an
    Xid), uncontained ECC (95), GSP timeouts (119) need the GPU reset or the node serviced and fail;
    application-level faults (13, 31, 43) warn; follow-on cleanups (45) are info."""
    inv = ctx.inventory
    log = inv.kernel_log
    if log is None:
        yield from _missing("kernel.xid", inv, inv.gpus)
        return
    by_gpu: dict[str, list] = defaultdict(list)
    for event in log.xids:
        by_gpu[event.pci].append(event)
    for pci, events in sorted(by_gpu.items()):
        judged = [(e, *xid_meaning(e.code, e.text)) for e in events]
        worst = max((_SEVERITY[s] for _e, _m, s in judged), key=lambda s: s.rank)
        codes: dict[int, str] = {}
        for e, meaning, _s in judged:
            codes.setdefault(e.code, meaning)
        summary = "; ".join(
            f"Xid {c} ({m}) x{sum(1 for e in events if e.code == c)}" for c, m in sorted(codes.items())
        )
        evidence = {
            "pci": pci,
            "xids": [{"code": e.code, "at_s": e.at_s, "text": e.text[:160]} for e in events[-10:]],
            "catalog": CATALOG_URL,
            "source": log.source,
        }
        fix = (
            "follow the catalog's resolution for each Xid: reset the GPU (`nvidia-smi -r -i <n>`) or drain and service the node for "
            "fail-level Xids; `nvidia-smi -q -d ECC,ROW_REMAPPER` and `nvidia-bug-report.sh` for the evidence"
        )
        yield Finding(
            "kernel.xid",
            worst,
            _gpu_label(inv, pci),
            summary,
            evidence,
            fix if worst is not Severity.INFO else None,
        )
    if not by_gpu:
        yield Finding(
            "kernel.xid",
            Severity.PASS,
            "kernel log",
            f"no Xid errors since boot ({log.source}, {log.lines} lines)",
        )


_NIC_KINDS = {
    "health": (Severity.FAIL, "firmware health failure"),
    "command_timeout": (Severity.WARN, "firmware command timeouts"),
    "module": (Severity.WARN, "transceiver module events"),
    "pcie_power": (Severity.WARN, "insufficient PCIe slot power"),
}


@check("kernel.nic_firmware", "mlx5 firmware and health events")
def nic_firmware(ctx: CheckContext) -> Iterator[Finding]:
    """mlx5_core logs when the NIC's firmware stops answering: `health compromised - reached miss
    count` and `unrecoverable hardware error` (the health poller gave up: the device needs a reset,
    fail), command timeouts (`... timeout. Will cause a leak of a command resource`, `No done
    completion`, `cmd_work_handler`: firmware too slow or hung, warn), transceiver `Port module
    event`s other than "Cable plugged" (unplugged, errors, warn) and insufficient slot power (warn)."""
    inv = ctx.inventory
    mlx5 = [d for d in inv.rdma_devices if d.driver in ("mlx5_core", None) and not d.is_efa]
    log = inv.kernel_log
    if log is None:
        yield from _missing("kernel.nic_firmware", inv, mlx5)
        return
    by_pci: dict[str, list] = defaultdict(list)
    for event in log.nic:
        by_pci[event.pci].append(event)
    names = {d.pci_address: d.name for d in inv.rdma_devices if d.pci_address}
    for pci, events in sorted(by_pci.items()):
        kinds = sorted({e.kind for e in events}, key=lambda k: -_NIC_KINDS[k][0].rank)
        severity = _NIC_KINDS[kinds[0]][0]
        subject = f"{names[pci]} ({pci})" if pci in names else pci
        evidence = {
            "pci": pci,
            "events": [{"kind": e.kind, "at_s": e.at_s, "text": e.text[:160]} for e in events[-10:]],
            "source": log.source,
        }
        fix = (
            f"collect `mlxfwmanager --query -d {pci}` and the full kernel log; a health failure needs `mlxfwreset -d {pci} reset` "
            "or a reboot, repeated ones a firmware update or RMA; module events: reseat or replace the transceiver"
        )
        yield Finding(
            "kernel.nic_firmware",
            severity,
            subject,
            ", ".join(f"{_NIC_KINDS[k][1]} ({sum(1 for e in events if e.kind == k)})" for k in kinds),
            evidence,
            fix,
        )
    if not by_pci and mlx5:
        yield Finding(
            "kernel.nic_firmware",
            Severity.PASS,
            "kernel log",
            f"no mlx5 firmware or health events ({log.source}, {log.lines} lines)",
        )
