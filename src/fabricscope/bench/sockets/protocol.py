"""The bench control protocol: length-prefixed JSON frames and validated test requests.

A control connection carries frames of a 4-byte big-endian length then UTF-8 JSON (at most
:data:`fabricscope.jobs.frames.MAX_FRAME_BYTES`). The conversation is::

    client: {"op": "hello", "version": 1, "token": "..." | null}
    server: {"ok": true, "server": "fabricscope", "version": "...", "limits": {...}}
    client: {"op": "test", "spec": {"kind": "tcp", ...}}            # one of the *Spec models
    server: {"ok": true, "cookie": "<hex>", "ports": [...], ...}    # data-plane rendezvous
    client: {"op": "done", "info": {...}}                           # client side finished
    server: {"ok": true, "op": "result", "reports": [...]}          # the server workers' reports

Any error is ``{"ok": false, "error": "one line"}``. Every spec is validated by a pydantic model
(unknown fields rejected, every number bounded) and then against the server's own
:class:`ServerLimits`; nothing a client sends names a file or reaches a command line.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from fabricscope.bench.sockets.wire import (
    MAX_RR_BYTES,
    MAX_UDP_PAYLOAD,
    RR_HEADER_BYTES,
    UDP_HEADER_BYTES,
)
from fabricscope.jobs.frames import ProtocolError
from fabricscope.units import parse_port

PROTOCOL_VERSION = 1
DEFAULT_PORT = 5211
MAX_MSG_BYTES = 16 * 1024 * 1024
MAX_STREAMS = 128
MAX_DURATION_S = 3600.0

MAX_TOKEN_CHARS = 256  # the longest token a hello may carry, so the longest a server may require


# ----- requests -------------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


class Hello(_Strict):
    op: Literal["hello"]
    version: int = Field(ge=1, le=1000)
    token: str | None = Field(default=None, max_length=MAX_TOKEN_CHARS)


class TcpSpec(_Strict):
    """Bulk TCP streams. ``direction`` is seen from the client: send = client to server."""

    kind: Literal["tcp"]
    streams: int = Field(default=1, ge=1, le=MAX_STREAMS)
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)
    msg_bytes: int = Field(default=128 * 1024, ge=1, le=MAX_MSG_BYTES)
    direction: Literal["send", "recv", "bidir"] = "send"
    window_bytes: int | None = Field(default=None, ge=4096, le=1024 * 1024 * 1024)
    interval_s: float = Field(default=1.0, ge=0.05, le=60.0)

    @property
    def workers(self) -> int:
        return self.streams * (2 if self.direction == "bidir" else 1)


class UdpSpec(_Strict):
    """UDP datagrams client to server at ``rate_bps`` per stream (0 = as fast as possible)."""

    kind: Literal["udp"]
    streams: int = Field(default=1, ge=1, le=MAX_STREAMS)
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)
    size_bytes: int = Field(default=1472, ge=UDP_HEADER_BYTES, le=MAX_UDP_PAYLOAD)
    rate_bps: float = Field(default=1e9, ge=0, le=1e12)
    interval_s: float = Field(default=1.0, ge=0.05, le=60.0)

    @property
    def workers(self) -> int:
        return self.streams


class LatencySpec(_Strict):
    """Request/response round trips (the server echoes each message back)."""

    kind: Literal["latency"]
    proto: Literal["tcp", "udp"] = "tcp"
    max_bytes: int = Field(default=1024 * 1024, ge=RR_HEADER_BYTES, le=MAX_RR_BYTES)
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)

    @model_validator(mode="after")
    def _udp_fits(self) -> LatencySpec:
        if self.proto == "udp" and self.max_bytes > MAX_UDP_PAYLOAD:
            raise ValueError(f"UDP messages are at most {MAX_UDP_PAYLOAD} bytes")
        return self

    @property
    def workers(self) -> int:
        return 1


class ConnectSpec(_Strict):
    """Connection setup: ``concurrency`` responders, each serving connection after connection."""

    kind: Literal["connect"]
    concurrency: int = Field(default=1, ge=1, le=64)
    max_bytes: int = Field(default=64 * 1024, ge=RR_HEADER_BYTES, le=MAX_RR_BYTES)
    duration_s: float = Field(default=10.0, gt=0, le=MAX_DURATION_S)

    @property
    def workers(self) -> int:
        return self.concurrency


RunSpec = Annotated[TcpSpec | UdpSpec | LatencySpec | ConnectSpec, Field(discriminator="kind")]


class RunRequest(_Strict):
    op: Literal["test"]
    spec: RunSpec


class Done(_Strict):
    op: Literal["done"]
    info: dict[str, Any] = Field(default_factory=dict)


_REQUEST = TypeAdapter(Hello | RunRequest | Done)


Port = Annotated[int, Field(ge=1, le=65535, strict=True)]


class RendezvousPorts(BaseModel):
    """Where the server's data plane waits for this test (which keys depend on the test kind)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    to_server: Port | None = None
    from_server: Port | None = None
    rr: Port | None = None
    udp: list[Port] | None = Field(default=None, max_length=MAX_STREAMS)


class Rendezvous(BaseModel):
    """The server's answer to a test request, as the client checks it before opening data sockets."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    cookie: str = Field(pattern=r"^[0-9a-f]{32}$", max_length=32)
    ports: RendezvousPorts


_SPEC = TypeAdapter(RunSpec)


def parse_rendezvous(reply: dict[str, Any], spec: dict[str, Any]) -> Rendezvous:
    """Validate the server's test reply against the request ``spec``; :class:`ProtocolError` if not.

    A server (or whoever answers on its port) could send any JSON: ports as text, out of range,
    missing for the direction asked. Checked here, once, so the test kinds only see valid ports.
    """
    try:
        rendezvous = Rendezvous.model_validate(reply)
    except ValidationError as exc:
        raise ProtocolError(f"malformed test reply: {_first_error(exc)}") from None
    asked = _SPEC.validate_python(spec)
    ports = rendezvous.ports
    if isinstance(asked, TcpSpec):
        needed = {"send": ("to_server",), "recv": ("from_server",), "bidir": ("to_server", "from_server")}
        missing = [key for key in needed[asked.direction] if getattr(ports, key) is None]
    elif isinstance(asked, UdpSpec):
        missing = [] if ports.udp is not None and len(ports.udp) == asked.streams else ["udp"]
    else:
        missing = [] if ports.rr is not None else ["rr"]
    if missing:
        raise ProtocolError(f"malformed test reply: no valid ports.{missing[0]} for a {asked.kind} test")
    return rendezvous


class ServerLimits(_Strict):
    """What a server lets any client ask for; protects the host the server runs on."""

    max_duration_s: float = Field(default=60.0, gt=0, le=MAX_DURATION_S)
    max_tests: int = Field(default=2, ge=1, le=64)  # concurrent tests
    max_streams: int = Field(default=32, ge=1, le=MAX_STREAMS)  # worker processes per test
    max_clients: int = Field(default=16, ge=1, le=1024)  # concurrent control connections
    max_msg_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=MAX_MSG_BYTES)
    max_udp_rate_bps: float = Field(default=100e9, gt=0, le=1e12)

    def check(self, spec: TcpSpec | UdpSpec | LatencySpec | ConnectSpec) -> None:
        """Raise :class:`ProtocolError` when ``spec`` asks for more than this server allows."""
        if spec.duration_s > self.max_duration_s:
            raise ProtocolError(
                f"duration {spec.duration_s:g} s exceeds the server's limit of {self.max_duration_s:g} s"
            )
        if spec.workers > self.max_streams:
            raise ProtocolError(f"{spec.workers} streams exceed the server's limit of {self.max_streams}")
        if isinstance(spec, TcpSpec) and spec.msg_bytes > self.max_msg_bytes:
            raise ProtocolError(
                f"message size {spec.msg_bytes} exceeds the server's limit of {self.max_msg_bytes}"
            )
        if isinstance(spec, UdpSpec) and spec.rate_bps * spec.streams > self.max_udp_rate_bps:
            raise ProtocolError(
                f"UDP rate exceeds the server's limit of {self.max_udp_rate_bps / 1e9:g} Gb/s"
            )


def parse_request(message: dict[str, Any]) -> Hello | RunRequest | Done:
    """Validate one decoded frame; raise :class:`ProtocolError` with a short, safe message."""
    try:
        return _REQUEST.validate_python(message)
    except ValidationError as exc:
        raise ProtocolError(f"invalid request: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "invalid"
    # With a union the most specific error is the deepest location; keep it short and printable.
    err = max(errors, key=lambda e: len(e.get("loc", ())))
    loc = ".".join(
        str(p) for p in err.get("loc", ()) if not str(p).startswith(("Hello", "RunRequest", "Done"))
    )
    text = f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg", "invalid"))
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:300]


def error_reply(message: str) -> dict[str, Any]:
    return {"ok": False, "error": message}


def parse_peer(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address -> (host, port)."""
    text = text.strip()
    if not text:
        raise ValueError("empty peer")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise ValueError(f"peer {text!r}: missing ']'")
        port_text = rest.removeprefix(":") if rest else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host:
        raise ValueError(f"peer {text!r}: no host")
    if port_text:
        try:
            return host, parse_port(port_text)
        except ValueError:
            raise ValueError(f"peer {text!r}: port must be 1..65535") from None
    return host, default_port
