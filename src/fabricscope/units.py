"""Sizes, rates, ratios and probabilities as users type them: one grammar for the whole tool.

Every option and file field that takes a size or a rate (``bench collective --sizes``,
``bench latency --sizes``, ``bench udp --rate``, ``sim --size/--nic-rate``, topology files,
``lab --link-rate``) reads it here, so a spelling means the same thing everywhere. What each
spelling means is decided by the two tools our users already type them into:

Sizes are bytes, and K, M, G, T, P are powers of 2 however they are written (``1G`` = ``1GB`` =
``1GiB`` = 2**30), case-insensitive:

* nccl-tests (NVIDIA/nccl-tests v2.19.6, ``src/common.cu`` ``parsesize()``, which reads ``-b``,
  ``-e``): the letter after the number, ``K``/``M``/``G`` (either case) = 1024, 1024**2,
  1024**3; a trailing ``B`` is never looked at, so ``-b 1GB`` is 2**30.
* tc (tc(8) "SIZES"; iproute2 ``lib/utils_math.c`` ``get_size64()``): ``k``/``kb``,
  ``m``/``mb``, ``g``/``gb`` (``strcasecmp``) = 1024, 1024**2, 1024**3.

So there is no decimal size spelling: write ``1000000000`` for 10**9 bytes. tc also reads
sizes in bits (``kbit`` = 128 bytes); we refuse bits for sizes. Both tools truncate a
fractional byte count (``(size_t)`` of a double), and so do we.

Rates are bits per second, case-insensitive as in tc (tc(8) "RATES"; iproute2
``lib/utils_math.c`` ``suffixes[]``):

* a bare number or ``bit``: bit/s; ``kbit``, ``mbit``, ``gbit``, ``tbit``: 10**3 .. 10**12;
  ``kibit``, ``mibit``, ``gibit``, ``tibit``: 2**10 .. 2**40.
* a bare prefix, as link speeds are named (``400G``, ``25g``, ``100M``, ``1.6T``), or a prefix
  with ``b``, ``b/s``, ``bit/s`` (``400Gb/s``): decimal bits, as ``kbit`` .. ``tbit``.
* byte rates are refused. tc reads ``bps``, ``kbps``, ``mbps``, ``gbps`` (any case) and
  ``KiBps`` as BYTES per second, while "Mbps" everywhere else means megabits: either reading
  is wrong by a factor of 8 for someone, so ``25Gbps``, ``100mbps``, ``1GB/s`` are errors that
  say to write ``25G`` or ``100mbit``.

Sweeps, as nccl-tests' ``-b MIN -e MAX -f FACTOR``: ``MIN:MAX`` doubles, ``MIN:MAX:FACTOR``
multiplies by an integer factor; or a list ``64,4K,1M``.

Every error is a :class:`UnitError`: a ``FabricscopeError`` (the CLI prints its one line and
exits 2) and a ``ValueError`` (pydantic validators and ``except ValueError`` keep working).
Only ASCII digits are numbers (``"²"``, ``"١"`` are refused), text is capped at 64 characters
and exponents at three digits, so no input can make a huge number or a long computation.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from fabricscope.errors import FabricscopeError

MAX_SIZE_BYTES = 2**50  # 1 PiB: beyond any buffer, and exact in a float
MAX_RATE_BPS = 1e15  # 1 Pbit/s: beyond any link
MAX_SWEEP = 64  # points in one size sweep (nccl-tests' -f 2 from 1 B to 8 EiB is 64)
MAX_TEXT = 64

_NUMBER = r"(?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?)"
_QUANTITY_RE = re.compile(rf"{_NUMBER}\s*(?P<unit>[A-Za-z/]*)", re.ASCII)
_INTEGER_RE = re.compile(r"[0-9]{1,6}", re.ASCII)
_PORT_RE = re.compile(r"[0-9]{1,5}", re.ASCII)

_BINARY = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_RATE_PREFIX = {
    "": Decimal(1),
    "k": Decimal(10**3),
    "m": Decimal(10**6),
    "g": Decimal(10**9),
    "t": Decimal(10**12),
    "ki": Decimal(2**10),
    "mi": Decimal(2**20),
    "gi": Decimal(2**30),
    "ti": Decimal(2**40),
}
_BIT_UNITS = ("bits/s", "bit/s", "b/s", "bits", "bit", "b")  # longest first: "b" also ends the others

SIZE_EXAMPLES = "examples: 8, 64K, 1M, 1.5G, 1GiB"
RATE_EXAMPLES = "examples: 400G, 25g, 1gbit, 200mbit, 100Mb/s"


class UnitError(FabricscopeError, ValueError):
    """A size, rate, ratio or probability that cannot be read; the message says what to write."""


def _split(text: str | float | int, what: str, examples: str) -> tuple[Decimal, str]:
    """``"1.5 GiB"`` -> (Decimal("1.5"), "GiB"); every malformed input raises UnitError."""
    raw = str(text).strip()
    if not raw:
        raise UnitError(f"empty {what} ({examples})")
    if len(raw) > MAX_TEXT:
        raise UnitError(f"{what} {raw[:MAX_TEXT]!r}... is too long ({examples})")
    if raw.startswith("-"):
        raise UnitError(f"{what} {raw!r} is negative ({examples})")
    match = _QUANTITY_RE.fullmatch(raw[1:] if raw.startswith("+") else raw)
    if match is None:
        raise UnitError(f"cannot read {what} {raw!r} ({examples})")
    try:
        return Decimal(match["num"]), match["unit"]
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        raise UnitError(f"cannot read {what} {raw!r} ({examples})") from None


def parse_size(text: str | int, *, minimum: int = 1, maximum: int = MAX_SIZE_BYTES) -> int:
    """``"64K"`` -> 65536 bytes; ``"1G"``, ``"1GB"``, ``"1GiB"`` -> 2**30 (see the module doc)."""
    if isinstance(text, bool):
        raise UnitError(f"cannot read size {text!r} ({SIZE_EXAMPLES})")
    number, unit = _split(text, "size", SIZE_EXAMPLES)
    lower = unit.lower()
    if lower.endswith(("bit", "bits", "/s")):
        raise UnitError(f"size {text!r}: sizes are bytes, not bits or rates ({SIZE_EXAMPLES})")
    prefix = lower[:1] if lower[:1] and lower[:1] in "kmgtp" else ""
    if prefix not in _BINARY or lower[len(prefix) :] not in (("", "b", "ib") if prefix else ("", "b")):
        raise UnitError(f"size {text!r}: unknown unit {unit!r} (use K, M, G, T: powers of 1024)")
    value = number * (1024 ** _BINARY[prefix])
    if value > maximum:
        raise UnitError(f"size {text!r} is larger than {size_token(maximum)}")
    size = int(value)  # truncate a fraction of a byte, as nccl-tests and tc do
    if size < minimum:
        raise UnitError(f"size {text!r} is smaller than {minimum} byte{'s' if minimum != 1 else ''}")
    return size


def parse_sizes(
    text: str, *, minimum: int = 1, maximum: int = MAX_SIZE_BYTES, max_count: int = MAX_SWEEP
) -> list[int]:
    """``"1K:1M"`` (doubling), ``"1M:64M:4"`` (factor 4) or a list ``"64,4K,1M"`` -> bytes, in order."""
    raw = str(text).strip()
    if ":" in raw:
        parts = raw.split(":")
        if len(parts) not in (2, 3):
            raise UnitError(f"size sweep {raw!r}: write MIN:MAX or MIN:MAX:FACTOR, e.g. 1M:64M or 1K:1G:4")
        lo = parse_size(parts[0], minimum=minimum, maximum=maximum)
        hi = parse_size(parts[1], minimum=minimum, maximum=maximum)
        factor_text = parts[2].strip() if len(parts) == 3 else "2"
        if not _INTEGER_RE.fullmatch(factor_text) or int(factor_text) < 2:
            raise UnitError(f"size sweep {raw!r}: FACTOR must be an integer >= 2")
        if lo > hi:
            raise UnitError(f"size sweep {raw!r}: MIN is larger than MAX")
        sizes, size = [], lo
        while size <= hi:
            sizes.append(size)
            size *= int(factor_text)
            if len(sizes) > max_count:
                raise UnitError(f"size sweep {raw!r} has more than {max_count} sizes")
        return sizes
    sizes = [parse_size(part, minimum=minimum, maximum=maximum) for part in raw.split(",") if part.strip()]
    if not sizes:
        raise UnitError(f"no size given ({SIZE_EXAMPLES}, a list 64,4K,1M or a sweep 1M:64M)")
    if len(sizes) > max_count:
        raise UnitError(f"more than {max_count} sizes")
    return sizes


def parse_rate(text: str | float | int, *, minimum: float = 1.0, maximum: float = MAX_RATE_BPS) -> float:
    """``"400G"`` -> 4e11, ``"200mbit"`` -> 2e8, ``"1gibit"`` -> 2**30 bit/s (see the module doc)."""
    if isinstance(text, bool):
        raise UnitError(f"cannot read rate {text!r} ({RATE_EXAMPLES})")
    number, unit = _split(text, "rate", RATE_EXAMPLES)
    lower = unit.lower()
    suffix = next((s for s in _BIT_UNITS if lower.endswith(s)), "")
    if lower.endswith("bps") or (suffix in ("b", "b/s") and unit[-len(suffix)] == "B"):
        raise UnitError(
            f"rate {text!r}: bytes or bits? tc reads 'mbps' as megaBYTES/s, others read 'Mbps' as megabits; "
            f"write bits per second: 25G, 25gbit, 200mbit"
        )
    prefix = lower[: len(lower) - len(suffix)]
    if prefix not in _RATE_PREFIX:
        raise UnitError(f"rate {text!r}: unknown unit {unit!r} ({RATE_EXAMPLES})")
    value = float(number * _RATE_PREFIX[prefix])
    if not math.isfinite(value) or value > maximum:
        raise UnitError(f"rate {text!r} is above {format_rate(maximum)}bit/s")
    if value < minimum:
        raise UnitError(f"rate {text!r} is below {format_rate(minimum)}bit/s")
    return value


def parse_ratio(text: str | float | int) -> float:
    """Oversubscription ``"4:1"`` -> 4.0; ``"1"``/``1.5`` accepted. Must be >= 1."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
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
            raise UnitError(f"cannot read ratio {text!r} (examples: 1:1, 2:1, 4:1)") from None
    if not math.isfinite(value) or value < 1.0:
        raise UnitError(f"oversubscription must be >= 1 (down:up), got {text!r}")
    return value


def parse_probability(text: str | float | int) -> float:
    """Loss as ``0.001``, ``0.1%`` or ``1e-4``; must be in [0, 1)."""
    s = str(text).strip()
    try:
        value = float(s[:-1]) / 100.0 if s.endswith("%") else float(s)
    except ValueError:
        raise UnitError(f"cannot read probability {text!r} (examples: 0.001, 0.1%, 1e-4)") from None
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise UnitError(f"loss probability must be in [0, 1), got {text!r}")
    return value


def parse_port(text: str, *, minimum: int = 1) -> int:
    """A TCP/UDP port in ASCII digits, ``minimum``..65535 (``"²"`` passes ``str.isdigit``, not this)."""
    if not _PORT_RE.fullmatch(text) or not minimum <= int(text) <= 65535:
        shown = text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."
        raise UnitError(f"port must be a number from {minimum} to 65535, not {shown!r}")
    return int(text)


def format_size(n: float) -> str:
    """Bytes for people: ``1 GiB``, ``1.5 MiB``, ``512 B``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{int(n)} B"


def size_token(n: int) -> str:
    """Bytes as the shortest exact spelling :func:`parse_size` reads back: ``64M``, ``4K``, ``100``."""
    for unit, scale in (("P", 2**50), ("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def size_label(n: int) -> str:
    """Bytes as an exact label for names: ``64B``, ``4KiB``, ``1MiB``."""
    token = size_token(n)
    return f"{token}iB" if token[-1].isalpha() else f"{token}B"


def format_rate(bps: float) -> str:
    """Bits per second, short: 4e11 -> ``400G``, 2.5e8 -> ``250M``."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}"


class Bounds:
    """A number's accepted range, declared once: the CLI option (its help text and its parse-time
    check, ``cli/options.py``) and the domain's validator read the same object, so what help says
    is what is accepted (issue 26 item 5: the exporter's intervals said 0.05-86400 and refused 0.5).

    ``off`` is a value outside the range that turns the feature off (``--doctor-interval 0``).
    """

    __slots__ = ("high", "low", "off", "unit")

    def __init__(self, low: float, high: float, *, off: float | None = None, unit: str = "") -> None:
        self.low, self.high, self.off, self.unit = low, high, off, unit

    def accepts(self, value: float) -> bool:
        return (self.off is not None and value == self.off) or (
            math.isfinite(value) and self.low <= value <= self.high
        )

    def text(self) -> str:
        """``1 to 3,600 seconds``, ``10 to 86,400 seconds, or 0 (off)``."""
        unit = f" {self.unit}" if self.unit else ""
        span = f"{_bound(self.low)} to {_bound(self.high)}{unit}"
        return span if self.off is None else f"{span}, or {_bound(self.off)} (off)"

    def check(self, value: float, name: str) -> float:
        """``value`` when accepted; else a ValueError naming ``name`` and the range."""
        if not self.accepts(value):
            raise ValueError(f"{name} takes {self.text()}, not {value:g}")
        return value


def _bound(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"
