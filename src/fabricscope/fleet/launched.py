"""`fleet doctor` and `fleet collect` launched under the job's engine (srun, torchrun, mpirun,
``--launch lab:NAME``): one rank per node reads its own node, rank 0 gathers and judges.

The ranks meet at the job's store (:mod:`fabricscope.jobs.rendezvous`, the one bench matrix
uses), so a fleet run needs nothing the job does not already have. Each node is named as the
scheduler knows it, so that a drain hits the right node: the lab host (``FABRICSCOPE_HOST``), else
Slurm's node name (``SLURMD_NODENAME``), else the hostname the doctor document carries. One rank
per node answers (local rank 0); ``--root`` may name a different snapshot or mounted filesystem
per node with ``{host}``. A node whose doctor run fails is a ``fleet.input`` finding; a rank that
sends nothing before the deadline ends the run with an error that names it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.fleet.inputs import MAX_DOCUMENT_BYTES, NodeDoc, nodes_from_documents
from fabricscope.jobs.launch import DistEnv
from fabricscope.jobs.rendezvous import Gathered, gather, open_store, parse_json
from fabricscope.jobs.store import StoreLimits

HOST_FIELD = "{host}"
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Received:
    """What one node's rank sent; ``trusted``: signed under the job's secret by a rank on one of
    the job's nodes (only such a document may lead to a scheduler action)."""

    rank: int
    node: str | None  # as the scheduler names it; None: take the document's hostname
    document: dict[str, Any] | None
    snapshot: bytes | None
    error: str | None
    trusted: bool = False

    @property
    def source(self) -> str:
        return f"rank {self.rank}" + (f" ({self.node})" if self.node else "")


def node_label(env: DistEnv, environ: Mapping[str, str]) -> str | None:
    """The scheduler's name for this node: the lab host, else Slurm's node name, else unknown."""
    return env.host_label or environ.get("SLURMD_NODENAME") or None


def own_root(template: str | None, label: str) -> str | None:
    """``--root`` for this node: ``{host}`` becomes its name (one snapshot per node)."""
    return template.replace(HOST_FIELD, label) if template else None


def read_own_node(root_location: str | None, *, snapshot: bool) -> dict[str, str]:
    """This node's doctor document (JSON text) and, if asked, its scrubbed snapshot (base64 in a
    JSON string); on a failure, why (rank 0 turns it into a ``fleet.input`` finding for this node)."""
    from fabricscope.checks.doctor import run_doctor
    from fabricscope.host import Root, RootError
    from fabricscope.host.snapshot import take_snapshot
    from fabricscope.host.tempfiles import private_dir

    items: dict[str, str] = {}
    try:
        root = Root.at(root_location) if root_location else Root.live()
        items["document"] = json.dumps(run_doctor(root).to_dict())
        if snapshot:
            with private_dir("fleet") as tmp:
                target = tmp / "node.tar.gz"
                take_snapshot(root, target, scrub=True)
                if target.stat().st_size > MAX_SNAPSHOT_BYTES:
                    raise FabricscopeError(f"snapshot larger than {MAX_SNAPSHOT_BYTES >> 20} MiB")
                items["snapshot"] = json.dumps(base64.b64encode(target.read_bytes()).decode())
    except (RootError, FabricscopeError, OSError) as exc:
        items = {"error": json.dumps(f"cannot read the node: {exc}")}
    return items


def participates(env: DistEnv) -> bool:
    """One rank per node: local rank 0 (or every rank our own launchers started, one per host)."""
    return env.local_rank == 0 or env.rank == 0 or env.host_label is not None


def store_limits(snapshot: bool) -> StoreLimits:
    """Room at rank 0 for every node's document (and snapshot, base64) and no more."""
    per_rank = MAX_DOCUMENT_BYTES + (MAX_SNAPSHOT_BYTES * 4 // 3 if snapshot else 0) + (1 << 20)
    return StoreLimits(
        bytes_per_rank=per_rank, total_bytes=max(per_rank * 4, 4 << 30 if snapshot else 1 << 30)
    )


def run_ranks(
    env: DistEnv,
    root_template: str | None,
    timeout_s: float,
    *,
    snapshot: bool = False,
    environ: Mapping[str, str] = os.environ,
) -> Gathering | None:
    """Every rank calls this; rank 0 gets what each node sent, the others None."""
    node = node_label(env, environ)
    meeting = open_store(env, timeout_s, needs="a launched fleet run", node=node or "", environ=environ,
                         limits=store_limits(snapshot))  # fmt: skip
    try:
        items: dict[str, str] = {}
        if participates(env):
            items = read_own_node(own_root(root_template, node or socket.gethostname()), snapshot=snapshot)
        gathered = gather(meeting, items, timeout_s)
    finally:
        meeting.close()
    if gathered is None:
        return None
    received = [_decode(got) for got in gathered if got.items or got.error]
    return Gathering(received, meeting.secret.authenticated, meeting.secret.source)


@dataclass(frozen=True)
class Gathering:
    """Rank 0's view of a launched run: what each node sent, and whether the job had a secret."""

    received: list[Received]
    authenticated: bool
    secret_source: str  # token | launcher | munge | none

    def trusted_names(self) -> set[str]:
        """The nodes whose documents may lead to a scheduler action."""
        return {_name(r) for r in self.received if r.trusted}


def _decode(got: Gathered) -> Received:
    node = got.node or None
    trusted = got.authenticated and got.error is None
    if got.error is not None:
        return Received(got.rank, node, None, None, got.error)
    try:
        if "error" in got.items:
            return Received(got.rank, node, None, None, str(parse_json(got.items["error"], 4096)), trusted)
        document = parse_json(got.items["document"], MAX_DOCUMENT_BYTES)
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
        snapshot = None
        if "snapshot" in got.items:
            snapshot = base64.b64decode(
                parse_json(got.items["snapshot"], MAX_SNAPSHOT_BYTES * 2), validate=True
            )
    except (KeyError, ValueError, TypeError, binascii.Error) as exc:
        return Received(got.rank, node, None, None, f"unreadable document: {exc}", trusted)
    return Received(got.rank, node, document, snapshot, None, trusted)


def _name(got: Received) -> str:
    host = (got.document or {}).get("host") if isinstance(got.document, dict) else None
    hostname = host.get("hostname") if isinstance(host, dict) else None
    return got.node or (hostname if isinstance(hostname, str) and hostname else f"rank{got.rank}")


def to_nodes(received: list[Received]) -> list[NodeDoc]:
    """The fleet as `fleet doctor --from` would read it, from what the ranks sent."""
    return nodes_from_documents(
        [(_name(r), r.source, r.document if r.error is None else r.error) for r in received]
    )


def keep(received: list[Received], out_dir: Path) -> tuple[list[tuple[str, Path, Path | None]], list[str]]:
    """`fleet collect` launched: rank 0 writes every node's document (and snapshot) into
    ``out_dir``; returns what it kept and, for each node that could not be read, why."""
    from fabricscope.fleet.collect import SNAPSHOT_DIR, store_document, write_atomic
    from fabricscope.fleet.inputs import safe_file_name

    kept, failed = [], []
    for got in received:
        if got.error is not None or got.document is None:
            failed.append(f"{got.source}: {got.error}")
            continue
        name = _name(got)
        doc_path = store_document(out_dir, name, got.document)
        snap_path = None
        if got.snapshot is not None:
            snap_path = out_dir / SNAPSHOT_DIR / f"{safe_file_name(name)}.tar.gz"
            try:
                write_atomic(snap_path, got.snapshot)
            except OSError as exc:
                raise FabricscopeError(f"cannot write {snap_path}: {exc.strerror or exc}") from None
        kept.append((name, doc_path, snap_path))
    return kept, failed
