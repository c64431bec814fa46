"""Which GID NCCL uses on a port: ncclIbGetGidIndex() of NCCL 2.21+, as one pure function.

Transcribed from NCCL v2.30.7-1, src/transport/net_ib/connect.cc (envIbAddrFamily,
envIbAddrRange, getGidAddrFamily, matchGidAddrPrefix, configuredGid, linkLocalGid,
ncclIbRoceGetVersionNum, ncclUpdateGidIndex, ncclIbGetGidIndex); the same selection exists since
2.21. Shared by doctor (``roce.gid``) and NCCL lint (NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM,
NCCL_IB_ADDR_RANGE, NCCL_IB_GID_INDEX): both judge a GID table exactly as NCCL walks it, so this
module depends only on the standard library and the host model's GID entries.

On RoCE, NCCL starts at index 0 and walks the table once: a candidate of the wanted address family
(default AF_INET) inside NCCL_IB_ADDR_RANGE replaces a current entry of the other family; one of
the same family replaces it when it is configured, not link-local, and of the wanted RoCE version
(default 2) while the current one is not. Empty entries count as all-zero GIDs (IPv6, invalid).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

AF_INET = "AF_INET"
AF_INET6 = "AF_INET6"
SINCE = (2, 21)  # first NCCL release that chooses the RoCE GID itself
SOURCE = "NCCL v2.30.7-1 src/transport/net_ib/connect.cc ncclIbGetGidIndex"
_ZERO = bytes(16)
_LONG_MAX = 2**63 - 1


class GidEntry(Protocol):
    """What NCCL reads per index: the GID (ibv_query_gid) and gid_attrs/types/<index>."""

    index: int
    gid: str

    @property
    def roce_version(self) -> int | None: ...


class ExplainedGid(GidEntry, Protocol):
    """A GID entry with the address views the explanations name (the host model's Gid)."""

    @property
    def ipv4(self) -> str | None: ...

    @property
    def is_link_local(self) -> bool: ...

    @property
    def is_routable(self) -> bool: ...


def c_strtol(text: str, base: int = 10) -> tuple[int, bool]:
    """C strtol/strtoll: leading blanks, a sign, the longest run of digits (base 0: 0x.. hex,
    0.. octal); no digits gives 0. Returns (value, overflowed) with the value clamped like C."""
    s = text.lstrip(" \t\n\r\f\v")
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if base == 0:
        if s[:2].lower() == "0x" and len(s) > 2 and s[2] in "0123456789abcdefABCDEF":
            base, s = 16, s[2:]
        elif s[:1] == "0":
            base = 8
        else:
            base = 10
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    run = ""
    for ch in s:
        if ch.lower() not in digits:
            break
        run += ch
    value = sign * int(run, base) if run else 0
    if value > _LONG_MAX:
        return _LONG_MAX, True
    if value < -_LONG_MAX - 1:
        return -_LONG_MAX - 1, True
    return value, False


def nccl_param(env: Mapping[str, str], name: str, default: int) -> int:
    """NCCL_PARAM as ncclLoadParam reads it: strtoll(str, NULL, 0); ERANGE keeps the default."""
    text = env.get(name)
    if not text:
        return default
    value, overflowed = c_strtol(text, 0)
    return default if overflowed else value


@dataclass(frozen=True)
class GidPolicy:
    """The settings NCCL reads before choosing a GID, as NCCL reads them."""

    gid_index: int = -1  # NCCL_IB_GID_INDEX; >= 0 forces that index on RoCE
    family: str = AF_INET  # NCCL_IB_ADDR_FAMILY
    roce_version: int = 2  # NCCL_IB_ROCE_VERSION_NUM
    range_text: str | None = None  # NCCL_IB_ADDR_RANGE as given
    range_prefix: bytes | None = None  # the range address (4 or 16 bytes) when NCCL took it
    range_prefixlen: int = 0  # NCCL's mask; 0 matches every address, < 0 matches none
    routable_flid_index: int = 1  # NCCL_IB_ROUTABLE_FLID_GID_INDEX (InfiniBand)
    notes: tuple[str, ...] = field(default=())  # how NCCL reads values that are not what they look like

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GidPolicy:
        notes: list[str] = []
        family_text = env.get("NCCL_IB_ADDR_FAMILY") or ""
        family = AF_INET6 if family_text == "AF_INET6" else AF_INET
        if family_text and family_text not in (AF_INET, AF_INET6):
            notes.append(
                f"NCCL_IB_ADDR_FAMILY={family_text!r} is neither AF_INET nor AF_INET6 (case-sensitive): NCCL uses AF_INET"
            )
        prefix, prefixlen, range_notes = _parse_range(env.get("NCCL_IB_ADDR_RANGE") or "", family)
        return cls(
            gid_index=nccl_param(env, "NCCL_IB_GID_INDEX", -1),
            family=family,
            roce_version=nccl_param(env, "NCCL_IB_ROCE_VERSION_NUM", 2),
            range_text=env.get("NCCL_IB_ADDR_RANGE") or None,
            range_prefix=prefix,
            range_prefixlen=prefixlen,
            routable_flid_index=nccl_param(env, "NCCL_IB_ROUTABLE_FLID_GID_INDEX", 1),
            notes=tuple(notes + range_notes),
        )

    def describe(self) -> str:
        parts = [f"NCCL_IB_ADDR_FAMILY={self.family}", f"NCCL_IB_ROCE_VERSION_NUM={self.roce_version}"]
        if self.range_text:
            parts.append(f"NCCL_IB_ADDR_RANGE={self.range_text}")
        return ", ".join(parts)


def _parse_range(text: str, family: str) -> tuple[bytes | None, int, list[str]]:
    """envIbAddrRange: "addr/len" in the chosen family; anything NCCL cannot use matches all."""
    if not text:
        return None, 0, []
    text = text[:127]  # snprintf into a 128-byte buffer
    addr, slash, mask_text = text.partition("/")
    if not slash:
        return None, 0, [f"NCCL_IB_ADDR_RANGE={text!r} has no '/<prefix length>': NCCL ignores it"]
    try:
        if "%" in addr:
            raise ValueError(addr)
        packed = (ipaddress.IPv4Address(addr) if family == AF_INET else ipaddress.IPv6Address(addr)).packed
    except ValueError:
        return (
            None,
            0,
            [f"NCCL_IB_ADDR_RANGE address {addr!r} is not an {family} address: NCCL ignores the range"],
        )
    mask, _ = c_strtol(mask_text, 10)
    if mask > (32 if family == AF_INET else 128):
        return (
            None,
            0,
            [f"NCCL_IB_ADDR_RANGE prefix length {mask} is too long for {family}: NCCL ignores the range"],
        )
    notes = [f"NCCL_IB_ADDR_RANGE prefix length {mask} is negative: no GID matches"] if mask < 0 else []
    return packed, mask, notes


# ----- GID predicates (on the 16 raw bytes, words in network order) ------------------------------
def _raw(text: str | None) -> bytes:
    if not text:
        return _ZERO
    try:
        return ipaddress.IPv6Address(text.strip()).packed
    except ValueError:
        return _ZERO


def _words(raw: bytes) -> tuple[int, int, int, int]:
    return tuple(int.from_bytes(raw[i : i + 4], "big") for i in range(0, 16, 4))  # type: ignore[return-value]


def gid_family(raw: bytes) -> str:
    """getGidAddrFamily: IPv4-mapped (also the ff0e:: mapped multicast form) is AF_INET."""
    w0, w1, w2, _ = _words(raw)
    mapped = (w0 | w1 | (w2 ^ 0x0000FFFF)) == 0
    mapped_mc = w0 == 0xFF0E0000 and (w1 | (w2 ^ 0x0000FFFF)) == 0
    return AF_INET if mapped or mapped_mc else AF_INET6


def gid_valid(raw: bytes) -> bool:
    """validGid: configured (not zero, not bare fe80::) and not link-local (fe80:0:...)."""
    w0, w1, w2, w3 = _words(raw)
    trailer = w1 | w2 | w3
    configured = not ((w0 | trailer) == 0 or (w0 == 0xFE800000 and trailer == 0))
    link_local = w0 == 0xFE800000 and w1 == 0
    return configured and not link_local


def _in_range(policy: GidPolicy, raw: bytes) -> bool:
    """matchGidAddrPrefix, with the range in the user's family."""
    prefixlen = policy.range_prefixlen
    base = policy.range_prefix
    if prefixlen <= 0 or base is None:
        return prefixlen == 0
    words = _words(raw)
    if policy.family == AF_INET:
        mask = (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF
        return (int.from_bytes(base, "big") & mask) == (words[3] & mask)
    base_words = _words(base)
    for i in range(4):
        if prefixlen >= 32:
            if base_words[i] != words[i]:
                return False
            prefixlen -= 32
        else:
            mask = (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF
            return (base_words[i] & mask) == (words[i] & mask)
        if prefixlen == 0:
            return True
    return prefixlen == 0


@dataclass(frozen=True)
class GidChoice:
    """The index NCCL uses and what sits there."""

    index: int
    gid: str | None  # None: an empty entry
    family: str
    roce_version: int | None
    valid: bool  # configured and not link-local: can cross an IP router
    forced: bool  # NCCL_IB_GID_INDEX chose it

    @property
    def routable_v2(self) -> bool:
        return self.valid and self.roce_version == 2

    def fits(self, policy: GidPolicy) -> bool:
        """Whether the entry is one NCCL was asked for: configured, not link-local, of the wanted
        family and RoCE version, inside the range. When no entry fits, ncclIbGetGidIndex keeps
        whatever its walk ended on (index 0 at worst) and queue pairs use that."""
        return (
            self.valid
            and self.roce_version == policy.roce_version
            and self.family == policy.family
            and _in_range(policy, _raw(self.gid))
        )


def select_gid(
    gids: Iterable[GidEntry], table_len: int | None, policy: GidPolicy, link_layer: str | None = "Ethernet"
) -> GidChoice:
    """The GID index NCCL (2.21+) uses on a port with this GID table."""
    by_index = {g.index: g for g in gids}
    length = table_len if table_len is not None else (max(by_index) + 1 if by_index else 0)

    def raw(i: int) -> bytes:
        entry = by_index.get(i)
        return _raw(entry.gid if entry else None)

    def version(i: int) -> int | None:
        entry = by_index.get(i)
        return entry.roce_version if entry else None

    def choice(i: int, forced: bool = False) -> GidChoice:
        entry = by_index.get(i)
        data = raw(i)
        return GidChoice(
            i, entry.gid if entry else None, gid_family(data), version(i), gid_valid(data), forced
        )

    if link_layer == "InfiniBand":
        flid_index = policy.routable_flid_index
        if flid_index < length and int.from_bytes(raw(flid_index)[4:6], "big") != 0:
            return choice(flid_index)
        return choice(0)
    if policy.gid_index >= 0:
        return choice(policy.gid_index, forced=True)
    index = 0
    for candidate in range(1, length):
        current, new = raw(index), raw(candidate)
        new_family = gid_family(new)
        in_range = _in_range(policy, new)
        if new_family != gid_family(current) and new_family == policy.family and in_range:
            index = candidate
            continue
        if new_family != policy.family or not gid_valid(new) or not in_range:
            continue
        new_version = version(candidate) if version(candidate) is not None else -1
        if (version(index) != new_version or not gid_valid(current)) and new_version == policy.roce_version:
            index = candidate
    return choice(index)


def gid_table_empty(gids: Iterable[Any]) -> bool:
    """No entry at all: a pod that sees the RDMA device without its netdev (RoCE is unusable)."""
    return not any(g.gid for g in gids)


def explain_choice(
    gids: Iterable[ExplainedGid],
    netdev: str | None,
    choice: GidChoice,
    policy: GidPolicy,
    where: str = "the environment",
) -> tuple[str, str]:
    """Why the entry NCCL uses does not fit (message, fix), from what the table holds. Shared by
    doctor's roce.gid, lint's NCCL036 and `nccl env`'s left-out ports."""
    gids = list(gids)
    at = (
        "an empty entry"
        if choice.gid is None
        else f"{choice.gid}" + (", link-local" if not choice.valid else "")
    )
    kind = f"RoCE v{choice.roce_version}" if choice.roce_version else "type unknown"
    picked = f"NCCL (2.21+, {policy.describe()}) uses GID index {choice.index} ({at}, {kind})"
    dev = netdev or "<netdev>"
    if choice.forced:
        return (
            f"NCCL_IB_GID_INDEX={choice.index} in {where} forces GID index {choice.index} ({at}, {kind})",
            f"remove NCCL_IB_GID_INDEX from {where} (NCCL 2.21+ picks the RoCE v2 entry itself)",
        )
    if not any(g.gid for g in gids):
        return (
            "the port's GID table is empty: no GID at all, not even the link-local one the kernel adds for any "
            "netdev, so RoCE cannot address any peer. In a container this means the RDMA device is visible but "
            "its netdev is not in the pod's network namespace",
            "attach the pod to the RDMA network: the RDMA device plugin's resource together with its network "
            "attachment (SR-IOV / Multus NetworkAttachmentDefinition, or host networking), so the port's netdev "
            "is in the pod; giving an address to some other interface does not help",
        )
    v2 = [g for g in gids if g.roce_version == 2 and g.is_routable and not g.is_link_local]
    other_family = [g for g in v2 if (AF_INET if g.ipv4 else AF_INET6) != policy.family]
    if v2 and len(other_family) == len(v2):
        shown = ", ".join(f"index {g.index} {g.ipv4 or g.gid}" for g in v2[:3])
        fam, want = ("IPv6", "IPv4") if policy.family == AF_INET else ("IPv4", "IPv6")
        return (
            f"{picked}: this port's only RoCE v2 addresses are {fam} ({shown}), and NCCL looks for {want}",
            f"give {dev} an {want} address (`ip addr add <ip>/<len> dev {dev}`), or set "
            f"NCCL_IB_ADDR_FAMILY={AF_INET6 if policy.family == AF_INET else AF_INET} for every job on every node (NCCL >= 2.21)",
        )
    if v2 and policy.range_text:
        return (
            f"{picked}: NCCL_IB_ADDR_RANGE={policy.range_text} excludes every RoCE v2 address of this port",
            f"set NCCL_IB_ADDR_RANGE to the subnet of {dev}'s address, or remove it",
        )
    if v2 and policy.roce_version != 2:
        return (
            f"{picked}: NCCL_IB_ROCE_VERSION_NUM={policy.roce_version} steers NCCL away from the RoCE v2 entries",
            "remove NCCL_IB_ROCE_VERSION_NUM (default 2)",
        )
    v1_ip = [g for g in gids if g.is_routable and g.roce_version == 1]
    if v1_ip and not any(g.roce_version == 2 for g in gids):
        # The kernel adds a RoCE v2 entry next to the v1 one for every address when the device
        # supports RoCE v2 (drivers/infiniband/core/roce_gid_mgmt.c); v1 entries alone mean the NIC
        # or its driver offers v1 only. RDMA-CM's default mode (cma_roce_mode) cannot change that
        # and NCCL does not use RDMA-CM: it picks the GID index itself.
        shown = v1_ip[0].ipv4 or v1_ip[0].gid
        return (
            f"{picked}: the port offers RoCE v1 entries only (index {v1_ip[0].index} carries {shown}); "
            "its NIC or driver has no RoCE v2, which NCCL wants by default",
            "RoCE v1 does not cross IP routers: either run every node with NCCL_IB_ROCE_VERSION_NUM=1 inside one "
            "L2 domain, or move to a NIC and driver with RoCE v2 (then each address gets a RoCE v2 entry too)",
        )
    return (
        "no RoCE v2 GID with an IPv4 or global IPv6 address (only link-local entries)",
        f"give {netdev or 'the port netdev'} an IP address (`ip addr add <ip>/<len> dev {dev}`); the kernel then adds the RoCE v2 GID",
    )
