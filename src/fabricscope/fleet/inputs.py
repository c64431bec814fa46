"""Where a fleet's nodes come from: `doctor --json` documents and snapshots, one per node.

A document is read and immediately reduced to what the fleet needs (the non-pass findings, the
worst severity per check, the facts), so thousands of nodes fit in little memory. A snapshot
(``.tar.gz`` or a snapshot directory) is opened with ``Root.at`` and judged by ``run_doctor``, exactly
as ``doctor --root`` would. A document that cannot be used becomes a ``fleet.input`` finding for
that node instead of ending the run; only a fleet without one usable node is an error.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.findings import Finding, Severity
from fabricscope.untrusted import DocumentError, check_depth, json_load

DOCTOR_SCHEMA = "fabricscope.doctor/v1"
SNAPSHOT_SUFFIXES = (".tar.gz", ".tgz")
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
SNAPSHOT_TOPS = ("sys", "proc", "cmd", "etc")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


@dataclass
class NodeDoc:
    """One node as the fleet sees it."""

    name: str
    source: str
    hostname: str | None
    findings: list[Finding]  # every finding that is not a pass
    checks: dict[str, str]  # check id -> worst severity on this node (pass included)
    summary: dict[str, int]
    facts: dict[str, Any] | None
    extra: list[Finding] = field(default_factory=list)  # fleet.* and expect.* findings added later

    @property
    def all_findings(self) -> list[Finding]:
        return [*self.findings, *self.extra]


def is_snapshot_dir(path: Path) -> bool:
    return path.is_dir() and any((path / top).exists() for top in SNAPSHOT_TOPS)


def expand_sources(items: Iterable[str]) -> list[Path]:
    """Files and directories as given: a directory that is not itself a snapshot contributes its
    ``*.json`` documents, ``*.tar.gz`` snapshots and snapshot subdirectories (not recursively)."""
    sources: list[Path] = []
    for item in items:
        path = Path(item).expanduser()
        if not path.exists():
            raise FabricscopeError(f"--from {item}: no such file or directory")
        if path.is_file() or is_snapshot_dir(path):
            sources.append(path)
            continue
        if not path.is_dir():
            raise FabricscopeError(f"--from {item}: neither a file nor a directory")
        try:
            entries = sorted(path.iterdir())
        except OSError as exc:
            raise FabricscopeError(f"--from {item}: cannot list: {exc.strerror or exc}") from None
        for entry in entries:
            if entry.name.endswith(".json") and entry.is_file():
                sources.append(entry)
            elif entry.name.endswith(SNAPSHOT_SUFFIXES) and entry.is_file():
                sources.append(entry)
            elif is_snapshot_dir(entry):
                sources.append(entry)
    if not sources:
        raise FabricscopeError("no node documents or snapshots found (give --from DIR or FILES)")
    return sources


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (*SNAPSHOT_SUFFIXES, ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def reduce_document(doc: Any, source: str) -> NodeDoc:
    """Keep what the fleet needs from one doctor document; raises ValueError when it is not one."""
    if not isinstance(doc, dict) or doc.get("schema") != DOCTOR_SCHEMA:
        raise ValueError(f"not a {DOCTOR_SCHEMA} document")
    try:
        check_depth(doc)  # later walks (drift, --json, --html) must not meet a RecursionError
    except DocumentError as exc:
        raise ValueError(f"not a doctor document: {exc}") from None
    raw = doc.get("findings")
    if not isinstance(raw, list):
        raise ValueError("no findings list")
    findings: list[Finding] = []
    checks: dict[str, str] = {}
    counts = dict.fromkeys((s.value for s in Severity), 0)
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise ValueError("a finding without an id")
        severity = Severity.parse(str(item.get("severity")))
        counts[severity.value] += 1
        check_id = sys.intern(item["id"])
        seen = checks.get(check_id)
        if seen is None or Severity(seen).rank < severity.rank:
            checks[check_id] = severity.value
        if severity is not Severity.PASS:
            evidence = item.get("evidence")
            findings.append(
                Finding(
                    check_id,
                    severity,
                    str(item.get("subject", "")),
                    str(item.get("message", "")),
                    evidence if isinstance(evidence, dict) else {},
                    item.get("fix") if isinstance(item.get("fix"), str) else None,
                )
            )
    host = doc.get("host") if isinstance(doc.get("host"), dict) else {}
    hostname = (
        host.get("hostname") if isinstance(host.get("hostname"), str) and host.get("hostname") else None
    )
    facts = doc.get("facts") if isinstance(doc.get("facts"), dict) else None
    return NodeDoc(
        name=hostname or "",
        source=source,
        hostname=hostname,
        findings=findings,
        checks=checks,
        summary=counts,
        facts=facts,
    )


def _read_document(path: Path) -> NodeDoc:
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise ValueError(f"larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB")
        with open(path, "rb") as handle:
            doc = json_load(handle.read())  # 4 KB of "[" once ended the whole verdict (RecursionError)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    except DocumentError as exc:
        raise ValueError(f"not a doctor document: {exc}") from None
    return reduce_document(doc, str(path))


def _judge_snapshot(path: Path) -> NodeDoc:
    from fabricscope.checks.doctor import run_doctor
    from fabricscope.host import Root, RootError

    try:
        root = Root.at(path)
    except RootError as exc:
        raise ValueError(str(exc)) from None
    return reduce_document(run_doctor(root).to_dict(), str(path))


def _unusable(path: Path | str, reason: str) -> NodeDoc:
    finding = Finding(
        "fleet.input",
        Severity.FAIL,
        str(path),
        f"node not judged: {reason}",
        {"source": str(path)},
        "re-collect this node: `fabricscope doctor --json > NODE.json` (or `fabricscope snapshot -o NODE.tar.gz`) on it",
    )
    return NodeDoc(
        name="",
        source=str(path),
        hostname=None,
        findings=[],
        checks={"fleet.input": "fail"},
        summary={"pass": 0, "info": 0, "warn": 0, "fail": 0},
        facts=None,
        extra=[finding],
    )


def load_nodes(sources: list[Path], progress: Callable[[int, int], None] | None = None) -> list[NodeDoc]:
    """Every source as a node, named by its hostname (by its file name where hostnames repeat,
    as in scrubbed snapshots); an unusable source is a node with a ``fleet.input`` finding."""
    nodes = []
    for i, path in enumerate(sources):
        try:
            node = (
                _judge_snapshot(path)
                if (path.is_dir() or path.name.endswith(SNAPSHOT_SUFFIXES))
                else _read_document(path)
            )
        except ValueError as exc:
            node = _unusable(path, str(exc))
        nodes.append(node)
        if progress is not None:
            progress(i + 1, len(sources))
    _name_nodes(nodes, sources)
    _check_usable(nodes)
    return nodes


def nodes_from_documents(received: list[tuple[str, str, Any]]) -> list[NodeDoc]:
    """Nodes from documents already in memory (gathered by a launched run): ``(name, source,
    document)``, where a document that is a string says why that node could not be read."""
    nodes = []
    for name, source, doc in received:
        try:
            if isinstance(doc, str):
                raise ValueError(doc)
            node = reduce_document(doc, source)
        except ValueError as exc:
            node = _unusable(source, str(exc))
        node.name = name
        nodes.append(node)
    for node, name in zip(nodes, _unique([n.name for n in nodes])):
        node.name = name
    _check_usable(nodes)
    return nodes


def _check_usable(nodes: list[NodeDoc]) -> None:
    """Refuse a fleet without one usable node; flag documents without facts."""
    if all(n.facts is None and not n.checks.keys() - {"fleet.input"} for n in nodes):
        first = next((f for n in nodes for f in n.extra), None)
        raise FabricscopeError(
            f"no usable node document: {first.subject}: {first.message}"
            if first
            else "no usable node document"
        )
    for node in nodes:
        if node.facts is None and "fleet.input" not in node.checks:
            node.extra.append(
                Finding(
                    "fleet.input",
                    Severity.WARN,
                    node.name,
                    "document carries no facts (written by an older fabricscope): drift not judged",
                    {"source": node.source},
                    "re-run `fabricscope doctor --json` on the node with this fabricscope",
                )
            )
            node.checks["fleet.input"] = "warn"


def _name_nodes(nodes: list[NodeDoc], sources: list[Path]) -> None:
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.hostname or ""] = counts.get(node.hostname or "", 0) + 1
    names = [
        node.hostname if node.hostname and counts[node.hostname] == 1 else _stem(path)
        for node, path in zip(nodes, sources)
    ]
    for node, name in zip(nodes, _unique(names)):
        node.name = name


def _unique(names: list[str]) -> list[str]:
    """The names, with ``#2``, ``#3`` ... added where one repeats."""
    used: set[str] = set()
    out = []
    for name in names:
        base, n = name, 2
        while name in used:
            name, n = f"{base}#{n}", n + 1
        used.add(name)
        out.append(name)
    return out


def safe_file_name(name: str) -> str:
    """A node name usable as a file name (full match), or an error."""
    if not _SAFE_NAME.fullmatch(name) or name in (".", ".."):
        raise FabricscopeError(f"node name {name[:80]!r} cannot be used as a file name")
    return name
