"""Every command the lab runs goes through here: argv lists, a deadline, never a shell."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

from fabricscope.host import command
from fabricscope.lab.spec import LabError

DEFAULT_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Attached:
    """How a command run on the user's terminal ended: exit status (128 + N for signal N)."""

    rc: int
    timed_out: bool


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str


class CommandError(LabError):
    """A command the lab needed failed; the message carries the command and its first error line."""

    def __init__(self, argv: Sequence[str], rc: int, stderr: str) -> None:
        first = next((line.strip() for line in stderr.splitlines() if line.strip()), f"exit status {rc}")
        super().__init__(f"`{' '.join(argv)}` failed: {first}")
        self.argv = tuple(argv)
        self.rc = rc
        self.stderr = stderr


class Runner:
    """Runs argv lists with a timeout. Tests substitute :class:`RecordingRunner`."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input_text: str | None = None,
        timeout_s: float | None = None,
    ) -> Completed:
        argv = [str(a) for a in argv]
        limit = timeout_s or self.timeout_s
        try:
            proc = command.run(argv, limit, input_bytes=input_text.encode() if input_text else None)
        except FileNotFoundError:
            raise LabError(f"{argv[0]}: command not found (install {package_for(argv[0])})") from None
        except OSError as exc:
            raise LabError(f"{argv[0]}: cannot run: {exc.strerror or exc}") from None
        if proc.rc is None:
            why = f"did not finish within {limit:g} s" if proc.timed_out else str(proc.why_stopped)
            raise LabError(f"`{' '.join(argv)}` {why}")
        done = Completed(tuple(argv), proc.rc, proc.stdout_text, proc.stderr_text)
        if check and proc.rc != 0:
            raise CommandError(argv, proc.rc, done.stderr or done.stdout)
        return done

    def run_attached(self, argv: Sequence[str], timeout_s: float | None) -> Attached:
        """Run with the terminal's stdin/stdout/stderr, in its own session: at the deadline (or on
        Ctrl-C/SIGTERM here) it ends with all its children. ``timeout_s`` None waits forever."""
        argv = [str(a) for a in argv]
        try:
            proc = command.Process(argv, stdin=None, stdout=None, stderr=None)
        except OSError as exc:
            raise LabError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        try:
            finished = proc.wait_exit(timeout_s)
        finally:
            rc = proc.stop(grace_s=3.0)
        return Attached(rc if rc >= 0 else 128 - rc, timed_out=not finished)

    def which(self, tool: str) -> str | None:
        return shutil.which(tool)


@dataclass
class RecordingRunner(Runner):
    """Records commands instead of running them; ``responses`` maps an argv prefix to stdout."""

    calls: list[tuple[str, ...]] = field(default_factory=list)
    inputs: list[str | None] = field(default_factory=list)
    responses: dict[tuple[str, ...], str] = field(default_factory=dict)
    failures: dict[tuple[str, ...], str] = field(default_factory=dict)
    tools: tuple[str, ...] = ("ip", "tc", "nft")
    timeout_s: float = DEFAULT_TIMEOUT_S

    def run(self, argv, *, check=True, input_text=None, timeout_s=None):  # type: ignore[override]
        call = tuple(str(a) for a in argv)
        self.calls.append(call)
        self.inputs.append(input_text)
        for prefix, message in self.failures.items():
            if call[: len(prefix)] == prefix:
                if check:
                    raise CommandError(call, 1, message)
                return Completed(call, 1, "", message)
        out = ""
        for prefix, text in self.responses.items():
            if call[: len(prefix)] == prefix:
                out = text
        return Completed(call, 0, out, "")

    def run_attached(self, argv: Sequence[str], timeout_s: float | None) -> Attached:
        self.calls.append(tuple(str(a) for a in argv))
        self.inputs.append(None)
        return Attached(0, timed_out=False)

    def which(self, tool: str) -> str | None:
        return f"/usr/sbin/{tool}" if tool in self.tools else None


_PACKAGES = {"ip": "iproute2", "tc": "iproute2", "bridge": "iproute2", "nft": "nftables"}


def package_for(tool: str) -> str:
    """The Debian package that provides ``tool`` (for error messages)."""
    return _PACKAGES.get(tool, tool)
