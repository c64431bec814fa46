"""NVIDIA NIC firmware configuration (``mlxconfig -d <pci> q``, NVIDIA Firmware Tools): the
non-volatile settings that decide PCIe behaviour of ConnectX adapters (ATS, PCI write ordering,
outstanding read requests).

Layout (MFT documentation, "Examples of mlxconfig Usage"; tests/data/samples/mlxconfig_q_mft_doc.txt):
a ``Configurations: Next Boot`` header (``Default Current Next Boot`` with --enable_verbosity),
then one ``NAME VALUE`` line per parameter, values such as ``True(1)``, ``per_mkey(0)`` or ``128``;
``*`` before a name marks a value changed from the default. The last column is the next-boot value.
"""

from __future__ import annotations

import re

from fabricscope.host.root import Root

_PARAM = re.compile(r"^\s*\*?\s*([A-Z][A-Z0-9_]*(?:\[[0-9.]+\])?)\s+(\S.*?)\s*$")
_CODE = re.compile(r"\((-?\d+)\)$")


def mlxconfig_argv(pci: str) -> list[str]:
    return ["mlxconfig", "-d", pci, "q"]


def parse_mlxconfig(text: str) -> dict[str, str]:
    """``NAME -> next-boot value`` ("True(1)", "128", "per_mkey(0)") of every parameter listed."""
    values: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        if line.strip().startswith("Configurations:"):
            inside = True
            continue
        if not inside:
            continue
        m = _PARAM.match(line)
        if m is None:
            if line.strip().startswith(("Device", "---")):
                inside = False
            continue
        values[m.group(1)] = m.group(2).split()[-1]
    return values


def value_code(value: str | None) -> int | None:
    """The number of a value: ``True(1)`` -> 1, ``per_mkey(0)`` -> 0, ``128`` -> 128; else None."""
    if value is None:
        return None
    m = _CODE.search(value)
    if m is not None:
        return int(m.group(1))
    return int(value) if (value.isascii() and value.isdigit()) else None


def read_mlxconfig(root: Root, devices: dict[str, str]) -> dict[str, dict[str, str]] | None:
    """``{rdma device: parameters}`` for the given ``{rdma device: pci address}``; None when
    mlxconfig is not available at all (not installed, not captured)."""
    out: dict[str, dict[str, str]] = {}
    seen = False
    for name, pci in sorted(devices.items()):
        result = root.run(mlxconfig_argv(pci))
        if not result.available:
            continue
        seen = True
        params = parse_mlxconfig(result.stdout) if result.ok else {}
        if params:
            out[name] = params
        else:
            root.note(" ".join(mlxconfig_argv(pci)), f"no configuration read (exit status {result.rc})")
    return out if seen else None
