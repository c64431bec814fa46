"""The RDMA matrix predicted from the nodes' doctor state (issue 26 item 1): each node at its
slowest active RDMA port (a degraded port at its real rate) over the transport its link layer runs,
and judged against a perftest result read by fabricscope's perftest parser.

Nodes: doctor documents of the fixture hosts (tests/fixtures/make_hosts.py): ib-ndr-healthy (NDR,
400G) and ib-degraded (one port trained down to 200G). Measured: the real ib_send_bw output of
tests/data/samples/perftest_ib_send_bw_ib_pkey.txt (NVIDIA/nccl issue #1323: 44756.50 MB/sec at
64 KiB on InfiniBand; its 375 Gbit/s can only be a 400G NDR port) for a healthy pair; for a pair
with the degraded node, a stand-in: the same capture with its average halved, as a 200G port gives.
No RDMA here: the matrix itself is not run (bench matrix's RDMA half has its own tests)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fabricscope.bench.rdma.perftest import metrics_from, parse_text
from fabricscope.checks.doctor import run_doctor
from fabricscope.host import Root
from fabricscope.jobs.launch import DistEnv
from fabricscope.ready.allocation import allocation
from fabricscope.ready.node import NodeInfo
from fabricscope.ready.params import ReadyParams
from fabricscope.ready.predict import Allocation
from fabricscope.ready.run import Prediction, predict_rdma, rdma_step
from fabricscope.ready.verdict import verdict
from tests.conftest import FIXTURE_HOSTS, SAMPLES

HOSTS = ["n1", "n2", "n3", "n4"]
ROOTS = {"n1": "ib-ndr-healthy", "n2": "ib-degraded", "n3": "ib-ndr-healthy", "n4": "ib-ndr-healthy"}
CAPTURE = (SAMPLES / "perftest_ib_send_bw_ib_pkey.txt").read_text()


@pytest.fixture(scope="module")
def received() -> list[SimpleNamespace]:
    docs = {name: run_doctor(Root.at(FIXTURE_HOSTS / name)).to_dict() for name in set(ROOTS.values())}
    return [SimpleNamespace(rank=r, document=docs[ROOTS[h]]) for r, h in enumerate(HOSTS)]


def _alloc(received: list[SimpleNamespace]) -> Allocation:
    """As rank 0 builds it for a gloo job (the TCP collective does not use the RDMA ports)."""
    params = ReadyParams(backend="gloo", nic_rate="100G")
    env = DistEnv(0, 4, 0, "127.0.0.1", 29500, "slurm")
    infos = [NodeInfo(r, h, h, True) for r, h in enumerate(HOSTS)]
    return allocation(params, env, received, infos)


def _gbps(text: str) -> float:
    return float(metrics_from(parse_text(text))["throughput_gbps"])


def test_the_degraded_ports_pairs_are_predicted_at_its_real_rate(received) -> None:
    alloc = _alloc(received)
    assert alloc.doctor_bps == {}  # gloo: the collective's model ignores the RDMA ports
    assert alloc.rdma_bps == {"n1": 400e9, "n2": 200e9, "n3": 400e9, "n4": 400e9}
    pred = Prediction()
    predict_rdma(alloc, [r.document for r in received], pred)
    assert pred.rdma_transport == "ib" and pred.rdma is not None and pred.rdma_expected is not None
    assert [(d.name, d.rate_bps, d.nominal_bps, d.source) for d in pred.rdma_degradations] == [
        ("n2", 200e9, 400e9, "doctor document")
    ]
    healthy = pred.rdma[0][2]
    for i, a in enumerate(HOSTS):
        for j, b in enumerate(HOSTS):
            if i != j:
                share = 0.5 if "n2" in (a, b) else 1.0  # 200G of 400G: the port's real rate
                assert pred.rdma[i][j] == pytest.approx(share * healthy, rel=1e-3), (a, b)
                assert pred.rdma_expected[i][j] == pytest.approx(healthy, rel=1e-3)
    # the model's healthy NDR pair against a real ib_send_bw on NDR: within 5%
    assert _gbps(CAPTURE) == pytest.approx(375.44, abs=0.01)
    assert healthy == pytest.approx(_gbps(CAPTURE), rel=0.05)


def test_the_rdma_step_prints_predicted_vs_measured_and_blames_the_port(received) -> None:
    alloc = _alloc(received)
    pred = Prediction()
    predict_rdma(alloc, [r.document for r in received], pred)
    halved = CAPTURE.replace("44756.50", "22378.25")  # stand-in: a 200G port's ib_send_bw
    measured = [[None if i == j else _gbps(halved if "n2" in (a, b) else CAPTURE)
                 for j, b in enumerate(HOSTS)] for i, a in enumerate(HOSTS)]  # fmt: skip
    step = rdma_step(HOSTS, SimpleNamespace(matrix_gbps=measured, suspects=[]), pred)
    assert step.name == "rdma" and step.unit == "Gbit/s"
    assert step.predicted is not None and step.measured is not None
    assert abs(step.error_pct or 0) < 10 and step.details["pairs_within_10pct"] == 12
    assert "predicted" in step.summary and "n2" not in {c.name for c in step.culprits if c.kind != "node"}
    assert step.status == "fail" and [c.name for c in step.culprits if c.kind == "node"] == ["n2"]
    assert [d["node"] for d in verdict([step]).drain] == ["n2"]


def test_no_rdma_port_no_rdma_prediction(received) -> None:
    alloc = Allocation(HOSTS, HOSTS, None, None, nic_rate_bps=100e9)
    pred = Prediction()
    predict_rdma(alloc, [], pred)
    assert pred.rdma is None and pred.rdma_transport is None


def test_the_terminal_shows_the_rdma_prediction_and_step(received) -> None:
    from fabricscope.ready.params import ReadyParams, plan
    from fabricscope.ready.run import ReadyRun
    from fabricscope.report.ready import prediction_lines, summary_lines

    pred = Prediction()
    predict_rdma(_alloc(received), [r.document for r in received], pred)
    lines = prediction_lines(pred, HOSTS)
    assert any(line.strip().startswith("rdma matrix (ib): median pair") for line in lines), lines
    assert any("rdma known slower than built: n2: link at 200Gb/s" in line for line in lines), lines
    measured = [[None if i == j else float(pred.rdma[i][j]) for j in range(4)] for i in range(4)]  # type: ignore[index]
    run = ReadyRun(ReadyParams(), plan(ReadyParams(), 4), 4, "slurm", HOSTS, pred)
    run.steps = [rdma_step(HOSTS, SimpleNamespace(matrix_gbps=measured, suspects=[]), pred)]
    rows = [line.split() for line in summary_lines(run)]
    assert ["rdma", "FAIL"] == next(r for r in rows if r and r[0] == "rdma")[:2]  # n2's pairs: half of built
