"""NCCL's GID selection (fabricscope.nccl.gid), on real GID tables (show_gids captures) and on the
corner cases of NCCL v2.30.7-1's ncclIbGetGidIndex / envIbAddrRange."""

from __future__ import annotations

import pytest

from fabricscope.host.infiniband import Gid
from fabricscope.nccl.gid import AF_INET, AF_INET6, GidPolicy, c_strtol, gid_family, gid_valid, select_gid
from tests.conftest import samples_dir


def show_gids(name: str, dev: str = "mlx5_0") -> list[Gid]:
    rows = [
        line.split() for line in (samples_dir() / name).read_text().splitlines() if line.startswith(dev + " ")
    ]
    return [Gid(int(r[2]), r[3], "RoCE v2" if r[-2] == "v2" else "IB/RoCE v1", r[-1]) for r in rows]


def policy(**env: str) -> GidPolicy:
    return GidPolicy.from_env(env)


def test_typical_table_gives_the_ipv4_roce_v2_entry() -> None:
    gids = show_gids("show_gids_typical_index3.txt")
    choice = select_gid(gids, 16, policy())
    assert (choice.index, choice.family, choice.roce_version, choice.routable_v2) == (3, AF_INET, 2, True)


def test_extra_ipv6_addresses_shift_the_choice_to_index_5() -> None:
    gids = show_gids("show_gids_cx6_ipv6_and_ipv4.txt")
    assert select_gid(gids, 256, policy()).index == 5
    # Asked for IPv6, NCCL finds only link-local IPv6 entries, which are never valid: it stays at 0.
    v6 = select_gid(gids, 256, policy(NCCL_IB_ADDR_FAMILY="AF_INET6"))
    assert v6.index == 0 and not v6.routable_v2


def test_ipv6_only_port_gives_link_local_index_0_by_default() -> None:
    """The issue's case: RoCE v2 GIDs exist, but only for IPv6 -> NCCL (AF_INET) stays at 0."""
    ll = "fe80:0000:0000:0000:a288:c2ff:fe5b:03e7"
    v6 = "2001:0db8:0020:0007:0000:0000:0000:0011"
    gids = [
        Gid(0, ll, "IB/RoCE v1", "e"),
        Gid(1, ll, "RoCE v2", "e"),
        Gid(2, v6, "IB/RoCE v1", "e"),
        Gid(3, v6, "RoCE v2", "e"),
    ]
    default = select_gid(gids, 16, policy())
    assert (default.index, default.valid, default.roce_version) == (0, False, 1)
    assert select_gid(gids, 16, policy(NCCL_IB_ADDR_FAMILY="AF_INET6")).index == 3


def test_roce_version_and_range() -> None:
    gids = show_gids("show_gids_typical_index3.txt")
    assert select_gid(gids, 16, policy(NCCL_IB_ROCE_VERSION_NUM="1")).index == 2
    assert select_gid(gids, 16, policy(NCCL_IB_ADDR_RANGE="11.0.0.0/24")).index == 3
    # A range that excludes the address: no candidate of the family qualifies.
    assert select_gid(gids, 16, policy(NCCL_IB_ADDR_RANGE="10.0.0.0/8")).index == 0
    # Two IPv4 addresses: the range picks the second one's RoCE v2 entry.
    more = gids + [
        Gid(4, "0000:0000:0000:0000:0000:ffff:0c00:0048", "IB/RoCE v1", "e"),
        Gid(5, "0000:0000:0000:0000:0000:ffff:0c00:0048", "RoCE v2", "e"),
    ]
    assert select_gid(more, 16, policy()).index == 3
    assert select_gid(more, 16, policy(NCCL_IB_ADDR_RANGE="12.0.0.0/8")).index == 5


@pytest.mark.parametrize(
    ("value", "prefixlen", "noted"),
    [
        ("11.0.0.0", 0, "no '/"),  # no mask: ignored, everything matches
        ("fd00::/8", 0, "not an AF_INET address"),  # wrong family: ignored
        ("11.0.0.0/40", 0, "too long"),  # mask > 32: ignored
        ("11.0.0.0/24abc", 24, None),  # strtol stops at the first non-digit
        ("11.0.0.0/-1", -1, "negative"),  # a negative mask matches nothing
    ],
)
def test_addr_range_is_read_as_nccl_reads_it(value: str, prefixlen: int, noted: str | None) -> None:
    p = policy(NCCL_IB_ADDR_RANGE=value)
    assert p.range_prefixlen == prefixlen
    assert (noted is None and not p.notes) or (noted and any(noted in n for n in p.notes))


def test_negative_mask_leaves_index_0() -> None:
    assert (
        select_gid(
            show_gids("show_gids_typical_index3.txt"), 16, policy(NCCL_IB_ADDR_RANGE="11.0.0.0/-1")
        ).index
        == 0
    )


def test_family_and_param_parsing() -> None:
    assert policy(NCCL_IB_ADDR_FAMILY="af_inet6").family == AF_INET  # strcmp: case-sensitive
    assert "neither AF_INET nor AF_INET6" in policy(NCCL_IB_ADDR_FAMILY="inet6").notes[0]
    assert policy(NCCL_IB_GID_INDEX="0x3").gid_index == 3  # strtoll base 0
    assert policy(NCCL_IB_GID_INDEX="abc").gid_index == 0  # no digits: 0, not the default
    assert policy(NCCL_IB_GID_INDEX="99999999999999999999").gid_index == -1  # ERANGE: default
    assert c_strtol("  -12x") == (-12, False) and c_strtol("010", 0) == (8, False)


def test_forced_index_and_empty_entries() -> None:
    gids = show_gids("show_gids_typical_index3.txt")
    forced = select_gid(gids, 16, policy(NCCL_IB_GID_INDEX="7"))
    assert forced.forced and forced.gid is None and not forced.valid


def test_gid_predicates_match_nccl() -> None:
    def raw(text: str) -> bytes:
        import ipaddress

        return ipaddress.IPv6Address(text).packed

    assert gid_family(raw("::ffff:10.1.2.3")) == AF_INET
    assert gid_family(raw("ff0e::ffff:e000:1")) == AF_INET  # IPv4-mapped multicast
    assert gid_family(bytes(16)) == AF_INET6
    assert not gid_valid(bytes(16)) and not gid_valid(raw("fe80::")) and not gid_valid(raw("fe80::1"))
    assert gid_valid(raw("2001:db8::1")) and gid_valid(raw("::ffff:10.1.2.3"))


def test_infiniband_uses_index_0_or_the_routable_flid_entry() -> None:
    ib = [Gid(0, "fe80:0000:0000:0000:a088:c203:005b:03e0", None, None)]
    assert select_gid(ib, 8, policy(), link_layer="InfiniBand").index == 0
    flid = ib + [Gid(1, "fe80:0000:0012:0000:a088:c203:005b:03e0", None, None)]
    assert select_gid(flid, 8, policy(), link_layer="InfiniBand").index == 1
