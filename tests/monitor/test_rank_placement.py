"""Each rank's GPU (and so its NIC and rail) from NCCL's own log when the exporter follows it: the
``[N]`` cudaDev of its lines and the ``busId`` of its init lines, mapped to the inventory's GPU by
PCI address; the rank-modulo rule only when no log says, and the label says which was used."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from fabricscope.monitor.nccl_tail import NcclLogTailer, Placement, bus_id_address
from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import make_exporter, samples
from tests.monitor.inspector_gen import Communicator, DumpWriter

DATA = Path(__file__).resolve().parent.parent / "data"
GH200 = DATA / "samples" / "nccl_tests_all_reduce_gh200_ib_stall.txt"  # NVIDIA/nccl#1291, verbatim
H200 = DATA / "job" / "h200" / "nccl_info_healthy.log"  # captured on a lent H200
H200_SMI = DATA / "samples" / "nvidia_smi_q_h200_pcie_copy.txt"  # the same machine's nvidia-smi -q


def _tail(*files: Path) -> NcclLogTailer:
    tailer = NcclLogTailer([str(f) for f in files], from_start=True)
    tailer.poll()
    return tailer


def test_real_init_lines_give_each_process_its_gpu() -> None:
    tailer = _tail(GH200, H200)
    # "gh1:185972:186354 [0] NCCL INFO ncclCommInitRank comm 0xaaacf8930f40 rank 0 nranks 2 cudaDev 0
    # nvmlDev 0 busId 901000 ..." (and gh2's): GH200's GPU sits in PCI domain 9.
    assert tailer.placement("gh1", 185972) == Placement(0, "0009:01:00.0")
    assert tailer.placement("gh2", 15475) == Placement(0, "0009:01:00.0")
    # The H200's "busId 60" is the GPU nvidia-smi -q showed on that machine ("GPU 00000000:00:06.0").
    smi = re.search(
        r"^GPU 0000([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)$", H200_SMI.read_text(), re.M
    )
    assert smi is not None
    assert tailer.placement("vm", 667) == Placement(0, smi.group(1).lower())
    assert tailer.placement("vm.example.org", 667) == tailer.placement("vm", 667)  # NCCL logs short names
    assert tailer.placement("gh1", 1) is None and tailer.placement("gh1", None) is None
    tailer.close()


def test_bus_ids_decode_as_nccl_encodes_them() -> None:
    assert bus_id_address("901000") == "0009:01:00.0"
    assert bus_id_address("60") == "0000:00:06.0"
    assert bus_id_address("1b0") == "0000:00:1b.0"
    assert bus_id_address("zz") is None


def _nccl_bus_id(address: str) -> str:
    """NCCL's busIdToInt64 printed with %lx: the address's hex digits run together."""
    return format(int(re.sub(r"[:.]", "", address), 16), "x")


def test_ranks_are_placed_by_the_nccl_log_and_labelled_so(tmp_path: Path) -> None:
    """Ranks 8-15 of a 2-node job, one process each; the log puts rank r on GPU 15-r (not what the
    modulo rule guesses) for all but rank 15, which no log line names: it stays rank modulo 8."""
    host = tmp_path / "host"
    shutil.copytree(FIXTURE_HOSTS / "ib-ndr-healthy", host, symlinks=True)
    dump, logs = tmp_path / "inspector", tmp_path / "logs"
    dump.mkdir()
    logs.mkdir()
    probe = make_exporter(host)
    topo = probe.topology_task.outcome.value
    assert topo is not None
    address_of = {index: address for address, index in topo.gpu_pci.items()}
    lines = []
    for rank in range(8, 15):
        gpu, pid = 15 - rank, 4200 + rank
        lines.append(
            f"gpu-node-2:{pid}:{pid + 7} [{gpu}] NCCL INFO ncclCommInitRank comm 0x5ac0{rank:02x} rank {rank} "
            f"nranks 16 cudaDev {gpu} nvmlDev {gpu} busId {_nccl_bus_id(address_of[gpu])} commId 0x7f8c496ae9f661 - Init START"
        )
        lines.append(
            f"gpu-node-2:{pid}:{pid + 7} [{gpu}] NCCL INFO comm 0x5ac0{rank:02x} rank {rank} nRanks 16 nNodes 2 "
            f"localRanks 8 localRank {rank - 8} MNNVL 0"
        )
    (logs / "job.log").write_text("\n".join(lines) + "\n")
    for rank in range(8, 16):
        comm = Communicator("0x7f8c496ae9f661", "DP", 16, 2, (rank,), ops=("AllReduce",), sizes=(1 << 30,))
        DumpWriter(dump, hostname="gpu-node-2.cluster", pid=4200 + rank).round([comm])
    exporter = make_exporter(
        host, inspector_dirs=(str(dump),), nccl_globs=(str(logs / "*.log"),), nccl_from_start=True
    )
    exporter.inspector_task.run_once()
    parsed = samples(exporter.render().decode())
    placed = {
        labels["rank"]: labels
        for (name, labelset), _v in parsed.items()
        if name == "fabricscope_nccl_seconds_since_last_collective"
        for labels in [dict(labelset)]
    }
    assert sorted(placed, key=int) == [str(r) for r in range(8, 16)]
    for rank in range(8, 15):
        labels = placed[str(rank)]
        assert labels["gpu"] == str(15 - rank) and labels["placement"] == "nccl_log_bus_id", labels
        assert labels["nic"] == topo.gpu_nic[15 - rank] and labels["rail"] == str(
            topo.nics.index(labels["nic"])
        )
    assert (placed["15"]["gpu"], placed["15"]["placement"]) == ("7", "rank_modulo")
