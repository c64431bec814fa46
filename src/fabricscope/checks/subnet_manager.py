"""The InfiniBand subnet manager: an IB port becomes ACTIVE only after an SM has assigned its LID
and routes, and a fabric whose SM died keeps running on stale routes until something changes."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.checks.registry import CheckContext, check
from fabricscope.findings import Finding, Severity
from fabricscope.host.subnet import SmQuery

SM_MASTER = 3  # SMInfo state: 0 not active, 1 discovering, 2 standby, 3 master (sminfo(8))
_FIX_SM = (
    "start or fail over the subnet manager (`systemctl status opensmd` on the SM host, or UFM / the managed switch's SM); "
    "`sminfo` and `saquery -s` show which SMs answer"
)


@check("rdma.subnet_manager", "InfiniBand subnet manager reachable")
def subnet_manager(ctx: CheckContext) -> Iterator[Finding]:
    """On InfiniBand the subnet manager assigns LIDs and routes and moves ports from INIT to
    ACTIVE. A port whose link is up but that stays in INIT (or ARMED), or has no SM LID in sysfs
    (ports/N/sm_lid 0), points at the SM, not the cable: fail. `sminfo` (infiniband-diags) asks
    the SM the port knows about; no answer fails (routes are not repaired when links or nodes
    change), an answering SM that is not MASTER warns, an SM LID that differs from the ports'
    warns. Without `sminfo` the sysfs evidence alone decides."""
    inv = ctx.inventory
    ib = [p for p in inv.ports if p.is_ib]
    if not ib:
        return
    stuck = [p.name for p in ib if p.is_link_up and p.state_id in (2, 3)]
    no_sm = [p.name for p in ib if p.is_active and p.sm_lid == 0]
    lids = sorted({p.sm_lid for p in ib if p.is_active and p.sm_lid})
    evidence: dict = {"sm_lid": lids, "stuck": stuck, "no_sm_lid": no_sm}
    if stuck:
        yield Finding(
            "rdma.subnet_manager",
            Severity.FAIL,
            ",".join(stuck),
            f"link up but port {', '.join(stuck)} stuck in INIT/ARMED: no subnet manager has activated it",
            evidence,
            _FIX_SM,
        )
    if no_sm:
        yield Finding(
            "rdma.subnet_manager",
            Severity.FAIL,
            ",".join(no_sm),
            f"ACTIVE port(s) {', '.join(no_sm)} without an SM LID (sm_lid 0)",
            evidence,
            _FIX_SM,
        )
    yield from _sminfo_verdict(inv.sminfo, lids, not stuck and not no_sm, evidence)


def _sminfo_verdict(
    query: SmQuery | None, lids: list[int], ports_fine: bool, evidence: dict
) -> Iterator[Finding]:
    """What `sminfo` says of the SM the ports know: no answer fails, not MASTER or another LID than
    the ports' warns; without `sminfo`, the ports' SM LIDs alone can pass."""
    if query is None or not query.available:
        if lids and ports_fine:
            yield Finding(
                "rdma.subnet_manager",
                Severity.PASS,
                "subnet manager",
                f"SM LID {', '.join(map(str, lids))} set on every active IB port (`sminfo` not available: {query.problem if query else 'not run'})",
                evidence,
            )
        return
    if query.info is None:
        evidence["sminfo"] = query.problem
        yield Finding(
            "rdma.subnet_manager",
            Severity.FAIL,
            "subnet manager",
            f"no subnet manager answered `sminfo` ({query.problem}): fabric changes will not be routed around",
            evidence,
            _FIX_SM,
        )
        return
    sm = query.info
    evidence["sminfo"] = {
        "lid": sm.lid,
        "guid": sm.guid,
        "priority": sm.priority,
        "state": sm.state,
        "activity": sm.activity,
    }
    if sm.state != SM_MASTER:
        yield Finding(
            "rdma.subnet_manager",
            Severity.WARN,
            "subnet manager",
            f"the SM at LID {sm.lid} answers in state {sm.state} {sm.state_name}, not MASTER",
            evidence,
            _FIX_SM,
        )
    elif lids and sm.lid not in lids:
        yield Finding(
            "rdma.subnet_manager",
            Severity.WARN,
            "subnet manager",
            f"`sminfo` reached the SM at LID {sm.lid} but the ports were configured by SM LID {', '.join(map(str, lids))}: a failover is under way or stale",
            evidence,
            _FIX_SM,
        )
    elif ports_fine:
        yield Finding(
            "rdma.subnet_manager",
            Severity.PASS,
            "subnet manager",
            f"SM MASTER at LID {sm.lid} ({sm.guid}, priority {sm.priority}) answers",
            evidence,
        )
