"""What each kind served by ``bench serve`` asks of the server: its request, its caps, its data plane.

One model per served kind, named by its :class:`fabricscope.bench.results.kinds.Kind` record
(``spec=``). The control protocol accepts exactly the kinds that have one, the server runs any of
them through the same three hooks, so the server itself names no kind (issue 21):

* the model's fields and their bounds are what a client may send (unknown fields rejected),
* :meth:`Spec.over_limits` is the kind's share of the server's own caps (:class:`ServerLimits`),
* :meth:`Spec.open` opens the kind's data sockets and starts its server workers,
  :attr:`Spec.waits_for_done` and :attr:`Spec.drain_s` say how the run ends,
* :meth:`Spec.missing_ports` is what the client checks in the server's answer.

The bounds are shared with each kind's parameter model (``TcpParams`` ...), so a run the client
accepts is not refused by the server (``tests/bench/test_kinds.py`` compares them).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricscope.bench.sockets.wire import MAX_RR_BYTES, MAX_UDP_PAYLOAD, RR_HEADER_BYTES, UDP_HEADER_BYTES

if TYPE_CHECKING:
    from fabricscope.bench.sockets.protocol import RendezvousPorts, ServerLimits

MAX_MSG_BYTES = 16 * 1024 * 1024
MAX_STREAMS = 128
MAX_DURATION_S = 3600.0
MAX_WINDOW_BYTES = 1024 * 1024 * 1024
MAX_RATE_BPS = 1e12
MAX_CONCURRENCY = 64

MailboxSockets = tuple[socket.socket, socket.socket]


class DataPlane(Protocol):
    """What the server lends a spec for one test (:class:`fabricscope.bench.sockets.server.BenchServer`)."""

    cfg: dict[str, Any]  # the workers' configuration; a spec adds its own keys

    def tcp_listener(self, backlog: int) -> tuple[socket.socket, MailboxSockets]: ...

    def udp_socket(self) -> socket.socket: ...

    def spawn(self, worker: str, sock: socket.socket, mailbox: MailboxSockets | None = None) -> None: ...


class Spec(BaseModel):
    """A served kind's test request (subclasses set ``kind`` to their name as a Literal)."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)

    kind: str
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)

    waits_for_done: ClassVar[bool] = True  # the client's "done" ends the run (else the workers end it)
    drain_s: ClassVar[float] = 0.0  # after "done", before the workers stop (datagrams in flight)

    @property
    def workers(self) -> int:
        """Worker processes the server starts (held to ``ServerLimits.max_streams``)."""
        return 1

    def over_limits(self, limits: ServerLimits) -> str | None:
        """Why this request exceeds a cap of the kind's own (None: within), besides duration and workers."""
        return None

    def open(self, plane: DataPlane) -> dict[str, Any]:
        """Open the data sockets, start the server's workers; the ports the client connects to."""
        raise NotImplementedError

    def missing_ports(self, ports: RendezvousPorts) -> list[str]:
        """The keys of the server's ``ports`` answer this request needs but did not get."""
        return [] if ports.rr is not None else ["rr"]


class TcpSpec(Spec):
    """Bulk TCP streams. ``direction`` is seen from the client: send = client to server."""

    kind: Literal["tcp"]
    streams: int = Field(default=1, ge=1, le=MAX_STREAMS)
    msg_bytes: int = Field(default=128 * 1024, ge=1, le=MAX_MSG_BYTES)
    direction: Literal["send", "recv", "bidir"] = "send"
    window_bytes: int | None = Field(default=None, ge=4096, le=MAX_WINDOW_BYTES)
    interval_s: float = Field(default=1.0, ge=0.05, le=60.0)

    waits_for_done: ClassVar[bool] = False  # each worker ends after duration_s
    _PLANE: ClassVar[tuple[tuple[tuple[str, ...], str, str], ...]] = (
        (("send", "bidir"), "to_server", "tcp_sink"),
        (("recv", "bidir"), "from_server", "tcp_source"),
    )

    @property
    def workers(self) -> int:
        return self.streams * (2 if self.direction == "bidir" else 1)

    def over_limits(self, limits: ServerLimits) -> str | None:
        if self.msg_bytes > limits.max_msg_bytes:
            return f"message size {self.msg_bytes} exceeds the server's limit of {limits.max_msg_bytes}"
        return None

    def open(self, plane: DataPlane) -> dict[str, Any]:
        plane.cfg.update(msg_bytes=self.msg_bytes, interval_s=self.interval_s, window_bytes=self.window_bytes)
        ports = {}
        for directions, key, worker in self._PLANE:
            if self.direction in directions:
                lst, box = plane.tcp_listener(self.streams)
                ports[key] = lst.getsockname()[1]
                for _ in range(self.streams):
                    plane.spawn(worker, lst, mailbox=box)
        return ports

    def missing_ports(self, ports: RendezvousPorts) -> list[str]:
        return [key for dirs, key, _ in self._PLANE if self.direction in dirs and getattr(ports, key) is None]


class UdpSpec(Spec):
    """UDP datagrams client to server at ``rate_bps`` per stream (0 = as fast as possible)."""

    kind: Literal["udp"]
    streams: int = Field(default=1, ge=1, le=MAX_STREAMS)
    size_bytes: int = Field(default=1472, ge=UDP_HEADER_BYTES, le=MAX_UDP_PAYLOAD)
    rate_bps: float = Field(default=1e9, ge=0, le=MAX_RATE_BPS)
    interval_s: float = Field(default=1.0, ge=0.05, le=60.0)

    drain_s: ClassVar[float] = 0.25

    @property
    def workers(self) -> int:
        return self.streams

    def over_limits(self, limits: ServerLimits) -> str | None:
        if self.rate_bps * self.streams > limits.max_udp_rate_bps:
            return f"UDP rate exceeds the server's limit of {limits.max_udp_rate_bps / 1e9:g} Gb/s"
        return None

    def open(self, plane: DataPlane) -> dict[str, Any]:
        plane.cfg.update(interval_s=self.interval_s)
        ports = []
        for _ in range(self.streams):
            usock = plane.udp_socket()
            ports.append(usock.getsockname()[1])
            plane.spawn("udp_sink", usock)
        return {"udp": ports}

    def missing_ports(self, ports: RendezvousPorts) -> list[str]:
        return [] if ports.udp is not None and len(ports.udp) == self.streams else ["udp"]


class LatencySpec(Spec):
    """Request/response round trips (the server echoes each message back)."""

    kind: Literal["latency"]
    proto: Literal["tcp", "udp"] = "tcp"
    max_bytes: int = Field(default=1024 * 1024, ge=RR_HEADER_BYTES, le=MAX_RR_BYTES)

    @model_validator(mode="after")
    def _udp_fits(self) -> LatencySpec:
        if self.proto == "udp" and self.max_bytes > MAX_UDP_PAYLOAD:
            raise ValueError(f"UDP messages are at most {MAX_UDP_PAYLOAD} bytes")
        return self

    def open(self, plane: DataPlane) -> dict[str, Any]:
        plane.cfg.update(max_bytes=self.max_bytes)
        if self.proto == "tcp":
            lst, box = plane.tcp_listener(4)
            plane.spawn("rr_responder", lst, mailbox=box)
            return {"rr": lst.getsockname()[1]}
        usock = plane.udp_socket()
        plane.spawn("udp_echo", usock)
        return {"rr": usock.getsockname()[1]}


class ConnectSpec(Spec):
    """Connection setup: ``concurrency`` responders, each serving connection after connection."""

    kind: Literal["connect"]
    concurrency: int = Field(default=1, ge=1, le=MAX_CONCURRENCY)
    max_bytes: int = Field(default=64 * 1024, ge=RR_HEADER_BYTES, le=MAX_RR_BYTES)

    @property
    def workers(self) -> int:
        return self.concurrency

    def open(self, plane: DataPlane) -> dict[str, Any]:
        plane.cfg.update(max_bytes=self.max_bytes)
        lst, box = plane.tcp_listener(1024)
        for _ in range(self.concurrency):
            plane.spawn("rr_responder", lst, mailbox=box)
        return {"rr": lst.getsockname()[1]}
