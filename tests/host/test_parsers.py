"""Pure parsers of the host model, on real captured outputs from tests/data/samples/."""

from __future__ import annotations

import re

from fabricscope.host.ethtool import parse_features, parse_module, parse_stats
from fabricscope.host.gpu import normalise_bus_id, parse_nvidia_smi
from fabricscope.host.infiniband import Gid, parse_rate
from fabricscope.host.netclass import parse_ip_addr_json
from fabricscope.host.pci import parse_config_space, parse_link_speed
from fabricscope.host.procfs import parse_modules, parse_netstat
from fabricscope.host.qos import parse_dcb_app, parse_dcb_pfc, parse_mlnx_qos
from fabricscope.host.sysfs import parse_id_name
from tests.conftest import samples_dir


def sample(name: str) -> str:
    return (samples_dir() / name).read_text()


def sample_body(name: str) -> str:
    """The sample without its two metadata lines."""
    return "\n".join(
        line
        for line in sample(name).splitlines()
        if not line.startswith("# source:") and not line.startswith("# note:")
    )


def test_mlnx_qos_real_output() -> None:
    text = sample_body("mlnx_qos_dscp_trust_pfc3.txt")
    block = text.split("+ sudo sh")[0]
    qos = parse_mlnx_qos(block)
    assert qos is not None
    assert qos.trust == "dscp"
    assert qos.pfc_priorities == [3]
    assert qos.dscp_to_prio[26] == 3 and qos.dscp_to_prio[48] == 6 and len(qos.dscp_to_prio) == 64
    assert qos.priority_of_dscp(26) == 3


def test_mlnx_qos_garbage() -> None:
    assert parse_mlnx_qos("nothing to see") is None
    partial = parse_mlnx_qos("Priority trust state: pcp\n")
    assert partial is not None and partial.trust == "pcp" and partial.pfc_enabled is None


def test_dcb_json() -> None:
    assert parse_dcb_pfc(
        '{"pfc_cap":8,"prio_pfc":{"0":false,"1":false,"2":false,"3":true,"4":false,"5":false,"6":false,"7":false},"delay":0}'
    ) == (False, False, False, True, False, False, False, False)
    assert parse_dcb_pfc('{"prio_pfc":[{"prio":3,"enabled":true}]}')[3] is True
    assert parse_dcb_pfc("not json") is None
    assert parse_dcb_app('{"dscp_prio":[[26,3],[48,6]]}') == {26: 3, 48: 6}
    assert parse_dcb_app("[]") is None


def test_sysfs_value_formats_from_procfs_fixture() -> None:
    values = {}
    for line in sample("sysfs_infiniband_fixture_procfs.txt").splitlines():
        if line.startswith("/sys/"):
            path, _, value = line.partition(" = ")
            values[path] = value
    assert parse_rate(values["/sys/class/infiniband/mlx4_0/ports/1/rate"]) == (40.0, 4, "QDR")
    assert parse_rate(values["/sys/class/infiniband/hfi1_0/ports/1/rate"]) == (100.0, 4, "EDR")
    assert parse_id_name(values["/sys/class/infiniband/mlx4_0/ports/1/state"]) == (4, "ACTIVE")
    assert parse_id_name(values["/sys/class/infiniband/mlx4_0/ports/1/phys_state"]) == (5, "LinkUp")
    assert parse_rate("10 Gb/sec (4X)") == (10.0, 4, None)
    assert parse_rate("garbage") == (None, None, None)
    assert parse_id_name("ACTIVE") == (None, None)


def test_gid_semantics_from_show_gids_samples() -> None:
    rows = [
        line.split()
        for line in sample("show_gids_cx6_ipv6_and_ipv4.txt").splitlines()
        if line.startswith("mlx5_0")
    ]
    gids = [
        Gid(index=int(r[2]), gid=r[3], type="RoCE v2" if r[-2] == "v2" else "IB/RoCE v1", netdev=r[-1])
        for r in rows
    ]
    v2_routable = [g for g in gids if g.roce_version == 2 and g.is_routable]
    assert [g.index for g in v2_routable] == [5]  # index 5, not 3, when extra IPv6 addresses shift the table
    assert v2_routable[0].ipv4 == "172.19.0.60"
    assert all(g.is_link_local for g in gids[:4])


def test_ethtool_stats_real_prio_counters() -> None:
    text = sample_body("ethtool_S_mlx5_prio_counters_before_after.txt").split("# [excerpt gap")[0]
    stats = parse_stats(text)
    assert stats["rx_prio0_bytes"] == 88034564921216
    assert not any(re.match(r"[rt]x_prio\d_pause$", k) for k in stats)


def test_ethtool_stats_cx4_head() -> None:
    stats = parse_stats(sample_body("ethtool_S_mlx5_cx4_head.txt"))
    assert "rx_packets" in stats and all(isinstance(v, int) for v in stats.values())
    assert "driver" not in stats  # the ethtool -i block is not a statistic


def test_ethtool_features_and_module() -> None:
    feats = parse_features(
        "Features for eth0:\nrx-checksumming: on\ngeneric-receive-offload: off\n\ttx-tcp-segmentation: on [fixed]\n"
    )
    assert feats == {"rx-checksumming": True, "generic-receive-offload": False, "tx-tcp-segmentation": True}
    module = parse_module(
        "\tIdentifier                                : 0x11 (QSFP28)\n"
        "\tModule temperature                        : 37.50 degrees C / 99.50 degrees F\n"
        "\tModule temperature high alarm             : On\n"
        "\tLaser tx bias current high alarm   (Channel 1) : Off\n"
    )
    assert module.temperature_c == 37.5 and module.alarms == ("Module temperature high alarm",)
    assert parse_module("") is None


def test_netstat_snmp_and_modules() -> None:
    parsed = parse_netstat(
        "Tcp: RtoAlgorithm InSegs OutSegs RetransSegs\nTcp: 1 100 200 3\nUdp: InDatagrams\nUdp: 9\n"
    )
    assert parsed == {
        "Tcp.RtoAlgorithm": 1,
        "Tcp.InSegs": 100,
        "Tcp.OutSegs": 200,
        "Tcp.RetransSegs": 3,
        "Udp.InDatagrams": 9,
    }
    assert parse_netstat("garbage\n") == {}
    assert parse_modules(
        "mlx5_ib 466944 0 - Live 0xffffffffc0b2a000\nnvidia_peermem 16384 0 - Live 0x0\n"
    ) == {"mlx5_ib", "nvidia_peermem"}


def test_ip_addr_json_and_nvidia_smi() -> None:
    addrs = parse_ip_addr_json(
        '[{"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.0.1"},{"family":"inet6","local":"fe80::1"}]}]'
    )
    assert addrs == {"eth0": (["10.0.0.1"], ["fe80::1"])}
    assert parse_ip_addr_json("{oops") == {}
    gpus = parse_nvidia_smi(
        "0, 00000000:18:00.0, NVIDIA H100 80GB HBM3\nbad line\n1, 00000000:2A:00.0, NVIDIA H100 80GB HBM3\n"
    )
    assert [(g.index, g.pci_address) for g in gpus] == [(0, "0000:18:00.0"), (1, "0000:2a:00.0")]
    assert normalise_bus_id("00000000:AB:00.0") == "0000:ab:00.0"


def test_pcie_speed_and_config_space() -> None:
    from tests.fixtures.hostbuilder import config_space

    assert parse_link_speed("32.0 GT/s PCIe") == 32.0
    assert parse_link_speed("Unknown") is None
    port_type, acs = parse_config_space(config_space(0x1000, 0xC030, 0x060400, port_type=6, acs_ctrl=0x1D))
    assert port_type == 6 and acs.request_redirect and acs.completion_redirect and acs.source_validation
    assert parse_config_space(b"\xff" * 64) == (None, None)
    assert parse_config_space(b"") == (None, None)
