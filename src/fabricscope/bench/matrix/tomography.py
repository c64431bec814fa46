"""Network tomography: the fewest links, switches or hosts that explain a matrix's slow flows.

Each measured flow is good or bad (slow or lossy, by the matrix's own cut-offs) and crosses a set
of elements (:mod:`fabricscope.topology.paths`): those it *must* cross (on every ECMP path) and
those it *may* cross (on some path). The rules, chosen so that nothing innocent is blamed for
a hash the matrix cannot see:

* a good flow clears only what it must cross: it proves every one of those elements can carry
  a flow at full rate;
* a bad flow may be blamed on anything it may cross and that no good flow cleared;
* the explanation is a minimum hitting set of the bad flows over those candidates, found
  exactly (every smallest set, up to :data:`EXACT_MAX` elements) where the candidates are few,
  else greedily (the element explaining most unexplained flows first), which the result says;
* elements that explain exactly the same flows are one group: the matrix cannot tell them
  apart (the two uplinks of a two-leaf fabric with one spine carry the same flows), and the
  result names the group as "one of", never picks one;
* a bad flow that crosses only cleared elements is *unexplained* (an intermittent fault, or
  contention), and is reported as such, not pinned on anything.

A host's own element covers all of its flows, so a slow host explains all of its pairs first,
and an uplink whose hosts are fine with each other is blamed instead of those hosts.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from fabricscope.topology.paths import Element

EXACT_MAX = 3  # exact search for explanations of up to this many elements
EXACT_BUDGET = 200_000  # combinations tried at one size before falling back to greedy


@dataclass(frozen=True)
class Observation:
    """One measured flow (sender, receiver indexes) and what it crosses."""

    flow: tuple[int, int]
    bad: bool
    must: frozenset[Element]
    may: frozenset[Element]


@dataclass(frozen=True)
class Blame:
    """A group of elements that explain the same bad flows; one of them (``needed``) is bad."""

    elements: tuple[Element, ...]
    flows: tuple[tuple[int, int], ...]  # the bad flows this group explains
    through: int  # measured flows that must cross the (first) element
    slow: int  # of those, bad
    may_slow: int  # bad flows that may cross it (another ECMP path) without having to
    needed: int = 1  # how many of ``elements`` the smallest explanations need

    @property
    def ambiguous(self) -> bool:
        return len(self.elements) > 1


@dataclass
class Localization:
    blamed: list[Blame] = field(default_factory=list)
    unexplained: list[tuple[int, int]] = field(default_factory=list)
    exact: bool = True  # False: the greedy fallback chose (small, not proven smallest)
    alternatives: int = 1  # how many smallest explanations there were (exact search only)
    cleared: frozenset[Element] = frozenset()


def _classes(candidates: dict[Element, frozenset[int]]) -> list[tuple[tuple[Element, ...], frozenset[int]]]:
    """Elements grouped by the bad flows they explain; groups strictly inside another dropped
    (swapping one for the larger never makes an explanation bigger)."""
    by_cover: dict[frozenset[int], list[Element]] = {}
    for e, cover in sorted(candidates.items()):
        by_cover.setdefault(cover, []).append(e)
    covers = list(by_cover)
    kept = [c for c in covers if not any(c < other for other in covers)]
    return [(tuple(by_cover[c]), c) for c in sorted(kept, key=lambda c: (-len(c), sorted(c)))]


def _exact(
    classes: list[tuple[tuple[Element, ...], frozenset[int]]], need: frozenset[int]
) -> list[tuple[int, ...]] | None:
    """Every smallest set of classes covering ``need`` (indexes), or None past the budget."""
    for k in range(1, EXACT_MAX + 1):
        if math.comb(len(classes), k) > EXACT_BUDGET:
            return None
        found = [
            combo
            for combo in itertools.combinations(range(len(classes)), k)
            if frozenset().union(*(classes[i][1] for i in combo)) >= need
        ]
        if found:
            return found
    return None


def _greedy(
    classes: list[tuple[tuple[Element, ...], frozenset[int]]], need: frozenset[int]
) -> tuple[int, ...]:
    left, chosen = set(need), []
    while left:
        best = max(range(len(classes)), key=lambda i: (len(classes[i][1] & left), -i))
        chosen.append(best)
        left -= classes[best][1]
    return tuple(chosen)


def localize(observations: Sequence[Observation]) -> Localization:
    """The smallest explanation of the bad flows (see the module docstring)."""
    bad = [o for o in observations if o.bad]
    cleared = frozenset().union(*(o.must for o in observations if not o.bad))
    if not bad:
        return Localization(cleared=cleared)
    candidates: dict[Element, set[int]] = {}
    unexplained = []
    for i, o in enumerate(bad):
        open_ = o.may - cleared
        if not open_:
            unexplained.append(o.flow)
        for e in open_:
            candidates.setdefault(e, set()).add(i)
    need = frozenset(i for i, o in enumerate(bad) if o.may - cleared)
    if not need:
        return Localization(unexplained=unexplained, cleared=cleared)
    classes = _classes({e: frozenset(c) for e, c in candidates.items()})
    covers = _exact(classes, need)
    exact = covers is not None
    chosen = covers if covers is not None else [_greedy(classes, need)]
    # a class in every smallest explanation is named; the others are merged into one "one of" group
    certain = set(chosen[0]).intersection(*chosen[1:]) if len(chosen) > 1 else set(chosen[0])
    groups = [(classes[i][0], 1) for i in sorted(certain)]
    rest = sorted({i for combo in chosen for i in combo} - certain)
    if rest:
        groups.append((tuple(e for i in rest for e in classes[i][0]), len(chosen[0]) - len(certain)))
    blamed = [_blame(g, n, observations, bad, classes) for g, n in groups]
    return Localization(blamed, unexplained, exact, len(chosen), cleared)


def _blame(
    group: tuple[Element, ...],
    needed: int,
    observations: Sequence[Observation],
    bad: Sequence[Observation],
    classes: list[tuple[tuple[Element, ...], frozenset[int]]],
) -> Blame:
    first = group[0]
    explained = sorted({bad[i].flow for els, cover in classes if set(els) & set(group) for i in cover})
    through = [o for o in observations if first in o.must]
    may_slow = sum(1 for o in bad if first in o.may and first not in o.must)
    return Blame(group, tuple(explained), len(through), sum(1 for o in through if o.bad), may_slow, needed)
