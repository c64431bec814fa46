"""`nccl lint`: the blog configuration against the fixture hosts, every rule, and the sources."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabricscope.findings import Finding
from fabricscope.host import Root, read_inventory
from fabricscope.nccl.lint import CODES, lint
from fabricscope.nccl.match import parse_list
from fabricscope.nccl.settings import from_environ, merge, parse_env_file, parse_script
from tests.conftest import FIXTURE_HOSTS

BLOG = """\
export NCCL_DEBUG=WARN
export NCCL_SOCKET_IFNAME=eth0
export NCCL_IB_HCA=mlx5
export NCCL_IB_GID_INDEX=3
export NCCL_IB_TIMEOUT=22
export NCCL_IB_QPS_PER_CONNECTION=4
export NCCL_IB_TC=41
export NCCL_NET_GDR_LEVEL=2
"""


def inventory(name: str):
    return read_inventory(Root.at(FIXTURE_HOSTS / name))


def run(env: dict[str, str] | str, host: str | None = None, **kw) -> list[Finding]:
    if isinstance(env, str):
        settings = merge([parse_script(env, "job.sh")])
    else:
        settings = merge([from_environ(env)])
    return lint(settings, inventory(host) if host else None, **kw)


def codes(findings: list[Finding], severity: str | None = None) -> dict[str, str]:
    """code -> worst severity (one code may appear for several variables)."""
    out: dict[str, str] = {}
    order = ["pass", "info", "warn", "fail"]
    for f in findings:
        if severity is None or f.severity.value == severity:
            if f.id not in out or order.index(f.severity.value) > order.index(out[f.id]):
                out[f.id] = f.severity.value
    return out


def by_var(findings: list[Finding]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in findings:
        out.setdefault(f.subject, set()).add(f"{f.id}:{f.severity.value}")
    return out


# ----- the worked example of docs/nccl.md -------------------------------------------------------
def test_blog_config_on_infiniband() -> None:
    found = by_var(run(BLOG, "ib-ndr-healthy"))
    assert found == {
        "NCCL_SOCKET_IFNAME": {"NCCL020:fail"},  # no eth0 on the node
        "NCCL_IB_GID_INDEX": {"NCCL030:info"},  # ignored on InfiniBand
        "NCCL_IB_TIMEOUT": {"NCCL070:info"},  # 17.2 s x 7 = 2 min
        "NCCL_IB_QPS_PER_CONNECTION": {"NCCL071:info"},  # adaptive routing already spreads load
        "NCCL_IB_TC": {"NCCL040:info"},  # ignored on InfiniBand
        "NCCL_NET_GDR_LEVEL": {"NCCL050:info"},  # 2 = PXB = the default
    }


def test_blog_config_on_healthy_roce() -> None:
    found = by_var(run(BLOG, "roce-healthy"))
    assert found == {
        "NCCL_SOCKET_IFNAME": {"NCCL020:fail"},
        "NCCL_IB_GID_INDEX": {"NCCL035:info"},  # right here, but NCCL >= 2.21 picks it itself
        "NCCL_IB_TIMEOUT": {"NCCL070:info"},
        "NCCL_IB_QPS_PER_CONNECTION": {"NCCL071:pass"},  # ECMP entropy on RoCE
        "NCCL_IB_TC": {"NCCL041:fail"},  # DSCP 10 -> priority 1, PFC is on 3
        "NCCL_NET_GDR_LEVEL": {"NCCL050:info"},
    }
    tc = next(f for f in run(BLOG, "roce-healthy") if f.id == "NCCL041")
    assert "DSCP 10" in tc.message and "priority 1 (PFC on 3)" in tc.message


def test_blog_config_on_broken_roce() -> None:
    found = by_var(run(BLOG, "roce-broken"))
    assert found["NCCL_IB_GID_INDEX"] == {"NCCL031:fail"}  # mlx5_1 has no GID 3 (no IPv4 on ens1np0)
    assert found["NCCL_IB_TC"] == {"NCCL041:fail", "NCCL042:warn", "NCCL043:warn"}  # PFC, trust pcp, ECN off
    assert found["NCCL_NET_GDR_LEVEL"] == {"NCCL050:info", "NCCL052:info"}  # no nvidia_peermem
    gid = next(f for f in run(BLOG, "roce-broken") if f.id == "NCCL031")
    assert gid.evidence["ports"] == ["mlx5_1:1"]


def test_blog_config_on_cloud_tcp() -> None:
    found = codes(run(BLOG, "cloud-tcp"))
    assert found["NCCL020"] == "fail"
    assert found["NCCL072"] == "info"
    assert "NCCL070" not in found  # timeout is irrelevant without RDMA: said once, by NCCL072


# ----- rules ------------------------------------------------------------------------------------
def test_unknown_misspelt_and_deprecated_names() -> None:
    found = {
        f.subject: f
        for f in run(
            {
                "NCCL_IB_HCAS": "mlx5",
                "NCCL_IB_GDR_LEVEL": "PHB",
                "NCCL_FOO_BAR_BAZ": "1",
                "NCCL_ASYNC_ERROR_HANDLING": "1",
            }
        )
    }
    assert found["NCCL_IB_HCAS"].id == "NCCL001" and found["NCCL_IB_HCAS"].severity.value == "warn"
    assert found["NCCL_IB_HCAS"].evidence["suggestion"] == "NCCL_IB_HCA"
    assert found["NCCL_FOO_BAR_BAZ"].id == "NCCL001" and found["NCCL_FOO_BAR_BAZ"].severity.value == "info"
    assert (
        found["NCCL_IB_GDR_LEVEL"].id == "NCCL002"
        and found["NCCL_IB_GDR_LEVEL"].evidence["replacement"] == "NCCL_NET_GDR_LEVEL"
    )
    assert found["NCCL_ASYNC_ERROR_HANDLING"].evidence["replacement"] == "TORCH_NCCL_ASYNC_ERROR_HANDLING"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NCCL_IB_TIMEOUT", "40"),
        ("NCCL_IB_TIMEOUT", "fast"),
        ("NCCL_IB_RETRY_CNT", "8"),
        ("NCCL_IB_QPS_PER_CONNECTION", "0"),
        ("NCCL_IB_TC", "300"),
        ("NCCL_P2P_DISABLE", "yes"),
        ("NCCL_DEBUG", "verbose"),
        ("NCCL_NET_GDR_LEVEL", "CLOSE"),
        ("NCCL_CROSS_NIC", "3"),
        ("NCCL_BUFFSIZE", "3000000"),
        ("NCCL_IB_HCA", ""),
        ("NCCL_IB_HCA", "=mlx5_0:x"),
    ],
)
def test_values_out_of_range_or_wrong_type(name: str, value: str) -> None:
    found = [f for f in run({name: value}) if f.id == "NCCL003"]
    assert found and found[0].severity.value == "warn" and found[0].subject == name


def test_valid_values_pass_the_type_check() -> None:
    env = {
        "NCCL_IB_TIMEOUT": "20",
        "NCCL_IB_TC": "0x6a",
        "NCCL_NET_GDR_LEVEL": "PHB",
        "NCCL_DEBUG": "warn",
        "NCCL_IB_HCA": "^=mlx5_1,mlx5_4",
        "NCCL_BUFFSIZE": "8388608",
    }
    assert "NCCL003" not in codes(run(env))


def test_list_syntax() -> None:
    exact = parse_list("=mlx5_0:1,mlx5_1:1")
    assert (
        exact.exact and not exact.exclude and exact.matches("mlx5_1", 1) and not exact.matches("mlx5_10", 1)
    )
    assert not exact.matches("mlx5_0", 2)
    prefix = parse_list("mlx5_1")
    assert prefix.matches("mlx5_10") and prefix.matches("mlx5_1")
    excl = parse_list("^=mlx5_1,mlx5_4")
    assert excl.exclude and excl.exact and not excl.matches("mlx5_1") and excl.matches("mlx5_10")
    assert parse_list("mlx5_0::0:0").tokens[0].port is None


def test_hca_prefix_trap_and_names_that_match_nothing(host_copy) -> None:
    # Give the IB host 18 devices worth of names by linting against a copy with mlx5_1x devices.
    root = host_copy("ib-ndr-healthy")
    ib = root / "sys/class/infiniband"
    for i in range(10, 13):
        shutil.copytree(ib / "mlx5_1", ib / f"mlx5_{i}", symlinks=True, dirs_exist_ok=True) if (
            ib / "mlx5_1"
        ).is_dir() and not (ib / "mlx5_1").is_symlink() else (ib / f"mlx5_{i}").symlink_to(
            (ib / "mlx5_1").readlink()
        )
    inv = read_inventory(Root.at(root))
    assert {d.name for d in inv.rdma_devices} >= {"mlx5_10", "mlx5_11", "mlx5_12"}
    found = lint(merge([from_environ({"NCCL_IB_HCA": "mlx5_1,mlx5_9"})]), inv)
    trap = next(f for f in found if f.id == "NCCL012")
    assert trap.evidence["also_matches"] == ["mlx5_10", "mlx5_11", "mlx5_12"]
    assert "=mlx5_1,mlx5_9" in (trap.fix or "")
    # NCCL uses every device matching any entry (matchIfList): mlx5_9 matching nothing is info, as
    # mlx5_1 still selects devices; only a list where nothing matches fails.
    nothing = next(f for f in found if f.id == "NCCL010")
    assert nothing.severity.value == "info" and nothing.evidence["token"] == "mlx5_9"
    none_left = [
        f for f in lint(merge([from_environ({"NCCL_IB_HCA": "mlx5_9,mlx4_0"})]), inv) if f.id == "NCCL010"
    ]
    assert {f.severity.value for f in none_left} == {"fail"} and len(none_left) == 2


def test_hca_down_port_missing_port_and_mixed_layers() -> None:
    found = codes(run({"NCCL_IB_HCA": "=mlx5_4:1,mlx5_5:1"}, "ib-degraded"))
    assert found["NCCL011"] == "warn"  # mlx5_5 is DOWN, mlx5_4 still works
    assert codes(run({"NCCL_IB_HCA": "=mlx5_5"}, "ib-degraded"))["NCCL011"] == "fail"  # nothing left
    assert codes(run({"NCCL_IB_HCA": "=mlx5_0:2"}, "ib-ndr-healthy"))["NCCL014"] == "fail"
    assert codes(run({"NCCL_IB_HCA": "^mlx5"}, "ib-ndr-healthy"))["NCCL010"] == "fail"
    assert "NCCL011" not in codes(run({"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}, "ib-degraded"))


def test_socket_ifname_rules() -> None:
    assert codes(run({"NCCL_SOCKET_IFNAME": "=eno1"}, "ib-ndr-healthy")) == {}
    assert codes(run({"NCCL_SOCKET_IFNAME": "ibp180s0"}, "ib-degraded"))["NCCL021"] == "fail"  # down
    assert (
        codes(run({"NCCL_SOCKET_IFNAME": "ens1np0"}, "roce-broken"))["NCCL021"] == "fail"
    )  # no IPv4, only fe80
    assert codes(run({"NCCL_SOCKET_IFNAME": "lo"}, "cloud-tcp"))["NCCL023"] == "warn"
    socket_codes = {"NCCL020", "NCCL021", "NCCL022", "NCCL023"}
    ok = codes(run({"NCCL_SOCKET_IFNAME": "ens5np0,eno"}, "roce-healthy"))
    assert not socket_codes & set(ok)


def test_gid_index_rules() -> None:
    assert codes(run({"NCCL_IB_GID_INDEX": "0"}, "roce-healthy"))["NCCL032"] == "fail"  # fe80 v1
    assert codes(run({"NCCL_IB_GID_INDEX": "1"}, "roce-healthy"))["NCCL033"] == "fail"  # fe80 v2
    assert codes(run({"NCCL_IB_GID_INDEX": "2"}, "roce-healthy"))["NCCL032"] == "fail"  # IPv4 but RoCE v1
    assert codes(run({"NCCL_IB_GID_INDEX": "7"}, "roce-healthy"))["NCCL031"] == "fail"
    old = codes(run({"NCCL_IB_GID_INDEX": "3"}, "roce-healthy", nccl_version="2.19.3"))
    assert gid_codes(old) == {}  # right index, and the version needs it
    assert gid_codes(codes(run({"NCCL_IB_GID_INDEX": "-1"}, "roce-healthy"))) == {}
    # Selecting only healthy NICs on the broken host: index 3 is right there.
    found = codes(run({"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_2:1"}, "roce-broken"))
    assert gid_codes(found) == {"NCCL035": "info"}


def gid_codes(found: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in found.items() if k.startswith("NCCL03")}


def test_gid_index_that_differs_between_nics(host_copy) -> None:
    root = host_copy("roce-healthy")
    port = root / "sys/class/infiniband/mlx5_0/ports/1"
    # An extra IPv6 address shifts mlx5_0's IPv4 RoCE v2 entry from 3 to 5 (as in show_gids samples).
    gids = port / "gids"
    types = port / "gid_attrs/types"
    ndevs = port / "gid_attrs/ndevs"
    for src, dst in ((2, 4), (3, 5)):
        for base in (gids, types, ndevs):
            if (base / str(src)).exists():
                (base / str(dst)).write_text((base / str(src)).read_text())
    (gids / "2").write_text("fd00:0000:0000:0000:0000:0000:0000:0011\n")
    (gids / "3").write_text("fd00:0000:0000:0000:0000:0000:0000:0011\n")
    inv = read_inventory(Root.at(root))
    found = codes(lint(merge([from_environ({"NCCL_IB_GID_INDEX": "3"})]), inv))
    assert found.get("NCCL034") == "fail"


def test_tc_rules() -> None:
    assert codes(run({"NCCL_IB_TC": "106"}, "roce-healthy")) == {
        "NCCL044": "pass"
    }  # DSCP 26 ECT(0) -> prio 3
    assert codes(run({"NCCL_IB_TC": "107"}, "roce-healthy"))["NCCL043"] == "fail"  # CE bits
    assert (
        codes(run({}, "roce-healthy") + run({"NCCL_DEBUG": "WARN"}, "roce-healthy"))["NCCL045"] == "warn"
    )  # TC unset, PFC on 3
    assert codes(run({"NCCL_IB_TC": "106"}, "ib-ndr-healthy")) == {"NCCL040": "info"}


def test_forced_sockets_and_debug_settings() -> None:
    assert codes(run({"NCCL_IB_DISABLE": "1"}, "ib-ndr-healthy"))["NCCL060"] == "fail"
    assert codes(run({"NCCL_NET": "Socket"}, "roce-healthy"))["NCCL061"] == "fail"
    assert "NCCL060" not in codes(run({"NCCL_IB_DISABLE": "1"}, "cloud-tcp"))
    assert codes(run({"NCCL_IB_DISABLE": "1"}))["NCCL060"] == "warn"  # no node given
    found = codes(
        run(
            {
                "NCCL_P2P_DISABLE": "1",
                "NCCL_SHM_DISABLE": "1",
                "NCCL_ALGO": "Ring",
                "NCCL_PROTO": "LL128",
                "NCCL_DEBUG": "INFO",
            }
        )
    )
    assert found["NCCL062"] == "warn" and found["NCCL063"] == "warn" and found["NCCL064"] == "warn"
    assert codes(run({"NCCL_DEBUG": "TRACE"}, production=False))["NCCL064"] == "info"
    assert codes(run({"NCCL_P2P_LEVEL": "LOC"}))["NCCL062"] == "warn"


def test_timeout_translation() -> None:
    f = next(f for f in run({"NCCL_IB_TIMEOUT": "20", "NCCL_IB_RETRY_CNT": "7"}) if f.id == "NCCL070")
    assert f.severity.value == "info" and f.evidence["per_try_s"] == pytest.approx(4.295, abs=0.001)
    assert f.evidence["total_s"] == pytest.approx(30.06, abs=0.01)
    assert next(f for f in run({"NCCL_IB_TIMEOUT": "0"}) if f.id == "NCCL070").severity.value == "warn"
    assert next(f for f in run({"NCCL_IB_TIMEOUT": "12"}) if f.id == "NCCL070").severity.value == "warn"


def test_gdr_level_against_topology() -> None:
    assert codes(run({"NCCL_NET_GDR_LEVEL": "LOC"}, "ib-ndr-healthy"))["NCCL051"] == "warn"
    assert codes(run({"NCCL_NET_GDR_LEVEL": "0"}, "ib-ndr-healthy"))["NCCL050"] == "info"
    assert codes(run({"NCCL_NET_GDR_LEVEL": "PIX"}, "ib-ndr-healthy")) == {}  # GPUs are PIX from their NIC
    assert codes(run({"NCCL_NET_GDR_LEVEL": "PHB"}, "ib-ndr-healthy")) == {}


def test_every_code_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "nccl.md").read_text()
    missing = [code for code in CODES if code not in doc]
    assert not missing, f"codes not in docs/nccl.md: {missing}"


# ----- sources ----------------------------------------------------------------------------------
def test_script_parsing_covers_the_ways_jobs_set_variables() -> None:
    script = """#!/bin/bash
#SBATCH --export=ALL,NCCL_IB_TIMEOUT=19
export NCCL_DEBUG=INFO NCCL_IB_HCA="=mlx5_0:1,mlx5_1:1"
NCCL_SOCKET_IFNAME='=eno1' torchrun train.py
# export NCCL_P2P_DISABLE=1   (commented out: ignored)
export NCCL_ALGO=Ring
unset NCCL_ALGO
docker run -e NCCL_IB_GID_INDEX=3 image
env:
  - name: NCCL_IB_TC
    value: "106"
os.environ["NCCL_NET_GDR_LEVEL"] = "PHB"
"""
    found = {s.name: (s.value, s.line) for s in parse_script(script, "job.sh")}
    assert found == {
        "NCCL_IB_TIMEOUT": ("19", 2),
        "NCCL_DEBUG": ("INFO", 3),
        "NCCL_IB_HCA": ("=mlx5_0:1,mlx5_1:1", 3),
        "NCCL_SOCKET_IFNAME": ("=eno1", 4),
        "NCCL_IB_GID_INDEX": ("3", 8),
        "NCCL_IB_TC": ("106", 11),
        "NCCL_NET_GDR_LEVEL": ("PHB", 12),
    }


def test_env_file_and_precedence() -> None:
    env, bad = parse_env_file(
        "NCCL_IB_TC=106\n# comment\nexport NCCL_DEBUG=WARN # trailing\nnot a line\n", "job.env"
    )
    assert [(s.name, s.value) for s in env] == [("NCCL_IB_TC", "106"), ("NCCL_DEBUG", "WARN")]
    assert bad == [("job.env", 4, "not a line")]
    conf, _ = parse_env_file("NCCL_IB_TC=41\nNCCL_IB_TIMEOUT=22\n", "/etc/nccl.conf", origin="/etc/nccl.conf")
    user, _ = parse_env_file("NCCL_IB_TIMEOUT=20\n", "/home/u/nccl.conf", origin="NCCL_CONF_FILE")
    merged = merge([conf, env, user])
    assert merged.get("NCCL_IB_TC") == "106"  # environment beats /etc/nccl.conf
    assert merged.get("NCCL_IB_TIMEOUT") == "20"  # NCCL_CONF_FILE beats /etc/nccl.conf
    shadow = codes(lint(merged))
    assert shadow["NCCL005"] == "info"


def test_socket_ifname_prefix_trap(host_copy) -> None:
    # A cloud host copy with eth1 and eth10 laid out as sysfs does (class symlink into /sys/devices).
    root = host_copy("cloud-tcp")
    for name in ("eth1", "eth10"):
        dev = root / "sys/devices/virtual/net" / name
        dev.mkdir(parents=True)
        for attr, value in {
            "mtu": "1500",
            "operstate": "up",
            "type": "1",
            "address": "02:00:00:00:00:01",
        }.items():
            (dev / attr).write_text(value + "\n")
        (root / "sys/class/net" / name).symlink_to(f"../../devices/virtual/net/{name}")
    inv = read_inventory(Root.at(root))
    found = lint(merge([from_environ({"NCCL_SOCKET_IFNAME": "eth1"})]), inv)
    trap = next(f for f in found if f.id == "NCCL022")
    assert trap.severity.value == "warn" and trap.evidence["also_matches"] == ["eth10"]
    assert "=eth1" in (trap.fix or "")
    assert not [
        f for f in lint(merge([from_environ({"NCCL_SOCKET_IFNAME": "=eth1"})]), inv) if f.id == "NCCL022"
    ]


# ----- values as NCCL v2.30.7-1 reads them (issue 13 B8) ----------------------------------------
def nccl003(env: dict[str, str], **kw) -> Finding | None:
    return next((f for f in run(env, **kw) if f.id == "NCCL003"), None)


def test_debug_levels_are_ncclParamOneOf_s() -> None:
    # src/debug.cc: VERSION, WARN, INFO, ABORT, TRACE (case-insensitive); there is no ATTN.
    assert nccl003({"NCCL_DEBUG": "ABORT"}) is None
    assert nccl003({"NCCL_DEBUG": "abort"}) is None
    attn = nccl003({"NCCL_DEBUG": "ATTN"})
    assert attn is not None and "ATTN" not in (attn.fix or "")


@pytest.mark.parametrize(
    "value", ["LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "0", "2", "7"]
)
def test_path_levels_ncclGetLevel_takes(value: str) -> None:
    assert nccl003({"NCCL_P2P_LEVEL": value}) is None
    assert nccl003({"NCCL_NET_GDR_LEVEL": value}) is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("pxb", "case-sensitively"),
        ("NODE", "nvidia-smi"),
        ("Sys", "case-sensitively"),
        ("-1", "legacy number"),
        (" PHB", "blanks"),
    ],
)
def test_path_levels_ncclGetLevel_ignores(value: str, why: str) -> None:
    for name in ("NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL"):
        f = nccl003({name: value})
        assert f is not None and why in f.message, (name, value)


def test_protocol_exclusion_is_not_called_forcing() -> None:
    found = next(f for f in run({"NCCL_PROTO": "^LL128"}) if f.id == "NCCL063")
    assert (
        found.severity.value == "info" and "forc" not in found.message and "excludes LL128" in found.message
    )
    assert nccl003({"NCCL_PROTO": "^LL128"}) is None
    forced = next(f for f in run({"NCCL_PROTO": "LL128"}) if f.id == "NCCL063")
    assert forced.severity.value == "warn" and "corrupt" in forced.message


@pytest.mark.parametrize("value", ["Rign", "ring;tree", "allreduce:ring;foo:tree", "Ring,NVLS_Tree"])
def test_unknown_algorithm_tokens_fail_init_since_2_24(value: str) -> None:
    # parseList, src/graph/tuning.cc: "Unrecognized element token" -> ncclInvalidUsage (2.24+).
    found = nccl003({"NCCL_ALGO": value})
    assert found is not None and found.severity.value == "fail" and "ncclInvalidUsage" in found.message
    old = nccl003({"NCCL_ALGO": value}, nccl_version="2.23.4")
    assert old is not None and old.severity.value == "warn"
    assert not [f for f in run({"NCCL_ALGO": value}) if f.id == "NCCL063"]  # one finding, not two


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NCCL_ALGO", "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"),
        ("NCCL_PROTO", "LL,Simple;allreduce:^LL"),
        ("NCCL_PROTO", "^LL128;allreduce:LL128"),
        ("NCCL_ALGO", "pat"),
    ],
)
def test_the_guide_s_list_examples_are_valid(name: str, value: str) -> None:
    assert nccl003({name: value}) is None


# ----- version- and platform-aware rules (issue 13 B11) -------------------------------------------
@pytest.fixture
def grace_host(host_copy) -> Path:
    """ib-ndr-healthy with the GPUs nvidia-smi would name on a Grace Hopper node."""
    root = host_copy("ib-ndr-healthy")
    smi = next((root / "cmd").glob("*nvidia-smi_query-gpu*"))
    smi.write_text(smi.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA GH200 480GB"))
    return root


def test_gdr_level_2_on_grace_is_not_the_default(grace_host: Path) -> None:
    inv = read_inventory(Root.at(grace_host))
    found = lint(merge([from_environ({"NCCL_NET_GDR_LEVEL": "2"})]), inv)
    explained = next(f for f in found if f.id == "NCCL050")
    assert "changes nothing" not in explained.message and "P2C" in explained.message
    harmful = next(f for f in found if f.id == "NCCL051")
    assert harmful.severity.value == "warn" and "C2C" in harmful.message
    # 2.27-2.28 treat the C2C path as C2C whatever the level; NCCL_NET_GDR_C2C=0 restores PXB.
    assert not [
        f
        for f in lint(merge([from_environ({"NCCL_NET_GDR_LEVEL": "2"})]), inv, nccl_version="2.28.3")
        if f.id == "NCCL051"
    ]
    assert not [
        f
        for f in lint(merge([from_environ({"NCCL_NET_GDR_LEVEL": "PXB", "NCCL_NET_GDR_C2C": "0"})]), inv)
        if f.id == "NCCL051"
    ]
    # On a PCIe node 2 is still the default.
    assert (
        "changes nothing"
        in next(f for f in run({"NCCL_NET_GDR_LEVEL": "2"}, "ib-ndr-healthy") if f.id == "NCCL050").message
    )


def test_adaptive_routing_depends_on_the_subnet_manager() -> None:
    ib = next(
        f
        for f in run({"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_SL": "1"}, "ib-ndr-healthy")
        if f.id == "NCCL071"
    )
    assert "subnet manager" in ib.message and "NCCL_IB_SL=1" in ib.message and "by default" not in ib.message
    roce = next(f for f in run({"NCCL_IB_QPS_PER_CONNECTION": "4"}, "roce-healthy") if f.id == "NCCL071")
    assert "InfiniBand only" in roce.message


def test_gid_advice_before_2_21() -> None:
    old = next(
        f for f in run({"NCCL_DEBUG": "WARN"}, "roce-healthy", nccl_version="2.19.3") if f.id == "NCCL037"
    )
    assert old.severity.value == "warn" and "index 0" in old.message
    assert old.fix is not None and old.fix.startswith("set NCCL_IB_GID_INDEX=3")
    assert not [
        f for f in run({"NCCL_DEBUG": "WARN"}, "roce-healthy") if f.id == "NCCL037"
    ]  # 2.21+: NCCL chooses
    assert not [
        f for f in run({"NCCL_IB_GID_INDEX": "3"}, "roce-healthy", nccl_version="2.19.3") if f.id == "NCCL037"
    ]


def test_log_version_drives_the_version_aware_rules() -> None:
    from fabricscope.nccl.lint import lint_log_env
    from fabricscope.nccl.log.aggregate import LogAggregator

    def verdicts(version: str) -> list[Finding]:
        agg = LogAggregator()
        for line in (
            f"host1:100:100 [0] NCCL INFO NCCL version {version}+cuda12.2",
            "host1:100:100 [0] NCCL INFO NCCL_ALGO set by environment to Rign",
        ):
            agg.feed(line)
        return [f for f in lint_log_env(agg) if f.evidence.get("code") == "NCCL003"]

    assert [f.severity.value for f in verdicts("2.23.4")] == ["warn"]
    assert [f.severity.value for f in verdicts("2.24.3")] == ["fail"]
