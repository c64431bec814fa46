"""Where a discovery reads from: ``ibnetdiscover`` (run here, from a snapshot, or a saved
output), LLDP readings (gathered from a job, from snapshots, or from saved ``lldpctl`` outputs,
plus the switches' own tables), or a lab's plan. Every reading goes through the host model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fabricscope.host.ibnetdiscover import parse_ibnetdiscover, read_ibnetdiscover
from fabricscope.host.lldp import LldpNeighbor, parse_lldpctl
from fabricscope.host.netclass import read_net_devices
from fabricscope.host.root import Root, RootError
from fabricscope.topology.infiniband import from_ibnetdiscover
from fabricscope.topology.lldp import NodeLldp
from fabricscope.topology.model import Discovery, TopologyError

MAX_FILE_BYTES = 64 * 1024 * 1024  # an ibnetdiscover of a 100,000-port fabric is ~30 MB


def read_text(path: str) -> str:
    """A capture file ('-' for stdin), with one clear error when it cannot be read."""
    import sys

    if path == "-":
        return sys.stdin.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise TopologyError(f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB")
        data = p.read_bytes()
    except OSError as exc:
        raise TopologyError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TopologyError(f"{path} is not text (expected a saved command output)") from None


def ib_from_file(path: str) -> Discovery:
    fabric = parse_ibnetdiscover(read_text(path))
    if not fabric.nodes:
        raise TopologyError(f"{path}: no ibnetdiscover node found (expected its topology output)")
    return from_ibnetdiscover(fabric)


def ib_from_root(root: Root) -> Discovery:
    """Run ibnetdiscover through ``root`` (live, or its captured output in a snapshot)."""
    fabric = read_ibnetdiscover(root)
    if fabric is None:
        why = root.problems[-1].reason if root.problems else "no output"
        raise TopologyError(f"ibnetdiscover: {why} (infiniband-diags, on a node of the subnet, as root)")
    return from_ibnetdiscover(fabric)


def _named(item: str) -> tuple[str, str]:
    """``HOST=PATH`` or ``PATH`` (host = the file name without its extension)."""
    if "=" in item and not Path(item).exists():
        name, _, path = item.partition("=")
        return name.strip(), path.strip()
    return Path(item).stem, item


def lldp_from_files(items: Sequence[str]) -> list[NodeLldp]:
    """Saved ``lldpctl -f json|keyvalue`` outputs, one per host."""
    nodes = []
    for item in items:
        host, path = _named(item)
        neighbors = parse_lldpctl(read_text(path))
        if neighbors is None:
            raise TopologyError(f"{path}: not lldpctl output (-f json or -f keyvalue)")
        nodes.append(NodeLldp(host, tuple(neighbors)))
    return nodes


def lldp_from_snapshots(locations: Sequence[str]) -> list[NodeLldp]:
    """``fabricscope snapshot`` archives, one per host: their lldpctl capture and NIC speeds."""
    from fabricscope.host.lldp import read_lldp

    nodes = []
    for loc in locations:
        try:
            root = Root.at(loc)
        except RootError as exc:
            raise TopologyError(str(exc)) from None
        host = (root.read("proc/sys/kernel/hostname") or Path(loc).name.split(".")[0]).strip()
        neighbors = read_lldp(root)
        if neighbors is None:
            raise TopologyError(
                f"{loc}: the snapshot holds no lldpctl output (was lldpd running when it was taken?)"
            )
        wanted = {n.interface for n in neighbors}
        speeds = {
            d.name: d.speed_mbps * 1e6 for d in read_net_devices(root) if d.name in wanted and d.speed_mbps
        }
        nodes.append(NodeLldp(host, neighbors, speeds))
    return nodes


def switch_tables(items: Sequence[str]) -> dict[str, tuple[LldpNeighbor, ...]]:
    """``SWITCH=FILE`` (a switch's ``lldpctl -f json`` or keyvalue) or ``lab:NAME`` (every switch
    of a lab started with ``--lldp``)."""
    tables: dict[str, tuple[LldpNeighbor, ...]] = {}
    for item in items:
        if item.startswith("lab:"):
            for switch, text in lab_switch_outputs(item[4:]).items():
                tables[switch] = tuple(parse_lldpctl(text) or ())
            continue
        switch, path = _named(item)
        neighbors = parse_lldpctl(read_text(path))
        if neighbors is None:
            raise TopologyError(f"{path}: not lldpctl output (-f json or -f keyvalue)")
        tables[switch] = tuple(neighbors)
    return tables


def lab_switch_outputs(name: str) -> dict[str, str]:
    from fabricscope.lab import lldp
    from fabricscope.lab.fabric import Labs

    state = Labs().load(name)
    return lldp.switch_tables(state.plan, Labs().runner)


def lab_discovery(name: str) -> Discovery:
    from fabricscope.lab.fabric import Labs
    from fabricscope.topology.lab import from_lab

    return from_lab(Labs().load(name))
