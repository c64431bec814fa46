"""NCCL's device/interface list syntax (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_OOB_NET_IFNAME).

Semantics, as in NCCL's ``parseStringList``/``matchIfList`` (src/misc/utils.cc, v2.30.7-1): an optional
leading ``^`` makes the list an exclude list; then an optional ``=`` makes every token an exact
name, otherwise every token is a *prefix*; tokens are separated by ``,`` and each is
``name[:port[:rail[:plane]]]`` (the port only matters for HCAs). So ``mlx5_1`` also selects
``mlx5_10`` .. ``mlx5_17``: the prefix trap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabricscope.nccl.gid import c_strtol


@dataclass(frozen=True)
class ListToken:
    name: str
    port: int | None  # None: any port
    raw: str


@dataclass(frozen=True)
class DeviceList:
    exclude: bool
    exact: bool
    tokens: tuple[ListToken, ...]
    problems: tuple[str, ...] = ()  # tokens that could not be parsed

    @property
    def spaced(self) -> tuple[ListToken, ...]:
        """Entries whose name holds a blank: NCCL compares it as written, so they match nothing."""
        return tuple(t for t in self.tokens if any(c.isspace() for c in t.name))

    def token_matches(self, token: ListToken, name: str, port: int | None = None) -> bool:
        if self.exact:
            ok = name == token.name
        else:
            ok = name.startswith(token.name)
        if ok and token.port is not None and port is not None:
            ok = token.port == port
        return ok

    def matches(self, name: str, port: int | None = None) -> bool:
        """Whether NCCL would use ``name`` (and ``port``) under this list."""
        hit = any(self.token_matches(t, name, port) for t in self.tokens)
        return not hit if self.exclude else hit

    def matched_by(
        self, token: ListToken, candidates: list[tuple[str, int | None]]
    ) -> list[tuple[str, int | None]]:
        return [(n, p) for n, p in candidates if self.token_matches(token, n, p)]


def parse_list(value: str) -> DeviceList:
    """The list as NCCL reads it (init.cc / linux.cc, then parseStringList in src/misc/utils.cc at
    v2.30.7-1): ``^`` and ``=`` count only as the very first characters; entries are split on ','
    alone (strtok_r: empty entries vanish) and nothing is stripped, so ``mlx5_0:1, mlx5_1:1`` names
    a device " mlx5_1" that does not exist (:attr:`DeviceList.spaced`)."""
    text = value
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    tokens = []
    problems = []
    for raw in text.split(","):
        if not raw:
            continue
        parts = raw.split(":")
        name = parts[0]
        port: int | None = None
        if len(parts) >= 2 and parts[1] != "":
            if not re.match(r"\s*[+-]?\d", parts[1]):  # atoi gives 0, a port no device has
                problems.append(raw)
                continue
            port, _ = c_strtol(parts[1], 10)  # NCCL's atoi: leading digits ('1"' is port 1)
            if port < 0:
                port = None
        if not name:
            problems.append(raw)
            continue
        tokens.append(ListToken(name=name, port=port, raw=raw))
    return DeviceList(exclude=exclude, exact=exact, tokens=tuple(tokens), problems=tuple(problems))


def prefix_trap(token: ListToken, names: list[str]) -> list[str]:
    """Other names a prefix token also catches beyond the one it spells (``mlx5_1`` -> ``mlx5_10``...)."""
    return sorted({n for n in names if n != token.name and n.startswith(token.name) and token.name in names})
