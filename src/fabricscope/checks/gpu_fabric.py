"""NVLink links and the NVSwitch fabric: what `nvidia-smi nvlink -s` and the Fabric section of
`nvidia-smi -q` say about the GPU-to-GPU paths NCCL uses inside a node (and across an NVL72 rack)."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated_where
from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import Inventory
from fabricscope.host.nvlink import GpuFabric

# NVML's nvmlGpuFabricState_t values as nvidia-smi prints them, and states that mean "no fabric here".
FABRIC_PENDING = ("Not Started", "In Progress")
NO_FABRIC = ("N/A", "Not Supported", "")


def _label(inv: Inventory, index: int | None = None, pci: str | None = None) -> str:
    for gpu in inv.gpus:
        if gpu.index == index or (pci and gpu.pci_address == pci):
            return f"GPU{gpu.index} ({gpu.pci_address})"
    return f"GPU{index}" if index is not None else f"GPU {pci}"


def _unread(check_id: str, inv: Inventory, command: str) -> list[Finding]:
    """Without nvidia-smi's output: not evaluated where nvidia-smi found the GPUs, else nothing
    (GPUs seen only in sysfs may have no driver to ask)."""
    return not_evaluated_where(
        inv.gpus and inv.gpu_source == "nvidia-smi",
        check_id,
        "GPUs",
        f"`{command}` not available",
        "run doctor where nvidia-smi works (driver loaded)",
    )


@check("gpu.nvlink", "NVLink links up at full speed")
def nvlink(ctx: CheckContext) -> Iterator[Finding]:
    """`nvidia-smi nvlink -s` lists each GPU's NVLink links with their speed, or `<inactive>`. An
    inactive link on a GPU whose siblings have it up is a failed link (bad NVLink bridge/board
    connector or NVSwitch port): NCCL's intra-node rings and trees lose that bandwidth or fall back
    to PCIe, so it fails. A link slower than the node's fastest is degraded and warns. GPUs without
    NVLink (PCIe cards) print no links and are not judged."""
    inv = ctx.inventory
    state = inv.nvlink
    if state is None or state.links is None:
        yield from _unread("gpu.nvlink", inv, "nvidia-smi nvlink -s")
        return
    speeds = [s for g in state.links for s in g.links.values() if s is not None]
    if not speeds:
        return
    best = max(speeds)
    flagged = 0
    for gpu in state.links:
        down = sorted(n for n, s in gpu.links.items() if s is None)
        slow = sorted(n for n, s in gpu.links.items() if s is not None and s < best)
        evidence = {"links_gbps": {str(n): s for n, s in gpu.links.items()}, "expected_gbps": best}
        fix = (
            "`nvidia-smi nvlink -e -i N` for the link's error counters and `nvidia-smi -q -d NVLINK`; reset the GPU or reboot, "
            "then reseat the board/NVLink bridge or raise a hardware ticket if it stays down"
        )
        if down:
            severity = Severity.FAIL
            message = f"NVLink link(s) {', '.join(map(str, down))} inactive ({len(gpu.links) - len(down)} of {len(gpu.links)} up)"
        elif slow:
            severity, message = (
                Severity.WARN,
                f"NVLink link(s) {', '.join(map(str, slow))} below {best:g} GB/s",
            )
        else:
            continue
        flagged += 1
        yield Finding("gpu.nvlink", severity, _label(inv, gpu.index), message, evidence, fix)
    if not flagged:
        yield Finding(
            "gpu.nvlink",
            Severity.PASS,
            "GPUs",
            f"all NVLink links of {len(state.links)} GPU(s) up at {best:g} GB/s",
        )


def _fabric_problem(gpu: GpuFabric) -> str | None:
    """Why a GPU that should join the NVLink fabric cannot use it, or None when it is registered."""
    if gpu.state in FABRIC_PENDING:
        return f"fabric registration {gpu.state}: NVLink through NVSwitch not usable"
    if gpu.status not in (None, "Success", "N/A"):
        return f"fabric registration {gpu.state} with status {gpu.status}"
    if gpu.health == "Unhealthy":
        return "fabric health summary Unhealthy"
    return None


@check("gpu.fabric", "NVSwitch fabric registration")
def fabric(ctx: CheckContext) -> Iterator[Finding]:
    """On NVSwitch systems each GPU registers with the fabric (Fabric Manager on HGX, the NVLink
    fabric on GB200 NVL): `nvidia-smi -q` shows Fabric State and Status. Until State is Completed
    with Status Success, CUDA on that GPU cannot use NVLink peers (jobs fail to start or fall back),
    so Not Started, In Progress or an error status fail (start or fix nvidia-fabricmanager); a
    Health Summary of Unhealthy fails too. GPUs whose State is N/A have no fabric to join."""
    inv = ctx.inventory
    state = inv.nvlink
    if state is None or state.fabric is None:
        yield from _unread("gpu.fabric", inv, "nvidia-smi -q")
        return
    fix = (
        "check `systemctl status nvidia-fabricmanager` and /var/log/fabricmanager.log (HGX), or the NVLink fabric/NMX "
        "controller (GB200); the fabric manager's version must match the driver's; then reset the GPUs or reboot"
    )
    good = bad = 0
    for gpu in state.fabric:
        if (gpu.state or "") in NO_FABRIC:
            continue
        evidence = {
            "state": gpu.state,
            "status": gpu.status,
            "clique_id": gpu.clique_id,
            "health": gpu.health,
            "pci": gpu.pci,
        }
        problem = _fabric_problem(gpu)
        if problem is None:
            good += 1
            continue
        bad += 1
        yield Finding("gpu.fabric", Severity.FAIL, _label(inv, pci=gpu.pci), problem, evidence, fix)
    if good and not bad:
        yield Finding(
            "gpu.fabric",
            Severity.PASS,
            "GPUs",
            f"{good} GPU(s) registered with the NVLink fabric (Completed, Success)",
        )
