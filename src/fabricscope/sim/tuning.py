"""NCCL's own tuning model: which (algorithm, protocol) pairs NCCL may run for an operation on a
system, their latency, and the protocol's share of the bandwidth.

Source: NVIDIA NCCL v2.30.7-1, ``src/graph/tuning.cc`` (``ncclTunerConstantsDefaults``,
``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``), channel doubling in ``src/graph/connect.cc``.
The tables (latencies, llMaxBws, per-channel caps, nvlsEfficiency, treeCorrectionFactor) and the
NVLS channel counts (``src/transport/nvls.cc``, ``src/include/device.h``) are read from
``nccl_tuning.json`` beside this module, which ``scripts/gen_nccl_tuning.py --repo NCCL_GIT
--tag TAG`` writes from NCCL's source (it records the tag, commit and line of each table); rerun it
for a new release. The factors NCCL writes inline in its code (protocol factors, the ring plateau,
the network overhead) are kept here, as is the structure, paraphrased, not copied. What this module
does *not* take from NCCL is the raw bandwidth: that is the flow model's answer for the algorithm's
traffic on the topology (``sim/select.py``); NCCL's protocol factors and per-channel caps are then
applied to it, as ``ncclTopoTuneModel`` applies them to its own graph bandwidth.

Predicted time of one pair, as in ``ncclTopoGetAlgoTime``: ``latency + bytes / algbw``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources

from fabricscope.sim import gpus

_DATA = json.loads(
    resources.files("fabricscope.sim").joinpath("nccl_tuning.json").read_text(encoding="utf-8")
)
_IX = {kind: {name: i for i, name in enumerate(names)} for kind, names in _DATA["indices"].items()}
_TABLES = {name: table["values"] for name, table in _DATA["tables"].items()}
NCCL_SOURCE = f"NVIDIA NCCL {_DATA['source']['tag']}, {_DATA['source']['file']}"

# Algorithms fabricscope names (NCCL_ALGO spelling in brackets): ring [Ring], tree [Tree],
# nvls [NVLS], nvlstree [NVLSTree], collnet [CollNetDirect], pat [PAT].
NCCL_ALGOS = ("ring", "tree", "nvls", "nvlstree", "collnet", "pat")
PROTOS = ("LL", "LL128", "Simple")
_P = {p: i for i, p in enumerate(PROTOS)}
# fabricscope's name -> NCCL's index macro (NCCL_ALGO_<NAME>, lower case), in NCCL's order.
_NCCL_ALGO = {
    "tree": "tree",
    "ring": "ring",
    "collnet": "collnet_direct",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "pat": "pat",
}


def _three(row: list[float]) -> tuple[float, float, float]:
    """A row of three: (LL, LL128, Simple) or (1, 2, >2 nodes)."""
    a, b, c = row
    return (a, b, c)


def _protos(row: list[float]) -> tuple[float, float, float]:
    """A row indexed by NCCL_PROTO_*, in PROTOS order."""
    return _three([row[_IX["protocol"][p.lower()]] for p in PROTOS])


def _per_algo(rows: list[list[float]]) -> dict[str, tuple[float, float, float]]:
    return {a: _protos(rows[_IX["algorithm"][n]]) for a, n in _NCCL_ALGO.items()}


# baseLatencies (us) per algorithm, (LL, LL128, Simple).
BASE_LAT_US = _per_algo(_TABLES["baseLatencies"])
# hwLatencies (us) per link type of a hop (nvlink, pci, net), per algorithm, (LL, LL128, Simple).
# collnet is NCCL's CollNetDirect (the variant on NVSwitch systems).
HW_LAT_US = {hw: _per_algo(_TABLES["hwLatencies"][i]) for hw, i in _IX["hw"].items()}
ARCHS = gpus.ARCHS
# llMaxBws (GB/s busbw): row = GPU generation for one node, or the CPU for several (row 0 Intel,
# row 1 AMD); column = 1, 2, >2 nodes.
LL_MAX_BW = tuple(_three(row) for row in _TABLES["llMaxBws"])


def _per_arch(rows: list[list[float]]) -> dict[str, tuple[float, float, float]]:
    """A table indexed by NCCL_<ARCH>_COMPCAP_IDX, per 1 / 2 / >2 nodes."""
    return {a: _three(rows[_IX["compcap"][a]]) for a in ARCHS}


# Per-channel caps (GB/s), per generation, per 1 / 2 / >2 nodes.
PER_CH_MAX_RING_LL128 = _per_arch(_TABLES["perChMaxRingLL128Bws"])
PER_CH_MAX_TREE_LL128 = _per_arch(_TABLES["perChMaxTreeLL128Bws"])
PER_CH_MAX_TREE = _per_arch(_TABLES["perChMaxTreeBws"])
PER_CH_MAX_NVLSTREE = _per_arch(_TABLES["perChMaxNVLSTreeBws"])
# nvlsEfficiency: NVLink SHARP's share of the NVLink bandwidth (0 = no NVLS before Hopper).
NVLS_EFFICIENCY = {a: float(_TABLES["nvlsEfficiency"][_IX["compcap"][a]]) for a in ARCHS}
# treeCorrectionFactor[proto][log2(bytes / 64)] for 64 B .. 256 MiB (tree all_reduce only).
TREE_CORRECTION: tuple[tuple[float, ...], ...] = tuple(
    tuple(map(float, _TABLES["treeCorrectionFactor"][_IX["protocol"][p.lower()]])) for p in PROTOS
)
_DEFINES = {name: int(d["value"]) for name, d in _DATA["defines"].items()}
NCCL_MAX_NVLS_ARITY = _DEFINES["NCCL_MAX_NVLS_ARITY"]  # the most NVLS heads (src/include/device.h)
# Not declared as tables in tuning.cc (written inline in its code, or in other files): kept here.
NET_OVERHEAD_US = 1.0  # getNetOverhead on an Intel x86 host (2.0 on AMD); x3 for Simple
RING_PLATEAU = {"volta": 1.9}  # ring Simple all_reduce latency factor on several nodes; 1.4 from Ampere
MAXCHANNELS = 64  # src/include/device.h
# The channels NVLS and NVLSTree kernels run (comm->nvlsChannels): NVLS_NCHANNELS_SM90, Hopper's.
# Blackwell's (NVLS_NCHANNELS_SM100_NVL 24 in one domain, NVLS_NCHANNELS_SM100 32 across domains,
# then ncclNvlsTreeSm100Tuning, src/transport/nvls.cc:164-219) were tried and not taken: they put the
# held-out B200 sweep further off (docs/sim.md, Limits).
NVLS_CHANNELS = _DEFINES["NVLS_NCHANNELS_SM90"]


@dataclass(frozen=True)
class CommShape:
    """What NCCL's tuner knows of a communicator."""

    op: str
    ranks: int
    nodes: int  # NVLink domains (NCCL's nodes) the communicator spans
    arch: str  # a member of ARCHS
    intra_hw: str  # "nvlink" or "pci": the link type between GPUs of a node
    nvswitch: bool  # an NVSwitch with NVLink SHARP (Hopper and later)
    channels: int  # NCCL's channel count
    nics_per_node: int
    sharp: bool = False  # CollNet: in-network reduction in the IB switches (SHARP)
    net_extra_us: float = 0.0  # what the transport adds per network hop to NCCL's RDMA figure

    @property
    def ppn(self) -> float:
        return self.ranks / self.nodes

    @property
    def col(self) -> int:
        """NCCL's index2: 1, 2, or more nodes."""
        return min(self.nodes, 3) - 1


def nvls_heads(shape: CommShape) -> int:
    """The NVLS graph's channels, one per head GPU (src/graph/search.cc ncclTopoCompute and
    ncclTopoSearchRecNet at v2.30.7-1): every GPU of one node; across nodes one per NIC with its own
    local GPU; at most NCCL_MAX_NVLS_ARITY. ncclTopoTuneModel multiplies NVLSTree's per-channel
    bandwidth by these (``graphs[NVLS]->nChannels``), not by the channels the kernel runs."""
    ppn = max(1, int(shape.ppn))
    heads = min(ppn, shape.nics_per_node) if shape.nodes > 1 else ppn
    return min(heads, NCCL_MAX_NVLS_ARITY)


def channels_for(nodes: int, nics_per_node: int, gpus_per_node: int) -> int:
    """NCCL's channel count: the ring graph search finds one channel per NIC (per GPU in one node),
    and ``connect.cc`` doubles them (``nChannels * 2``), at most MAXCHANNELS."""
    base = nics_per_node if nodes > 1 else gpus_per_node
    return max(2, min(MAXCHANNELS, 2 * max(1, base)))


def allowed(shape: CommShape, algo: str) -> tuple[bool, str]:
    """Whether NCCL runs ``algo`` for this op on this system, and why not (ncclTopoTuneModel's
    per-function filters and the enable rules that follow it)."""
    op, multi = shape.op, shape.nodes > 1
    if op == "broadcast" and algo != "ring":
        return False, "NCCL runs broadcast on rings only"
    if op in ("all_gather", "reduce_scatter") and algo not in ("ring", "pat", "nvls", "collnet"):
        return False, f"NCCL runs {op} with ring, PAT, NVLS or CollNet only"
    if op == "all_reduce" and algo == "pat":
        return False, "PAT runs all_gather and reduce_scatter only"
    if op not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        return False, f"{op} is point-to-point in NCCL (no collective algorithm)"
    if algo in ("nvls", "nvlstree"):
        if not shape.nvswitch:
            return False, "NVLS needs NVSwitch with NVLink SHARP (H100, H200, B200, GB200)"
        if shape.ppn < 2:
            return False, "NVLS needs several GPUs of one NVLink domain"
    if algo == "nvlstree" and not multi:
        return False, "NVLSTree is disabled on a single node"
    if algo == "nvls" and multi and not shape.sharp:
        return False, "NVLS across nodes needs CollNet/SHARP (--sharp)"
    if algo == "collnet":
        if not shape.sharp:
            return False, "CollNet needs in-network reduction (SHARP switches): --sharp"
        if not multi:
            return False, "CollNet reduces across nodes"
        if op != "all_reduce" and shape.ppn > shape.nics_per_node:
            return False, f"CollNet {op} needs one NIC per GPU"
    if algo == "pat" and (shape.ppn != 1 or not multi):
        return False, "PAT runs with one GPU per node"
    return True, ""


def protocols(shape: CommShape, algo: str) -> list[str]:
    """Protocols NCCL enables for ``algo``: NVLS, NVLSTree, CollNet and PAT run Simple only;
    LL128 only where every intra-node hop is NVLink (typeIntra <= PATH_NVB) from Volta on."""
    if algo in ("nvls", "nvlstree", "collnet", "pat"):
        return ["Simple"]
    out = ["LL", "LL128", "Simple"]
    if shape.intra_hw != "nvlink":
        out.remove("LL128")
    return out


def _log2i(x: float) -> int:
    return int(math.floor(math.log2(x))) if x >= 1 else 0


def latency_s(shape: CommShape, algo: str, proto: str, size_bytes: float) -> float:
    """NCCL's latency of one (algorithm, protocol): a base plus each hop charged the latency of
    its own link type (NVLink or PCIe inside a node, the network between nodes)."""
    p, n, nn = _P[proto], shape.ranks, shape.nodes
    lat = BASE_LAT_US[algo][p]
    intra = HW_LAT_US[shape.intra_hw][algo][p]
    # With one GPU per node every hop is exposed: NCCL charges the tree's network latency.
    inter = HW_LAT_US["net"]["tree" if shape.ppn == 1 else algo][p] + shape.net_extra_us
    op = shape.op
    if algo == "ring":
        steps = 2 * (n - 1) if op == "all_reduce" else n - 1 if op in ("all_gather", "reduce_scatter") else n
        if op == "broadcast":
            lat += HW_LAT_US["net" if nn > 1 else shape.intra_hw]["ring"][p]
        else:
            overhead = (NET_OVERHEAD_US * (3 if proto == "Simple" else 1)) if nn > 1 else 0.0
            inter_steps = 0 if nn == 1 else 2 * (nn - 1) if op == "all_reduce" else nn - 1
            lat += (steps - inter_steps) * max(intra, overhead) + inter_steps * inter
            if (
                proto == "Simple"
                and nn > 1
                and op == "all_reduce"
                and size_bytes / (shape.channels * n) >= 64
            ):
                lat *= RING_PLATEAU.get(shape.arch, 1.4)
    elif algo == "tree":
        lat += 2 * ((shape.ppn - 1) * intra + _log2i(nn) * inter)
    elif algo == "collnet":
        lat += 2 * (min(1.0, shape.ppn - 1) * intra + (shape.ppn - 1) * 0.4) + inter
    elif algo == "nvls":
        lat = intra + (inter if nn > 1 else 0.0)
    elif algo == "nvlstree":
        lat += intra + 2 * _log2i(nn) * inter
    elif algo == "pat":
        lat += _log2i(nn) * (inter / 3.5) + n * 2.8
    return lat * 1e-6


def protocol_busbw(shape: CommShape, algo: str, proto: str, busbw: float, size_bytes: float) -> float:
    """The busbw (GB/s, nccl-tests units) this protocol gets out of the flow model's ``busbw`` for
    the algorithm's traffic: NCCL's protocol factors, per-channel caps and tree derating."""
    a, col, nch = shape.arch, shape.col, shape.channels
    row = ARCHS.index(a) if shape.nodes == 1 else 0  # several nodes: the CPU's row (Intel)
    ll_max = LL_MAX_BW[row][col]
    bw = busbw
    if algo == "ring" and proto == "LL":
        bw = min(ll_max, bw * 0.5)
    elif algo == "ring" and proto == "LL128":
        bw = min(bw * 0.92, nch * PER_CH_MAX_RING_LL128[a][col])
    elif algo == "tree":
        if shape.op == "all_reduce":
            bw = min(bw * 0.92, nch * PER_CH_MAX_TREE[a][col])
        if proto == "LL":
            bw = min(bw / 3.8, ll_max)
        elif proto == "LL128":
            bw = min(
                bw * (7.0 / 9.0 if shape.nodes == 1 else 120.0 / 128.0), nch * PER_CH_MAX_TREE_LL128[a][col]
            )
        if shape.ppn == 1:
            # tuning.cc:336, maxTreePattern == NCCL_TOPO_PATTERN_TREE: a node of one GPU always takes
            # that pattern (src/graph/search.cc:1133); a Hopper+ search that falls back to it with
            # several GPUs per node (search.cc:1216) depends on the machine: not modelled.
            bw *= 0.85
        bw *= tree_correction(proto, size_bytes)
    elif algo == "nvlstree":
        # tuning.cc:307-324: heads x min(NVLS rate, network rate, perChMaxNVLSTreeBw)
        cap = nvls_heads(shape) * PER_CH_MAX_NVLSTREE[a][col]
        bw = min(bw, cap) if cap > 0 else bw
        # ncclTopoGetAlgoTime also corrects NVLSTree as a tree on Blackwell x86 hosts (tuning.cc:643-646):
        # tried and not taken, it puts the held-out B200 sweep further off (docs/sim.md, Limits).
    elif algo == "pat":
        bw *= 0.75
    return bw


def tree_correction(proto: str, size_bytes: float) -> float:
    """treeCorrectionFactor: trees run below their model for medium sizes (64 B .. 256 MiB)."""
    log = _log2i(int(size_bytes) >> 6) if size_bytes >= 64 else -1
    if 0 <= log < 23:
        return TREE_CORRECTION[_P[proto]][log]
    return 1.0
