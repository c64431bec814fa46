"""The bench-kind table (bench/results/kinds.py) against the schema, the parameter models, the
history, report/ and `bench serve` (issue 21 item 2), and the null leak it fixes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest

from fabricscope.bench.results.history import headline
from fabricscope.bench.results.kinds import KIND_FIELDS, KINDS, Kind, served_kinds
from fabricscope.bench.results.schema import BenchResult, IncastPoint, new_result
from fabricscope.bench.sockets.protocol import parse_rendezvous, parse_request
from fabricscope.bench.sockets.specs import DataPlane, Spec
from fabricscope.jobs.frames import ProtocolError
from fabricscope.report import bench as report_bench

# Top-level fields every result has, whatever its kind.
COMMON = {"schema_", "kind", "status", "reason", "params", "host", "started", "duration_s", "metrics", "intervals",
          "counters", "thresholds", "detail", "run_id"}  # fmt: skip


def test_every_optional_field_belongs_to_a_kind() -> None:
    """A field added to BenchResult without a kind would leak into every result's JSON as null."""
    assert set(BenchResult.model_fields) - COMMON == set(KIND_FIELDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_result_of_one_kind_carries_no_other_kinds_fields(name: str) -> None:
    doc = json.loads(new_result(name, {}).finish({"x_gbps": 1.0}).to_json())
    assert not set(doc) & set(KIND_FIELDS), sorted(set(doc) & set(KIND_FIELDS))


def test_the_reported_leak_is_gone() -> None:
    """Every result's JSON used to carry "topology": null and "incast": null."""
    doc = json.loads(new_result("tcp", {}).finish({"throughput_gbps": 9.5}).to_json())
    assert "topology" not in doc and "incast" not in doc
    incast = new_result("incast", {})
    incast.incast = [IncastPoint(senders=1, goodput_gbps=1, round_p50_ms=1, round_p99_ms=1, round_max_ms=1, rounds=1,
                                 retransmits=0, timeouts=0)]  # fmt: skip
    assert json.loads(incast.to_json())["incast"][0]["senders"] == 1


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_record_is_whole(name: str) -> None:
    kind = KINDS[name]
    model = kind.params_model()
    assert issubclass(model, pydantic.BaseModel)
    assert callable(getattr(report_bench, kind.renderer))
    assert set(kind.data) <= set(kind.fields)
    result = new_result(name, {}).finish({m: 1.0 for m in kind.headline})
    assert [m for m, _ in headline(result)] == list(kind.headline)


def test_the_protocol_accepts_exactly_the_served_kinds() -> None:
    """`bench serve` runs the kinds whose record names a request model, and refuses the others by name."""
    served = {k.name for k in served_kinds()}
    assert {"tcp", "udp", "latency", "connect"} <= served  # and any kind added since
    for name in sorted(KINDS):
        message = {"op": "test", "spec": {"kind": name, "duration_s": 1}}
        if name in served:
            spec = parse_request(message).spec
            assert spec.kind == name and isinstance(spec, KINDS[name].spec_model())
        else:
            with pytest.raises(ProtocolError, match=f"tag '{name}'.*expected tags: 'tcp', 'udp'"):
                parse_request(message)


@pytest.mark.parametrize("name", sorted(k.name for k in served_kinds()))
def test_a_served_kinds_parameters_are_bounded_as_the_server_bounds_them(name: str) -> None:
    """A parameter both the client's model and the server's request carry has the same bounds, so a run
    the client accepts is not refused by the protocol (``--window`` once took 1 KiB to 1 GiB here,
    4 KiB up unbounded in TcpParams, 4 KiB to 1 GiB in the server's request)."""
    kind = KINDS[name]
    params, spec = kind.params_model().model_fields, kind.spec_model().model_fields
    shared = sorted(set(params) & set(spec) - {"kind"})
    assert "duration_s" in shared
    for field in shared:
        assert params[field].metadata == spec[field].metadata, (name, field)


def test_the_server_names_no_kind() -> None:
    """The server runs every served kind through its request model's hooks: no kind's name or model
    appears in it, so adding a kind is its record and its model (bench/sockets/specs.py)."""
    import ast

    from fabricscope.bench.sockets import server

    tree = ast.parse(Path(server.__file__).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    texts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for kind in served_kinds():
        model = kind.spec_model()
        assert model is not None and model.__name__ not in names, model
        assert kind.name not in texts, kind.name


class EchoSpec(Spec):
    """A kind that exists only in this test: one request/response responder."""

    kind: Literal["echo"]

    def open(self, plane: DataPlane) -> dict[str, Any]:
        plane.cfg.update(max_bytes=1024)
        lst, box = plane.tcp_listener(4)
        plane.spawn("rr_responder", lst, mailbox=box)
        return {"rr": lst.getsockname()[1]}


def test_a_new_served_kind_is_one_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record naming a request model is all `bench serve` needs to run a kind (on loopback)."""
    from fabricscope.bench.sockets import protocol
    from fabricscope.bench.sockets.client import ControlSession, Peer
    from tests.bench.conftest import start_server

    echo = Kind(
        "echo", KINDS["latency"].params, ("rtt_p50_us",), "latency_lines", spec=f"{__name__}:EchoSpec"
    )
    monkeypatch.setitem(KINDS, "echo", echo)
    protocol.served_specs.cache_clear()
    try:
        server = start_server()
        session = ControlSession(Peer("127.0.0.1", server.port), None, 5.0)
        try:
            reply = session.open({"kind": "echo", "duration_s": 1})
            assert parse_rendezvous(reply, {"kind": "echo"}).ports.rr
            reports = session.finish({}, 10.0)
        finally:
            session.close()
            server.stop()
        assert [r.get("role") for r in reports] == ["rr_responder"] and "error" not in reports[0], reports
    finally:
        protocol.served_specs.cache_clear()


def _model_range(field: Any) -> tuple[float, float]:
    """The closed range a pydantic field accepts (an open end as its value: a CLI min is never equal)."""
    low, high = -float("inf"), float("inf")
    for m in field.metadata:
        low = getattr(m, "ge", getattr(m, "gt", low))
        high = getattr(m, "le", getattr(m, "lt", high))
    return low, high


def _option_ranges(command: str, model: type[pydantic.BaseModel]) -> list[tuple[str, tuple, tuple]]:
    """(option, its min..max, the model field's range) for every bounded option that sets a field."""
    import typer.main

    from fabricscope.cli.main import _register, app

    _register(["bench"])
    cmd = typer.main.get_command(app).commands["bench"].commands[command]  # type: ignore[attr-defined]
    fields = model.model_fields
    found = []
    for p in cmd.params:
        if getattr(p, "min", None) is None and getattr(p, "max", None) is None:
            continue
        name = next((n for n in (p.name, f"{p.name}_bytes", f"{p.name}_s") if n in fields), None)
        if name is not None:
            found.append((p.opts[0], (p.min, p.max), _model_range(fields[name])))
    return found


@pytest.mark.parametrize("name", sorted(k.name for k in served_kinds()))
def test_a_served_kinds_command_accepts_nothing_its_model_refuses(name: str) -> None:
    """`bench tcp --window 2048` passed the option (1 KiB up) and failed TcpParams (4 KiB up) with a
    pydantic error: an option's range lies inside its parameter's."""
    ranges = _option_ranges(name, KINDS[name].params_model())
    assert "duration_s" in KINDS[name].params_model().model_fields and len(ranges) >= 2, (name, ranges)
    for opt, (low, high), (model_low, model_high) in ranges:
        assert low is not None and high is not None, opt
        assert model_low <= low and high <= model_high, (name, opt, (low, high), (model_low, model_high))


def test_bench_serve_caps_nothing_its_limits_refuse() -> None:
    from fabricscope.bench.sockets.protocol import ServerLimits

    ranges = _option_ranges("serve", ServerLimits)
    assert {opt for opt, _, _ in ranges} >= {"--max-duration", "--max-tests", "--max-streams"}
    for opt, (low, high), (model_low, model_high) in ranges:
        assert model_low <= low and high <= model_high, (opt, (low, high), (model_low, model_high))
