"""The allocation from what the nodes' doctor documents say: a degraded port counts at its real
rate, a port that is down does not count, the transport follows the ports' link layer; and a
stored run calibrates the collective's prediction."""

from __future__ import annotations

import pytest

from fabricscope.bench.results.schema import new_result
from fabricscope.checks.doctor import run_doctor
from fabricscope.errors import FabricscopeError
from fabricscope.host import Root
from fabricscope.ready.allocation import gpu_of, slowest_port_bps, transport_of
from fabricscope.ready.predict import Allocation, CollectiveModel, collective_busbw, documents
from tests.conftest import FIXTURE_HOSTS


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    return {
        name: run_doctor(Root.at(FIXTURE_HOSTS / name)).to_dict()
        for name in ("ib-degraded", "ib-ndr-healthy", "roce-healthy", "cloud-tcp")
    }


def test_a_nodes_rate_is_its_slowest_active_port(docs) -> None:
    # ib-degraded (tests/fixtures/make_hosts.py PLANTED): one port at 200G, one down; the rest 400G
    assert slowest_port_bps(docs["ib-degraded"]) == 200e9
    assert slowest_port_bps(docs["ib-ndr-healthy"]) == 400e9
    assert slowest_port_bps(docs["cloud-tcp"]) is None  # no RDMA: nothing to say


def test_the_transport_and_gpu_follow_the_nodes(docs) -> None:
    assert transport_of([docs["ib-ndr-healthy"]], "nccl") == "ib"
    assert transport_of([docs["roce-healthy"]], "nccl") == "roce"
    assert transport_of([docs["cloud-tcp"]], "nccl") == "tcp"
    assert transport_of([docs["ib-ndr-healthy"]], "gloo") == "tcp"
    assert (
        gpu_of([docs["ib-ndr-healthy"]], "nccl") == "h100" and gpu_of([docs["cloud-tcp"]], "gloo") == "none"
    )


def _gpu_doc(model: str) -> dict:
    return {"facts": {"gpus": {"model": model}}}


def test_the_gpu_is_read_as_nvidia_smi_names_it_and_an_unknown_one_refused() -> None:
    """Names as nvidia-smi prints them (tests/data/samples/nvidia_smi_q_h200_pcie_copy.txt: "NVIDIA
    H200"). A part the table has no model for is refused with the known ones, never modelled as an
    H100 (the old fallback gave an L40S node 989 TFLOPS and NVLink it does not have)."""
    assert gpu_of([_gpu_doc("NVIDIA H200")], "nccl") == "h200"
    assert gpu_of([_gpu_doc("NVIDIA A100-SXM4-80GB"), _gpu_doc("NVIDIA A100-SXM4-40GB")], "nccl") == "a100"
    for refused, words in (
        ([_gpu_doc("NVIDIA L40S")], "no model for GPU 'NVIDIA L40S'"),
        ([_gpu_doc("NVIDIA H100 PCIe")], "no model for GPU 'NVIDIA H100 PCIe'"),
        ([_gpu_doc("NVIDIA H100 80GB HBM3"), _gpu_doc("NVIDIA H200")], "different GPUs"),
        ([_gpu_doc("NVIDIA H100 80GB HBM3, NVIDIA A100-SXM4-80GB")], "different GPUs"),
        ([{"facts": {}}], "name no GPU"),
    ):
        with pytest.raises(FabricscopeError, match=words) as caught:
            gpu_of(refused, "nccl")
        assert (
            "h100" in str(caught.value) or "different" in str(caught.value) or "no GPU" in str(caught.value)
        )


def test_a_degraded_port_halves_the_ring(docs) -> None:
    """NCCL's ring is as fast as its slowest link: a node at 200G in a fleet of 400G halves it."""
    hosts = ["n1", "n2", "n3", "n4"]
    rates = {"n1": slowest_port_bps(docs["ib-ndr-healthy"]), "n2": slowest_port_bps(docs["ib-degraded"]),
             "n3": slowest_port_bps(docs["ib-ndr-healthy"]), "n4": slowest_port_bps(docs["ib-ndr-healthy"])}  # fmt: skip
    alloc = Allocation(hosts, hosts, None, None, doctor_bps=rates)
    now, built, slow = documents(alloc)
    assert [(d.name, d.rate_bps, d.nominal_bps, d.source) for d in slow] == [
        ("n2", 200e9, 400e9, "doctor document")
    ]
    spec = CollectiveModel("all_reduce", (1 << 30,), "nccl", "ib", "h100")
    degraded = collective_busbw(alloc, now, "ethernet", spec)[0][-1]
    healthy = collective_busbw(alloc, built, "ethernet", spec)[0][-1]
    assert degraded / healthy == pytest.approx(0.5, rel=0.05)


def test_a_stored_run_calibrates_the_prediction() -> None:
    """A stored run twice as slow as the model at every size: the calibrated prediction follows it."""
    hosts = ["h1", "h2", "h3", "h4"]
    alloc = Allocation(hosts, hosts, None, None, nic_rate_bps=1e9)
    now, _, _ = documents(alloc)
    sizes = (4 << 20, 16 << 20, 64 << 20)
    spec = CollectiveModel("all_reduce", sizes, "gloo", "tcp")
    model = collective_busbw(alloc, now, "ethernet", spec)[0]
    run = new_result("collective", {"op": "all_reduce", "world_size": 4, "backend": "gloo"})
    factor = 2 * 3 / 4  # all_reduce's bus factor 2(n-1)/n: time = size x factor / busbw
    run.finish({f"size_{s}_time_s": 2 * s * factor / (bw * 1e9) for s, bw in zip(sizes, model)})
    calibrated, _, report = collective_busbw(alloc, now, "ethernet", spec, run)
    assert report is not None and report["max_abs_error_after"] < 0.05
    for before, after in zip(model, calibrated):
        assert after == pytest.approx(before / 2, rel=0.05)
