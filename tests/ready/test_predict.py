"""The prediction on fabrics whose answer is textbook: TCP goodput through tc tbf (1448 payload
bytes per 1514-byte frame at MTU 1500) at the slowest link a flow crosses, shared evenly where
flows of one matrix phase cross one uplink. The budget plan is held to its own promise."""

from __future__ import annotations

import pytest

from fabricscope.bench.matrix.schedule import phases
from fabricscope.errors import FabricscopeError
from fabricscope.ready.params import ReadyError, ReadyParams, job_nodes, matrix_seconds, plan
from fabricscope.ready.predict import Allocation, CollectiveModel, collective_busbw, documents, matrix_gbps
from fabricscope.topology.model import Attachment, Cable, Discovery, build_document

GOODPUT = 1448 / 1514


def _star(rates: dict[str, float]) -> Allocation:
    hosts = sorted(rates)
    disc = Discovery("lab:t", "lab-t", [Attachment(h, "eth0", "sw", None, rates[h]) for h in hosts])
    return Allocation(hosts, hosts, build_document(disc), "lab:t")


def test_a_slow_host_is_predicted_at_its_rate_and_expected_at_the_fleets() -> None:
    alloc = _star({"h1": 1e9, "h2": 1e9, "h3": 250e6, "h4": 1e9})
    now, built, slow = documents(alloc)
    assert [(d.kind, d.name, d.rate_bps, d.nominal_bps) for d in slow] == [("host", "h3", 250e6, 1e9)]
    predicted, expected = matrix_gbps(alloc, now, "tbf"), matrix_gbps(alloc, built, "tbf")
    for i, a in enumerate(alloc.hosts):
        for j, b in enumerate(alloc.hosts):
            if i != j:
                link = 0.25 if "h3" in (a, b) else 1.0
                assert predicted[i][j] == pytest.approx(link * GOODPUT, rel=1e-3), (a, b)
                assert expected[i][j] == pytest.approx(GOODPUT, rel=1e-3)


def test_ring_all_reduce_is_held_to_its_slowest_link() -> None:
    """Ring all-reduce: busbw = the slowest ring link's goodput (nccl-tests' definition, PERFORMANCE.md)."""
    alloc = _star({"h1": 1e9, "h2": 1e9, "h3": 250e6, "h4": 1e9})
    now, built, _ = documents(alloc)
    spec = CollectiveModel("all_reduce", (64 << 20,), "gloo", "tcp")
    slow = collective_busbw(alloc, now, "tbf", spec)[0][-1]
    fast = collective_busbw(alloc, built, "tbf", spec)[0][-1]
    assert fast * 8 == pytest.approx(GOODPUT, rel=0.03)  # GB/s -> Gbit/s; latency takes the rest
    assert slow / fast == pytest.approx(0.25, rel=0.03)


def _leaf_spine(uplink: dict[str, float]) -> Allocation:
    hosts = [f"h{i}" for i in range(1, 7)]
    leaf = {h: f"leaf{(i // 2) + 1}" for i, h in enumerate(hosts)}
    disc = Discovery("lab:ls", "lab-ls", [Attachment(h, "eth0", leaf[h], None, 200e6) for h in hosts],
                     [Cable(name, "spine", None, None, rate) for name, rate in uplink.items()])  # fmt: skip
    return Allocation(hosts, hosts, build_document(disc), "lab:ls")


def test_flows_of_one_phase_share_an_uplink() -> None:
    alloc = _leaf_spine({"leaf1": 400e6, "leaf2": 100e6, "leaf3": 400e6})
    now, built, slow = documents(alloc)
    assert [(d.kind, d.name, d.rate_bps, d.nominal_bps) for d in slow] == [
        ("link", "leaf2-spine", 100e6, 400e6)
    ]
    predicted = matrix_gbps(alloc, now, "tbf")
    expected = matrix_gbps(alloc, built, "tbf")
    hosts, under = alloc.hosts, {"h3", "h4"}  # leaf2
    for phase in phases(len(hosts)):
        crossing = [(a, b) for a, b in phase if (hosts[a] in under) != (hosts[b] in under)]
        for a, b in phase:
            if (a, b) in crossing:
                share = 100e6 / len([f for f in crossing if (hosts[f[0]] in under) == (hosts[a] in under)])
                want = min(200e6, share) * GOODPUT / 1e9
            else:
                want = 200e6 * GOODPUT / 1e9  # inside a leaf, or between leaf1 and leaf3 (400M uplinks)
            assert predicted[a][b] == pytest.approx(want, rel=1e-3), (hosts[a], hosts[b], phase)
            assert expected[a][b] == pytest.approx(200e6 * GOODPUT / 1e9, rel=1e-3)


def test_without_a_topology_the_rate_must_come_from_somewhere() -> None:
    alloc = Allocation(["a", "b"], ["a", "b"], None, None)
    with pytest.raises(FabricscopeError, match="--nic-rate"):
        documents(alloc)
    alloc.nic_rate_bps = 10e9
    now, built, slow = documents(alloc)
    assert not slow and matrix_gbps(alloc, now, "ethernet")[0][1] == pytest.approx(
        matrix_gbps(alloc, built, "ethernet")[0][1]
    )
    alloc.doctor_bps = {"a": 200e9, "b": 400e9}  # a degraded port counts at its real rate
    now, _, slow = documents(alloc)
    assert [(d.name, d.rate_bps) for d in slow] == [("a", 200e9)]


def test_the_plan_fits_the_budget_and_refuses_one_too_short() -> None:
    for budget, ranks in ((60, 2), (300, 4), (300, 8), (3600, 64)):
        p = plan(ReadyParams(budget_s=budget), ranks)
        assert p.total_s <= budget + 30 * 1  # the matrix deadline keeps a fixed 30 s of slack for its retests
        assert p.matrix_timeout_s >= matrix_seconds(ranks, p.flow_s)
    longer = plan(ReadyParams(budget_s=3600), 8)
    assert (
        longer.flow_s >= plan(ReadyParams(budget_s=120), 8).flow_s
        and longer.iters >= plan(ReadyParams(budget_s=120), 8).iters
    )
    with pytest.raises(ReadyError, match="needs at least") as refused:
        plan(ReadyParams(budget_s=30), 16)
    need = float(str(refused.value).split("needs at least ")[1].split()[0])
    assert plan(ReadyParams(budget_s=need + 1), 16).flow_s > 0  # what it asks for is enough


def test_the_plan_sizes_the_matrix_by_nodes_not_ranks() -> None:
    """srun -N 2 --ntasks-per-node 8: sixteen ranks, a matrix of two nodes. Every rank reads the
    same SLURM_NNODES (or torchrun's WORLD_SIZE / LOCAL_WORLD_SIZE), so every rank plans alike."""
    assert job_nodes(16, "slurm", {"SLURM_NNODES": "2", "SLURM_TASKS_PER_NODE": "8(x2)"}) == 2
    assert job_nodes(5, "slurm", {"SLURM_NNODES": "3", "SLURM_TASKS_PER_NODE": "2(x2),1"}) == 3
    assert job_nodes(16, "torchrun", {"LOCAL_WORLD_SIZE": "8"}) == 2
    assert job_nodes(4, "slurm", {}) == 4 and job_nodes(4, "slurm", {"SLURM_NNODES": "x"}) == 4
    assert job_nodes(4, "lab:demo", {"SLURM_NNODES": "1"}) == 4  # our launcher inside an allocation
    with pytest.raises(ReadyError, match="too short"):
        plan(ReadyParams(budget_s=60), 16)
    two = plan(ReadyParams(budget_s=60), 16, job_nodes(16, "slurm", {"SLURM_NNODES": "2"}))
    assert two.matrix_timeout_s >= matrix_seconds(2, two.flow_s) and two.total_s <= 60 + 30


def _tasks_per_node(spec: str, hosts: list[str]) -> list[str]:
    """Each rank's host under Slurm's block distribution, from SLURM_TASKS_PER_NODE (``2(x2),1``)."""
    counts = []
    for part in spec.split(","):
        n, _, times = part.partition("(x")
        counts += [int(n)] * int(times.rstrip(")") or 1)
    return [h for h, c in zip(hosts, counts) for _ in range(c)]


def test_unequal_ranks_per_node_ring_is_held_to_its_slowest_link() -> None:
    """SLURM_TASKS_PER_NODE=2(x2),1: five ranks on three nodes. A ring through them crosses each
    node's link once each way per step, as with one rank per node: busbw is still the slowest
    link's goodput (2(p-1)/p * S moved through it in 2(p-1) steps of S/p)."""
    rates = {"h1": 1e9, "h2": 1e9, "h3": 1e9}
    hosts = sorted(rates)
    disc = Discovery("lab:t", "lab-t", [Attachment(h, "eth0", "sw", None, rates[h]) for h in hosts])
    ranks = _tasks_per_node("2(x2),1", hosts)
    assert ranks == ["h1", "h1", "h2", "h2", "h3"]
    alloc = Allocation(hosts, ranks, build_document(disc), "lab:t")
    spec = CollectiveModel("all_reduce", (64 << 20,), "gloo", "tcp")
    now, built, _ = documents(alloc)
    fast = collective_busbw(alloc, built, "tbf", spec)[0][-1]
    assert fast * 8 == pytest.approx(GOODPUT, rel=0.03)
    slow_disc = Discovery(
        "lab:t", "lab-t", [Attachment(h, "eth0", "sw", None, 250e6 if h == "h3" else 1e9) for h in hosts]
    )
    slow = Allocation(hosts, ranks, build_document(slow_disc), "lab:t")
    now, _, degraded = documents(slow)
    assert [d.name for d in degraded] == ["h3"]
    assert collective_busbw(slow, now, "tbf", spec)[0][-1] / fast == pytest.approx(0.25, rel=0.03)


def test_unequal_ranks_per_node_on_gpus_model_nccls_ring() -> None:
    """With GPUs (NCCL's tuner) an uneven communicator is modelled as the ring only, and said so
    when another algorithm is forced."""
    import numpy as np

    from fabricscope.sim import select
    from fabricscope.sim.custom import topology_from_document
    from fabricscope.sim.engine import Simulator
    from fabricscope.sim.transport import make_transport

    hosts = ["h1", "h2", "h3"]
    disc = Discovery("t", "t", [Attachment(h, "eth0", "sw", None, 400e9) for h in hosts])
    topo = topology_from_document(dict(build_document(disc), gpus_per_node=2, gpu="h100"))
    sim = Simulator(topo, make_transport("ib"))
    groups = np.array([[0, 1, 2, 3, 4]], np.int64)  # 2, 2, 1
    got = select.collective(sim, "all_reduce", 256 << 20, groups)
    assert got.algo.lower() == "ring" and got.busbw_GBps > 0
    with pytest.raises(FabricscopeError, match="ring only"):
        select.collective(sim, "all_reduce", 256 << 20, groups, algo="tree")
