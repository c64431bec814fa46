"""AWS EFA (issue 13 A5): devices with the efa driver and link layer "Unknown" are RDMA reached
through libfabric and aws-ofi-nccl; the host model, doctor, inventory and `nccl env` say so and
never call the node TCP-only."""

from __future__ import annotations

from fabricscope.checks.doctor import run_doctor
from fabricscope.findings import Severity
from fabricscope.host import Root, read_inventory
from fabricscope.host.verbs import parse_ibv_devinfo
from fabricscope.nccl.envgen import plan_env
from tests.conftest import FIXTURE_HOSTS, SAMPLES

EFA_HOST = FIXTURE_HOSTS / "efa-p4d"


def sample(name: str) -> str:
    return "\n".join(line for line in (SAMPLES / name).read_text().splitlines() if not line.startswith("# "))


def test_real_efa_capture_shapes() -> None:
    """The capture the fixture follows: sysfs "Unknown", ibv_devinfo with an active 4096 MTU port."""
    text = sample("ibv_devinfo_efa.txt")
    assert text.splitlines()[0] == "Unknown"
    ports = parse_ibv_devinfo(text)
    assert ports["efa_0/1"].state == "PORT_ACTIVE" and ports["efa_0/1"].active_mtu_bytes == 4096
    assert "Link layer: Unknown" in (SAMPLES / "ibstat_efa.txt").read_text()


def test_host_model_knows_efa_and_its_link_layer() -> None:
    root = Root.at(EFA_HOST)
    inv = read_inventory(root)
    assert [d.name for d in inv.rdma_devices] == ["rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"]
    assert all(d.is_efa and d.driver == "efa" for d in inv.rdma_devices)
    assert all(p.link_layer == "Unknown" and p.is_unspecified and p.is_active for p in inv.ports)
    # "Unknown" is what the kernel writes for IB_LINK_LAYER_UNSPECIFIED: not a garbled source.
    assert not [p for p in inv.problems if "link_layer" in p.source], inv.problems
    mlx = read_inventory(Root.at(FIXTURE_HOSTS / "ib-ndr-healthy"))
    assert {d.driver for d in mlx.rdma_devices} == {"mlx5_core"} and not any(
        d.is_efa for d in mlx.rdma_devices
    )


def test_doctor_calls_efa_rdma_not_tcp_only() -> None:
    report = run_doctor(Root.at(EFA_HOST))
    present = [f for f in report.findings if f.id == "rdma.present"]
    assert [f.severity for f in present] == [Severity.PASS]
    assert "EFA" in present[0].message and "aws-ofi-nccl" in present[0].message
    assert "TCP-only" not in " ".join(f.message for f in report.findings)
    assert not [
        f
        for f in report.findings
        if f.id in ("host.sources", "rdma.firmware", "link.errors") and f.severity is not Severity.PASS
    ]


def test_efa_drops_counted_as_link_errors(host_copy) -> None:
    path = host_copy("efa-p4d")
    (path / "sys/class/infiniband/rdmap32s27/ports/1/hw_counters/rx_drops").write_text("4410\n")
    hits = [
        f for f in run_doctor(Root.at(path)).findings if f.id == "link.errors" and f.severity is Severity.WARN
    ]
    assert [(f.subject, f.evidence["totals"]) for f in hits] == [("rdmap32s27/1", {"rx_drops": 4410})]


def test_nccl_env_plans_for_efa() -> None:
    plan = plan_env(read_inventory(Root.at(EFA_HOST)))
    assert plan.fabric == "EFA"
    unset = {v.name: v.reason for v in plan.variables if v.value is None}
    assert "aws-ofi-nccl" in unset["NCCL_NET_PLUGIN"] and "NCCL_IB_HCA" in unset
    assert not any("no RDMA device" in n for n in plan.notes), plan.notes
    assert plan.as_environ().get("NCCL_NET_PLUGIN") is None and "NCCL_IB_HCA" not in plan.as_environ()


def test_inventory_labels_efa_ports() -> None:
    import io

    from rich.console import Console

    from fabricscope.report.inventory import render_inventory

    buf = io.StringIO()
    render_inventory(read_inventory(Root.at(EFA_HOST)), Console(file=buf, width=250))
    assert "Unknown (EFA)" in buf.getvalue() and "TCP-only" not in buf.getvalue()
