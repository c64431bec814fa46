"""What the job store's messages carry and how they are signed: shared by its server and client.

Every message after the greeting carries an HMAC-SHA256, under the job's key, over a canonical
JSON list of (job id, rank, both sides' nonces, sequence number, operation, key, value): a value
cannot be moved to another key, rank, connection or job, nor replayed (the sequence only rises
on a connection, and both nonces are fresh for each one). Rank 0's replies are signed too, so a
rank knows the answer came from the job's own rank 0. Without a key (no secret) nothing is
signed and nothing read is authenticated; callers must say so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

from fabricscope.jobs.frames import ProtocolError

STORE_MAGIC = "fabricscope-job-store"
STORE_VERSION = 1
MAX_KEY_CHARS = 256
MAX_NODE_CHARS = 255
_KEY = re.compile(r"[A-Za-z0-9_./:@+=-]{1,256}\Z")  # printable ASCII: no control bytes, no surprises in logs
_NONCE = re.compile(r"[0-9a-f]{32}\Z")


def sign(key: bytes | None, fields: list[Any]) -> str | None:
    """HMAC-SHA256 (hex) of ``fields`` as canonical JSON; None without a key."""
    if key is None:
        return None
    text = json.dumps(fields, separators=(",", ":"), ensure_ascii=True, sort_keys=True)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def verify(key: bytes | None, fields: list[Any], mac: Any) -> bool:
    """True when ``mac`` signs ``fields`` (always, without a key: nothing to check against)."""
    if key is None:
        return True
    expected = sign(key, fields)
    return (
        isinstance(mac, str) and expected is not None and hmac.compare_digest(mac.encode(), expected.encode())
    )


def check_key(key: Any) -> str:
    """A store key: short printable ASCII; :class:`ProtocolError` otherwise."""
    if not isinstance(key, str) or not _KEY.match(key):
        raise ProtocolError(f"key must be 1..{MAX_KEY_CHARS} characters of A-Z a-z 0-9 _ . / : @ + = -")
    return key


def check_nonce(nonce: Any) -> str:
    if not isinstance(nonce, str) or not _NONCE.match(nonce):
        raise ProtocolError("nonce must be 32 lowercase hex digits")
    return nonce


def check_text(value: Any, what: str, max_bytes: int) -> str:
    """A string that is valid UTF-8 (no lone surrogates from ``\\ud800`` escapes) within ``max_bytes``."""
    if not isinstance(value, str):
        raise ProtocolError(f"{what} must be a string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ProtocolError(f"{what} is not valid UTF-8 text") from None
    if size > max_bytes:
        raise ProtocolError(f"{what} of {size} bytes exceeds {max_bytes}")
    return value


def rank_of_key(key: str) -> int | None:
    """The rank that owns ``rank/N/...`` (only rank N may write there); None for a shared key."""
    parts = key.split("/", 2)
    if parts[0] == "rank" and len(parts) > 1 and parts[1].isdigit():
        return int(parts[1])
    return None
