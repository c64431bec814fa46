"""Parsing of the rates, sizes and ratios users type, with one clear error for anything else.

Rates are bits per second with decimal prefixes, as switch and NIC vendors write them
(``400G``, ``1gbit``, ``100mbit``, ``25Gbps``); sizes are bytes with binary prefixes, as
nccl-tests reads ``-b 1G`` (``1G`` = ``1GiB`` = 2**30), while ``GB``/``MB`` are decimal.
"""

from __future__ import annotations

import math
import re

from fabricscope.errors import FabricscopeError

_RATE_RE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kmgt]?)\s*(bit/s|bits/s|bps|bit|b/s|b)?\s*$", re.IGNORECASE
)
_RATE_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
_SIZE_EXP = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_rate_bps(text: str | float | int) -> float:
    """``"400G"`` -> 4e11 bit/s. Bare numbers are bit/s. Raises FabricscopeError on anything else."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE_RE.match(str(text))
        if not m:
            raise FabricscopeError(f"cannot read rate {text!r} (examples: 400G, 1gbit, 100mbit, 25Gbps)")
        value = float(m.group(1)) * _RATE_PREFIX[m.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise FabricscopeError(f"rate must be positive and finite, got {text!r}")
    return value


def parse_size_bytes(text: str | float | int) -> int:
    """``"1G"``/``"1GiB"`` -> 2**30 bytes, ``"1GB"`` -> 10**9 bytes, bare numbers are bytes."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise FabricscopeError(f"cannot read size {text!r} (examples: 8, 64K, 1M, 1G, 1GiB, 1GB)")
        number, prefix, binary, b = m.groups()
        exp = _SIZE_EXP[prefix.lower()]
        if b and not binary and prefix:
            value = float(number) * 1000**exp  # "1GB": decimal, as disk vendors write it
        else:
            value = float(number) * 1024**exp  # "1G", "1GiB": binary, as nccl-tests reads -b/-e
    if not math.isfinite(value) or value < 0:
        raise FabricscopeError(f"size must be a non-negative finite number of bytes, got {text!r}")
    return int(round(value))


def parse_size_range(text: str) -> list[int]:
    """``"1K:1G"`` -> doubling sweep (nccl-tests -b/-e/-f 2); ``"1M,8M,64M"`` -> that list."""
    text = text.strip()
    if ":" in text:
        lo_s, hi_s = text.split(":", 1)
        lo, hi = parse_size_bytes(lo_s), parse_size_bytes(hi_s)
        if lo <= 0 or hi < lo:
            raise FabricscopeError(f"size range {text!r} must be LOW:HIGH with 0 < LOW <= HIGH")
        sizes = []
        s = lo
        while s <= hi:
            sizes.append(s)
            s *= 2
        if len(sizes) > 40:
            raise FabricscopeError(f"size range {text!r} has more than 40 points")
        return sizes
    sizes = [parse_size_bytes(part) for part in text.split(",") if part.strip()]
    if not sizes:
        raise FabricscopeError("empty size list")
    return sizes


def parse_ratio(text: str | float | int) -> float:
    """Oversubscription ``"4:1"`` -> 4.0; ``"1"``/``1.5`` accepted. Must be >= 1."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        parts = str(text).strip().split(":")
        try:
            if len(parts) == 2:
                value = float(parts[0]) / float(parts[1])
            elif len(parts) == 1:
                value = float(parts[0])
            else:
                raise ValueError
        except (ValueError, ZeroDivisionError):
            raise FabricscopeError(f"cannot read ratio {text!r} (examples: 1:1, 2:1, 4:1)") from None
    if not math.isfinite(value) or value < 1.0:
        raise FabricscopeError(f"oversubscription must be >= 1 (down:up), got {text!r}")
    return value


def parse_probability(text: str | float | int) -> float:
    """Loss as ``0.001``, ``0.1%`` or ``1e-4``; must be in [0, 1)."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100.0 if s.endswith("%") else float(s)
    except ValueError:
        raise FabricscopeError(f"cannot read probability {text!r} (examples: 0.001, 0.1%, 1e-4)") from None
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise FabricscopeError(f"loss probability must be in [0, 1), got {text!r}")
    return value


def format_rate_bps(bps: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}"


def format_size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"
