"""The RDMA half of ``bench matrix``: perftest between every pair, planned like ``bench rdma``.

Each host decides once whether it can take part (:func:`readiness`): an RDMA device in its
inventory, the perftest tool on PATH, and an active port with a usable GID, chosen by
:func:`fabricscope.bench.rdma.run.choose_port` (the port whose netdev holds the host's matrix
address, else the first active port; on RoCE the lowest-index RoCE v2 GID with an IPv4
address). Every host applies the same rule to its own inventory, so both ends of a flow agree
on the GID type without exchanging indexes. The matrix runs RDMA only when every host is
ready; otherwise the result says which hosts lack what (a skip, not an error).

A flow is one perftest server (the receiver, :func:`serve_flow`) and one client (the sender,
:func:`send_flow`). perftest's client gives up at once when nobody listens yet, so the
sender retries a refused handshake for ``connect_window_s``; the receiver stops its server
once the sender has reported, so a failed client never leaves a server waiting. Every
process has a deadline; argv lists only, never a shell.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabricscope.bench.counters import netdev_for_address
from fabricscope.bench.rdma.perftest import PerftestParseError, failure_reason, metrics_from, parse_text
from fabricscope.bench.rdma.run import (
    STOP_GRACE_S,
    CommandOutcome,
    PortChoice,
    RdmaParams,
    RdmaPlanError,
    Runner,
    build_argv,
    choose_port,
    from_outcome,
    subprocess_runner,
)
from fabricscope.host import Root, command, read_inventory

CONNECT_WINDOW_S = 20.0  # how long a sender retries a refused perftest handshake
SERVER_GRACE_S = 5.0  # after the sender reported, how long the server may take to exit
FLOW_MARGIN_S = 30.0  # beyond the perftest duration, for setup and teardown
_REFUSED = ("couldn't connect", "unable to init the socket connection", "connection refused")


@dataclass(frozen=True)
class Readiness:
    """Whether this host can run the RDMA matrix, and with which device/port/GID."""

    ok: bool
    reason: str | None = None
    tool_path: str | None = None
    choice: PortChoice | None = None

    def public(self) -> dict[str, Any]:
        """What the other hosts (and the result) learn: no local paths."""
        endpoint = None
        if self.choice is not None:
            c = self.choice
            endpoint = {
                "device": c.device,
                "port": c.port,
                "gid_index": c.gid_index,
                "gid_ip": c.gid_ip,
                "link_layer": c.link_layer,
                "netdev": c.netdev,
                "rate_gbps": c.rate_gbps,
            }
        return {"ok": self.ok, "reason": self.reason, "endpoint": endpoint}


def readiness(
    test: str,
    *,
    root: Root,
    address: str | None,
    device: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> Readiness:
    """Can this host run ``ib_<test>`` (device, perftest, an active port with a usable GID)?"""
    tool = f"ib_{test}"
    try:
        inv = read_inventory(root)
    except Exception as exc:  # an unreadable root must not end the TCP matrix
        return Readiness(False, f"cannot read the RDMA inventory: {' '.join(str(exc).split())[:200]}")
    if not inv.rdma_devices:
        return Readiness(False, "no RDMA device (/sys/class/infiniband is empty)")
    path = which(tool)
    if path is None:
        return Readiness(
            False, f"perftest is not installed ({tool} not found on PATH; Debian/Ubuntu package perftest)"
        )
    try:
        choice = choose_port(inv, device=device, route_netdev=netdev_for_address(root, address))
    except RdmaPlanError as exc:
        return Readiness(False, str(exc))
    return Readiness(True, None, path, choice)


def skip_reason(hosts: list[str], public: list[dict[str, Any]]) -> str | None:
    """None when every host is ready; else one line naming the hosts per missing piece."""
    by_reason: dict[str, list[str]] = {}
    for host, info in zip(hosts, public):
        if not info.get("ok"):
            by_reason.setdefault(str(info.get("reason") or "not ready"), []).append(host)
    if not by_reason:
        return None
    parts = [f"{reason} on {', '.join(names)}" for reason, names in by_reason.items()]
    return "; ".join(parts)


def flow_seconds(duration_s: float) -> int:
    """perftest's -D takes whole seconds (at least 1)."""
    return max(1, round(duration_s))


def server_argv(ready: Readiness, test: str, duration_s: int, port: int) -> list[str]:
    assert ready.choice is not None and ready.tool_path is not None
    params = RdmaParams(test=test, duration_s=duration_s, perftest_port=port)  # type: ignore[arg-type]
    return build_argv(params, ready.choice, ready.tool_path)


def client_argv(ready: Readiness, test: str, duration_s: int, port: int, server: str) -> list[str]:
    assert ready.choice is not None and ready.tool_path is not None
    params = RdmaParams(test=test, duration_s=duration_s, perftest_port=port, peer=server)  # type: ignore[arg-type]
    return build_argv(params, ready.choice, ready.tool_path)


class BackgroundCommand:
    """A perftest server running while this process coordinates; stopped on any deadline."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.error: str | None = None
        try:
            self.proc: command.Process | None = command.Process(argv)
        except OSError as exc:
            self.proc = None
            self.error = f"{argv[0]}: {exc.strerror or exc}"

    def running(self) -> bool:
        return self.proc is not None and not self.proc.exited()

    def finish(self, timeout_s: float) -> CommandOutcome:
        """Wait up to ``timeout_s`` for it to exit; stop it (and its process group) after that."""
        if self.proc is None:
            return CommandOutcome(rc=127, stdout="", stderr=self.error or "could not start")
        deadline = time.monotonic() + max(0.01, timeout_s)
        return from_outcome(self.proc.collect(deadline, grace_s=STOP_GRACE_S))


def outcome_to_flow(outcome: CommandOutcome, tool: str, budget_s: float) -> dict[str, Any]:
    """A client run as the matrix records it: ``{"gbps": ...}`` or ``{"error": ...}``."""
    text = outcome.stdout + ("\n" + outcome.stderr if outcome.stderr else "")
    if outcome.timed_out:
        return {"error": f"{tool} did not finish within {budget_s:g} s; stopped it"}
    if outcome.rc != 0:
        return {"error": f"{tool} exited with status {outcome.rc}: {failure_reason(text)}"}
    try:
        parsed = parse_text(outcome.stdout)
    except PerftestParseError as exc:
        return {"error": f"{tool} output not understood: {exc}"}
    metrics = metrics_from(parsed)
    if not parsed.rows or metrics.get("throughput_gbps") is None:
        return {"error": f"{tool} printed no bandwidth row: {failure_reason(text)}"}
    flow: dict[str, Any] = {"gbps": float(metrics["throughput_gbps"])}
    if parsed.gid_index is not None:
        flow["gid_index"] = parsed.gid_index
    return flow


def send_flow(
    argv: list[str],
    duration_s: int,
    *,
    runner: Runner = subprocess_runner,
    connect_window_s: float = CONNECT_WINDOW_S,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Run the perftest client, retrying while the server is not listening yet."""
    tool = argv[0].rsplit("/", 1)[-1]
    budget = duration_s + FLOW_MARGIN_S
    end = time.monotonic() + connect_window_s
    attempts = 0
    while True:
        attempts += 1
        outcome = runner(argv, budget)
        text = (outcome.stdout + "\n" + outcome.stderr).lower()
        refused = outcome.rc not in (0, None) and any(marker in text for marker in _REFUSED)
        if refused and time.monotonic() < end:
            sleep(0.2)
            continue
        flow = outcome_to_flow(outcome, tool, budget)
        if refused and "error" in flow:
            flow["error"] += (
                f" (no perftest server answered within {connect_window_s:g} s, {attempts} attempts)"
            )
        return flow


def serve_flow(
    argv: list[str],
    duration_s: int,
    *,
    started: Callable[[], None],
    sender_done: Callable[[], bool],
    connect_window_s: float = CONNECT_WINDOW_S,
    grace_s: float = SERVER_GRACE_S,
    poll_s: float = 0.05,
) -> dict[str, Any]:
    """Run the perftest server for one flow; ``{}`` when it served, else ``{"error": ...}``.

    ``started`` announces the server (the sender then connects); ``sender_done`` says the
    sender has reported. The server is stopped ``grace_s`` after that, or at its deadline.
    """
    tool = argv[0].rsplit("/", 1)[-1]
    budget = connect_window_s + duration_s + FLOW_MARGIN_S
    server = BackgroundCommand(argv)
    started()
    if server.proc is None:
        return {"error": f"{tool} server could not start: {server.error}"}
    end = time.monotonic() + budget
    done_at: float | None = None
    while server.running():
        now = time.monotonic()
        if now > end:
            server.finish(0)
            return {"error": f"{tool} server did not finish within {budget:g} s; stopped it"}
        if done_at is None and sender_done():
            done_at = now
        if done_at is not None and now - done_at > grace_s:
            server.finish(0)
            return {}  # the sender's report says what happened (its error, or its figure)
        time.sleep(poll_s)
    outcome = server.finish(5.0)
    if outcome.rc != 0:
        text = outcome.stdout + ("\n" + outcome.stderr if outcome.stderr else "")
        return {"error": f"{tool} server exited with status {outcome.rc}: {failure_reason(text)}"}
    return {}


def endpoint_dict(host: str, public: dict[str, Any]) -> dict[str, Any] | None:
    endpoint = public.get("endpoint")
    return {"host": host, **endpoint} if isinstance(endpoint, dict) else None


__all__ = [
    "BackgroundCommand",
    "Readiness",
    "client_argv",
    "endpoint_dict",
    "flow_seconds",
    "outcome_to_flow",
    "readiness",
    "send_flow",
    "serve_flow",
    "server_argv",
    "skip_reason",
]
