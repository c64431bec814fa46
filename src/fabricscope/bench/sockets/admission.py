"""Who `bench serve` lets in, before any test: token strength and a per-source backoff after
failed tokens (handshakes not yet authenticated are counted by jobs.frames.PendingConnections,
which the job's store uses too).

A 4-digit token was found by a guesser on loopback in 2.5 s (about 1,730 guesses a second, issue
20). Two defences, each enough against a short guess list and together against a long one:

- A token must be strong: at least :data:`MIN_TOKEN_CHARS` characters, at least
  :data:`MIN_TOKEN_BITS` bits as estimated from the character classes it uses, and at least
  :data:`MIN_DISTINCT_CHARS` different characters. ``python -c 'import secrets;
  print(secrets.token_hex(16))'`` (128 bits) and ``openssl rand -hex 16`` make one.
- A source address (IPv4 address, IPv6 /64) that sent :data:`FREE_FAILURES` wrong tokens is
  turned away, unread, for a time that doubles with each further failure up to
  :data:`MAX_BACKOFF_S`; at most :data:`MAX_SOURCES` sources are remembered (the oldest forgotten).
"""

from __future__ import annotations

import ipaddress
import math
import string
import threading
import time
from collections import OrderedDict

MIN_TOKEN_CHARS = 16
MIN_TOKEN_BITS = 64
MIN_DISTINCT_CHARS = 8
FREE_FAILURES = 3  # a typo or two, then backoff
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
MAX_SOURCES = 4096
MAKE_TOKEN = "python -c 'import secrets;print(secrets.token_hex(16))' (or: openssl rand -hex 16)"
_CLASSES = (string.digits, string.ascii_lowercase, string.ascii_uppercase)


def token_weakness(token: str) -> str | None:
    """Why ``token`` is too weak to guard a server, or None when it is strong enough."""
    alphabet = sum(len(c) for c in _CLASSES if any(ch in c for ch in token))
    if any(not any(ch in c for c in _CLASSES) for ch in token):
        alphabet += 33  # punctuation and the rest
    bits = len(token) * math.log2(max(alphabet, 2))
    if len(token) < MIN_TOKEN_CHARS:
        return f"{len(token)} characters, fewer than {MIN_TOKEN_CHARS}"
    if len(set(token)) < MIN_DISTINCT_CHARS:
        return f"only {len(set(token))} different characters, fewer than {MIN_DISTINCT_CHARS}"
    if bits < MIN_TOKEN_BITS:
        return f"about {bits:.0f} bits, fewer than {MIN_TOKEN_BITS}"
    return None


def source_key(source: str) -> str:
    """What failures are counted against: the IPv4 address, or the IPv6 /64 (one host's share)."""
    try:
        address = ipaddress.ip_address(source)
    except ValueError:
        return source
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class AuthFailures:
    """Wrong tokens per source, and how long each source is turned away (bounded memory)."""

    def __init__(
        self,
        free: int = FREE_FAILURES,
        first_s: float = FIRST_BACKOFF_S,
        max_s: float = MAX_BACKOFF_S,
        max_sources: int = MAX_SOURCES,
    ) -> None:
        self.free = free
        self.first_s = first_s
        self.max_s = max_s
        self.max_sources = max_sources
        self._by_source: OrderedDict[str, tuple[int, float]] = (
            OrderedDict()
        )  # key -> (failures, turned away until)
        self._lock = threading.Lock()

    def wait_s(self, source: str) -> float:
        """Seconds ``source`` must still wait before its next token is read (0: read it now)."""
        with self._lock:
            entry = self._by_source.get(source_key(source))
        return max(0.0, entry[1] - time.monotonic()) if entry else 0.0

    def failed(self, source: str) -> None:
        key = source_key(source)
        with self._lock:
            failures = self._by_source.pop(key, (0, 0.0))[0] + 1
            backoff = (
                0.0 if failures < self.free else min(self.max_s, self.first_s * 2 ** (failures - self.free))
            )
            self._by_source[key] = (failures, time.monotonic() + backoff)
            while len(self._by_source) > self.max_sources:
                self._by_source.popitem(last=False)

    def succeeded(self, source: str) -> None:
        with self._lock:
            self._by_source.pop(source_key(source), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_source)
