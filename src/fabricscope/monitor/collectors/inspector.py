"""NCCL communication time from the NCCL Inspector, judged against what the fabric should deliver:
per communicator, collective and size bucket the execution-time histogram, bandwidths, the
simulator's expected bus bandwidth and the ratio; per rank (with its node, GPU, NIC and rail) the
ratio and the seconds since its last collective, which is where a stalled job shows first."""

from __future__ import annotations

import math
import statistics
import time

from fabricscope.monitor.background import Periodic
from fabricscope.monitor.collectors.base import Families, ScrapeContext
from fabricscope.monitor.inspector_tail import DURATION_BUCKETS, CommView, InspectorCounts, InspectorFollower
from fabricscope.monitor.nccl_expected import ExpectedBusbw, shape_of
from fabricscope.monitor.topology import Topology

GB = 1e9
KEY = ("comm", "collective", "size_bucket")
EXPECTED_HELP = (
    "Bus bandwidth the fabric should deliver for this communicator's shape (ranks, nodes, this node's NIC "
    "count and rate), collective and message size, from fabricscope's simulator, in bytes per second."
)
RATIO_HELP = "Measured bus bandwidth over the expected one (1 = what the fabric should deliver; 0.5 = half)."
RANK_RATIO_HELP = (
    "Median over this rank's recent collectives of measured over expected bus bandwidth; labelled with "
    "the node, the GPU (rank modulo ranks per node unless the Inspector names it) and its nearest NIC and rail."
)
SINCE_HELP = "Seconds since this rank's last completed collective (Inspector dump time): a stalled job rises here first."


def _rank_place(comm: CommView, rank: int, gpu: int | None, topo: Topology) -> dict[str, str]:
    per_node = max(1, math.ceil(comm.n_ranks / max(comm.n_nodes, 1)))
    index = gpu if gpu is not None else rank % per_node
    nic = topo.gpu_nic.get(index, "")
    rail = str(topo.nics.index(nic)) if nic in topo.nics else ""
    return {"gpu": str(index), "nic": nic, "rail": rail}


class InspectorCollector:
    name = "nccl_inspector"
    uses_topology = True

    def __init__(self, follower: InspectorFollower, task: Periodic[InspectorCounts], expected: ExpectedBusbw) -> None:
        self.follower = follower
        self.task = task
        self.expected = expected

    def collect(self, ctx: ScrapeContext, out: Families) -> None:
        outcome = self.task.outcome
        if outcome.error is not None:
            ctx.root.note("nccl inspector", f"last poll failed: {outcome.error}")
        if self.task.is_stale():
            ctx.root.note("nccl inspector", f"not polled for {self.task.age_s():.0f} s")
        counts = self.follower.counts()
        for source, reason in counts.problems:
            ctx.root.note(source, reason)
        now = time.time()
        for comm in self.follower.view():
            self._communicator(ctx.topology, comm, out, now)
        _own(counts, out)

    def _communicator(self, topo: Topology, comm: CommView, out: Families, now: float) -> None:
        out.gauge("nccl_communicator_info", "NCCL communicator seen by the Inspector; value is always 1.",
                  {"comm": comm.label, "comm_id": comm.comm_id[:32], "comm_name": comm.name[:64],
                   "n_ranks": str(comm.n_ranks), "n_nodes": str(comm.n_nodes)}, 1)
        expected_by_key: dict[tuple[str, str], float | None] = {}
        per_op: dict[str, list] = {}
        for (op, bucket), key in comm.keys.items():
            labels = {"comm": comm.label, "collective": op, "size_bucket": bucket}
            out.counter("nccl_collectives_total", "Collectives completed (rate() is collectives per second).",
                        labels, key.count)
            agg = per_op.setdefault(op, [0, 0.0, [0] * len(DURATION_BUCKETS)])
            agg[0] += key.count
            agg[1] += key.sum_s
            agg[2] = [a + b for a, b in zip(agg[2], key.buckets)]
            if key.busbw_gbs is not None:
                out.gauge("nccl_busbw_bytes_per_second", "Bus bandwidth of recent collectives (mean), bytes per second.",
                          labels, key.busbw_gbs * GB)
            if key.algbw_gbs is not None:
                out.gauge("nccl_algbw_bytes_per_second",
                          "Algorithm bandwidth (size over time) of recent collectives (mean), bytes per second.",
                          labels, key.algbw_gbs * GB)
            expected = self.expected(shape_of(op, key.mean_size, comm.n_ranks, comm.n_nodes, topo))
            expected_by_key[(op, bucket)] = expected
            if expected:
                out.gauge("nccl_busbw_expected_bytes_per_second", EXPECTED_HELP, labels, expected)
                if key.busbw_gbs is not None:
                    out.gauge("nccl_busbw_ratio", RATIO_HELP, labels, key.busbw_gbs * GB / expected)
        for op, (count, total, counts) in per_op.items():
            cumulative, buckets = 0, []
            for bound, n in zip(DURATION_BUCKETS, counts):
                cumulative += n
                buckets.append((f"{bound:g}", float(cumulative)))
            buckets.append(("+Inf", float(count)))
            out.histogram("nccl_collective_duration_seconds", "Execution time of NCCL collectives (Inspector).",
                          {"comm": comm.label, "collective": op}, buckets, total)
        for rank, view in comm.ranks.items():
            labels = {"comm": comm.label, "rank": str(rank), "node": view.hostname,
                      **_rank_place(comm, rank, view.gpu, topo)}
            out.gauge("nccl_seconds_since_last_collective", SINCE_HELP, labels, max(0.0, now - view.last_s))
            ratios = [bw * GB / e for op, bucket, bw in view.recent if (e := expected_by_key.get((op, bucket)))]
            if ratios:
                out.gauge("nccl_rank_busbw_ratio", RANK_RATIO_HELP, labels, statistics.median(ratios))


def _own(counts: InspectorCounts, out: Families) -> None:
    out.counter("nccl_inspector_records_total", "Inspector records (collectives, P2P operations, textfile samples) read.",
                {}, counts.records)
    out.counter("nccl_inspector_bad_lines_total", "Lines of Inspector files that were not records (skipped).",
                {}, counts.bad_lines)
    out.counter("nccl_inspector_dropped_records_total",
                "Inspector records beyond the caps on communicators, operations or size buckets.", {},
                counts.dropped_records)
    out.counter("nccl_inspector_read_bytes_total", "Bytes read from the Inspector's dump files.", {}, counts.read_bytes)
    out.counter("nccl_inspector_skipped_bytes_total",
                "Bytes of Inspector dumps skipped unread (a file more than 64 MiB behind).", {}, counts.skipped_bytes)
    out.gauge("nccl_inspector_files", "Inspector dump files and textfiles being read now.", {},
              counts.files + counts.prom_files)
