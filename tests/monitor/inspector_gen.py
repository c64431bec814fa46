"""Writes NCCL Inspector output in exactly the formats the plugin writes, for tests and benchmarks:
the JSONL dump (one compact object per line, keys and order of inspector_json.cc at NCCL
v2.30.7-1: header id/comm_name/rank/n_ranks/nnodes, metadata v4.0, coll_perf with integer
microseconds) and the v5.1 textfile (inspector_prom.cc: nccl_bus_bandwidth_gbs and
nccl_collective_exec_time_microseconds). Many communicators, rotation, a planted slowdown on
one rank, a stall.

The bandwidth a healthy rank reaches is what ``fabricscope sim collective`` gives for the job's
shape, asked here directly with the fixture host's hardware written out (8 GPUs, 8 NICs at
400 Gb/s, InfiniBand), not through the exporter's own code; a slow rank reaches ``factor`` of it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from fabricscope.collective_ops import bus_factor, find
from fabricscope.errors import FabricscopeError
from fabricscope.nccl.inspector import size_bucket

OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll")
FIXTURE_HARDWARE = {"gpus_per_node": 8, "nics_per_node": 8, "nic_rate": "400G", "transport": "ib"}


@cache
def true_busbw_gbs(op: str, size: int, ranks: int, nodes: int) -> float:
    """The simulator's bus bandwidth for this collective on the fixture host's hardware (GB/s)."""
    from fabricscope.sim.scenario import run_collective

    row = find(op)
    assert row is not None, op
    params = {
        **FIXTURE_HARDWARE,
        "gpus_per_node": max(1, ranks // nodes),
        "nodes": nodes,
        "op": row.name,
        "size": str(size),
    }
    params["nics_per_node"] = min(8, params["gpus_per_node"])
    try:
        return float(run_collective(params)["busbw_GBps"])
    except FabricscopeError:  # a collective the model does not run on this shape: any plausible figure
        return 100.0


def record_line(
    *,
    comm_id: str,
    comm_name: str,
    rank: int,
    n_ranks: int,
    n_nodes: int,
    op: str,
    seq: int,
    size: int,
    busbw_gbs: float,
    hostname: str,
    pid: int,
    now_us: int,
) -> str:
    """One line of a dump, as inspectorCommInfoDumpColl writes it (exec time in whole microseconds,
    the bandwidths recomputed from it as the plugin does)."""
    row = find(op)
    factor = bus_factor(row.name, n_ranks) if row is not None else 1.0
    exec_us = max(1, round(size / (busbw_gbs / factor * 1e3)))
    algbw = size / exec_us / 1e3
    return json.dumps(
        {
            "header": {
                "id": comm_id,
                "comm_name": comm_name,
                "rank": rank,
                "n_ranks": n_ranks,
                "nnodes": n_nodes,
            },
            "metadata": {
                "inspector_output_format_version": "v4.0",
                "git_rev": "",
                "rec_mechanism": "nccl_profiler_interface",
                "dump_timestamp_us": now_us,
                "hostname": hostname,
                "pid": pid,
            },
            "coll_perf": {
                "coll": op,
                "coll_sn": seq,
                "coll_msg_size_bytes": size,
                "coll_exec_time_us": exec_us,
                "coll_timing_source": "kernel_gpu",
                "coll_algobw_gbs": round(algbw, 6),
                "coll_busbw_gbs": round(algbw * factor, 6),
            },
        },
        separators=(",", ":"),
    )


def prom_lines(
    *,
    comm_name: str,
    node: str,
    gpu: int,
    n_ranks: int,
    n_nodes: int,
    op: str,
    size: int,
    busbw_gbs: float,
    exec_us: float,
) -> str:
    labels = (
        f'version="v5.1",slurm_job_id="unknown",node="{node}",gpu="GPU{gpu}",comm_name="{comm_name}",'
        f'n_nodes="{n_nodes}",nranks="{n_ranks}",collective="{op}",message_size="{size_bucket(size)}",'
        'algo_proto="Ring_simple"'
    )
    return f"nccl_bus_bandwidth_gbs{{{labels}}} {busbw_gbs:.6g}\nnccl_collective_exec_time_microseconds{{{labels}}} {exec_us:.6g}\n"


@dataclass
class Communicator:
    comm_id: str
    name: str
    n_ranks: int
    n_nodes: int
    local_ranks: tuple[int, ...]  # the ranks running on this node
    ops: tuple[str, ...] = ("AllReduce",)
    sizes: tuple[int, ...] = (1 << 30,)
    slow: dict[int, float] = field(default_factory=dict)  # rank -> planted factor of the true busbw
    stalled: bool = False
    seq: int = 0


class DumpWriter:
    """One process's dump file in NCCL_INSPECTOR_DUMP_DIR (``<hostname>-pid<pid>.log``)."""

    def __init__(self, directory: Path, hostname: str = "node-a", pid: int = 4242) -> None:
        self.directory, self.hostname, self.pid = directory, hostname, pid
        self.path = directory / f"{hostname}-pid{pid}.log"
        self.lines = 0

    def round(self, comms: list[Communicator], now_us: int | None = None) -> int:
        """One collective per (communicator, op, size) on every local rank; returns lines written."""
        now_us = now_us if now_us is not None else int(time.time() * 1e6)
        out = []
        for comm in comms:
            if comm.stalled:
                continue
            for op in comm.ops:
                for size in comm.sizes:
                    comm.seq += 1
                    true = true_busbw_gbs(op, size, comm.n_ranks, comm.n_nodes) if find(op) else 100.0
                    for rank in comm.local_ranks:
                        out.append(
                            record_line(
                                comm_id=comm.comm_id,
                                comm_name=comm.name,
                                rank=rank,
                                n_ranks=comm.n_ranks,
                                n_nodes=comm.n_nodes,
                                op=op,
                                seq=comm.seq,
                                size=size,
                                busbw_gbs=true * comm.slow.get(rank, 1.0),
                                hostname=self.hostname,
                                pid=self.pid,
                                now_us=now_us,
                            )
                        )
        with open(self.path, "a") as handle:
            handle.write("".join(line + "\n" for line in out))
        self.lines += len(out)
        return len(out)

    def rotate(self) -> Path:
        """Rename the file away (logrotate ``create``): the next round starts a new one."""
        old = self.path.with_suffix(".log.1")
        os.replace(self.path, old)
        return old
