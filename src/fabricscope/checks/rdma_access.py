"""Whether processes started here can use the RDMA devices: /dev/infiniband and RLIMIT_MEMLOCK.

Both are what a container most often lacks: the devices show in /sys/class/infiniband (sysfs is
shared) while /dev/infiniband was not passed in, and the memlock limit stays at the runtime's
default (64 KiB), so registering memory fails.
"""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check, not_evaluated
from fabricscope.findings import Finding, Severity

# Below this, NCCL cannot register even its first buffers (ibv_reg_mr pins them).
MIN_MEMLOCK_BYTES = 64 * 2**20


@check("rdma.dev_files", "/dev/infiniband present")
def dev_files(ctx: CheckContext) -> Iterator[Finding]:
    """libibverbs opens /dev/infiniband/uverbsN for each RDMA device (rdma_cm for RDMA-CM,
    umadN for management tools). A container that sees the devices in sysfs but was started
    without /dev/infiniband (no --device, no RDMA device plugin) cannot use them: NCCL then falls
    back to TCP sockets. The device files are only listed, never opened."""
    inv = ctx.inventory
    if not inv.rdma_devices:
        return
    names = inv.char_devices
    if names is None:
        yield not_evaluated(
            "rdma.dev_files",
            "/dev/infiniband",
            "/dev is not in this snapshot (taken by an older fabricscope)",
        )
        return
    uverbs = sorted(n for n in names if n.startswith("uverbs"))
    evidence = {"dev_infiniband": list(names), "rdma_devices": len(inv.rdma_devices)}
    fix = (
        "pass the devices into the container: `docker run --device=/dev/infiniband ...`, or on Kubernetes the RDMA "
        "shared device plugin (rdma/hca resource) or a privileged pod; on a host: `modprobe ib_uverbs`"
    )
    if not uverbs:
        yield Finding(
            "rdma.dev_files",
            Severity.FAIL,
            "/dev/infiniband",
            f"{len(inv.rdma_devices)} RDMA device(s) in sysfs but no /dev/infiniband/uverbs*: processes here cannot open them "
            "and NCCL falls back to TCP sockets",
            evidence,
            fix,
        )
    elif len(uverbs) < len(inv.rdma_devices):
        yield Finding(
            "rdma.dev_files",
            Severity.WARN,
            "/dev/infiniband",
            f"{len(uverbs)} uverbs device file(s) for {len(inv.rdma_devices)} RDMA devices: some devices cannot be opened here",
            evidence,
            fix,
        )
    else:
        yield Finding(
            "rdma.dev_files",
            Severity.PASS,
            "/dev/infiniband",
            f"{len(uverbs)} uverbs device file(s) for {len(inv.rdma_devices)} RDMA device(s)",
            evidence,
        )


def _size(value: int) -> str:
    return (
        f"{value // 2**20} MiB"
        if value >= 2**20
        else f"{value // 2**10} KiB"
        if value >= 2**10
        else f"{value} bytes"
    )


@check("rdma.memlock", "RLIMIT_MEMLOCK unlimited")
def memlock(ctx: CheckContext) -> Iterator[Finding]:
    """RDMA registers (pins) every buffer it transfers, and the pinned memory counts against
    RLIMIT_MEMLOCK. NCCL and the verbs tools expect it unlimited (`ulimit -l unlimited`); a finite
    limit caps how much can be registered, and the 64 KiB default of container runtimes makes
    ibv_reg_mr fail outright (processes with CAP_IPC_LOCK are exempt; containers lack it by
    default). Read from /proc/self/limits, so it describes processes started the way doctor was."""
    inv = ctx.inventory
    if not inv.rdma_devices:
        return
    limit = inv.kernel.memlock
    if limit is None:
        yield not_evaluated("rdma.memlock", "RLIMIT_MEMLOCK", "/proc/self/limits unreadable", fix="ulimit -l")
        return
    evidence = {"soft_bytes": limit.soft, "hard_bytes": limit.hard}
    if limit.soft is None:
        yield Finding("rdma.memlock", Severity.PASS, "RLIMIT_MEMLOCK", "unlimited", evidence)
        return
    fix = (
        "set it to unlimited for jobs: `* - memlock unlimited` in /etc/security/limits.d/ (plus LimitMEMLOCK=infinity for "
        "slurmd/containerd units), `docker run --ulimit memlock=-1:-1`, or Slurm PropagateResourceLimits"
    )
    hard = "unlimited" if limit.hard is None else _size(limit.hard)
    if limit.soft < MIN_MEMLOCK_BYTES:
        yield Finding(
            "rdma.memlock",
            Severity.FAIL,
            "RLIMIT_MEMLOCK",
            f"locked-memory limit is {_size(limit.soft)} (hard {hard}): registering RDMA buffers fails (NCCL: 'Unable to register memory')",
            evidence,
            fix,
        )
    else:
        yield Finding(
            "rdma.memlock",
            Severity.WARN,
            "RLIMIT_MEMLOCK",
            f"locked-memory limit is {_size(limit.soft)} (hard {hard}), not unlimited: large jobs can run out of registrable memory",
            evidence,
            fix,
        )
