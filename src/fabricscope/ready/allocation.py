"""The job's allocation as the model needs it, from what the first two steps gathered: the
matrix's hosts in its order, each rank's host, the fabric they sit on, each node's NIC rate as
its doctor document shows it, and the transport the job's collective runs over."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.jobs.launch import DistEnv
from fabricscope.ready.node import NodeInfo
from fabricscope.ready.params import ReadyParams
from fabricscope.ready.predict import Allocation, CollectiveModel
from fabricscope.units import parse_rate


def _ports(document: Any) -> list[dict[str, Any]]:
    facts = document.get("facts") if isinstance(document, dict) else None
    nics = facts.get("nics") if isinstance(facts, dict) else None
    return [
        p
        for nic in nics or []
        if isinstance(nic, dict)
        for p in nic.get("ports") or []
        if isinstance(p, dict)
    ]


def _active(port: dict[str, Any]) -> bool:
    return "ACTIVE" in str(port.get("state") or "").upper()


def slowest_port_bps(document: Any) -> float | None:
    """A node's slowest ACTIVE RDMA port (a degraded port at its real rate), or None: none known."""
    rates = [
        float(p["rate_gbps"]) * 1e9
        for p in _ports(document)
        if _active(p) and isinstance(p.get("rate_gbps"), (int, float))
    ]
    return min(rates) if rates else None


def transport_of(documents: Sequence[Any], backend: str) -> str:
    """gloo: TCP. NCCL: InfiniBand or RoCE as most nodes' active RDMA ports run, else its sockets (TCP)."""
    if backend == "gloo":
        return "tcp"
    layers = Counter(str(p.get("link_layer") or "") for d in documents for p in _ports(d) if _active(p))
    if not layers:
        return "tcp"
    layer = layers.most_common(1)[0][0].lower()
    return "ib" if layer.startswith("infiniband") else "roce"


def gpu_of(documents: Sequence[Any], backend: str) -> str:
    """The simulator's GPU model for the nodes' GPUs as nvidia-smi names them (``none`` for gloo on
    CPUs). A GPU the table has no model for is refused, never modelled as another part."""
    from fabricscope.sim.gpus import CPU_HOST, GPUS, from_product_name

    if backend == "gloo":
        return CPU_HOST
    names = sorted(
        {  # a node with mixed GPUs reports them joined by ", "
            name
            for d in documents
            if isinstance(d, dict)
            for name in str(((d.get("facts") or {}).get("gpus") or {}).get("model") or "").split(", ")
        }
        - {""}
    )
    if not names:
        raise FabricscopeError("the nodes' documents name no GPU: the NCCL collective cannot be modelled")
    models = {name: from_product_name(name) for name in names}
    unknown = [name for name, model in models.items() if model is None]
    if unknown:
        parts = ", ".join(GPUS)
        raise FabricscopeError(
            f"no model for GPU {', '.join(map(repr, unknown))} (the simulator models the SXM parts {parts})"
        )
    if len({m.name for m in models.values() if m is not None}) > 1:
        raise FabricscopeError(
            f"the nodes hold different GPUs ({', '.join(names)}): one collective model cannot fit"
        )
    return next(m.name for m in models.values() if m is not None)


def matrix_hosts(infos: Sequence[NodeInfo]) -> list[str]:
    """The matrix's hosts, as bench matrix names them: one per node, in rank order."""
    from fabricscope.bench.matrix.worker import unique_labels

    speaking = [i for i in infos if i.speaks]
    return unique_labels([i.host for i in speaking], [i.rank for i in speaking])


def allocation(
    params: ReadyParams, env: DistEnv, received: Sequence[Any], infos: Sequence[NodeInfo]
) -> Allocation:
    """Rank 0: the allocation from the doctor documents (``received``) and every rank's names."""
    hosts = matrix_hosts(infos)
    if len(hosts) < 2:
        raise FabricscopeError("the job has one node: there is no fabric between nodes to predict")
    host_of_rank = {i.rank: i.host for i in infos}
    rdma: dict[str, float] = {}
    for got in received:
        bps = slowest_port_bps(got.document)
        if bps is not None and got.rank in host_of_rank:
            rdma[host_of_rank[got.rank]] = bps
    doctor = dict(rdma) if params.backend == "nccl" else {}  # the collective runs over those ports
    document, source, placed = None, None, {}
    if params.topology:
        from fabricscope.bench.matrix.fabric import load

        readings = (
            [i.lldp or {"error": "no LLDP reading"} for i in infos if i.speaks]
            if params.topology == "discover"
            else []
        )
        fabric = load(params.topology, hosts, readings, [])
        document, source, placed = fabric.document, fabric.source, dict(fabric.placed)
    nic = parse_rate(params.nic_rate) if params.nic_rate else None
    return Allocation(
        hosts, [host_of_rank[r] for r in range(env.world_size)], document, source, placed, doctor, nic, rdma
    )


def collective_model(params: ReadyParams, received: Sequence[Any]) -> CollectiveModel:
    documents = [got.document for got in received if got.document is not None]
    return CollectiveModel(params.op, tuple(params.sizes), params.backend, transport_of(documents, params.backend),
                           gpu_of(documents, params.backend))  # fmt: skip
