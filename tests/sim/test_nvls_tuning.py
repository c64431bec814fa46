"""NVLS and NVLSTree channel counts as NCCL v2.30.7-1 sets them: the NVLS graph's heads, which
NCCL's tuning multiplies NVLSTree's per-channel cap by (src/graph/tuning.cc, src/graph/search.cc),
and the channels the kernel runs (src/enqueue.cc)."""

from __future__ import annotations

import pytest

from fabricscope.sim import pipeline, tuning


def shape(arch: str, nodes: int, ppn: int = 8, nics: int | None = None) -> tuning.CommShape:
    nics = ppn if nics is None else nics
    return tuning.CommShape("all_reduce", nodes * ppn, nodes, arch, "nvlink", True, 2 * nics, nics)


def test_nvls_heads_follow_the_nvls_graph_search() -> None:
    """One head per GPU in one node; across nodes one per NIC with its own local GPU; at most
    NCCL_MAX_NVLS_ARITY (32, src/include/device.h)."""
    assert tuning.NCCL_MAX_NVLS_ARITY == 32
    assert tuning.nvls_heads(shape("hopper", 1)) == 8
    assert tuning.nvls_heads(shape("hopper", 2)) == 8
    assert tuning.nvls_heads(shape("hopper", 2, nics=4)) == 4
    assert tuning.nvls_heads(shape("hopper", 2, nics=16)) == 8  # two NICs of one GPU: one head
    assert tuning.nvls_heads(shape("blackwell", 2, ppn=72)) == 32  # NVL72 racks: 72 NICs, 32 heads
    assert tuning.nvls_heads(shape("blackwell", 1, ppn=72)) == 32


def test_nvlstree_cap_counts_the_nvls_heads() -> None:
    """ncclTopoTuneModel caps NVLSTree at heads x perChMaxNVLSTreeBw (Hopper, 2 nodes: 8 x 57.7
    GB/s), not at the 16 channels the kernel runs (which would be 923 GB/s, never binding)."""
    h100 = shape("hopper", 2)
    assert tuning.protocol_busbw(h100, "nvlstree", "Simple", 1000.0, 8 << 30) == pytest.approx(8 * 57.7)
    assert tuning.protocol_busbw(h100, "nvlstree", "Simple", 400.0, 8 << 30) == 400.0
    assert tuning.protocol_busbw(shape("hopper", 4), "nvlstree", "Simple", 1000.0, 8 << 30) == pytest.approx(
        8 * 45.5
    )
    assert tuning.protocol_busbw(shape("hopper", 2, nics=4), "nvlstree", "Simple", 1000.0, 8 << 30) == (
        pytest.approx(4 * 57.7)
    )


def test_the_kernel_runs_nvls_channels() -> None:
    """enqueue.cc: NVLSTree runs nvlsChannels (16, NVLS_NCHANNELS_SM90); NVLS across nodes (with
    CollNet) no more than the communicator's channels."""
    assert tuning.NVLS_CHANNELS == 16
    assert pipeline.channels_used("nvlstree", "Simple", 1 << 30, 8, 16, 16, nodes=2) == 16
    assert pipeline.channels_used("nvls", "Simple", 1 << 30, 8, 16, 16, nodes=2) == 8
    assert pipeline.channels_used("nvls", "Simple", 1 << 30, 8, 8, 16, nodes=1) == 16
