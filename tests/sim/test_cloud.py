"""Cloud transports and presets (issue 23): efa, tcpx, tcpxo; the host side of NCCL's socket
transport; instance presets; a multi-node NVLink domain described as trays."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.scenario import build_simulator, normalise, run_collective
from fabricscope.sim.systems import SYSTEMS

DOC_SIM = (Path(__file__).resolve().parents[2] / "docs" / "sim.md").read_text()


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_every_preset_runs_and_names_its_source(name: str) -> None:
    s = SYSTEMS[name]
    assert (
        s.source.startswith(("NVIDIA", "AWS", "GCP", "Azure", "DeepSeek", "H20"))
        and "http" in s.source + s.nic
    )
    d = run_collective({"system": name, "nodes": 2, "size": "1G"})
    assert d["busbw_GBps"] > 0
    assert f"| `{name}` |" in DOC_SIM, f"{name}: no row in docs/sim.md's table of real systems"
    if s.transport:
        assert d["model"]["transport"]["name"] == s.transport  # the network the instance is sold with


def test_the_instance_network_can_be_overridden() -> None:
    d = run_collective({"system": "aws-p5", "nodes": 2, "transport": "tcp", "size": "1G"})
    assert d["model"]["transport"]["name"] == "tcp"


def test_tcp_stages_through_host_memory_and_rdma_does_not() -> None:
    """NCCL's socket transport copies every byte through host memory (4 touches each way): a host
    with little memory bandwidth caps the NIC; RDMA transports are untouched."""
    base = {
        "system": "dgx-h100",
        "nodes": 2,
        "nics_per_node": 1,
        "nic_rate": "400G",
        "size": "4G",
        "algo": "ring",
        "nsocks_perthread": 4,
        "socket_nthreads": 16,
        "transport": "tcp",
    }
    fast = run_collective({**base, "host_mem_GBps": 10_000})
    slow = run_collective({**base, "host_mem_GBps": 80})
    assert slow["busbw_GBps"] < 0.5 * fast["busbw_GBps"]
    assert slow["limited_by"] == "access bandwidth"
    assert slow["busbw_GBps"] <= 80 / 8 * 1.0001  # 80 GB/s / (4 touches x 2 directions), one NIC
    with pytest.raises(FabricscopeError, match="host-mem-GBps applies to tcp"):
        run_collective(
            {
                **base,
                "transport": "roce",
                "nsocks_perthread": None,
                "socket_nthreads": None,
                "host_mem_GBps": 80,
            }
        )


def test_tcp_answers_are_labelled_upper_bounds() -> None:
    sim = build_simulator(normalise({"transport": "tcp"}))
    assert sim.transport.upper_bound and sim.transport.describe()["upper_bound"]
    assert not build_simulator(normalise({"transport": "ib"})).transport.upper_bound


def test_small_messages_cost_more_on_sockets_than_on_rdma() -> None:
    """NCCL's per-network-hop cost over sockets (fitted, sim/published.py) against RDMA's."""
    t = {
        tr: run_collective({"system": "dgx-h100", "nodes": 2, "transport": tr, "size": "1M"})["time_s"]
        for tr in ("ib", "efa", "tcpxo", "tcpx", "tcp")
    }
    assert t["ib"] < t["efa"] < t["tcpx"] and t["tcpxo"] < t["tcp"]


def test_nvl72_described_as_trays_is_one_nvlink_domain() -> None:
    """Issue 23 item 7: 18 trays of 4 GPUs are one NVLink domain of 72, not 18 nodes on the network."""
    rack = run_collective({"system": "gb200-nvl72", "nodes": 1, "size": "8G"})
    trays = run_collective({"system": "gb200-nvl72", "nodes": 18, "gpus_per_node": 4, "size": "8G"})
    assert trays["ranks"] == 72 and trays["algo"] == rack["algo"] == "nvls"
    assert trays["busbw_GBps"] == pytest.approx(rack["busbw_GBps"], rel=1e-9)
    two = run_collective({"system": "gb200-nvl72", "nodes": 36, "gpus_per_node": 4, "size": "8G"})
    assert two["model"]["topology"]["nodes"] == 2 and two["ranks"] == 144
    with pytest.raises(FabricscopeError, match="whole NVLink domains"):
        run_collective({"system": "gb200-nvl72", "nodes": 19, "gpus_per_node": 4})
    part = run_collective(
        {"system": "gb200-nvl72", "nodes": 3, "nvlink_domain": 4, "size": "16G", "algo": "ring"}
    )
    assert part["model"]["topology"]["nodes"] == 3  # --nvlink-domain 4: three NVL4 partitions over IB
