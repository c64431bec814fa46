"""Collective algorithms turned into phases of concurrent point-to-point transfers.

A *pattern* is one set of concurrent transfers (src GPU -> dst GPU, and for inter-node
transfers the NICs they leave and enter by). A *phase* repeats a pattern ``steps`` times with
``bytes`` per transfer per step, and says how steps compose in time:

* ``ring``: steps are pipelined around rings (NCCL ring, gloo ring_chunked). Per step, each
  ring pays its mean hop latency and the slowest transfer's serialisation.
* ``sync``: steps are separated by a dependency on every transfer (halving-doubling,
  alltoall, send/recv). Per step: the worst latency plus the slowest transfer.
* ``pipeline``: one pass of ``bytes`` down a tree or chain of ``steps`` hops, cut into slices
  that overlap (NCCL trees, ring broadcast).

Ranks: rank = node * gpus_per_node + local GPU. Multi-node rings follow NCCL's rail-aligned
channels: one channel per distinct NIC, each a ring over all ranks whose intra-node order is
rotated so the channel enters and leaves each node through the same NIC (rail), using PXN
(an NVLink hop to the NIC's GPU) where needed.
"""

from __future__ import annotations

import math

import numpy as np

from fabricscope import collective_ops
from fabricscope.errors import FabricscopeError
from fabricscope.sim.patterns import Pattern, Phase, Plan
from fabricscope.sim.topology import Topology

ALGOS = ("ring", "tree", "hierarchical", "halving-doubling", "direct")
DEFAULT_ALGO = {
    "all_reduce": "ring",
    "all_gather": "ring",
    "reduce_scatter": "ring",
    "alltoall": "direct",
    "broadcast": "ring",
    "sendrecv": "direct",
}
# Above this many transfers an alltoall is solved by per-link aggregation (sim/alltoall.py): the
# same slowest rate and latency, without a flow per transfer.
AGGREGATE_ALLTOALL_ABOVE = 20_000


def stripe(pattern: Pattern, sockets: int) -> Pattern:
    """Each network transfer cut over ``sockets`` sockets (NCCL's socket transport), each its own
    TCP flow with its own ECMP hash; a transfer ends when its slowest socket does."""
    net = np.flatnonzero(pattern.src_nic >= 0)
    if sockets <= 1 or not len(net):
        return pattern
    keep = np.flatnonzero(pattern.src_nic < 0)
    rows = np.concatenate([keep, np.repeat(net, sockets)])
    sock = np.concatenate([np.zeros(len(keep), np.int64), np.tile(np.arange(sockets), len(net))])
    share = np.where(np.arange(len(rows)) < len(keep), 1.0, 1.0 / sockets)
    return Pattern(
        pattern.key + f"-x{sockets}",
        pattern.src_gpu[rows],
        pattern.dst_gpu[rows],
        pattern.src_nic[rows],
        pattern.dst_nic[rows],
        pattern.entropy[rows] * 64 + sock,
        pattern.chain[rows],
        share,
    )


def _direct(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    entropy: np.ndarray | int = 0,
    chain: np.ndarray | int = 0,
    key: str = "",
    via_rail_of_dst: bool = False,
) -> Pattern:
    """Transfers over the nearest NICs (or, for alltoall with PXN, via the NIC on the
    destination's rail)."""
    G = topo.node.gpus_per_node
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    inter = (src // G) != (dst // G)
    dn = topo.nic_of_gpu(dst)
    if via_rail_of_dst:
        N = topo.node.nics_per_node
        sn = (src // G) * N + dn % N
    else:
        sn = topo.nic_of_gpu(src)
    n = len(src)
    return Pattern(
        key,
        src,
        dst,
        np.where(inter, sn, -1),
        np.where(inter, dn, -1),
        np.broadcast_to(np.asarray(entropy, np.int64), (n,)).copy(),
        np.broadcast_to(np.asarray(chain, np.int64), (n,)).copy(),
    )


def _layout(topo: Topology, groups: np.ndarray) -> tuple[int, int]:
    """Nodes per group and GPUs per node in each group; groups must be node-major and uniform."""
    G = topo.node.gpus_per_node
    ng, m = groups.shape
    node = groups // G
    gpn = int(np.sum(node[0] == node[0, 0]))
    if m % gpn:
        raise FabricscopeError("every node of a communicator must hold the same number of its ranks")
    nn = m // gpn
    blocks = node.reshape(ng, nn, gpn)
    if not np.all(blocks == blocks[:, :, :1]):
        raise FabricscopeError("communicator ranks must be grouped by node (node-major order)")
    if nn > 1 and len(np.unique(blocks[0, :, 0])) != nn:
        raise FabricscopeError("a communicator lists the same node twice")
    return nn, gpn


def uneven(topo: Topology, groups: np.ndarray) -> bool:
    """One communicator grouped by node whose nodes hold different numbers of its ranks (a Slurm
    allocation of SLURM_TASKS_PER_NODE=2(x2),1, a hostfile with different slot counts)."""
    if groups.shape[0] != 1:
        return False
    node = groups[0] // topo.node.gpus_per_node
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    counts = np.diff(np.r_[starts, len(node)])
    return len(np.unique(node[starts])) == len(starts) and len(np.unique(counts)) > 1


def ring_pattern(
    topo: Topology, groups: np.ndarray, key: str, channels: int | None = None
) -> tuple[Pattern, int]:
    """NCCL-style rings over each group (all groups at once). Returns (pattern, channels).

    An uneven communicator (:func:`uneven`) is one ring through its ranks in order, each hop a
    direct transfer: every node's link carries one hop in and one out, as with any count per node."""
    G, N = topo.node.gpus_per_node, topo.node.nics_per_node
    ng, m = groups.shape
    nn, gpn = (0, 0) if uneven(topo, groups) else _layout(topo, groups)
    if nn <= 1:
        src = groups
        dst = np.roll(groups, -1, axis=1)
        chain = np.repeat(np.arange(ng), m)
        return _direct(topo, src.ravel(), dst.ravel(), 0, chain, key), 1
    loc = groups.reshape(ng, nn, gpn)
    nic_local = topo.local_nic_of_gpu[loc[:, 0, :] % G]  # (ng, gpn): NIC of each local rank
    _, starts = np.unique(nic_local[0], return_index=True)
    starts = np.sort(starts)
    if channels is not None and not 1 <= channels <= 64:
        raise FabricscopeError("--channels must be between 1 and 64")
    C = len(starts) if channels is None else channels
    parts = []
    for c in range(C):
        s = int(starts[c % len(starts)])
        order = (s + np.arange(gpn)) % gpn
        seq = loc[:, :, order]  # (ng, nn, gpn)
        nxt = np.roll(seq.reshape(ng, m), -1, axis=1).reshape(ng, nn, gpn)
        src = seq.ravel()
        dst = nxt.ravel()
        last = np.zeros((ng, nn, gpn), bool)
        last[:, :, -1] = True
        last = last.ravel()
        node_s = seq // G
        rail = nic_local[:, s][:, None, None]
        sn = (node_s * N + rail).ravel()
        dn = (np.roll(node_s.reshape(ng, m), -1, axis=1).reshape(ng, nn, gpn) * N + rail).ravel()
        src_nic = np.where(last, sn, -1)
        dst_nic = np.where(last, dn, -1)
        chain = np.repeat(np.arange(ng) * C + c, m)
        parts.append(Pattern(key, src, dst, src_nic, dst_nic, np.full(len(src), c, np.int64), chain))
    return Pattern.concat(key, parts), C


def _btree_parents(n: int) -> np.ndarray:
    """Parent of each of ranks 0..n-1 in an in-order binary tree (-1 for the root).

    Node x = rank + 1 sits at the level of its lowest set bit; its parent is x + lowbit or
    x - lowbit, whichever has the next bit clear; parents beyond n are skipped upward.
    """
    parents = np.full(n, -1, np.int64)
    top = 1 << max(1, math.ceil(math.log2(n + 1)) + 1)
    for r in range(n):
        x = r + 1
        while True:
            lb = x & -x
            p = x + lb if not (x & (lb << 1)) else x - lb
            if p >= top:
                p = -1
                break
            x = p
            if p <= n:
                break
        parents[r] = p - 1 if p > 0 else -1
    return parents


def dbtree_parents(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two binary trees in which (for n > 2) an interior rank of one is a leaf of the other
    (Sanders, Speck, Traeff 2009; NCCL 2.4): the second tree is the first shifted by one rank."""
    a = _btree_parents(n)
    shift = (np.arange(n) - 1) % n  # rank r takes the tree position of rank r-1
    pos_parent = _btree_parents(n)[shift]
    b = np.where(pos_parent >= 0, (pos_parent + 1) % n, -1)
    return a, b


def _tree_depth(parents: np.ndarray) -> int:
    """Longest root path, by walking every rank up at once (numpy pointer chasing)."""
    cur = np.arange(len(parents))
    depth = 0
    while True:
        cur = parents[cur[cur >= 0]]
        cur = cur[cur >= 0]
        if not len(cur):
            return depth
        depth += 1
        if depth > len(parents):
            raise AssertionError("cycle in tree")


def tree_phase(topo: Topology, groups: np.ndarray, size: float, key: str) -> Phase:
    """NCCL double binary tree all-reduce: trees across nodes, a chain inside each node; reduce
    up and broadcast down run pipelined at once, each tree carries half the data per NIC."""
    G, N = topo.node.gpus_per_node, topo.node.nics_per_node
    ng, m = groups.shape
    nn, gpn = _layout(topo, groups)
    loc = groups.reshape(ng, nn, gpn)
    nic_local = topo.local_nic_of_gpu[loc[:, 0, :] % G]
    _, starts = np.unique(nic_local[0], return_index=True)
    starts = np.sort(starts)
    C = len(starts) if nn > 1 else 1
    trees = dbtree_parents(nn) if nn > 1 else (np.array([-1]), np.array([-1]))
    parts: list[Pattern] = []
    depth = 0
    for c in range(C):
        s = int(starts[c])
        order = (s + np.arange(gpn)) % gpn
        chain_gpus = loc[:, :, order]  # head of each node's chain = order[0]
        rail = nic_local[:, s][:, None]  # (ng, 1)
        for t, parents in enumerate(trees):
            ch = (np.arange(ng) * C + c) * 2 + t
            # intra-node chain, both directions
            if gpn > 1:
                a = chain_gpus[:, :, 1:].ravel()
                b = chain_gpus[:, :, :-1].ravel()
                chid = np.repeat(ch, nn * (gpn - 1))
                parts.append(_direct(topo, a, b, c, chid))
                parts.append(_direct(topo, b, a, c, chid))
            kids = np.flatnonzero(parents >= 0)
            if len(kids):
                heads = chain_gpus[:, :, 0]  # (ng, nn)
                child = heads[:, kids]
                par = heads[:, parents[kids]]
                nic_c = ((child // G) * N + rail).ravel()
                nic_p = ((par // G) * N + rail).ravel()
                child, par = child.ravel(), par.ravel()
                chid = np.repeat(ch, len(kids))
                for s_g, d_g, s_n, d_n in ((child, par, nic_c, nic_p), (par, child, nic_p, nic_c)):
                    parts.append(
                        Pattern(key, s_g, d_g, s_n, d_n, np.full(len(s_g), 2 * c + t, np.int64), chid)
                    )
            depth = max(depth, _tree_depth(parents))
    pattern = Pattern.concat(key, parts)
    hops = 2 * (depth + gpn - 1)  # up the chain and tree, then down again
    return Phase("tree (reduce+broadcast, pipelined)", pattern, "pipeline", max(hops, 1), size / (2 * C))


def halving_doubling_phases(topo: Topology, groups: np.ndarray, size: float, op: str) -> list[Phase]:
    """Rabenseifner: reduce-scatter by recursive halving then all-gather by recursive doubling
    (Thakur, Rabenseifner, Gropp 2005). Non-powers of two fold the extra ranks in first."""
    ng, m = groups.shape
    p2 = 1 << int(math.floor(math.log2(m)))
    extra = m - p2
    phases: list[Phase] = []
    if extra and op == "all_reduce":
        src = groups[:, p2:].ravel()
        dst = groups[:, :extra].ravel()
        fold = _direct(topo, src, dst, 0, 0, "hd-fold")
        unfold = _direct(topo, dst, src, 0, 0, "hd-unfold")
        phases.append(Phase("fold extra ranks", fold, "sync", 1, size))
    elif extra:
        raise FabricscopeError(f"halving-doubling {op} needs a power-of-two number of ranks (got {m})")
    core = groups[:, :p2]
    k = int(math.log2(p2))
    rs, ag = [], []
    for s in range(k):
        d = 1 << s
        idx = np.arange(p2)
        partner = idx ^ d
        src = core.ravel()
        dst = core[:, partner].ravel()
        pat = _direct(topo, src, dst, s, 0, f"hd-{d}")
        b = size / (2 ** (s + 1))
        rs.append(Phase(f"halving step distance {d}", pat, "sync", 1, b))
        ag.append(Phase(f"doubling step distance {d}", pat, "sync", 1, b))
    if op in ("all_reduce", "reduce_scatter"):
        phases += rs
    if op in ("all_reduce", "all_gather"):
        phases += list(reversed(ag))
    if extra and op == "all_reduce":
        phases.append(Phase("unfold extra ranks", unfold, "sync", 1, size))
    return phases


def plan(
    topo: Topology,
    op: str,
    algo: str | None,
    size_bytes: int,
    groups: np.ndarray | None = None,
    channels: int | None = None,
    pxn: bool = True,
) -> Plan:
    """The phases of one collective on ``groups`` (rows of global GPU ids, all run at once);
    default: one communicator of every GPU."""
    op = collective_ops.lookup(op, among=collective_ops.MEASURED).name
    algo = (algo or "auto").lower()
    if algo == "auto":  # NCCL's choice is sim/select.py's; a bare plan takes the flow model's default
        algo = DEFAULT_ALGO[op]
    if algo not in ALGOS:
        raise FabricscopeError(f"unknown algorithm {algo!r} (choose from {', '.join(ALGOS)})")
    if size_bytes <= 0:
        raise FabricscopeError("--size must be positive")
    groups = _checked_groups(topo, groups)
    p = groups.shape[1]
    n = float(size_bytes)
    pl = Plan(op, algo, size_bytes, p)
    if op == "sendrecv":
        if algo != "direct":
            raise FabricscopeError("sendrecv uses --algo direct")
        pat = _direct(
            topo,
            groups.ravel(),
            np.roll(groups, -1, axis=1).ravel(),
            0,
            0,
            "p2p" if pxn else "p2p-nopxn",
            via_rail_of_dst=pxn,
        )
        pl.phases.append(Phase("send/recv to next rank", pat, "sync", 1, n))
    elif op == "alltoall":
        if algo != "direct":
            raise FabricscopeError("alltoall uses --algo direct (every rank sends to every other at once)")
        pl.phases.append(alltoall_phase(topo, groups, n, pxn))
    elif algo == "ring":
        pl.phases.append(_ring_phase(topo, groups, op, n, channels))
    elif algo == "tree":
        if op != "all_reduce":
            raise FabricscopeError("the tree algorithm models all_reduce only")
        pl.phases.append(tree_phase(topo, groups, n, "tree"))
    elif algo == "hierarchical":
        if op != "all_reduce":
            raise FabricscopeError("the hierarchical algorithm models all_reduce only")
        pl.phases.extend(_hierarchical_phases(topo, groups, n))
        pl.overlap = True
    elif algo == "halving-doubling":
        if op not in ("all_reduce", "all_gather", "reduce_scatter"):
            raise FabricscopeError("halving-doubling models all_reduce, all_gather and reduce_scatter")
        pl.phases.extend(halving_doubling_phases(topo, groups, n, op))
    else:
        raise FabricscopeError(f"--algo {algo} does not apply to {op}")
    return pl


def _checked_groups(topo: Topology, groups: np.ndarray | None) -> np.ndarray:
    """The communicator groups as a 2-D int array of GPUs in the topology, at least 2 ranks each
    (default: one communicator of every GPU)."""
    if groups is None:
        groups = np.arange(topo.n_gpus, dtype=np.int64)[None, :]
    groups = np.asarray(groups, np.int64)
    if groups.ndim != 2 or groups.size == 0:
        raise FabricscopeError("communicator groups must be a non-empty 2-D array")
    if groups.shape[1] < 2:
        raise FabricscopeError("a collective needs at least 2 ranks")
    if groups.min() < 0 or groups.max() >= topo.n_gpus:
        raise FabricscopeError("communicator refers to a GPU outside the topology")
    return groups


def _ring_phase(topo: Topology, groups: np.ndarray, op: str, n: float, channels: int | None) -> Phase:
    """The ring algorithm: 2(p-1) steps of n/(pC) for all_reduce, p-1 for all_gather and
    reduce_scatter, and for broadcast a pipelined chain along the ring."""
    p = groups.shape[1]
    pat, C = ring_pattern(topo, groups, "ring", channels)
    if op == "all_reduce":
        return Phase(
            f"ring reduce-scatter + all-gather ({C} channel(s))", pat, "ring", 2 * (p - 1), n / (p * C)
        )
    if op in ("all_gather", "reduce_scatter"):
        return Phase(f"ring {op} ({C} channel(s))", pat, "ring", p - 1, n / (p * C))
    # broadcast: a pipelined chain along the ring (the wrap-around hop carries nothing)
    keep = np.ones(len(pat), bool)
    # drop the hop back into the root (rank groups[:,0]) so the ring becomes a chain
    keep &= ~np.isin(pat.dst_gpu, groups[:, 0])
    chain = Pattern(
        pat.key + "-chain",
        pat.src_gpu[keep],
        pat.dst_gpu[keep],
        pat.src_nic[keep],
        pat.dst_nic[keep],
        pat.entropy[keep],
        pat.chain[keep],
    )
    return Phase(f"ring broadcast chain ({C} channel(s))", chain, "pipeline", p - 1, n / C)


def _hierarchical_phases(topo: Topology, groups: np.ndarray, n: float) -> list[Phase]:
    """Hierarchical all_reduce: a ring inside each node, then one ring per rail across nodes."""
    ng = groups.shape[0]
    nn, gpn = _layout(topo, groups)
    if nn == 1 or gpn == 1:
        raise FabricscopeError("hierarchical all_reduce needs several nodes with several GPUs each")
    loc = groups.reshape(ng * nn, gpn)  # one intra-node group per node
    intra, _ = ring_pattern(topo, loc, "hier-intra")
    inter_groups = groups.reshape(ng, nn, gpn).transpose(0, 2, 1).reshape(ng * gpn, nn)
    inter, _ = ring_pattern(topo, inter_groups, "hier-inter")
    return [
        Phase("intra-node reduce-scatter + all-gather", intra, "ring", 2 * (gpn - 1), n / gpn),
        Phase("inter-node all-reduce (one ring per rail)", inter, "ring", 2 * (nn - 1), n / (gpn * nn)),
    ]


def _heads(topo: Topology, groups: np.ndarray) -> np.ndarray:
    """One group per (communicator, NIC): the GPU on each node that owns that NIC (NCCL's NVLS and
    CollNet heads), so every rail carries its own share. Shape (groups x NICs, nodes)."""
    G = topo.node.gpus_per_node
    ng, _ = groups.shape
    nn, gpn = _layout(topo, groups)
    loc = groups.reshape(ng, nn, gpn)
    nic_local = topo.local_nic_of_gpu[loc[:, 0, :] % G]
    _, starts = np.unique(nic_local[0], return_index=True)
    heads = loc[:, :, np.sort(starts)]  # (ng, nn, C)
    return heads.transpose(0, 2, 1).reshape(-1, nn)


def nvls_phase(topo: Topology, groups: np.ndarray, size: float, op: str, efficiency: float) -> Phase:
    """NVLink SHARP inside each node (NVLink domain). For all_reduce every GPU's NVLink carries
    n (1 + 1/g) each way: the switch reads the n-byte buffer to reduce (multimem.ld_reduce) and the
    GPU stores its reduced n/g share, which the switch multicasts to every GPU (multimem.st);
    all_gather / reduce_scatter move n (g-1)/g. The switch is not a GPU endpoint here, so each
    GPU exchanges with a neighbour on the NVSwitch, which loads every GPU link exactly once each
    way. ``efficiency`` is NCCL's nvlsEfficiency (bytes are divided by it)."""
    ng, _ = groups.shape
    nn, gpn = _layout(topo, groups)
    loc = groups.reshape(ng * nn, gpn)
    chain = np.repeat(np.arange(ng * nn), gpn)
    pat = _direct(topo, loc.ravel(), np.roll(loc, -1, axis=1).ravel(), 0, chain, "nvls")
    per = size * (1 + 1 / gpn) if op == "all_reduce" else size * (gpn - 1) / gpn
    return Phase("NVLS in-switch reduction (NVLink SHARP)", pat, "sync", 1, per / efficiency)


def nvlstree_phases(topo: Topology, groups: np.ndarray, size: float, efficiency: float) -> list[Phase]:
    """NCCL's NVLSTree all_reduce: NVLS inside each node while the node's NIC heads run a double
    binary tree across nodes on their own rail, each with 1/C of the data; pipelined (overlap)."""
    heads = _heads(topo, groups)
    C = heads.shape[0] // groups.shape[0]
    tree = tree_phase(topo, heads, size / C, "nvlstree")
    tree.name = f"tree across nodes on {C} rail(s)"
    return [nvls_phase(topo, groups, size, "all_reduce", efficiency), tree]


def collnet_phases(
    topo: Topology, groups: np.ndarray, size: float, op: str, nvls_efficiency: float
) -> list[Phase]:
    """CollNet (SHARP): every NIC sends its 1/C share once into the switches, which reduce in the
    network, and receives the result once: n/C each way per NIC, half a ring's network bytes.
    The switch is not an endpoint here: each head exchanges with the next node's head on the same
    rail, which loads every access link as SHARP does. Inside the node: NVLS where the node has
    it, else a ring reduce-scatter + all-gather; pipelined with the network part (overlap)."""
    ng, _ = groups.shape
    nn, gpn = _layout(topo, groups)
    heads = _heads(topo, groups)
    C = heads.shape[0] // ng
    share = size / C if op == "all_reduce" else size * (nn - 1) / nn / C
    net = _direct(topo, heads.ravel(), np.roll(heads, -1, axis=1).ravel(), 0, 0, "collnet")
    phases = [Phase("in-network reduction (SHARP), per rail", net, "sync", 1, share)]
    if gpn > 1:
        if nvls_efficiency > 0:
            phases.insert(0, nvls_phase(topo, groups, size, op, nvls_efficiency))
        else:
            intra, _ = ring_pattern(topo, groups.reshape(ng * nn, gpn), "collnet-intra")
            steps = 2 * (gpn - 1) if op == "all_reduce" else gpn - 1
            phases.insert(0, Phase("intra-node ring to the NIC heads", intra, "ring", steps, size / gpn))
    return phases


def alltoall_phase(topo: Topology, groups: np.ndarray, n: float, pxn: bool = True) -> Phase:
    """Every rank sends n/p to every other at once (MoE dispatch), via the NIC on the
    destination's rail (NCCL's PXN), or with ``pxn=False`` (NCCL_PXN_DISABLE=1) by its own NIC."""
    ng, p = groups.shape
    if ng * p * (p - 1) > AGGREGATE_ALLTOALL_ABOVE:  # count transfers per link instead
        from fabricscope.sim import alltoall

        agg = alltoall.build(topo, groups, _layout(topo, groups), pxn)
        return Phase("alltoall (all pairs at once, aggregated per link)", agg, "sync", 1, n / p)  # type: ignore[arg-type]
    i, j = np.nonzero(~np.eye(p, dtype=bool))
    pat = _direct(
        topo,
        groups[:, i].ravel(),
        groups[:, j].ravel(),
        0,
        0,
        "alltoall" if pxn else "alltoall-nopxn",
        via_rail_of_dst=pxn,
    )
    return Phase("alltoall (all pairs at once)", pat, "sync", 1, n / p)


def p2p_plan(
    topo: Topology,
    src: np.ndarray,
    dst: np.ndarray,
    size_bytes: float,
    key: str,
    name: str = "point-to-point",
) -> Plan:
    """Concurrent point-to-point transfers (pipeline-stage sends, KV-cache moves): each ``src[i]``
    sends ``size_bytes`` to ``dst[i]`` at once. busbw = algbw (factor 1)."""
    src = np.asarray(src, np.int64).ravel()
    dst = np.asarray(dst, np.int64).ravel()
    if len(src) != len(dst) or not len(src):
        raise FabricscopeError(
            "point-to-point transfers need matching, non-empty source and destination lists"
        )
    if src.min() < 0 or dst.min() < 0 or max(src.max(), dst.max()) >= topo.n_gpus:
        raise FabricscopeError("point-to-point transfer refers to a GPU outside the topology")
    pat = _direct(topo, src, dst, np.arange(len(src)) % 64, 0, key)
    pl = Plan("sendrecv", "direct", int(size_bytes), 2)
    pl.phases.append(Phase(name, pat, "sync", 1, float(size_bytes)))
    return pl
