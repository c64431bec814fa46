"""Scrubbing a snapshot: what identifies the machine is replaced, what doctor needs is kept.

Two levels (``fabricscope snapshot --scrub [--scrub-level strict]``; docs/security.md lists what
each keeps):

- standard: GUIDs, MAC and IP addresses (also inside GIDs and IPoIB addresses), UUIDs and the
  hostname are replaced consistently (the same value always becomes the same replacement, so the
  snapshot still judges the same); transceiver serial numbers in ``ethtool -m``; the PCIe Device
  Serial Number and the VPD data register in PCI config space are zeroed; kernel command-line
  values whose names look secret (password, token, key...) and passwords in URLs are redacted.
- strict: also PCI config space cut to what the host model parses (IDs, class, the capability
  lists' headers, the PCI Express and ACS capabilities; BARs and every other register zeroed), and
  the kernel command line cut to its IOMMU parameters (all pcie.iommu reads).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from fabricscope.host.pci import PCI_CAP_EXP, PCI_EXT_CAP_ACS, capabilities, extended_capabilities

STANDARD, STRICT = "standard", "strict"
LEVELS = (STANDARD, STRICT)

# include/uapi/linux/pci_regs.h: PCI_EXT_CAP_ID_DSN (a 64-bit serial, the two dwords after the
# header, PCI_DSN_SIZEOF 12; the kernel's pci_get_dsn reads them at +4 and +8) and PCI_CAP_ID_VPD
# (PCI_VPD_ADDR at +2, PCI_VPD_DATA at +4: the last dword of Vital Product Data read, which holds
# the board's serial number among its fields).
PCI_EXT_CAP_DSN = 0x0003
PCI_CAP_VPD = 0x03
PCI_EXP_SIZEOF_V2 = 0x3C  # PCI Express capability, version 2 (pci_regs.h PCI_CAP_EXP_ENDPOINT_SIZEOF_V2)
PCI_ACS_KEEP = 8  # header, ACS capability and control registers

# ethtool -m prints each SFF-8472/8636 and CMIS field as "<name> : <value>" (ethtool sff-common.c,
# qsfp.c, cmis.c: "Vendor SN").
_VENDOR_SN = re.compile(r"^(\s*Vendor SN\s*:\s*)(\S.*?)\s*$", re.M)
# Kernel parameters whose values are secrets by their name (dracut's rd.luks.key, ip= with a
# password, vendor agents' tokens...); a word of the command line is NAME or NAME=VALUE, and a
# value may be double-quoted with spaces (Documentation/admin-guide/kernel-parameters.rst).
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|key|cred|auth|cookie|private|signature", re.I)
_CMDLINE_WORD = re.compile(r'(?:[^\s"]+|"[^"]*")+')
_URL_PASSWORD = re.compile(r"(://)[^/@\s]+@")
REDACTED = "<redacted>"


def scrub_cmdline(text: str, strict: bool = False) -> str:
    """Values of secret-looking parameters and URL passwords redacted; strict keeps only the
    IOMMU parameters (iommu=, intel_iommu=, amd_iommu=, iommu.passthrough=)."""
    words = []
    for word in _CMDLINE_WORD.findall(text):
        name, eq, _value = word.partition("=")
        if strict:
            if "iommu" in name:
                words.append(word)
            continue
        if eq and _SECRET_NAME.search(name):
            word = f"{name}={REDACTED}"
        words.append(_URL_PASSWORD.sub(rf"\1{REDACTED}@", word))
    return " ".join(words) + ("\n" if text.endswith("\n") else "")


def scrub_config_space(data: bytes, strict: bool = False) -> bytes:
    """PCI config space with its serial numbers zeroed (strict: with everything the host model
    does not parse zeroed); the length stays, so "config space cut to 64 bytes" still reads so."""
    out = bytearray(data)
    for cap_id, offset in extended_capabilities(data):
        if cap_id == PCI_EXT_CAP_DSN:
            out[offset + 4 : offset + 12] = bytes(len(out[offset + 4 : offset + 12]))
    for cap_id, offset in capabilities(data):
        if cap_id == PCI_CAP_VPD:
            out[offset + 2 : offset + 8] = bytes(len(out[offset + 2 : offset + 8]))
    if not strict:
        return bytes(out)
    keep = bytearray(len(out))
    spans = [(0x00, 0x10), (0x2C, 0x30), (0x34, 0x35)]  # IDs, class, header type; subsystem; cap pointer
    spans += [(o, o + (PCI_EXP_SIZEOF_V2 if c == PCI_CAP_EXP else 2)) for c, o in capabilities(data)]
    spans += [(o, o + (PCI_ACS_KEEP if c == PCI_EXT_CAP_ACS else 4)) for c, o in extended_capabilities(data)]
    for start, end in spans:
        keep[start:end] = out[start:end]
    return bytes(keep)


# ----- text: addresses, identifiers, the hostname ------------------------------------------------
_GID = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{4}:){7}[0-9a-fA-F]{4}(?![0-9a-fA-F:])"
_IPOIB_HW = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{2}:){19}[0-9a-fA-F]{2}(?![0-9a-fA-F:])"
_MAC = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}(?![0-9a-fA-F:])"
_GUID = r"(?<![0-9a-fA-F:])(?:[0-9a-fA-F]{4}:){3}[0-9a-fA-F]{4}(?![0-9a-fA-F:.])"
_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
_IPV6 = r"(?<![0-9a-fA-F:])[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){2,7}(?![0-9a-fA-F:])"
_IPV4 = r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])"
_TOKEN = re.compile(
    "|".join(
        f"(?P<{n}>{p})"
        for n, p in (
            ("gid", _GID),
            ("ipoib", _IPOIB_HW),
            ("mac", _MAC),
            ("guid", _GUID),
            ("uuid", _UUID),
            ("ipv6", _IPV6),
            ("ipv4", _IPV4),
        )
    )
)
_KEEP_V4 = {"127.0.0.1", "0.0.0.0", "255.255.255.255"}


@dataclass
class Scrubber:
    """Consistent replacement of identifying values: the same input always maps to the same output."""

    hostname: str | None = None
    level: str = STANDARD
    maps: dict[str, dict[str, str]] = field(default_factory=dict)

    def _next(self, kind: str, original: str, make) -> str:
        table = self.maps.setdefault(kind, {})
        key = original.lower()
        if key not in table:
            table[key] = make(len(table) + 1)
        return table[key]

    def ipv4(self, text: str) -> str:
        try:
            addr = ipaddress.IPv4Address(text)
        except ValueError:
            return text
        if text in _KEEP_V4 or addr.is_loopback:
            return text
        return self._next("ipv4", text, lambda n: f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}")

    def mac(self, text: str) -> str:
        if text == "00:00:00:00:00:00":
            return text
        return self._next(
            "mac", text, lambda n: "02:00:" + ":".join(f"{(n >> s) & 255:02x}" for s in (24, 16, 8, 0))
        )

    def guid(self, text: str) -> str:
        return self._next("guid", text, lambda n: f"0200:0000:{(n >> 16) & 0xFFFF:04x}:{n & 0xFFFF:04x}")

    def uuid(self, text: str) -> str:
        return self._next("uuid", text, lambda n: f"00000000-0000-4000-8000-{n:012x}")

    def ipv6(self, addr: ipaddress.IPv6Address) -> ipaddress.IPv6Address:
        if addr.is_unspecified or addr.is_loopback:
            return addr
        if addr.ipv4_mapped is not None:
            return ipaddress.IPv6Address(f"::ffff:{self.ipv4(str(addr.ipv4_mapped))}")
        iid = int(addr) & ((1 << 64) - 1)
        prefix = int(addr) >> 64
        new_iid = int(self._next("iid", f"{iid:x}", lambda n: f"{0x0200_0000_0000_0000 | n:x}"), 16)
        new_prefix = prefix
        if not addr.is_link_local:
            new_prefix = int(
                self._next("prefix", f"{prefix:x}", lambda n: f"{0xFD00_0000_0000_0000 | n:x}"), 16
            )
        return ipaddress.IPv6Address((new_prefix << 64) | new_iid)

    def gid(self, text: str) -> str:
        try:
            addr = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        return ":".join(f"{(int(self.ipv6(addr)) >> s) & 0xFFFF:04x}" for s in range(112, -1, -16))

    def _replace(self, match: re.Match[str]) -> str:
        kind, value = match.lastgroup, match.group(0)
        if kind == "gid":
            return self.gid(value)
        if kind == "ipoib":
            # IPoIB hardware address: 4 bytes of flags/QPN, then the 16-byte port GID.
            parts = value.split(":")
            gid = ":".join("".join(parts[i : i + 2]) for i in range(4, 20, 2))
            new = self.gid(gid).replace(":", "")
            return ":".join(parts[:4] + [new[i : i + 2] for i in range(0, 32, 2)])
        if kind == "mac":
            return self.mac(value)
        if kind == "guid":
            return self.guid(value)
        if kind == "uuid":
            return self.uuid(value)
        if kind == "ipv6":
            try:
                return str(self.ipv6(ipaddress.IPv6Address(value)))
            except ValueError:
                return value
        return self.ipv4(value)

    def text(self, text: str) -> str:
        text = _TOKEN.sub(self._replace, text)
        if self.hostname:
            text = re.sub(rf"\b{re.escape(self.hostname)}\b", "node-1", text)
        return text

    def data(self, path: str, data: bytes) -> bytes:
        """One recorded file, by what it is: PCI config space, the kernel command line, text."""
        if path.startswith("sys/") and path.endswith("/config"):
            return scrub_config_space(data, strict=self.level == STRICT)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data if self.level != STRICT else b""  # no other binary file is read today
        if "\x00" in text:
            return data if self.level != STRICT else b""
        if path == "proc/cmdline":
            text = scrub_cmdline(text, strict=self.level == STRICT)
        return self.text(text).encode("utf-8")

    def command(self, argv: tuple[str, ...], stdout: str) -> str:
        """A captured command output: transceiver serial numbers, then the text rules."""
        if argv[:2] == ("ethtool", "-m"):
            stdout = _VENDOR_SN.sub(
                lambda m: m.group(1) + self._next("sn", m.group(2), lambda n: f"SN{n:08d}"), stdout
            )
        return self.text(stdout)
