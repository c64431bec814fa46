"""One grammar for sizes and rates (fabricscope.units), held to what nccl-tests and tc read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricscope.errors import FabricscopeError
from fabricscope.units import (
    UnitError,
    format_rate,
    format_size,
    parse_probability,
    parse_rate,
    parse_ratio,
    parse_size,
    parse_sizes,
    size_label,
    size_token,
)


# nccl-tests v2.19.6 src/common.cu parsesize(): K/M/G (either case) are 1024, 1024^2, 1024^3 and
# only the letter after the number counts (-b 1GB = 2^30); tc's get_size64() (iproute2
# lib/utils_math.c) reads k/kb, m/mb, g/gb the same way, case-insensitively.
@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("8", 8),
        ("64K", 65536),
        ("64k", 65536),
        ("64kb", 65536),
        ("1M", 2**20),
        ("1mb", 2**20),
        ("1G", 2**30),
        ("1GB", 2**30),
        ("1GiB", 2**30),
        ("1g", 2**30),
        ("2MB", 2 * 2**20),
        ("1.5M", 3 * 2**19),
        ("1T", 2**40),
        ("1 MiB", 2**20),
        ("100B", 100),
        ("1.3K", 1331),  # 1331.2 truncated, as (size_t) of nccl-tests' double and tc's get_size64
        ("1e3", 1000),
        (4096, 4096),
    ],
)
def test_sizes_are_binary_like_nccl_tests_and_tc(text, n) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "big",
        "K",
        "1X",
        "-4K",
        "0",
        "0.5",
        "1kbit",
        "1Mb/s",
        "1Gi",
        "1iB",
        "²",
        "١٢",
        "1e999",
        "2P",
        "1" * 80,
        "nan",
        "inf",
        "1..2K",
        "0x10",
        "1_000",
    ],
)
def test_bad_sizes_raise_one_error_type(text) -> None:
    with pytest.raises(UnitError) as info:
        parse_size(text)
    assert isinstance(info.value, FabricscopeError) and isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_size_bounds_are_the_callers() -> None:
    assert parse_size("0", minimum=0) == 0
    assert parse_size("8G", maximum=8 << 30) == 8 << 30
    with pytest.raises(UnitError, match="larger than 8G"):
        parse_size("16G", maximum=8 << 30)
    with pytest.raises(UnitError, match="negative"):
        parse_size("-1")


def test_sweeps_and_lists_like_nccl_tests_b_e_f() -> None:
    assert parse_sizes("1K:8K") == [1024, 2048, 4096, 8192]
    assert parse_sizes("1M:64M:4") == [1 << 20, 4 << 20, 16 << 20, 64 << 20]
    assert parse_sizes("1M:1M") == [1 << 20]
    assert parse_sizes("1M:5M") == [1 << 20, 2 << 20, 4 << 20]  # stops below MAX, as -e does
    assert parse_sizes("64,4K,1M") == [64, 4096, 1 << 20]
    assert parse_sizes("1M, ,64M,") == [1 << 20, 64 << 20]
    assert parse_sizes("4M,1M") == [4 << 20, 1 << 20]  # a list keeps its order


@pytest.mark.parametrize(
    "text",
    ["", ",", "8K:1K", "1K:1M:1", "1K:2K:x", "1K:2K:-2", "1K:2K:2.5", "1:2:3:4", "1X", "0", "1K:", ":1K"],
)
def test_bad_sweeps(text) -> None:
    with pytest.raises(UnitError):
        parse_sizes(text)


def test_sweep_length_is_capped() -> None:
    assert len(parse_sizes("1:1P")) == 51
    with pytest.raises(UnitError, match="more than 40"):
        parse_sizes("1:1P", max_count=40)
    with pytest.raises(UnitError, match="more than 2"):
        parse_sizes("1,2,3", max_count=2)
    with pytest.raises(UnitError, match="larger than"):
        parse_sizes("1:16G", maximum=8 << 30)


# tc(8) RATES and iproute2 lib/utils_math.c suffixes[]: bit/kbit/mbit/gbit/tbit decimal, the
# ki/mi/gi/ti forms binary, case-insensitive; a bare prefix is a decimal link speed.
@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("400G", 400e9),
        ("25g", 25e9),
        ("100M", 100e6),
        ("1.6T", 1.6e12),
        ("64000", 64000.0),
        ("1e9", 1e9),
        ("1bit", 1.0),
        ("1kbit", 1e3),
        ("200mbit", 200e6),
        ("1gbit", 1e9),
        ("1GBIT", 1e9),
        ("2tbit", 2e12),
        ("1kibit", 1024.0),
        ("1Mibit", 2.0**20),
        ("1gibit", 2.0**30),
        ("100Mb/s", 100e6),
        ("250Mbit/s", 250e6),
        ("400Gb", 400e9),
        (10, 10.0),
        (2.5e9, 2.5e9),
    ],
)
def test_rates_are_bits_like_tc(text, bps) -> None:
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["25Gbps", "100mbps", "1bps", "1KiBps", "1MBps", "1GB/s", "1GB", "10MB"])
def test_byte_rates_are_refused_not_misread(text) -> None:
    # tc reads every one of these as BYTES per second; "Gbps" elsewhere means gigabits
    with pytest.raises(UnitError, match="megaBYTES"):
        parse_rate(text)


@pytest.mark.parametrize(
    "text", ["", "fast", "-1G", "0", "400Q", "inf", "nan", "1GB/s/s", "²", "1e999G", "G", "1 2G"]
)
def test_bad_rates(text) -> None:
    with pytest.raises(UnitError):
        parse_rate(text)


def test_rate_bounds_are_the_callers() -> None:
    assert parse_rate("8kbit", minimum=8000) == 8000
    with pytest.raises(UnitError, match="below"):
        parse_rate("1kbit", minimum=8000)
    with pytest.raises(UnitError, match="above"):
        parse_rate("500G", maximum=400e9)


@given(st.text(max_size=40))
def test_any_text_is_a_value_or_one_unit_error(text) -> None:
    for parse in (parse_size, parse_rate, parse_sizes):
        try:
            parse(text)
        except UnitError as exc:
            assert str(exc) and "\n" not in str(exc)


@given(st.integers(min_value=1, max_value=2**50))
def test_size_token_round_trips(n) -> None:
    assert parse_size(size_token(n)) == n


def test_formatting() -> None:
    assert size_token(64 << 20) == "64M" and size_token(4096) == "4K" and size_token(1000) == "1000"
    assert size_label(64) == "64B" and size_label(16384) == "16KiB" and size_label(1 << 20) == "1MiB"
    assert (
        format_size(1 << 30) == "1 GiB" and format_size(3 << 19) == "1.5 MiB" and format_size(512) == "512 B"
    )
    assert format_rate(400e9) == "400G" and format_rate(250e6) == "250M" and format_rate(10) == "10"


def test_ratio_and_probability() -> None:
    assert parse_ratio("4:1") == 4.0
    assert parse_ratio("3:2") == 1.5
    assert parse_ratio(2) == 2.0
    for bad in ("1:2", "x", "4:0", "1:1:1"):
        with pytest.raises(UnitError):
            parse_ratio(bad)
    assert parse_probability("0.1%") == pytest.approx(0.001)
    assert parse_probability("1e-4") == pytest.approx(1e-4)
    for bad in ("1", "150%", "-0.1", "lots"):
        with pytest.raises(UnitError):
            parse_probability(bad)
