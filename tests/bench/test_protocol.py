"""Control protocol: frames, request validation (property-tested), limits, peer parsing."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricscope.bench.sockets.protocol import (
    Hello,
    RunRequest,
    ServerLimits,
    parse_peer,
    parse_rendezvous,
    parse_request,
)
from fabricscope.bench.sockets.specs import ConnectSpec, LatencySpec, TcpSpec, UdpSpec
from fabricscope.jobs.frames import (
    MAX_FRAME_BYTES,
    MAX_JSON_DEPTH,
    ProtocolError,
    decode_body,
    decode_length,
    encode_frame,
)


def test_frame_roundtrip() -> None:
    frame = encode_frame({"op": "hello", "version": 1})
    length = decode_length(frame[:4])
    assert length == len(frame) - 4
    assert decode_body(frame[4:]) == {"op": "hello", "version": 1}


@pytest.mark.parametrize("length", [0, MAX_FRAME_BYTES + 1, 2**32 - 1])
def test_frame_length_is_capped(length: int) -> None:
    with pytest.raises(ProtocolError):
        decode_length(struct.pack("!I", length))


@pytest.mark.parametrize("body", [b"\xff\xfe", b"not json", b"[1, 2]", b'"text"', b"12"])
def test_frame_body_must_be_a_json_object(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_body(body)


def test_encode_refuses_oversized_frames() -> None:
    with pytest.raises(ProtocolError):
        encode_frame({"op": "x" * MAX_FRAME_BYTES})


def test_valid_requests_parse() -> None:
    assert isinstance(parse_request({"op": "hello", "version": 1, "token": "t"}), Hello)
    req = parse_request({"op": "test", "spec": {"kind": "tcp", "streams": 4, "duration_s": 2}})
    assert isinstance(req, RunRequest) and isinstance(req.spec, TcpSpec) and req.spec.streams == 4
    assert isinstance(parse_request({"op": "test", "spec": {"kind": "udp", "rate_bps": 5e9}}).spec, UdpSpec)
    assert isinstance(
        parse_request({"op": "test", "spec": {"kind": "latency", "proto": "udp", "max_bytes": 1024}}).spec,
        LatencySpec,
    )
    assert isinstance(
        parse_request({"op": "test", "spec": {"kind": "connect", "concurrency": 2}}).spec, ConnectSpec
    )


@pytest.mark.parametrize(
    "message",
    [
        {},
        {"op": "hello"},
        {"op": "hello", "version": 1, "extra": 1},
        {"op": "shell", "cmd": "rm -rf /"},
        {"op": "test", "spec": {"kind": "tcp", "streams": 0}},
        {"op": "test", "spec": {"kind": "tcp", "streams": 10**9}},
        {"op": "test", "spec": {"kind": "tcp", "duration_s": -1}},
        {"op": "test", "spec": {"kind": "tcp", "duration_s": float("inf")}},
        {"op": "test", "spec": {"kind": "tcp", "msg_bytes": 2**40}},
        {"op": "test", "spec": {"kind": "tcp", "file": "/etc/passwd"}},
        {"op": "test", "spec": {"kind": "udp", "size_bytes": 70000}},
        {"op": "test", "spec": {"kind": "latency", "proto": "udp", "max_bytes": 1048576}},
        {"op": "test", "spec": {"kind": "latency", "proto": "sctp"}},
        {"op": "test", "spec": {"kind": "exec"}},
        {"op": "test", "spec": "tcp"},
        {"op": "hello", "version": 1, "token": "x" * 10000},
    ],
)
def test_hostile_requests_are_rejected_with_a_short_reason(message: dict) -> None:
    with pytest.raises(ProtocolError) as err:
        parse_request(message)
    text = str(err.value)
    assert len(text) < 400 and "\n" not in text


def test_limits_cap_what_a_client_may_ask() -> None:
    limits = ServerLimits(max_duration_s=10, max_streams=4, max_msg_bytes=1 << 20, max_udp_rate_bps=1e9)
    limits.check(TcpSpec(kind="tcp", streams=4, duration_s=10))
    for spec in (
        TcpSpec(kind="tcp", duration_s=11),
        TcpSpec(kind="tcp", streams=3, direction="bidir"),  # 6 workers
        TcpSpec(kind="tcp", msg_bytes=2 << 20),
        UdpSpec(kind="udp", streams=2, rate_bps=0.6e9),
        ConnectSpec(kind="connect", concurrency=5),
    ):
        with pytest.raises(ProtocolError):
            limits.check(spec)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
spec_like = st.fixed_dictionaries(
    {"kind": st.sampled_from(["tcp", "udp", "latency", "connect", "rdma", ""])},
    optional={
        "streams": json_values,
        "duration_s": json_values,
        "msg_bytes": json_values,
        "direction": st.sampled_from(["send", "recv", "bidir", "both"]) | json_values,
        "rate_bps": json_values,
        "size_bytes": json_values,
        "proto": st.sampled_from(["tcp", "udp"]) | json_values,
        "max_bytes": json_values,
        "concurrency": json_values,
        "window_bytes": json_values,
        "interval_s": json_values,
    },
)
messages = st.one_of(
    st.dictionaries(st.text(max_size=10), json_values, max_size=6),
    st.fixed_dictionaries({"op": st.just("test"), "spec": spec_like}),
    st.fixed_dictionaries({"op": st.just("hello"), "version": json_values}, optional={"token": json_values}),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_property_validation_accepts_only_bounded_requests(message: dict) -> None:
    """Whatever arrives: a typed, bounded request or a ProtocolError, never anything else."""
    try:
        parsed = parse_request(json.loads(json.dumps(message, allow_nan=True)))
    except ProtocolError as exc:
        assert str(exc).startswith("invalid request")
        return
    if isinstance(parsed, RunRequest):
        spec = parsed.spec
        assert 0 < spec.duration_s <= 3600
        assert 1 <= spec.workers <= 256
        if isinstance(spec, TcpSpec):
            assert 1 <= spec.msg_bytes <= 16 * 1024 * 1024
        if isinstance(spec, UdpSpec):
            assert 28 <= spec.size_bytes <= 65507 and 0 <= spec.rate_bps <= 1e12
        try:
            ServerLimits().check(spec)
        except ProtocolError:
            pass
    elif isinstance(parsed, Hello):
        assert 1 <= parsed.version <= 1000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host", ("host", 5211)),
        ("host:80", ("host", 80)),
        ("10.0.0.1:5300", ("10.0.0.1", 5300)),
        ("[::1]:99", ("::1", 99)),
        ("[fe80::1]", ("fe80::1", 5211)),
        ("::1", ("::1", 5211)),
    ],
)
def test_parse_peer(text: str, expected: tuple[str, int]) -> None:
    assert parse_peer(text) == expected


@pytest.mark.parametrize(
    "text", ["", "host:0", "host:70000", "host:abc", "[::1", ":80", "host:\u00b2", "[::1]:\u0661"]
)
def test_parse_peer_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="port must be|missing|no host|empty"):
        parse_peer(text)


@pytest.mark.parametrize("body", [b"[" * 30000 + b"]" * 30000, b'{"a":' * 10000 + b"1" + b"}" * 10000])
def test_deep_nesting_is_refused_before_decoding(body: bytes) -> None:
    """A 60 KB nested hello used to reach json.loads and raise RecursionError (a logged traceback)."""
    assert len(body) <= MAX_FRAME_BYTES
    with pytest.raises(ProtocolError, match="nests deeper"):
        decode_body(body)


def test_nesting_limit_counts_structure_not_strings() -> None:
    inside_strings = json.dumps({"op": "hello", "token": "[{" * 500 + '\\"[', "x": ["]]]"]}).encode()
    assert decode_body(inside_strings)["op"] == "hello"
    at_limit = b"[" * (MAX_JSON_DEPTH - 2) + b"{}" + b"]" * (MAX_JSON_DEPTH - 2)
    assert decode_body(b'{"a":' + at_limit + b"}")["a"]
    with pytest.raises(ProtocolError):
        decode_body(b'{"a":' + b"[" + at_limit + b"]" + b"}")


GOOD_COOKIE = "00" * 16


@pytest.mark.parametrize(
    ("reply", "spec"),
    [
        ({"cookie": GOOD_COOKIE, "ports": "abc"}, {"kind": "tcp"}),
        ({"cookie": GOOD_COOKIE, "ports": {"to_server": "abc"}}, {"kind": "tcp"}),
        ({"cookie": GOOD_COOKIE, "ports": {"to_server": 0}}, {"kind": "tcp"}),
        ({"cookie": GOOD_COOKIE, "ports": {"to_server": 70000}}, {"kind": "tcp"}),
        ({"cookie": GOOD_COOKIE, "ports": {"to_server": True}}, {"kind": "tcp"}),
        ({"cookie": GOOD_COOKIE, "ports": {"to_server": 5300}}, {"kind": "tcp", "direction": "bidir"}),
        ({"cookie": GOOD_COOKIE, "ports": {"udp": [5300]}}, {"kind": "udp", "streams": 2}),
        ({"cookie": GOOD_COOKIE, "ports": {"udp": ["x"]}}, {"kind": "udp"}),
        ({"cookie": GOOD_COOKIE, "ports": {}}, {"kind": "latency"}),
        ({"cookie": "zz" * 16, "ports": {"rr": 5300}}, {"kind": "connect"}),
        ({"cookie": GOOD_COOKIE + "\n", "ports": {"rr": 5300}}, {"kind": "connect"}),
        ({"ports": {"rr": 5300}}, {"kind": "connect"}),
    ],
)
def test_a_malformed_test_reply_is_a_protocol_error(reply: dict, spec: dict) -> None:
    with pytest.raises(ProtocolError, match="malformed test reply"):
        parse_rendezvous(reply, spec)


def test_a_valid_test_reply_passes() -> None:
    got = parse_rendezvous(
        {"ok": True, "cookie": GOOD_COOKIE, "ports": {"to_server": 5300, "from_server": 5301}, "new": 1},
        {"kind": "tcp", "direction": "bidir"},
    )
    assert got.ports.to_server == 5300 and got.ports.from_server == 5301
    assert parse_rendezvous({"cookie": GOOD_COOKIE, "ports": {"udp": [1, 2]}}, {"kind": "udp", "streams": 2})
