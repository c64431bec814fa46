"""A slow link behind a job that completes, from gloo's ring order and the ranks' arrival times.

gloo's ring collectives pass data from rank r to rank r+1, and a rank returns from one only when
its own sends have gone out: the rank whose send to its successor crossed a slow link arrives
late at the next collective. Measured in the lab (tests/data/job/lab/slowhost: h3's link at a
tenth makes ranks 1 and 2, the senders into and out of h3, late; a slow leaf uplink makes the
senders across it late). So: late ranks mark their ring flow (r -> r+1) bad, the others good
(a late rank behind a later predecessor neither: see :func:`inherited`), and the matrix's
tomography (:mod:`fabricscope.bench.matrix.tomography`) names the fewest hosts, cables or
switches that explain the bad flows: hosts alone without a topology, cables and switches with
one (``--topology FILE`` or ``lab:NAME``). NCCL picks its own ring order, so NCCL jobs are not
judged this way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fabricscope.triage.sequence import GroupView
from fabricscope.triage.timing import Lateness

if TYPE_CHECKING:
    from fabricscope.topology.paths import Element

# hosts a, b -> (must, may) elements; quoted: Element is imported for type checking only
Crossing = Callable[[str, str], "tuple[frozenset[Element], frozenset[Element]]"]


@dataclass
class SlowLink:
    late: list[int]
    op: str
    spread_s: float
    interval_s: float
    elements: list[str] = field(default_factory=list)  # blamed: host names, "leaf2 - spine", ...
    hosts_blamed: list[str] = field(default_factory=list)
    unexplained: int = 0


def topology_crossing(spec: str, hosts: list[str]) -> Crossing:
    """What a flow between two of the job's hosts crosses in a topology (``FILE`` or ``lab:NAME``),
    placed as `bench matrix --topology` places its hosts."""
    from fabricscope.bench.matrix.localize import load_document, place

    document, source = load_document(spec)
    fabric = place(hosts, document, source)
    index = {h: i for i, h in enumerate(hosts)}

    def crossing(a: str, b: str) -> tuple[frozenset[Element], frozenset[Element]]:
        c = fabric.crossings[(index[a], index[b])]
        return c.must, c.may

    return crossing


def inherited(rank: int, before: int, late: Lateness) -> bool:
    """A late rank whose ring predecessor is at least as late: it receives its last chunk over
    the predecessor's slow send, so its own lateness may be inherited rather than its send's. Its
    flow is left out (neither bad nor good): marking it bad would blame whatever it shares with the
    slow link (a 3-leaf lab under load named the whole leaf switch for its uplink); marking it good
    would clear what it crosses. Of two slow links next to each other in ring order, only the first
    is then seen."""
    return rank in late.late and before in late.late and late.medians[before] >= late.medians[rank]


def find_slow_link(
    view: GroupView, late: Lateness, hosts: dict[int, str | None], crossing: Crossing | None = None
) -> SlowLink | None:
    """Two or more late ranks of a gloo job, late after the collective that moves the most data:
    their ring sends are the bad flows."""
    if (
        len(late.late) < 2
        or not late.follows_most_data()
        or not all(e.op.startswith("gloo:") for st in view.status.values() for e in st.entries[-8:])
    ):
        return None
    ring = sorted(late.medians)
    if any(hosts.get(r) is None for r in ring):
        return None
    # imported here: the bench.matrix package and topology (through host/) cost ~0.5 s to import
    from fabricscope.bench.matrix.tomography import Observation, localize
    from fabricscope.topology.paths import element_label, host_element

    observations = []
    for i, r in enumerate(ring):
        a, b = hosts[r], hosts[ring[(i + 1) % len(ring)]]
        if a == b or inherited(r, ring[i - 1], late):
            continue
        must, may = (
            crossing(a, b) if crossing is not None else (frozenset({host_element(a), host_element(b)}),) * 2
        )
        observations.append(
            Observation((i, (i + 1) % len(ring)), r in late.late, frozenset(must), frozenset(may))
        )
    where = localize(observations)
    slow = SlowLink(
        late.late,
        late.op,
        round(late.spread_s, 4),
        round(late.interval_s, 4),
        unexplained=len(where.unexplained),
    )
    for blame in where.blamed:
        labels = [element_label(e) for e in blame.elements]
        slow.elements.append(labels[0] if len(labels) == 1 else "one of " + ", ".join(labels))
        slow.hosts_blamed += [e[1] for e in blame.elements if e[0] == "host" and len(blame.elements) == 1]
    return slow
