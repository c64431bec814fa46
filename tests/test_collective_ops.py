"""The table of collective operations, held to nccl-tests (doc/PERFORMANCE.md, src/*.cu v2.19.6)."""

from __future__ import annotations

from typing import get_args

import pytest

from fabricscope.collective_ops import (
    MEASURED,
    TABLE,
    MeasuredOp,
    UnknownOpError,
    bus_factor,
    find,
    layout,
    lookup,
)

# PERFORMANCE.md "Summary" (AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AlltoAll) and
# the *GetBw functions of sendrecv.cu, gather.cu, scatter.cu: busbw / algbw at n = 8
NCCL_TESTS_FACTOR_AT_8 = {
    "all_reduce": 2 * 7 / 8,
    "reduce_scatter": 7 / 8,
    "all_gather": 7 / 8,
    "broadcast": 1.0,
    "reduce": 1.0,
    "alltoall": 7 / 8,
    "sendrecv": 1.0,
    "gather": 7 / 8,
    "scatter": 7 / 8,
}


def test_bus_factors_are_nccl_tests() -> None:
    assert set(TABLE) == set(NCCL_TESTS_FACTOR_AT_8)
    for name, factor in NCCL_TESTS_FACTOR_AT_8.items():
        assert bus_factor(name, 8) == pytest.approx(factor), name
    assert bus_factor("all_reduce", 2) == 1.0


@pytest.mark.parametrize("name", [n for n, op in TABLE.items() if op.bus_factor != "1"])
def test_rank_count_is_recovered_from_the_factor(name) -> None:
    op = TABLE[name]
    for n in (2, 3, 8, 64, 1000):
        assert round(op.ranks_from_factor(op.factor(n))) == n
    assert TABLE["broadcast"].ranks_from_factor(1.0) is None


def test_redop_and_root_columns() -> None:
    assert {n for n, op in TABLE.items() if op.reduces} == {"all_reduce", "reduce_scatter", "reduce"}
    assert {n for n, op in TABLE.items() if op.rooted} == {"broadcast", "reduce", "gather", "scatter"}


def test_buffers_follow_get_coll_byte_count() -> None:
    # all_gather of 1000 floats over 3 ranks: per-rank chunk = floor(1000 / 12) * 4 = 332
    lay = layout("all_gather", 4000, 3, 4)
    assert (lay.chunk, lay.send, lay.recv, lay.size_bytes) == (332, 332, 996, 3984)
    lay = layout("reduce_scatter", 4000, 3, 4)
    assert (lay.send, lay.recv, lay.size_bytes) == (996, 332, 3984)
    assert (layout("gather", 4000, 3, 4).send, layout("scatter", 4000, 3, 4).recv) == (332, 332)
    lay = layout("alltoall", 4096, 4, 4)
    assert (lay.send, lay.recv, lay.chunk) == (1024, 1024, 256)
    for name in ("all_reduce", "broadcast", "reduce", "sendrecv"):
        lay = layout(name, 4098, 4, 4)
        assert (lay.size_bytes, lay.send, lay.recv) == (4096, 1024, 1024)
    assert layout("all_gather", 8, 4, 4) is None  # too small for one aligned chunk per rank
    assert layout("all_reduce", 2, 4, 4) is None


def test_names_and_the_measured_subset() -> None:
    assert get_args(MeasuredOp) == MEASURED and set(MEASURED) <= set(TABLE)
    assert find("allreduce") is TABLE["all_reduce"] and find("All-Gather") is TABLE["all_gather"]
    assert find("scan") is None
    with pytest.raises(UnknownOpError, match="choose from all_reduce"):
        lookup("gather", among=MEASURED)
    with pytest.raises(UnknownOpError):
        bus_factor("scan", 4)


def test_sim_and_bench_take_their_operations_from_the_table() -> None:
    pytest.importorskip("numpy")
    from fabricscope.bench.collective import CollectiveParams
    from fabricscope.sim.collectives import plan
    from fabricscope.sim.topology import TopologyOptions, build

    topo = build(TopologyOptions(kind="star", nodes=4, gpus_per_node=1, nic_rate_bps=1e9, gpu="none"))
    for name in MEASURED:
        assert plan(topo, name, None, 1 << 20).op == name
        assert CollectiveParams(op=name).op == name
    with pytest.raises(UnknownOpError):
        plan(topo, "reduce", None, 1 << 20)
    with pytest.raises(ValueError):
        CollectiveParams(op="reduce")
