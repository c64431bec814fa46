"""A lab's own plan as a discovered fabric: the cabling ``lab up`` built, at the rates it shapes."""

from __future__ import annotations

from fabricscope.lab.fabric import LabState
from fabricscope.topology.model import Attachment, Cable, Discovery

VETH_BPS = 10e9  # what /sys/class/net/<veth>/speed says; an unshaped lab link has no other rate


def from_lab(state: LabState) -> Discovery:
    """Every host port on its bridge, every leaf-to-spine veth pair, at its current shaping."""
    plan = state.plan
    name = state.spec.name
    disc = Discovery(source=f"lab:{name}", name=f"lab-{name}", attachments=[])
    unshaped = False
    for host in plan.hosts:
        rate = state.link(host.name).rate_bps
        unshaped |= rate is None
        disc.attachments += [
            Attachment(host.name, p.dev, p.switch, p.port, rate or VETH_BPS) for p in host.ports
        ]
    for up in plan.uplinks:
        rate = state.link(up.leaf).rate_bps
        unshaped |= rate is None
        disc.cables.append(Cable(up.leaf, up.spine, up.leaf_port, up.spine_port, rate or VETH_BPS))
    if unshaped:
        disc.warnings.append(
            "unshaped lab links are written at 10G, the speed veth reports; they run as fast as the CPU copies"
        )
    return disc
