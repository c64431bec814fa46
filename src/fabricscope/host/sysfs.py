"""Small parsers for the value formats sysfs uses; shared by every host reader."""

from __future__ import annotations

import re

from fabricscope.host.root import Root

_ID_NAME = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")


def printable_name(name: str) -> str:
    """A file name as text that encodes: bytes that were not UTF-8 (``os.listdir`` hands them over
    as surrogate escapes) become ``\\xNN``. Used for every label and every snapshot member name,
    so a name like ``bad\\xffname`` reads the same on the host and in its snapshot; a name that
    already holds such text is indistinguishable from it, which is acceptable for display."""
    if name.isascii():
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def parse_id_name(text: str | None) -> tuple[int | None, str | None]:
    """``"4: ACTIVE"`` -> ``(4, "ACTIVE")``; anything else -> ``(None, None)``."""
    if text is None:
        return None, None
    match = _ID_NAME.match(text)
    if not match:
        return None, None
    return int(match.group(1)), match.group(2)


def parse_int(text: str | None, base: int = 10) -> int | None:
    """An integer attribute (``"1500"``, ``"0x3db"`` with base 0); None for anything else."""
    if text is None:
        return None
    value = text.strip()
    if not value:
        return None
    try:
        return int(value, base)
    except ValueError:
        return None


def read_int(root: Root, rel: str, base: int = 10) -> int | None:
    """Read an integer attribute; a present but garbled file is recorded as a problem."""
    text = root.read(rel)
    value = parse_int(text, base)
    if text is not None and value is None and text.strip() and not text.startswith("N/A"):
        root.note(rel, f"not an integer: {text[:40]!r}")
    return value


def read_str(root: Root, rel: str) -> str | None:
    """Read a one-line string attribute; empty files give None."""
    text = root.read(rel)
    if text is None:
        return None
    text = text.strip()
    return text or None


def read_counters(root: Root, rel_dir: str) -> dict[str, int]:
    """Every integer file in a counters directory; garbled or N/A files are left out (and noted)."""
    counters: dict[str, int] = {}
    for name in root.listdir(rel_dir):
        value = read_int(root, f"{rel_dir}/{name}")
        if value is not None:
            counters[name] = value
    return counters
