"""The facts block of `doctor --json`: what a fleet compares, read from real interfaces."""

from __future__ import annotations

from fabricscope.checks.doctor import run_doctor
from fabricscope.host import Root
from fabricscope.host.versions import parse_package_versions
from tests.conftest import FIXTURE_HOSTS


def test_dpkg_query_default_format_as_printed_on_debian_12() -> None:
    # `dpkg-query -W libc6 munge rdma-core` on Debian 12 (this project's build machine): the
    # arch-qualified name of a Multi-Arch: same package, a tab, the version; missing ones go to stderr.
    text = "libc6:amd64\t2.36-9+deb12u14\nmunge\t0.5.15-2+deb12u1\n"
    assert parse_package_versions(text) == {"libc6": "2.36-9+deb12u14", "munge": "0.5.15-2+deb12u1"}


def test_rpm_not_installed_lines_and_empty_versions_are_dropped() -> None:
    text = "rdma-core\t46.0-1.el9\npackage libnccl is not installed\nlibibverbs\t\n"
    assert parse_package_versions(text) == {"rdma-core": "46.0-1.el9"}


def test_roce_node_facts() -> None:
    facts = run_doctor(Root.at(FIXTURE_HOSTS / "roce-healthy")).to_dict()["facts"]
    assert facts["kernel"] == "5.15.0-105-generic"
    assert facts["drivers"] == {"mlx5_core": "23.10-1.1.9", "nvidia": "535.129.03"}
    assert facts["rdma_core"] == "2307mlnx47-1.2310119" and facts["nccl_version"] == "2.18.5"
    assert facts["gpus"]["count"] == 8 and facts["gpus"]["model"] == "NVIDIA H100 80GB HBM3"
    assert facts["gpus"]["gpudirect_module"] == "nvidia_peermem"
    nics = facts["nics"]
    assert [n["rail"] for n in nics] == list(range(8))
    assert [n["pci"] for n in nics] == sorted(n["pci"] for n in nics)
    port = nics[0]["ports"][0]
    assert (nics[0]["model"], nics[0]["fw"], nics[0]["pcie"]["width"]) == ("MT4129", "28.39.1002", 16)
    assert port["roce_v2_ipv4_gid_index"] == 3 and port["pfc_priorities"] == [3] and port["trust"] == "dscp"
    assert port["mtu_bytes"] == 9000 and port["rate_gbps"] == 400.0 and 3 in port["ecn_priorities"]
    assert facts["sysctls"]["net.core.somaxconn"] == "4096"


def test_broken_node_facts_show_its_faults() -> None:
    facts = run_doctor(Root.at(FIXTURE_HOSTS / "roce-broken")).to_dict()["facts"]
    ports = {n["device"]: n["ports"][0] for n in facts["nics"]}
    assert ports["mlx5_1"]["roce_v2_ipv4_gid_index"] is None  # no IPv4 address: no IPv4 RoCE v2 GID
    assert ports["mlx5_2"]["mtu_bytes"] == 1500
    assert ports["mlx5_3"]["trust"] == "pcp"
    assert 3 not in ports["mlx5_4"]["ecn_priorities"]
    assert ports["mlx5_5"]["pfc_priorities"] == []
    assert facts["gpus"]["gpudirect_module"] == "none"


def test_tcp_only_node_facts() -> None:
    facts = run_doctor(Root.at(FIXTURE_HOSTS / "cloud-tcp")).to_dict()["facts"]
    assert facts["nics"] == [] and facts["rdma_core"] is None and facts["nccl_version"] is None
    assert facts["netdevs"][0]["name"] == "ens5" and facts["netdevs"][0]["mtu_bytes"] == 9001
    assert facts["gpus"]["count"] == 4 and facts["gpus"]["model"] == "NVIDIA L4"
