"""Mid-size messages: what NCCL's own time estimate leaves out, from NCCL's kernel mechanics.

NCCL's tuning model (sim/tuning.py) prices a collective as ``latency + bytes / bandwidth``: every
stage of the algorithm's pipeline charged its hop latency once, and the bytes streamed at full
bandwidth from the first byte. The kernel does not run like that (NVIDIA NCCL v2.30.7-1:
``src/enqueue.cc`` chunking and channel choice, ``src/include/collectives.h`` chunk and slice
steps, ``src/init.cc`` buffer sizes, ``src/transport/nvls.cc`` NVLS chunks):

* a channel moves its share in chunks whose size NCCL picks per algorithm, protocol and message
  size (``chunk_bytes``), and every chunk crosses every stage of the pipeline (the ring's steps,
  the tree's levels, NVLS's reduce and multicast) with a flag handshake between stages;
* so a message of ``N`` chunks through ``S`` stages takes ``(S + N - 1)`` chunk times, not the
  ``N`` the bandwidth term charges: the pipeline ramp ``(S - 1) x chunk time``, which NCCL's
  latency term leaves out because it charges latency per stage, not the first chunk's
  serialisation at each stage;
* a stage's flag handshake per chunk hides behind the chunk's own transfer with ``NCCL_STEPS``
  chunks in flight (tried: a per-chunk handshake of 0.5-4 us on NVLink and 2-16 us on the network
  changed no calibration row at 1 MiB and above), so it is not modelled;
* small messages run on fewer channels (``channels_used``: ``nBytes < nc x nthreads x
  threadThreshold`` drops a channel), so each channel carries more.

At large sizes the ramp is a vanishing share of the time; at 1-16 MiB (TP all-reduces, MoE
dispatch) it is a large one. Nothing here is fitted: every number is NCCL's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NCCL_STEPS = 8  # src/include/device.h
BUFF_SIMPLE = 1 << 22  # DEFAULT_BUFFSIZE, src/init.cc
BUFF_LL = 8 * 512 * NCCL_STEPS * 16  # NCCL_LL_LINES_PER_THREAD x NCCL_LL_MAX_NTHREADS x steps x 16-byte line
BUFF_LL128 = 120 * 640 * NCCL_STEPS * 8  # NCCL_LL128_ELEMS_PER_THREAD x NCCL_LL128_MAX_NTHREADS x steps x 8
CHUNK_STEPS_RING = NCCL_STEPS // 2  # ALLREDUCE/ALLGATHER/REDUCESCATTER_CHUNKSTEPS
NVLS_CHUNK = 128 * 1024  # NCCL_NVLS_CHUNKSIZE default, src/transport/nvls.cc
# threadThresholds (src/include/comm.h; ring LL is multiplied by the rank count in tuning.cc) and
# the threads per channel (maxThreads: NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS)
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}


@dataclass(frozen=True)
class Ramp:
    """What NCCL's estimate leaves out for one (algorithm, protocol) at one size."""

    channels: int
    chunk_bytes: int
    chunks: int  # per channel, through the pipeline
    stages: int
    ramp_s: float  # (stages - 1) chunk times
    fewer_channels_s: float  # the same bytes on fewer channels than NCCL's graph has

    @property
    def extra_s(self) -> float:
        return self.ramp_s + self.fewer_channels_s


def channels_used(
    algo: str, proto: str, size: float, channels: int, ranks: int, nvls_channels: int, nodes: int = 1
) -> int:
    """enqueue.cc's channel choice (topoGetAlgoInfo): NVLS and NVLSTree run their own channel
    count (NVLS across nodes no more than the communicator's channels); ring and tree drop a
    channel while ``nBytes < nc x nthreads x threshold`` (ring LL's threshold x ranks)."""
    if algo == "nvls" and nodes > 1:
        return min(nvls_channels, channels)
    if algo in ("nvls", "nvlstree"):
        return nvls_channels
    nc = channels
    thr = THREAD_THRESHOLD[proto] * (ranks if algo == "ring" and proto == "LL" else 1)
    while nc >= 2 and size < nc * THREADS[proto] * thr:
        nc -= 1
    return max(1, nc)


def chunk_bytes(algo: str, proto: str, size: float, nc: int, heads: int, nodes: int, ppn: float) -> int:
    """calcCollChunking's chunk size: per protocol from the buffer, then shrunk for small messages
    (tree LL128, NVLS, NVLSTree rules)."""
    step = {"Simple": BUFF_SIMPLE, "LL": BUFF_LL, "LL128": BUFF_LL128}[proto] // NCCL_STEPS
    chunk = step * (CHUNK_STEPS_RING if proto == "Simple" and algo == "ring" else 1)
    if proto == "LL":
        chunk //= 2
    elif proto == "LL128":
        chunk = chunk // 16 * 15
    if algo == "tree" and proto == "LL128":
        steps = 1 + _log2i(nodes) + 0.1 * ppn
        while size // (nc * chunk) < steps * 64 / ppn and chunk > 131072:
            chunk //= 2
        while size // (nc * chunk) < steps * 16 / ppn and chunk > 32768:
            chunk //= 2
    elif algo == "nvls":
        ops = nc * heads
        chunk = min(chunk, NVLS_CHUNK)
        for mult, floor in ((64, 65536), (8, 32768), (2, 16384)):
            if size < mult * ops * chunk and chunk > floor:
                chunk = floor
    elif algo == "nvlstree":
        ops = nc * heads
        chunk = NVLS_CHUNK if nodes < 4 else min(NVLS_CHUNK, 65536)
        for mult, floor in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
            if size < mult * ops * chunk and chunk > floor:
                chunk = floor
    return int(chunk)


def stages(algo: str, op: str, ranks: int, nodes: int, ppn: float) -> int:
    """Store-and-forward stages a chunk crosses before the pipeline is full: the ring's steps, the
    intra-node chain of the tree up and down, NVLS's scatter, reduce + multicast and gather (the thread
    groups of src/device/all_reduce.h), and the network part of
    a tree as ONE stage up and one down, whatever its depth (an assumption: see docs/sim.md, the
    pipeline ramp; charging every tree level would put the 1,984-GPU NVLSTree row at 0.81 of its
    published busbw, and no calibration sweep deeper than two nodes exists to decide it). NVLSTree's
    four NVLink thread groups (scatter, reduce, multicast, gather) are counted as two stages: the
    count that fits the two-node calibration sweeps (H100, B200); all four put their 8 MiB rows
    at 1.2-1.3x the published time. A choice fitted to calibration data, named as such."""
    net = 1 if nodes > 1 else 0
    if algo == "ring":
        return 2 * (ranks - 1) if op == "all_reduce" else max(1, ranks - 1)
    if algo == "tree":
        return 2 * (max(0, int(ppn) - 1) + net)
    if algo == "nvlstree":  # four NVLink thread groups and the network tree; counted as 2 + 2 (see above)
        return 2 + 2 * net
    if algo == "collnet":
        return 4
    if (
        algo == "nvls"
    ):  # all_reduce.h's thread groups: scatter into the NVLS buffer, reduce + multicast, gather out
        return 3 if op == "all_reduce" else 2
    return 1  # pat: its log steps are in NCCL's latency


def ramp(
    algo: str,
    proto: str,
    op: str,
    size: float,
    bandwidth_s: float,
    *,
    channels: int,
    ranks: int,
    nodes: int,
    heads: int,
    nvls_channels: int,
) -> Ramp:
    """The pipeline ramp and the channel drop NCCL's estimate leaves out, for a message whose
    bandwidth time (at full bandwidth on every channel NCCL's graph has) is ``bandwidth_s``."""
    ppn = ranks / max(1, nodes)
    nc = channels_used(algo, proto, size, channels, ranks, nvls_channels, nodes)
    chunk = chunk_bytes(algo, proto, size, nc, heads, nodes, ppn)
    s = stages(algo, op, ranks, nodes, ppn)
    full = nc if algo in ("nvls", "nvlstree") else channels
    bw_s = bandwidth_s * full / nc  # fewer channels carry the same bytes
    if proto != "Simple":
        bw_s = (
            bandwidth_s  # LL/LL128: NCCL's per-protocol caps already bound these (llMaxBws, per-channel caps)
        )
    if (
        algo == "ring"
    ):  # each step moves one piece of n / (channels x ranks): the steps ARE the bandwidth term
        piece = min(chunk, math.ceil(size / (nc * ranks)))
        return Ramp(
            nc, int(piece), max(1, math.ceil(size / (nc * ranks * piece))), s, 0.0, bw_s - bandwidth_s
        )
    if proto != "Simple":  # LL and LL128 forward line by line (flags in the data): no store-and-forward ramp
        return Ramp(nc, int(chunk), 1, s, 0.0, bw_s - bandwidth_s)
    lanes = nc * (heads if algo in ("nvls", "nvlstree") else 1)  # NVLS runs channels x heads chunks at once
    per_lane = size / lanes
    piece = min(chunk, max(1, math.ceil(per_lane)))
    n_chunks = max(1, math.ceil(per_lane / piece))
    t_chunk = bw_s / n_chunks  # one chunk through one stage at the lane's rate
    return Ramp(nc, int(piece), n_chunks, s, (s - 1) * t_chunk, bw_s - bandwidth_s)


def _log2i(x: float) -> int:
    return int(math.floor(math.log2(x))) if x >= 1 else 0
