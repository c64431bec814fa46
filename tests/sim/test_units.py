"""Parsing of rates, sizes, ratios and loss as users type them."""

from __future__ import annotations

import pytest

from fabricscope.errors import FabricscopeError
from fabricscope.sim.units import (
    parse_probability,
    parse_rate_bps,
    parse_ratio,
    parse_size_bytes,
    parse_size_range,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [("400G", 400e9), ("1gbit", 1e9), ("100mbit", 100e6), ("25Gbps", 25e9), ("1.6T", 1.6e12), ("250Mb/s", 250e6),
     ("1e9", 1e9), (10, 10.0)],
)
def test_rates(text, bps) -> None:
    assert parse_rate_bps(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["", "fast", "-1G", "0", "400Q", "inf", "1GB/s/s"])
def test_bad_rates(text) -> None:
    with pytest.raises(FabricscopeError):
        parse_rate_bps(text)


@pytest.mark.parametrize(
    ("text", "n"),
    [("1G", 2**30), ("1GiB", 2**30), ("1GB", 10**9), ("64K", 65536), ("8", 8), ("1.5M", 3 * 2**19), ("2MB", 2_000_000)],
)
def test_sizes(text, n) -> None:
    assert parse_size_bytes(text) == n


@pytest.mark.parametrize("text", ["big", "-4K", "1X", "K"])
def test_bad_sizes(text) -> None:
    with pytest.raises(FabricscopeError):
        parse_size_bytes(text)


def test_size_range_doubles_and_lists() -> None:
    assert parse_size_range("1M:8M") == [2**20, 2**21, 2**22, 2**23]
    assert parse_size_range("1M,64M") == [2**20, 2**26]
    with pytest.raises(FabricscopeError):
        parse_size_range("8M:1M")
    with pytest.raises(FabricscopeError):
        parse_size_range("1:1P")  # more than 64 points


def test_ratio_and_probability() -> None:
    assert parse_ratio("4:1") == 4.0
    assert parse_ratio("3:2") == 1.5
    assert parse_ratio(2) == 2.0
    for bad in ("1:2", "x", "4:0", "1:1:1"):
        with pytest.raises(FabricscopeError):
            parse_ratio(bad)
    assert parse_probability("0.1%") == pytest.approx(0.001)
    assert parse_probability("1e-4") == pytest.approx(1e-4)
    for bad in ("1", "150%", "-0.1", "lots"):
        with pytest.raises(FabricscopeError):
            parse_probability(bad)
