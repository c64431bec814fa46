"""NCCL's device/interface list syntax (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_OOB_NET_IFNAME).

Semantics, as in NCCL's ``parseStringList``/``matchIfList`` (src/misc/utils.cc): an optional
leading ``^`` makes the list an exclude list; then an optional ``=`` makes every token an exact
name, otherwise every token is a *prefix*; tokens are separated by ``,`` and each is
``name[:port[:rail[:plane]]]`` (the port only matters for HCAs). So ``mlx5_1`` also selects
``mlx5_10`` .. ``mlx5_17``: the prefix trap.
"""

from __future__ import annotations

from dataclasses import dataclass


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

    def matched_by(self, token: ListToken, candidates: list[tuple[str, int | None]]) -> list[tuple[str, int | None]]:
        return [(n, p) for n, p in candidates if self.token_matches(token, n, p)]


def parse_list(value: str) -> DeviceList:
    text = value.strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    tokens = []
    problems = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        parts = raw.split(":")
        name = parts[0]
        port: int | None = None
        if len(parts) >= 2 and parts[1] != "":
            try:
                port = int(parts[1])
            except ValueError:
                problems.append(raw)
                continue
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
