"""The Slurm calls fabricscope makes, and nothing else: one thin layer over an injected runner.

Every call is an argv list run without a shell (the runner gets a deadline); node names are
checked against Slurm's node-name characters with a full match before they reach an argv. The
drain reason starts with ``fabricscope:`` so that a resume only touches nodes fabricscope drained,
as LBNL NHC does with ``NHC:`` (mej/nhc helpers/node-mark-online). Node state and reason come from
``scontrol show node``, whose ``Reason=`` runs to the end of its line; the default ``sinfo -R``
cuts reasons to 20 characters (tests/data/samples/sinfo_R_default.txt).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fabricscope.errors import FabricscopeError
from fabricscope.host import command

REASON_PREFIX = "fabricscope:"
MAX_REASON_CHARS = 120
DEFAULT_TIMEOUT_S = 30.0
# Slurm node names: letters, digits, '-', '_', '.'; no spaces, brackets (host lists) or '='.
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_STAMP = re.compile(r"\s*\[[^\]@]*@[^\]]*\]\s*$")

Runner = Callable[[list[str]], tuple[int, str, str]]  # argv -> (exit status, stdout, stderr)


def subprocess_runner(timeout_s: float = DEFAULT_TIMEOUT_S) -> Runner:
    """Run argv for real, no shell, with a deadline; a missing tool or a timeout is exit 127/124."""

    def run(argv: list[str]) -> tuple[int, str, str]:
        try:
            proc = command.run(argv, timeout_s)
        except FileNotFoundError:
            return 127, "", f"{argv[0]}: not installed"
        except OSError as exc:
            return 126, "", f"{argv[0]}: cannot run: {exc.strerror or exc}"
        if proc.timed_out:
            return 124, "", f"{argv[0]}: no answer within {timeout_s:g} s"
        if proc.rc is None:
            return 125, proc.stdout_text, f"{argv[0]}: {proc.why_stopped}"
        return proc.rc, proc.stdout_text, proc.stderr_text

    return run


def check_node_name(name: str) -> str:
    if not _NODE_NAME.fullmatch(name):
        raise FabricscopeError(
            f"node name {name[:80]!r} is not a Slurm node name (letters, digits, '.', '_', '-')"
        )
    return name


def drain_reason(finding_id: str, subject: str) -> str:
    """``fabricscope: <finding id> <subject>``, one line, capped."""
    text = " ".join(f"{REASON_PREFIX} {finding_id} {subject}".split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def drain_argv(node: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={check_node_name(node)}", "State=DRAIN", f"Reason={reason}"]


def resume_argv(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={check_node_name(node)}", "State=RESUME"]


SHOW_NODES_ARGV = ["scontrol", "show", "node"]


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # "IDLE+DRAIN", "MIXED+DRAIN", "DOWN", ...
    reason: str | None  # without the trailing [user@time]

    @property
    def drained(self) -> bool:
        flags = self.state.upper().split("+")
        return "DRAIN" in flags or "DRAINING" in flags or "DRAINED" in flags

    @property
    def drained_by_fabricscope(self) -> bool:
        return self.drained and (self.reason or "").startswith(REASON_PREFIX)


def parse_show_node(text: str) -> dict[str, SlurmNode]:
    """`scontrol show node` (multi-line blocks, one per node) -> node name -> state and reason."""
    nodes: dict[str, SlurmNode] = {}
    name = state = reason = None

    def flush() -> None:
        if name is not None:
            nodes[name] = SlurmNode(name, state or "UNKNOWN", reason)

    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("NodeName="):
            flush()
            name, state, reason = stripped.split()[0].removeprefix("NodeName="), None, None
        elif stripped.startswith("State=") and name is not None:
            state = stripped.split()[0].removeprefix("State=")
        elif stripped.startswith("Reason=") and name is not None:
            reason = _STAMP.sub("", stripped.removeprefix("Reason=")) or None
    flush()
    return nodes


@dataclass
class Slurm:
    """The scheduler calls of `fleet doctor --slurm-drain/--slurm-resume`."""

    runner: Runner

    def nodes(self) -> dict[str, SlurmNode]:
        rc, out, err = self.runner(list(SHOW_NODES_ARGV))
        if rc != 0:
            raise FabricscopeError(f"scontrol show node failed (exit {rc}): {(err or out).strip()[:200]}")
        return parse_show_node(out)

    def drain(self, node: str, reason: str) -> tuple[bool, str]:
        rc, out, err = self.runner(drain_argv(node, reason))
        return rc == 0, (err or out).strip()[:200]

    def resume(self, node: str) -> tuple[bool, str]:
        rc, out, err = self.runner(resume_argv(node))
        return rc == 0, (err or out).strip()[:200]
