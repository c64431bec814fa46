"""``bench matrix --topology``: the matrix's hosts placed on the fabric, its slow flows explained
by links, switches and hosts (:mod:`.tomography`), each suspect retested through itself.

The fabric comes from a topology file (``topology discover`` writes one, or the simulator's
explicit-graph YAML by hand), a lab's own plan (``lab:NAME``) or, with ``discover``, from the
LLDP neighbours every rank of the job reads (gathered by the worker).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabricscope.bench.matrix.tomography import Blame, Localization, Observation, localize
from fabricscope.bench.results.schema import MatrixSuspect
from fabricscope.topology.paths import Crossing, Element, FabricPaths, element_label, match_hosts
from fabricscope.topology.view import FabricView, view_from_document

Flow = tuple[int, int]


@dataclass
class Fabric:
    """A topology for one matrix: its document (kept with the result, drawn by the report) and
    what every measured flow crosses."""

    source: str
    document: dict[str, Any]
    view: FabricView
    crossings: dict[Flow, Crossing] = field(default_factory=dict)
    placed: dict[str, str] = field(default_factory=dict)  # matrix host -> topology host

    def leaf_of(self, topo_host: str) -> str | None:
        leaves = [s for s, items in self.view.nics_of.items() if any(h == topo_host for h, _ in items)]
        return leaves[0] if len(leaves) == 1 else None


def load_document(spec: str) -> tuple[dict[str, Any], str]:
    """``FILE`` or ``lab:NAME`` -> (the explicit-graph document, where it came from)."""
    if spec.startswith("lab:"):
        from fabricscope.topology.model import build_document
        from fabricscope.topology.sources import lab_discovery

        disc = lab_discovery(spec[4:])
        return build_document(disc), spec
    from fabricscope.sim.custom import load_document as read_yaml
    from fabricscope.topology.view import load_view

    load_view(spec)  # the simulator's own checks, and an explicit graph (not a family)
    return read_yaml(spec), spec


def place(hosts: Sequence[str], document: dict[str, Any], source: str) -> Fabric:
    """Every matrix host on a topology host, and every directed flow's crossing."""
    view = view_from_document(document)
    placed = match_hosts(hosts, view, source)
    paths = FabricPaths(view)
    crossings = {
        (i, j): paths.crossing(placed[a], placed[b])
        for i, a in enumerate(hosts) for j, b in enumerate(hosts) if i != j
    }  # fmt: skip
    return Fabric(source, document, view, crossings, placed)


def _to_matrix_names(e: Element, back: Mapping[str, str]) -> Element:
    return ("host", back.get(e[1], e[1])) if e[0] == "host" else e


def observations(
    fabric: Fabric, bad: Callable[[int, int], bool | None], back: Mapping[str, str]
) -> list[Observation]:
    """Measured flows (``bad`` None: not measured) with host elements named as in the matrix."""
    out = []
    for (i, j), c in fabric.crossings.items():
        verdict = bad(i, j)
        if verdict is None:
            continue
        out.append(
            Observation(
                (i, j),
                verdict,
                frozenset(_to_matrix_names(e, back) for e in c.must),
                frozenset(_to_matrix_names(e, back) for e in c.may),
            )
        )
    return out


@dataclass(frozen=True)
class Located:
    suspects: list[MatrixSuspect]
    notes: list[str]
    localization: Localization


def _evidence(b: Blame, host: bool = False) -> str:
    flows = "of its flows" if host else "flows through it"
    through = f"{b.slow} of {b.through} {flows} slow" if b.through else "no measured flow has to cross it"
    if b.slow == b.through and b.through:
        through += ", none good" if host else ", no good flow through it"
    if b.may_slow:
        through += f"; {b.may_slow} more slow flow(s) may cross it (ECMP)"
    return through


def _reason(b: Blame, fabric: Fabric) -> str:
    labels = [element_label(e) for e in b.elements]
    if b.ambiguous:
        head = f"{'one' if b.needed == 1 else b.needed} of {', '.join(labels)}"
        return (
            f"{head}: together they explain {len(b.flows)} slow flow(s), and no good flow has to cross any of "
            f"them; the matrix cannot tell them apart (the same flows cross each)"
        )
    e = b.elements[0]
    if e[0] == "host":
        leaf = fabric.leaf_of(fabric.placed.get(e[1], e[1]))
        where = f"the host itself or its NIC cable to {leaf}" if leaf else "the host itself or its NIC cables"
        return f"{_evidence(b, host=True)} ({where})"  # printed after the host's name, as plain host suspects are
    kind = (
        "uplink"
        if e[0] == "link" and fabric.view.tiers.get(e[1], 0) != fabric.view.tiers.get(e[2], 0)
        else "cables"
    )
    name = f"{e[1]} -> {e[2]} {kind}" if e[0] == "link" else labels[0]
    return f"{name}: {_evidence(b)}"


def _suspect(
    b: Blame, fabric: Fabric, gbps: Callable[[int, int], float | None], transport: str, median: float | None
) -> MatrixSuspect:
    e = b.elements[0]
    rates = [g for f in b.flows if (g := gbps(*f)) is not None]
    return MatrixSuspect(
        host=e[1], peer=e[2] if e[0] == "link" else None, kind=e[0],  # type: ignore[arg-type]
        reason=("RDMA: " if transport == "rdma" else "") + _reason(b, fabric), transport=transport,  # type: ignore[arg-type]
        score_gbps=statistics.median(rates) if rates else None, fleet_median_gbps=median,
        link=[e[1], e[2]] if e[0] == "link" else None,
        alternatives=[element_label(x) for x in b.elements] if b.ambiguous else None,
        flows_slow=len(b.flows), flows_through=b.through,
    )  # fmt: skip


def locate(
    fabric: Fabric,
    hosts: Sequence[str],
    bad: Callable[[int, int], bool | None],
    gbps: Callable[[int, int], float | None],
    transport: str,
    median: float | None,
) -> Located:
    """Suspects (hosts, links, switches) and notes for one matrix."""
    back = {topo: name for name, topo in fabric.placed.items()}
    loc = localize(observations(fabric, bad, back))
    suspects = [_suspect(b, fabric, gbps, transport, median) for b in loc.blamed]
    notes = []
    if loc.unexplained:
        pairs = ", ".join(f"{hosts[a]}->{hosts[b]}" for a, b in loc.unexplained[:6]) + (
            " ..." if len(loc.unexplained) > 6 else ""
        )
        notes.append(
            f"{len(loc.unexplained)} slow flow(s) have no single explanation: every link, switch and host they "
            f"cross also carried a good flow ({pairs}); an intermittent fault or contention"
        )
    if not loc.exact:
        notes.append("many candidates: the explanation was chosen greedily (small, not proven the smallest)")
    elif loc.alternatives > 1:
        notes.append(
            f"{loc.alternatives} explanations of the same size fit; the suspects marked 'one of' differ between them"
        )
    return Located(suspects, notes, loc)


def retest_plan(
    fabric: Fabric, located: Located, scores: Sequence[float | None], peers: int
) -> list[tuple[MatrixSuspect, list[Flow]]]:
    """Per suspect: flows that must cross it and nothing else under suspicion; those whose every
    other element was cleared by a good flow first, then those between the best-scoring hosts.
    A "one of" group is retested through its first element (the others share its flows)."""
    back = {topo: name for name, topo in fabric.placed.items()}
    named = {
        f: ({_to_matrix_names(e, back) for e in c.must}, {_to_matrix_names(e, back) for e in c.may})
        for f, c in fabric.crossings.items()
        if f[0] < f[1]
    }
    cleared = located.localization.cleared
    plan = []
    for s, blame in zip(located.suspects, located.localization.blamed):
        target = blame.elements[0]
        others = {e for b in located.localization.blamed if b is not blame for e in b.elements}
        picked = []
        for (a, b), (must, may) in named.items():
            if target in must and not (may - {target}) & others:
                unproven = len(must - {target} - cleared)
                picked.append((unproven, -((scores[a] or 0.0) + (scores[b] or 0.0)), (a, b)))
        flows: list[Flow] = []
        for _, _, (a, b) in sorted(picked)[:peers]:
            flows += [(a, b), (b, a)]
        plan.append((s, flows))
    return plan
