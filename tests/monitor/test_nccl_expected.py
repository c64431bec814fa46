"""The expected bus bandwidth is judged with what was discovered: the node's GPU model (nvidia-smi's
name, through the one GPU table in sim/gpus.py; an unknown GPU gives none, not an H100's) and, when
the exporter is given one, the topology file's fabric. Each expectation is compared with the
simulator asked directly (``sim collective``'s parameters written out), not through the exporter."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import make_exporter, samples
from tests.monitor.inspector_gen import Communicator, DumpWriter

SIZE = 10**9  # two significant digits: the exporter asks the simulator at sizes rounded to those
EXPECTED = "fabricscope_nccl_busbw_expected_bytes_per_second"


def _sim_busbw(**params: object) -> float:
    from fabricscope.sim.scenario import run_collective

    return float(run_collective({"op": "all_reduce", "size": str(SIZE), **params})["busbw_GBps"]) * 1e9


def _expected(tmp_path: Path, host: str, comm: Communicator, hostname: str = "node-a", **options: object):
    dump = tmp_path / f"inspector-{host}-{len(list(tmp_path.iterdir()))}"
    dump.mkdir()
    DumpWriter(dump, hostname=hostname).round([comm])
    exporter = make_exporter(
        FIXTURE_HOSTS / host, inspector_dirs=(str(dump),), nccl_from_start=True, **options
    )
    exporter.inspector_task.run_once()
    parsed = samples(exporter.render().decode())
    values = [v for (name, labels), v in parsed.items() if name == EXPECTED]
    ratios = [v for (name, _labels), v in parsed.items() if name == "fabricscope_nccl_busbw_ratio"]
    busbw = [v for (name, _labels), v in parsed.items() if name == "fabricscope_nccl_busbw_bytes_per_second"]
    return values, ratios, busbw


def _one_node() -> Communicator:
    return Communicator("0x51", "TP", 8, 1, tuple(range(8)), ops=("AllReduce",), sizes=(SIZE,))


def test_the_gpu_model_comes_from_the_inventory(tmp_path: Path) -> None:
    """ib-ndr-healthy names "NVIDIA H100 80GB HBM3", efa-p4d "NVIDIA A100-SXM4-40GB": inside one
    node NVLink sets the bus bandwidth, and the two GPUs' differ (450 and 300 GB/s a direction)."""
    (h100,), _r, _b = _expected(tmp_path, "ib-ndr-healthy", _one_node())
    (a100,), _r, _b = _expected(tmp_path, "efa-p4d", _one_node())
    assert h100 == pytest.approx(_sim_busbw(nodes=1, gpus_per_node=8, gpu="h100"), rel=1e-9)
    assert a100 == pytest.approx(_sim_busbw(nodes=1, gpus_per_node=8, gpu="a100"), rel=1e-9)
    assert a100 < 0.8 * h100


def test_an_unknown_gpu_has_no_expectation(tmp_path: Path) -> None:
    """cloud-tcp's GPUs are "NVIDIA L4", which the GPU table does not hold: no expected bandwidth and
    no ratio (not an H100's figure), while the measured bandwidth is still shown."""
    values, ratios, busbw = _expected(tmp_path, "cloud-tcp", _one_node())
    assert values == [] and ratios == [] and len(busbw) == 1


def test_product_names_map_to_the_table_or_to_nothing() -> None:
    from fabricscope.sim.gpus import from_product_name

    # Names as nvidia-smi prints them (tests/data/samples: nvidia_smi_q_h200_pcie_copy.txt "NVIDIA H200",
    # nvidia_smi_nvlink_s_gb200.txt "NVIDIA GB200"; the fixture hosts' H100, A100 and L4).
    named = {
        "NVIDIA H100 80GB HBM3": "h100",
        "NVIDIA A100-SXM4-40GB": "a100",
        "NVIDIA H200": "h200",
        "NVIDIA GB200": "gb200",
        "NVIDIA H100 PCIe": None,  # a PCIe card: not the SXM part's NVLink
        "NVIDIA H200 NVL": None,
        "NVIDIA GH200 480GB": None,  # not in the table
        "NVIDIA L4": None,
        "": None,
    }
    for name, model in named.items():
        found = from_product_name(name)
        assert (found.name if found else None) == model, name


def _fabric(path: Path, uplinks: int) -> Path:
    """Four nodes of 8 NICs at 400 Gb/s, two per leaf; each leaf reaches the spine over ``uplinks``
    400 Gb/s links (16 is non-blocking, 4 is 4:1 oversubscribed)."""
    path.write_text(
        "nodes: 4\ngpus_per_node: 8\nnics_per_node: 8\nnic_rate: 400G\n"
        "hosts: [gpu-node-1, gpu-node-2, gpu-node-3, gpu-node-4]\n"
        "switches: [leaf1, leaf2, spine]\n"
        f"links:\n  - {{a: leaf1, b: spine, rate: 400G, count: {uplinks}}}\n"
        f"  - {{a: leaf2, b: spine, rate: 400G, count: {uplinks}}}\n"
        "attach:\n  leaf1: [0-1]\n  leaf2: [2-3]\n"
    )
    return path


def test_a_topology_file_with_an_oversubscribed_uplink_lowers_the_expectation(tmp_path: Path) -> None:
    """This node is gpu-node-2 (node 1, leaf1); a 2-node communicator takes it and the node after it,
    gpu-node-3 on leaf2, so its traffic crosses the spine."""
    comm = Communicator("0x52", "DP", 16, 2, tuple(range(8, 16)), ops=("AllReduce",), sizes=(SIZE,))
    blocking = _fabric(tmp_path / "blocking.yaml", 4)
    full = _fabric(tmp_path / "full.yaml", 16)
    (over,), _r, _b = _expected(tmp_path, "ib-ndr-healthy", comm, "gpu-node-2", topology_file=str(blocking))
    (nonblocking,), _r, _b = _expected(
        tmp_path, "ib-ndr-healthy", comm, "gpu-node-2", topology_file=str(full)
    )
    assert over == pytest.approx(
        _sim_busbw(topology_file=str(blocking), node_order="1,2", gpu="h100"), rel=1e-9
    )
    assert over < 0.8 * nonblocking  # half the uplink the NICs need: the network share of the ring slows
    # A host the file does not name: the file cannot place the communicator, so no expectation.
    values, _r, busbw = _expected(tmp_path, "ib-ndr-healthy", comm, "elsewhere", topology_file=str(blocking))
    assert values == [] and len(busbw) == 1


def test_a_bad_topology_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from tests.monitor.test_cli import assert_one_line_error, fabricscope

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "switches: [leaf1]\nlinks: [{a: leaf1, b: nowhere, rate: 1G}]\nnodes: 1\nattach: {leaf1: [0]}\n"
    )
    root = str(FIXTURE_HOSTS / "ib-ndr-healthy")
    assert_one_line_error(
        fabricscope("exporter", "--once", "--root", root, "--topology", str(bad)), "--topology: "
    )
    missing = str(tmp_path / "missing.yaml")
    assert_one_line_error(
        fabricscope("exporter", "--once", "--root", root, "--topology", missing), "--topology: "
    )
