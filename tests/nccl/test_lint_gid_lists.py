"""Lint sees GIDs and device lists as NCCL does (issue 13 A2, A3) and explains RoCE v1-only ports
by their evidence (B10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.checks.doctor import run_doctor
from fabricscope.host import Root, read_inventory
from fabricscope.nccl.envgen import plan_env
from fabricscope.nccl.lint import lint
from fabricscope.nccl.match import parse_list
from fabricscope.nccl.settings import from_environ, merge, parse_script
from tests.conftest import FIXTURE_HOSTS


def inventory(name: str | Path):
    return read_inventory(Root.at(FIXTURE_HOSTS / name if isinstance(name, str) else name))


def found(env: dict[str, str], host, code: str, **kw):
    return [f for f in lint(merge([from_environ(env)]), inventory(host), **kw) if f.id == code]


# ----- A2: NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_RANGE against the GID tables
@pytest.mark.parametrize(
    ("env", "why"),
    [
        (
            {"NCCL_IB_ADDR_FAMILY": "AF_INET6"},
            "NCCL_IB_ADDR_FAMILY=AF_INET6",
        ),  # no global IPv6 RoCE v2 GID here
        (
            {"NCCL_IB_ADDR_RANGE": "172.16.0.0/12"},
            "excludes every RoCE v2 address",
        ),  # the RoCE addresses are 10.x
    ],
)
def test_gid_settings_that_leave_no_usable_gid_fail(env: dict[str, str], why: str) -> None:
    [f] = found(env, "roce-healthy", "NCCL036")
    assert f.severity.value == "fail" and why in f.message
    assert len(f.evidence["ports"]) == 8


def test_gid_settings_that_fit_pass_and_name_the_index() -> None:
    [f] = found({"NCCL_IB_ADDR_RANGE": "10.0.0.0/8"}, "roce-healthy", "NCCL036")
    assert f.severity.value == "pass" and "index 3" in f.message
    [v1] = found({"NCCL_IB_ROCE_VERSION_NUM": "1"}, "roce-healthy", "NCCL036")
    assert v1.severity.value == "pass" and "index 2" in v1.message  # the IPv4 RoCE v1 entry


def test_gid_settings_fail_only_the_ports_they_break() -> None:
    # roce-broken: mlx5_1 has no IPv4 at all, mlx5_7's RoCE v2 addresses are IPv6 only.
    [f] = found(
        {"NCCL_IB_ADDR_FAMILY": "AF_INET", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_7:1"}, "roce-broken", "NCCL036"
    )
    assert f.evidence["ports"] == ["mlx5_7:1"] and "only RoCE v2 addresses are IPv6" in f.message
    [ok] = found({"NCCL_IB_ADDR_FAMILY": "AF_INET6", "NCCL_IB_HCA": "=mlx5_7:1"}, "roce-broken", "NCCL036")
    assert ok.severity.value == "pass"


def test_gid_settings_are_left_alone_where_nccl_ignores_them() -> None:
    assert found({"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, "ib-ndr-healthy", "NCCL036") == []  # InfiniBand
    assert found({"NCCL_IB_ADDR_FAMILY": "AF_INET6"}, "roce-healthy", "NCCL036", nccl_version="2.19.3") == []
    assert (
        found({"NCCL_IB_ADDR_FAMILY": "AF_INET6", "NCCL_IB_GID_INDEX": "3"}, "roce-healthy", "NCCL036") == []
    )


def test_address_family_is_case_sensitive() -> None:
    # envIbAddrFamily: strcmp(env, "AF_INET6"); anything else is AF_INET.
    [f] = [f for f in lint(merge([from_environ({"NCCL_IB_ADDR_FAMILY": "af_inet6"})])) if f.id == "NCCL003"]
    assert "case-sensitively" in f.message


# ----- A3: blanks in lists --------------------------------------------------------------------------
def test_a_blank_in_the_hca_list_drops_that_device() -> None:
    parsed = parse_list("=mlx5_0:1, mlx5_1:1")
    assert parsed.matches("mlx5_0", 1) and not parsed.matches("mlx5_1", 1)
    [f] = found({"NCCL_IB_HCA": "=mlx5_0:1, mlx5_1:1"}, "ib-ndr-healthy", "NCCL016")
    assert f.severity.value == "warn" and "mlx5_1 is silently left out" in f.message
    assert f.fix == "write the list without blanks: NCCL_IB_HCA==mlx5_0:1,mlx5_1:1"
    assert found({"NCCL_IB_HCA": "=mlx5_0:1, mlx5_1:1"}, "ib-ndr-healthy", "NCCL010") == []  # said once
    [only] = found({"NCCL_SOCKET_IFNAME": " eno1"}, "ib-ndr-healthy", "NCCL016")
    assert only.severity.value == "fail"
    excl = parse_list("^mlx5_0, mlx5_1")
    assert excl.matches("mlx5_1")  # not excluded: NCCL compares ' mlx5_1'


def test_the_blank_is_caught_without_a_node_too() -> None:
    f = [f for f in lint(merge([from_environ({"NCCL_SOCKET_IFNAME": "=eno1, eno2"})])) if f.id == "NCCL016"]
    assert f and "eno2" in f[0].message


def test_script_reads_an_unquoted_list_whole() -> None:
    """`export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1` sets the whole list; only --export=A=B,C=D splits."""
    got = {
        s.name: s.value
        for s in parse_script(
            "export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\n#SBATCH --export=ALL,NCCL_DEBUG=WARN,NCCL_IB_TC=106\n",
            "j",
        )
    }
    assert got == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_DEBUG": "WARN", "NCCL_IB_TC": "106"}


# ----- B10: a RoCE v1-only NIC ----------------------------------------------------------------------
@pytest.fixture
def v1_only(host_copy) -> Path:
    """roce-healthy with mlx5_0's RoCE v2 entries gone, as on a NIC whose driver offers RoCE v1 only;
    its netdev keeps its IPv4 address."""
    root = host_copy("roce-healthy")
    port = root / "sys/class/infiniband/mlx5_0/ports/1"
    for index in ("1", "3"):
        (port / "gids" / index).write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
        for attr in ("types", "ndevs"):
            (port / "gid_attrs" / attr / index).unlink(missing_ok=True)
    return root


def test_doctor_gives_the_fix_the_evidence_supports(v1_only: Path) -> None:
    report = run_doctor(Root.at(v1_only))
    [f] = [f for f in report.findings if f.id == "roce.gid" and f.subject == "mlx5_0/1"]
    assert f.severity.value == "warn" and "RoCE v1 entries only" in f.message
    assert "cma_roce_mode" not in (f.fix or "")  # RDMA-CM's default; NCCL does not use RDMA-CM
    assert "NCCL_IB_ROCE_VERSION_NUM=1" in (f.fix or "")


def test_env_blames_ipv4_only_when_the_netdev_has_none(v1_only: Path) -> None:
    inv = inventory(v1_only)
    excluded = dict(plan_env(inv).excluded)
    assert inv.netdev("ens0np0").ipv4
    assert (
        "has no IPv4 address" not in excluded["mlx5_0:1"] and "RoCE v1 entries only" in excluded["mlx5_0:1"]
    )
    broken = dict(plan_env(inventory("roce-broken")).excluded)
    assert "ens1np0 has no IPv4 address" in broken["mlx5_1:1"]  # it really has none


# ----- A3: config files as NCCL's setEnvFile reads them -----------------------------------------------
def test_nccl_conf_is_read_verbatim(host_copy) -> None:
    """src/misc/param.cc setEnvFile: NAME is everything before the first '=', VALUE everything after."""
    from fabricscope.nccl.job import JobSources, lint_job

    root_path = host_copy("ib-ndr-healthy")
    (root_path / "etc").mkdir(exist_ok=True)
    (root_path / "etc/nccl.conf").write_text(
        'NCCL_IB_HCA="=mlx5_0:1"\nexport NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME==eno1 # management\nNCCL_IB_TIMEOUT = 22\n'
    )
    root = Root.at(root_path)
    settings, found = lint_job(JobSources(), root, read_inventory(root))
    assert settings.get("NCCL_IB_HCA") == '"=mlx5_0:1"'  # quotes kept: no device matches
    assert settings.get("NCCL_SOCKET_IFNAME") == "=eno1 # management"
    assert "NCCL_DEBUG" not in settings.effective and "NCCL_IB_TIMEOUT" not in settings.effective
    misread = {f.subject: f.message for f in found if f.id == "NCCL006"}
    assert set(misread) == {"/etc/nccl.conf:1", "/etc/nccl.conf:2", "/etc/nccl.conf:3", "/etc/nccl.conf:4"}
    assert (
        "keeps the quotes" in misread["/etc/nccl.conf:1"]
        and "'export NCCL_DEBUG'" in misread["/etc/nccl.conf:2"]
    )
    assert any(f.id == "NCCL010" for f in found)  # '"=mlx5_0' names no device, as NCCL sees it
