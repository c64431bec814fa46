"""Follow NCCL logs as they are written and count what matters.

Following (rotation, caps per file and per poll, overlong lines) is :mod:`.follow`'s, shared
with the NCCL Inspector follower. Each line goes through :func:`fabricscope.nccl.log.parse.parse_line`,
the NCCL helper's per-line event API.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fabricscope.monitor.follow import MAX_FILES, FileFollower, FollowStats


@dataclass(frozen=True)
class NcclCounts(FollowStats):
    """The follower's counts and what the tailer read from the lines."""

    warnings: dict[str, int] = field(default_factory=dict)  # WARN kind -> count
    socket_fallbacks: int = 0
    completion_errors: dict[int | None, int] = field(default_factory=dict)  # ibv_wc_status -> count


MAX_PLACEMENTS = 4096  # processes whose GPU the logs named, the least recently seen forgotten first
_BUS_ID = re.compile(r"\bbusId ([0-9a-fA-F]{1,16})\b")


@dataclass(frozen=True)
class Placement:
    """The GPU an NCCL process runs on, as its own log says: the ``[N]`` of every line is its
    cudaDev (an index among the GPUs CUDA_VISIBLE_DEVICES leaves it), and the init lines
    (``ncclCommInitRank comm 0x... rank R nranks N cudaDev N nvmlDev N busId 901000 ...``) name the
    GPU's PCI address, which the inventory maps to its GPU and nearest NIC whatever the renumbering."""

    cuda_dev: int | None
    pci_address: str | None  # "0009:01:00.0"


def bus_id_address(bus_id: str) -> str | None:
    """NCCL's ``busId`` (its busIdToInt64: the hex digits of "0009:01:00.0" run together, printed
    with %lx) as a PCI address: 901000 -> 0009:01:00.0, 60 -> 0000:00:06.0."""
    try:
        value = int(bus_id, 16)
    except ValueError:
        return None
    return f"{value >> 20:04x}:{(value >> 12) & 0xFF:02x}:{(value >> 4) & 0xFF:02x}.{value & 0xF:x}"


def _default_parser() -> Callable[[str], Any]:
    from fabricscope.nccl.log.parse import parse_line

    return parse_line


class NcclLogTailer:
    def __init__(
        self,
        patterns: Iterable[str],
        *,
        from_start: bool = False,
        parse: Callable[[str], Any] | None = None,
        max_files: int = MAX_FILES,
        **caps: int,
    ) -> None:
        self._parse = parse or _default_parser()
        self.follower = FileFollower(patterns, self._feed, from_start=from_start, max_files=max_files, **caps)
        self._lock = threading.Lock()  # guards the counters below (scrapes read them)
        self._warnings: Counter[str] = Counter()
        self._completions: Counter[int | None] = Counter()
        self._fallbacks = 0
        self._placements: OrderedDict[tuple[str, int], Placement] = OrderedDict()

    def poll(self) -> NcclCounts:
        """Look for new files and new lines once; returns the counts after this poll."""
        self.follower.poll()
        return self.snapshot()

    def close(self) -> None:
        self.follower.close()

    def _feed(self, _path: str, lines: list[bytes]) -> None:
        warnings: Counter[str] = Counter()
        completions: Counter[int | None] = Counter()
        fallbacks = 0
        placements: dict[tuple[str, int], Placement] = {}
        for raw in lines:
            event = self._parse(raw.decode("utf-8", errors="replace"))
            if event is None:
                continue
            kind = getattr(event, "kind", None)
            data = getattr(event, "data", None) or {}
            if kind == "comm":
                _place(event, placements)
            if getattr(event, "level", None) == "WARN":
                warnings[str(kind)] += 1
            if kind == "completion_error":
                status = data.get("status")
                completions[status if isinstance(status, int) else None] += 1
            elif kind == "network" and str(data.get("name", "")).lower() == "socket":
                fallbacks += 1
        with self._lock:
            self._warnings.update(warnings)
            self._completions.update(completions)
            self._fallbacks += fallbacks
            for key, placement in placements.items():
                known = self._placements.pop(key, None)
                if known is not None:  # a line without busId keeps what an init line said
                    placement = Placement(
                        placement.cuda_dev if placement.cuda_dev is not None else known.cuda_dev,
                        placement.pci_address or known.pci_address,
                    )
                self._placements[key] = placement
            while len(self._placements) > MAX_PLACEMENTS:
                self._placements.popitem(last=False)

    def placement(self, host: str, pid: int | None) -> Placement | None:
        """Where the process ``pid`` on ``host`` runs, if its NCCL log said (hosts compared by
        their first label: NCCL logs the short name)."""
        if pid is None:
            return None
        with self._lock:
            return self._placements.get((host.split(".")[0], pid))

    def snapshot(self) -> NcclCounts:
        stats = self.follower.stats()
        with self._lock:
            return NcclCounts(
                **stats.as_fields(),
                warnings=dict(self._warnings),
                socket_fallbacks=self._fallbacks,
                completion_errors=dict(self._completions),
            )


def _place(event: Any, placements: dict[tuple[str, int], Placement]) -> None:
    """A communicator line of the NCCL log: the process's cudaDev, and busId where the line has it."""
    host, pid = getattr(event, "host", None), getattr(event, "pid", None)
    if not host or pid is None:
        return
    key = (str(host).split(".")[0], int(pid))
    match = _BUS_ID.search(str(getattr(event, "message", "")))
    address = bus_id_address(match.group(1)) if match else None
    known = placements.get(key)
    cuda_dev = getattr(event, "cuda_dev", None)
    placements[key] = Placement(
        cuda_dev if cuda_dev is not None else (known.cuda_dev if known else None),
        address or (known.pci_address if known else None),
    )
