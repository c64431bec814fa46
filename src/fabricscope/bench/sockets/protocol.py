"""The bench control protocol: length-prefixed JSON frames and validated test requests.

A control connection carries frames of a 4-byte big-endian length then UTF-8 JSON (at most
:data:`fabricscope.jobs.frames.MAX_FRAME_BYTES`). The conversation is::

    client: {"op": "hello", "version": 1, "token": "..." | null}
    server: {"ok": true, "server": "fabricscope", "version": "...", "limits": {...}}
    client: {"op": "test", "spec": {"kind": "tcp", ...}}            # a served kind's Spec model
    server: {"ok": true, "cookie": "<hex>", "ports": [...], ...}    # data-plane rendezvous
    client: {"op": "done", "info": {...}}                           # client side finished
    server: {"ok": true, "op": "result", "reports": [...]}          # the server workers' reports

Any error is ``{"ok": false, "error": "one line"}``. Every spec is validated by the pydantic model
its kind's record names (:mod:`fabricscope.bench.sockets.specs`: unknown fields rejected, every
number bounded; a kind without one is refused) and then against the server's own
:class:`ServerLimits`; nothing a client sends names a file or reaches a command line.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from fabricscope.bench.results.kinds import served_kinds
from fabricscope.bench.sockets.specs import MAX_DURATION_S, MAX_MSG_BYTES, MAX_RATE_BPS, MAX_STREAMS, Spec
from fabricscope.jobs.frames import ProtocolError
from fabricscope.units import parse_port

PROTOCOL_VERSION = 1
DEFAULT_PORT = 5211

MAX_TOKEN_CHARS = 256  # the longest token a hello may carry, so the longest a server may require


# ----- requests -------------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


class Hello(_Strict):
    op: Literal["hello"]
    version: int = Field(ge=1, le=1000)
    token: str | None = Field(default=None, max_length=MAX_TOKEN_CHARS)


@functools.cache
def served_specs() -> TypeAdapter[Spec]:
    """The request of every served kind of the registry (bench/results/kinds.py), told by ``kind``."""
    models = tuple(model for kind in served_kinds() if (model := kind.spec_model()) is not None)
    union: Any = Annotated[Union[models], Field(discriminator="kind")]  # noqa: UP007 (a run-time tuple)
    return TypeAdapter(union)


class RunRequest(_Strict):
    op: Literal["test"]
    spec: Spec  # one of the served kinds' models (bench/sockets/specs.py)

    @field_validator("spec", mode="wrap")
    @classmethod
    def _served(cls, value: Any, handler: Any) -> Spec:
        return served_specs().validate_python(value)


class Done(_Strict):
    op: Literal["done"]
    info: dict[str, Any] = Field(default_factory=dict)


_REQUEST: TypeAdapter[Hello | RunRequest | Done] = TypeAdapter(
    Annotated[Hello | RunRequest | Done, Field(discriminator="op")]
)  # told by "op": an error names what is wrong with that request, not with every other one


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


def parse_rendezvous(reply: dict[str, Any], spec: dict[str, Any]) -> Rendezvous:
    """Validate the server's test reply against the request ``spec``; :class:`ProtocolError` if not.

    A server (or whoever answers on its port) could send any JSON: ports as text, out of range,
    missing for the direction asked. Checked here, once, so the test kinds only see valid ports.
    """
    try:
        rendezvous = Rendezvous.model_validate(reply)
    except ValidationError as exc:
        raise ProtocolError(f"malformed test reply: {_first_error(exc)}") from None
    asked = served_specs().validate_python(spec)
    missing = asked.missing_ports(rendezvous.ports)
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
    max_udp_rate_bps: float = Field(default=100e9, gt=0, le=MAX_RATE_BPS)

    def check(self, spec: Spec) -> None:
        """Raise :class:`ProtocolError` when ``spec`` asks for more than this server allows."""
        if spec.duration_s > self.max_duration_s:
            raise ProtocolError(
                f"duration {spec.duration_s:g} s exceeds the server's limit of {self.max_duration_s:g} s"
            )
        if spec.workers > self.max_streams:
            raise ProtocolError(f"{spec.workers} streams exceed the server's limit of {self.max_streams}")
        over = spec.over_limits(self)
        if over:
            raise ProtocolError(over)


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
    # The most specific error is the deepest location; keep it short and printable. The first
    # part of a location is the request's "op" (the union's tag), and a spec's next is its kind.
    err = max(errors, key=lambda e: len(e.get("loc", ())))
    loc = ".".join(str(p) for p in err.get("loc", ())[1:])
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
