"""Where ``bench matrix --topology`` gets its fabric: a topology file, a lab's plan, or
``discover``: every rank reads its own LLDP neighbours (as ``topology discover lldp`` does) and
rank 0 builds the fabric from them, with the switches' own tables where given (a lab's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fabricscope.bench.matrix.localize import Fabric, load_document, place
from fabricscope.errors import FabricscopeError, one_line


def lldp_reading(host: str, socket_template: str | None) -> dict[str, Any]:
    """This rank's LLDP neighbours on the wire, or why there are none."""
    from fabricscope.host import Root
    from fabricscope.topology.gather import local_reading, to_wire

    try:
        return to_wire(
            local_reading(
                Root.live(), host, socket_template.replace("{host}", host) if socket_template else None
            )
        )
    except FabricscopeError as exc:
        return {"error": one_line(exc)}


def _discovered(readings: Sequence[dict[str, Any]], switch_lldp: Sequence[str]) -> tuple[dict[str, Any], str]:
    from fabricscope.topology import sources
    from fabricscope.topology.gather import from_wire
    from fabricscope.topology.lldp import from_lldp
    from fabricscope.topology.model import TopologyError, build_document

    errors = [r["error"] for r in readings if "error" in r]
    if errors:
        raise TopologyError(
            f"discovery: {errors[0]}" + (f" (and {len(errors) - 1} more host(s))" if len(errors) > 1 else "")
        )
    disc = from_lldp([from_wire(r) for r in readings], sources.switch_tables(switch_lldp), name="discovered")
    return build_document(disc), "discover (LLDP" + (f" + {', '.join(switch_lldp)})" if switch_lldp else ")")


def load(
    spec: str, hosts: Sequence[str], readings: Sequence[dict[str, Any]], switch_lldp: Sequence[str]
) -> Fabric:
    """The fabric of ``spec`` with the matrix's hosts placed on it (rank 0)."""
    document, source = _discovered(readings, switch_lldp) if spec == "discover" else load_document(spec)
    return place(hosts, document, source)
