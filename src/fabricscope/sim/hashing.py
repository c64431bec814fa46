"""Deterministic, seeded flow hashing for ECMP path choice (vectorised splitmix64).

Real switches hash the 5-tuple (or for RoCE the UDP source port NCCL picks per QP) to choose
among equal-cost next hops; hash collisions put two elephants on one uplink while another sits
idle. A seeded hash reproduces that: the same seed gives the same collisions, another seed
another draw, so a user can ask how bad the luck can get.
"""

from __future__ import annotations

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a bijection on uint64 with good avalanche."""
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def flow_hash(*keys: np.ndarray | int, seed: int = 0) -> np.ndarray:
    """Combine integer keys (arrays broadcast together) into one uint64 hash per flow."""
    h = np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF)
    out = None
    with np.errstate(over="ignore"):
        for k in keys:
            kk = np.asarray(k).astype(np.int64).astype(np.uint64)
            acc = (h if out is None else out) ^ (kk + _GOLD)
            out = mix64(acc)
    assert out is not None
    return out


def pick(h: np.ndarray, n: np.ndarray | int, salt: int = 0) -> np.ndarray:
    """Choose an index in [0, n) from hash ``h``; ``salt`` gives an independent draw per hop."""
    hh = mix64(h ^ np.uint64(salt * 0x2545F4914F6CDD1D & 0xFFFFFFFFFFFFFFFF)) if salt else h
    return (hh % np.asarray(n, dtype=np.uint64)).astype(np.int64)
