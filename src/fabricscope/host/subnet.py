"""The InfiniBand subnet manager as a node sees it: ``sminfo`` (infiniband-diags) queries the SM
named in the local port's PortInfo, and sysfs ``ports/N/sm_lid`` is that SM's LID.

``sminfo`` prints one line (rdma-core infiniband-diags/sminfo.c):
``sminfo: sm lid 2 sm guid 0x2c90200259201, activity count 6881 priority 0 state 3 SMINFO_MASTER``
(tests/data/samples/sminfo_master.txt); when no SM answers it exits non-zero (IBEXIT("query")).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabricscope.host.root import Root

SMINFO = ("sminfo",)
_LINE = re.compile(
    r"sminfo: sm lid (\d+) sm guid (0x[0-9a-fA-F]+), activity count (\d+) priority (\d+) state (\d+) (\S+)"
)


@dataclass(frozen=True)
class SmInfo:
    lid: int
    guid: str
    activity: int
    priority: int
    state: int  # 0 not active, 1 discovering, 2 standby, 3 master (sminfo(8))
    state_name: str


@dataclass(frozen=True)
class SmQuery:
    """What ``sminfo`` said: ``info`` when an SM answered, else ``problem`` (why not);
    ``available`` False when the tool is not there (not installed, not captured)."""

    available: bool
    info: SmInfo | None = None
    problem: str | None = None


def parse_sminfo(text: str) -> SmInfo | None:
    m = _LINE.search(text)
    if m is None:
        return None
    lid, guid, act, prio, state, name = m.groups()
    return SmInfo(int(lid), guid.lower(), int(act), int(prio), int(state), name)


def read_sminfo(root: Root) -> SmQuery:
    result = root.run(list(SMINFO))
    if not result.available:
        return SmQuery(False, problem=result.reason)
    if result.rc is None:
        return SmQuery(True, problem=result.reason)
    info = parse_sminfo(result.stdout) if result.rc == 0 else None
    if info is None:
        why = f"exit status {result.rc}" if result.rc else "no 'sminfo: sm lid' line in the output"
        first = result.stdout.strip().splitlines()[-1][:120] if result.stdout.strip() else ""
        return SmQuery(True, problem=f"{why}{': ' + first if first else ''}")
    return SmQuery(True, info=info)
