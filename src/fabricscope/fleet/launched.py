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

import json
import os
import socket
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.fleet.inputs import MAX_DOCUMENT_BYTES, NodeDoc, nodes_from_documents
from fabricscope.jobs.launch import DistEnv
from fabricscope.jobs.rendezvous import gather, open_store

HOST_FIELD = "{host}"
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Received:
    """What one node's rank sent."""

    rank: int
    node: str | None  # as the scheduler names it; None: take the document's hostname
    document: dict[str, Any] | None
    snapshot: bytes | None
    error: str | None

    @property
    def source(self) -> str:
        return f"rank {self.rank}" + (f" ({self.node})" if self.node else "")


def node_label(env: DistEnv, environ: Mapping[str, str]) -> str | None:
    """The scheduler's name for this node: the lab host, else Slurm's node name, else unknown."""
    return env.host_label or environ.get("SLURMD_NODENAME") or None


def own_root(template: str | None, label: str) -> str | None:
    """``--root`` for this node: ``{host}`` becomes its name (one snapshot per node)."""
    return template.replace(HOST_FIELD, label) if template else None


def read_own_node(root_location: str | None, node: str | None, *, snapshot: bool) -> dict[str, bytes]:
    """This node's doctor document (compressed JSON) and, if asked, its scrubbed snapshot; on a
    failure, why (rank 0 turns it into a ``fleet.input`` finding for this node)."""
    from fabricscope.checks.doctor import run_doctor
    from fabricscope.host import Root, RootError
    from fabricscope.host.snapshot import take_snapshot
    from fabricscope.host.tempfiles import private_dir

    items = {"node": (node or "").encode()}
    try:
        root = Root.at(root_location) if root_location else Root.live()
        items["document"] = zlib.compress(json.dumps(run_doctor(root).to_dict()).encode(), 6)
        if snapshot:
            with private_dir("fleet") as tmp:
                target = tmp / "node.tar.gz"
                take_snapshot(root, target, scrub=True)
                if target.stat().st_size > MAX_SNAPSHOT_BYTES:
                    raise FabricscopeError(f"snapshot larger than {MAX_SNAPSHOT_BYTES >> 20} MiB")
                items["snapshot"] = target.read_bytes()
    except (RootError, FabricscopeError, OSError) as exc:
        items = {"node": items["node"], "error": f"cannot read the node: {exc}".encode()}
    return items


def participates(env: DistEnv) -> bool:
    """One rank per node: local rank 0 (or every rank our own launchers started, one per host)."""
    return env.local_rank == 0 or env.rank == 0 or env.host_label is not None


def run_ranks(env: DistEnv, root_template: str | None, timeout_s: float, *, snapshot: bool = False,
              environ: Mapping[str, str] = os.environ) -> list[Received] | None:
    """Every rank calls this; rank 0 gets what each node sent, the others None."""
    store = open_store(env, timeout_s, needs="a launched fleet run")
    items: dict[str, bytes] = {}
    if participates(env):
        node = node_label(env, environ)
        location = own_root(root_template, node or socket.gethostname())
        items = read_own_node(location, node, snapshot=snapshot)
    gathered = gather(store, env, items, timeout_s)
    if gathered is None:
        return None
    return [_decode(rank, got) for rank, got in enumerate(gathered) if got]


def _decode(rank: int, got: dict[str, bytes]) -> Received:
    node = got.get("node", b"").decode() or None
    if "error" in got:
        return Received(rank, node, None, None, got["error"].decode(errors="replace"))
    try:
        raw = zlib.decompressobj().decompress(got["document"], MAX_DOCUMENT_BYTES + 1)  # capped: no zip bomb
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
        document = json.loads(raw)
    except (KeyError, zlib.error, ValueError) as exc:
        return Received(rank, node, None, None, f"unreadable document: {exc}")
    return Received(rank, node, document, got.get("snapshot"), None)


def _name(got: Received) -> str:
    host = (got.document or {}).get("host") if isinstance(got.document, dict) else None
    hostname = host.get("hostname") if isinstance(host, dict) else None
    return got.node or (hostname if isinstance(hostname, str) and hostname else f"rank{got.rank}")


def to_nodes(received: list[Received]) -> list[NodeDoc]:
    """The fleet as `fleet doctor --from` would read it, from what the ranks sent."""
    return nodes_from_documents([(_name(r), r.source, r.document if r.error is None else r.error) for r in received])


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
