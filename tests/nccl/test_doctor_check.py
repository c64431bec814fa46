"""The doctor check that lints /etc/nccl.conf."""

from __future__ import annotations

from fabricscope.checks.doctor import run_doctor
from fabricscope.host import Root


def nccl_findings(root):
    report = run_doctor(Root.at(root))
    return [f for f in report.findings if f.id == "nccl.conf"]


def test_absent_conf_gives_nothing(host_copy) -> None:
    assert nccl_findings(host_copy("roce-healthy")) == []


def test_blog_conf_on_roce(host_copy) -> None:
    root = host_copy("roce-healthy")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/nccl.conf").write_text("NCCL_SOCKET_IFNAME=eth0\nNCCL_IB_TC=41\nNCCL_DEBUG=WARN\n")
    found = {f.evidence["code"]: f.severity.value for f in nccl_findings(root)}
    assert found == {"NCCL020": "fail", "NCCL041": "fail"}
    first = nccl_findings(root)[0]
    assert first.subject.startswith("/etc/nccl.conf:")


def test_clean_conf_passes(host_copy) -> None:
    root = host_copy("ib-ndr-healthy")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/nccl.conf").write_text("NCCL_SOCKET_IFNAME==eno1\nNCCL_IB_HCA==mlx5_0:1,mlx5_1:1\n")
    found = nccl_findings(root)
    assert [f.severity.value for f in found] == ["pass"]
