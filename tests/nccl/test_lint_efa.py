"""Lint knows the EFA variables (issue 13 A5): libfabric's FI_PROVIDER and FI_EFA_USE_DEVICE_RDMA,
and NCCL_NET_PLUGIN / NCCL_NET against a node whose RDMA ports are EFA."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.host import Root, read_inventory
from fabricscope.nccl.lint import lint
from fabricscope.nccl.lint.rules.efa import efa_ports
from fabricscope.nccl.settings import from_environ, merge, parse_script
from tests.conftest import FIXTURE_HOSTS


@pytest.fixture
def efa_host(host_copy) -> Path:
    """A host copy whose RDMA ports report the link layer EFA ports report in sysfs ("Unknown")."""
    root = host_copy("roce-healthy")
    for link in root.glob("sys/class/infiniband/*/ports/*/link_layer"):
        link.write_text("Unknown\n")
    return root


def efa_findings(env: dict[str, str], root: Path | None = None):
    inv = read_inventory(Root.at(root)) if root is not None else None
    return {f.subject: f for f in lint(merge([from_environ(env)]), inv) if f.id == "NCCL080"}


def test_efa_node_is_recognised(efa_host: Path) -> None:
    assert len(efa_ports(read_inventory(Root.at(efa_host)))) == 8
    p4d = read_inventory(Root.at(FIXTURE_HOSTS / "efa-p4d"))  # after real p4d.24xlarge captures
    assert efa_ports(p4d)
    found = {
        f.subject: f.severity.value
        for f in lint(merge([from_environ({"NCCL_NET_PLUGIN": "none", "FI_PROVIDER": "sockets"})]), p4d)
        if f.id == "NCCL080"
    }
    assert found == {"NCCL_NET_PLUGIN": "fail", "FI_PROVIDER": "fail"}


def test_plugin_off_or_sockets_on_efa_fail(efa_host: Path) -> None:
    found = efa_findings({"NCCL_NET_PLUGIN": "none", "FI_PROVIDER": "tcp"}, efa_host)
    assert (
        found["NCCL_NET_PLUGIN"].severity.value == "fail"
        and "TCP sockets" in found["NCCL_NET_PLUGIN"].message
    )
    assert found["FI_PROVIDER"].severity.value == "fail"
    assert efa_findings({"NCCL_NET": "Socket"}, efa_host)["NCCL_NET"].severity.value == "fail"
    assert efa_findings({"NCCL_NET_PLUGIN": "ofi"}, efa_host) == {}


def test_aws_ofi_nccl_cheatsheet_settings() -> None:
    # aws-ofi-nccl doc/efa-env-var.md: FI_PROVIDER=efa and FI_EFA_USE_DEVICE_RDMA=1 only for old plugins.
    found = efa_findings({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"})
    assert {k: f.severity.value for k, f in found.items()} == {
        "FI_PROVIDER": "info",
        "FI_EFA_USE_DEVICE_RDMA": "info",
    }
    assert efa_findings({"FI_EFA_USE_DEVICE_RDMA": "0"})["FI_EFA_USE_DEVICE_RDMA"].severity.value == "warn"


def test_efa_variables_are_read_from_job_sources_and_not_called_unknown() -> None:
    settings = merge(
        [parse_script("export FI_PROVIDER=efa FI_EFA_USE_DEVICE_RDMA=1 NCCL_NET_PLUGIN=ofi\n", "job.sh")]
    )
    assert set(settings.effective) == {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_NET_PLUGIN"}
    assert not [f for f in lint(settings) if f.id == "NCCL001"]


def test_plugin_none_is_fine_on_a_node_without_efa() -> None:
    ib = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "ib-ndr-healthy"
    assert efa_findings({"NCCL_NET_PLUGIN": "none"}, ib) == {}
