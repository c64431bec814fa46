"""`fleet collect`: keep every node's doctor document (and optionally its scrubbed snapshot) in one
directory that `fleet doctor --from DIR` reads later.

Layout: ``DIR/<node>.json`` (a ``fabricscope.doctor/v1`` document) and, with snapshots,
``DIR/snapshots/<node>.tar.gz``, which `fleet doctor --from DIR` does not read twice. Every file is
written to a temporary name and renamed, so a reader never sees half a document and a crash loses
nothing already stored. The launched mode (one rank per node, rank 0 gathering) builds on
:func:`store_document`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.fleet.inputs import SNAPSHOT_SUFFIXES, expand_sources, is_snapshot_dir, safe_file_name
from fabricscope.host.tempfiles import atomic_write

SNAPSHOT_DIR = "snapshots"


@dataclass(frozen=True)
class Collected:
    node: str
    document: Path
    snapshot: Path | None
    source: str


def write_atomic(path: Path, data: bytes) -> None:
    """Create the directory, then :func:`fabricscope.host.tempfiles.atomic_write`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)


def store_document(out_dir: Path, node: str, document: dict[str, Any]) -> Path:
    """Write one node's doctor document as ``out_dir/<node>.json``."""
    target = out_dir / f"{safe_file_name(node)}.json"
    try:
        write_atomic(target, (json.dumps(document, indent=1) + "\n").encode("utf-8"))
    except OSError as exc:
        raise FabricscopeError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def collect_root(root: Any, out_dir: Path, *, snapshot: bool, name: str | None = None) -> Collected:
    """Judge one node (a live or snapshot Root), store its document and, if asked, its scrubbed snapshot."""
    from fabricscope.checks.doctor import run_doctor
    from fabricscope.host.snapshot import take_snapshot

    report = run_doctor(root)
    node = name or report.inventory.hostname or "node"
    doc_path = store_document(out_dir, node, report.to_dict())
    snap_path = None
    if snapshot:
        snap_path = out_dir / SNAPSHOT_DIR / f"{safe_file_name(node)}.tar.gz"
        try:
            snap_path.parent.mkdir(parents=True, exist_ok=True)
            take_snapshot(root, snap_path, scrub=True)
        except OSError as exc:
            raise FabricscopeError(f"cannot write {snap_path}: {exc.strerror or exc}") from None
    return Collected(node, doc_path, snap_path, root.label)


def collect_sources(items: list[str], out_dir: Path, *, snapshot: bool) -> list[Collected]:
    """Documents are stored as they are (after checking that they are doctor documents); snapshots
    are judged, and with ``snapshot`` re-captured scrubbed."""
    from fabricscope.fleet.inputs import DOCTOR_SCHEMA
    from fabricscope.host import Root, RootError

    done = []
    for path in expand_sources(items):
        if path.is_dir() and not is_snapshot_dir(path):
            continue
        if path.is_dir() or path.name.endswith(SNAPSHOT_SUFFIXES):
            try:
                root = Root.at(path)
            except RootError as exc:
                raise FabricscopeError(str(exc)) from None
            done.append(collect_root(root, out_dir, snapshot=snapshot))
            continue
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise FabricscopeError(f"{path}: not a readable JSON document ({exc})") from None
        if not isinstance(doc, dict) or doc.get("schema") != DOCTOR_SCHEMA:
            raise FabricscopeError(f"{path}: not a {DOCTOR_SCHEMA} document")
        host = doc.get("host")
        hostname = host.get("hostname") if isinstance(host, dict) else None
        node = hostname if isinstance(hostname, str) and hostname else path.stem
        done.append(Collected(node, store_document(out_dir, node, doc), None, str(path)))
    return done
