"""The data plane: loops that run in their own processes, one per stream, on both ends.

Each worker gets a pipe to report on, an *endpoint* (a listening/bound socket on the server
side, a ``(host, port)`` address on the client side), the test cookie and a config dict. It
sends at most one ``{"ready": True}`` (client side) and exactly one final report dict, which
carries ``"error"`` when the run could not complete. Standard library only, so that worker
processes start fast; every socket has a kernel timeout so that a dead peer ends the loop.

Worker processes exist because one Python process cannot both send and receive at the speed
of a C tool: the GIL serialises the per-call overhead of every stream. With one process per
stream the work is the kernel's copy, as in iperf3.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from fabricscope.bench.sockets.dataport import Mailbox
from fabricscope.bench.sockets.workers.base import Channel, Endpoint, WorkerError, os_reason
from fabricscope.bench.sockets.workers.rr import connect_client, rr_client, rr_responder, udp_echo
from fabricscope.bench.sockets.workers.stream import tcp_sink, tcp_source, udp_sink, udp_source


def main() -> None:
    """``python -m fabricscope.bench.sockets.workers``: first stdin line is the job as JSON.

    ``{"name": ..., "endpoint": {"fd": N} | {"host": h, "port": p}, "cookie": hex, "cfg": {...},
    "sync": bool}``. A passed socket arrives as an inherited file descriptor.
    """
    channel = Channel()
    try:
        job = json.loads(sys.stdin.readline())
        name = job["name"]
        func: Callable[..., dict[str, Any]] = _WORKERS[name]
        ep = job["endpoint"]
        endpoint: Endpoint = (
            socket.socket(fileno=int(ep["fd"])) if "fd" in ep else (str(ep["host"]), int(ep["port"]))
        )
        cookie = bytes.fromhex(job["cookie"])
        cfg = job["cfg"]
        if "mailbox" in ep:  # server side: connections handed between this listener's workers
            outbox, inbox = (socket.socket(fileno=int(fd)) for fd in ep["mailbox"])
            cfg["mailbox"] = Mailbox(outbox, inbox)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        channel.send({"error": f"bad worker job: {exc}"})
        return
    threading.Thread(target=channel.listen, args=(sys.stdin,), daemon=True).start()
    start = channel.start if job.get("sync") else None
    try:
        report = func(channel, endpoint, cookie, cfg, start, channel.stop)
    except WorkerError as exc:
        report = {"error": str(exc)}
    except OSError as exc:
        report = {"error": os_reason(exc, name)}
    except Exception as exc:  # report, never a silent death of a worker
        report = {
            "error": f"{name}: internal error {type(exc).__name__}: {exc}",
            "trace": traceback.format_exc(limit=5),
        }
    report.setdefault("worker", name)
    try:
        channel.send(report)
    except (OSError, ValueError):
        pass


_WORKERS: dict[str, Callable[..., dict[str, Any]]] = {
    "tcp_sink": tcp_sink,
    "tcp_source": tcp_source,
    "udp_sink": udp_sink,
    "udp_source": udp_source,
    "rr_responder": rr_responder,
    "udp_echo": udp_echo,
    "rr_client": rr_client,
    "connect_client": connect_client,
}

__all__ = [
    "Channel",
    "WorkerError",
    "connect_client",
    "main",
    "rr_client",
    "rr_responder",
    "tcp_sink",
    "tcp_source",
    "udp_echo",
    "udp_sink",
    "udp_source",
]
