"""The job's own nodes, as its launcher names them: rank 0 accepts a rank's node only from this list.

* Slurm: ``SLURM_JOB_NODELIST`` in Slurm's hostlist syntax (``gpu[01-04,07],cpu-a[1-2]``,
  ``rack[1-2]-n[01-02]``), expanded here as ``scontrol show hostnames`` would.
* Our own launchers (``--launch local:N``, ``--launch lab:NAME``): ``FABRICSCOPE_NODELIST``, the
  hosts they started ranks on.
* torchrun, mpirun: no names; the world size bounds the ranks, nothing more.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

from fabricscope.errors import FabricscopeError

NODELIST_ENV = "FABRICSCOPE_NODELIST"
MAX_HOSTS = 65536
_RANGE = re.compile(r"(\d+)(?:-(\d+))?\Z")
_PLAIN = re.compile(r"[A-Za-z0-9._-]*\Z")


class NodeListError(FabricscopeError):
    """A node list that is not Slurm's hostlist syntax."""


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets; brackets may not nest."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise NodeListError(f"nested brackets in node list {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise NodeListError(f"unbalanced ']' in node list {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise NodeListError(f"unbalanced '[' in node list {text!r}")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _range(spec: str, whole: str) -> list[str]:
    """``01-04`` -> 01 02 03 04 (the width of the first number is kept), ``7`` -> 7."""
    match = _RANGE.match(spec.strip())
    if not match:
        raise NodeListError(f"{spec!r} in node list {whole!r} is not a number or a range")
    first, last = match.group(1), match.group(2) or match.group(1)
    lo, hi = int(first), int(last)
    if hi < lo or hi - lo >= MAX_HOSTS:
        raise NodeListError(f"range {spec!r} in node list {whole!r} is empty or too large")
    width = len(first)
    return [str(n).zfill(width) for n in range(lo, hi + 1)]


def _expand_one(expr: str, whole: str) -> list[str]:
    pieces = re.split(r"(\[[^\]]*\])", expr)
    choices: list[list[str]] = []
    count = 1
    for piece in pieces:
        if piece.startswith("["):
            values = [v for spec in piece[1:-1].split(",") for v in _range(spec, whole)]
        elif _PLAIN.match(piece):
            values = [piece]
        else:
            raise NodeListError(f"{piece!r} in node list {whole!r} is not a host name")
        count *= len(values)
        if count > MAX_HOSTS:
            raise NodeListError(f"node list {whole!r} names more than {MAX_HOSTS} hosts")
        choices.append(values)
    return ["".join(combo) for combo in itertools.product(*choices)]


def expand_hostlist(text: str) -> list[str]:
    """Every host of a Slurm hostlist, in order, duplicates dropped."""
    hosts: dict[str, None] = {}
    for expr in _split_top(text):
        for host in _expand_one(expr, text):
            hosts.setdefault(host, None)
            if len(hosts) > MAX_HOSTS:
                raise NodeListError(f"node list {text!r} names more than {MAX_HOSTS} hosts")
    if not hosts:
        raise NodeListError(f"node list {text!r} names no host")
    return list(hosts)


def job_nodes(environ: Mapping[str, str], launcher: str) -> frozenset[str] | None:
    """The job's nodes; None where the launcher names none (torchrun, mpirun)."""
    ours = environ.get(NODELIST_ENV)
    if ours and launcher.startswith(("local:", "lab:")):
        return frozenset(h for h in ours.split(",") if h)
    slurm = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if slurm and launcher == "slurm":
        return frozenset(expand_hostlist(slurm))
    return None
