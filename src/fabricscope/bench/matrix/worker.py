"""What every rank of ``bench matrix`` runs: the job's store, the TCP flows, the phases.

Coordination goes through the job's store at MASTER_ADDR:MASTER_PORT (:mod:`fabricscope.jobs.store`,
no SSH, no torch): endpoints, a random token that every data connection must present, per-phase
barriers and results, each under its rank's own keys and, where the job has a secret, signed by
it (so a stranger can neither read the token nor move an endpoint nor forge a result). One rank per host takes part (:class:`MatrixWorker`); the
others only wait for the end. Rank 0 judges (:mod:`.blame`) and returns the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, IPvAnyAddress, ValidationError

from fabricscope.bench.counters import local_address_towards
from fabricscope.bench.matrix import rdma as matrix_rdma
from fabricscope.bench.matrix.blame import (
    MatrixRun,
    RdmaPart,
    Survey,
    analyze,
    confirm,
    offdiag,
    retest_flows,
)
from fabricscope.bench.matrix.localize import Fabric
from fabricscope.bench.matrix.schedule import (
    MatrixError,
    MatrixParams,
    Phase,
    expected_s,
    pack_phases,
    phases,
)
from fabricscope.bench.sockets.tcpinfo import read_tcp_info
from fabricscope.errors import FabricscopeError, one_line
from fabricscope.host import Root
from fabricscope.jobs.client import StoreClient, StoreTimeout
from fabricscope.jobs.launch import DistEnv
from fabricscope.jobs.rendezvous import Meeting, RendezvousError, open_store, parse_json
from fabricscope.jobs.store import StoreLimits

CHUNK_BYTES = 256 << 10
MAX_VALUE_BYTES = 1 << 20
HEADER_MAX = 512
FlowResult = dict[str, Any]  # gbps, retx_pct, ... or error


# ----- one TCP flow -----------------------------------------------------------------------------
def send_flow(
    endpoint: tuple[str, int], header: dict[str, Any], duration_s: float, deadline_s: float
) -> FlowResult:
    """Send for ``duration_s``, wait until the receiver closed, report the socket's retransmits."""
    payload = memoryview(os.urandom(CHUNK_BYTES))
    sock = socket.create_connection(endpoint, timeout=min(10.0, deadline_s))
    try:
        sock.settimeout(deadline_s)
        sock.sendall((json.dumps(header) + "\n").encode())
        end = time.monotonic() + duration_s
        sent = 0
        while time.monotonic() < end:
            sock.sendall(payload)
            sent += len(payload)
        sock.shutdown(socket.SHUT_WR)
        # wait for the receiver to close: every byte acknowledged, retransmit count complete
        while sock.recv(4096):
            pass
        info = read_tcp_info(sock)
    finally:
        sock.close()
    out: FlowResult = {"sent_bytes": sent}
    retrans, segments = info.get("total_retrans"), info.get("segs_out")
    if retrans is not None and segments:
        out.update(retx_pct=retrans / segments * 100.0, retransmits=retrans, segments=segments)
    return out


def _accept_expected(
    server: socket.socket, expect: dict[str, Any], deadline_s: float
) -> tuple[socket.socket, bytes]:
    """The connection of the expected sender (token, phase, source checked) and what followed its header."""
    end_by = time.monotonic() + deadline_s
    while True:
        left = end_by - time.monotonic()
        if left <= 0:
            raise MatrixError(f"no connection from {expect['src_host']} within {deadline_s:g} s")
        server.settimeout(left)
        try:
            conn, _ = server.accept()
        except TimeoutError:
            raise MatrixError(f"no connection from {expect['src_host']} within {deadline_s:g} s") from None
        conn.settimeout(min(10.0, max(0.1, end_by - time.monotonic())))
        try:
            header_raw = b""
            while b"\n" not in header_raw and len(header_raw) < HEADER_MAX:
                chunk = conn.recv(HEADER_MAX - len(header_raw))
                if not chunk:
                    break
                header_raw += chunk
            line, _, rest = header_raw.partition(b"\n")
            header = json.loads(line.decode("utf-8"))
            if isinstance(header, dict) and all(
                header.get(k) == expect[k] for k in ("token", "phase", "src")
            ):
                return conn, rest
        except (ValueError, OSError, UnicodeDecodeError):
            pass
        conn.close()  # a stranger or a stale connection: refuse it and keep waiting


def receive_flow(
    server: socket.socket, expect: dict[str, Any], duration_s: float, warmup_s: float, deadline_s: float
) -> FlowResult:
    """Accept the expected sender and measure its rate after warm-up."""
    conn, rest = _accept_expected(server, expect, deadline_s)
    view = memoryview(bytearray(1 << 20))
    t_first = time.monotonic()
    total = len(rest)
    mark_t, mark_b = None, 0
    cap = t_first + duration_s + max(10.0, duration_s)  # a sender that never stops is cut off
    conn.settimeout(max(1.0, duration_s))
    try:
        while True:
            n = conn.recv_into(view)
            now = time.monotonic()
            if n == 0:
                break
            total += n
            if mark_t is None and now - t_first >= warmup_s:
                mark_t, mark_b = now, total
            if now > cap:
                break
    finally:
        conn.close()
    t_end = time.monotonic()
    if mark_t is None or t_end - mark_t < 0.02:
        mark_t, mark_b = t_first, 0
    seconds = t_end - mark_t
    gbps = (total - mark_b) * 8 / seconds / 1e9 if seconds > 0 else None
    return {"bytes": total, "seconds": seconds, "gbps": gbps}


# ----- the job's store --------------------------------------------------------------------------
class Coordinator:
    """Keys in the job's store (:mod:`fabricscope.jobs.store`), barriers over the participating ranks.

    What a rank publishes lives under its own ``rank/N/`` (only it may write there, once), so what
    rank 0 reads for a rank came from that rank: its endpoint, its flow results, its readiness.
    """

    def __init__(self, store: StoreClient, rank: int, count: int, timeout_s: float) -> None:
        self.store = store
        self.rank = rank
        self.count = count
        self.timeout_s = timeout_s

    def barrier(self, key: str) -> None:
        if self.store.add(f"bar/{key}", 1) == self.count:
            self.store.set(f"bar/{key}/go", "1")
        self.store.wait([f"bar/{key}/go"], self.timeout_s)

    def put(self, key: str, value: Any) -> None:
        """Publish ``key`` as this rank's."""
        self.store.set(f"rank/{self.rank}/{key}", json.dumps(value))

    def get(self, rank: int, key: str) -> Any:
        """What ``rank`` published as ``key``, waiting for it up to the timeout."""
        try:
            text = self.store.get(f"rank/{rank}/{key}", self.timeout_s)
        except StoreTimeout:
            raise MatrixError(
                f"rank {rank} published no {key} within {self.timeout_s:g} s (it died or hangs)"
            ) from None
        try:
            return parse_json(text, MAX_VALUE_BYTES)
        except ValueError as exc:
            raise MatrixError(f"rank {rank} published a {key} that is not JSON: {exc}") from None

    def has(self, rank: int, key: str) -> bool:
        return self.store.check([f"rank/{rank}/{key}"])

    def leave(self, expected_s: float) -> None:
        """Wait for rank 0's "done" (the end of the run), then say so; rank 0 keeps the store up till then."""
        self.store.wait(["rank/0/done"], max(expected_s, self.timeout_s))
        self.store.add("left", 1)

    def wait_for_leavers(self, count: int, limit_s: float = 10.0) -> None:
        end = time.monotonic() + limit_s
        while count > 0 and time.monotonic() < end:
            if self.store.add("left", 0) >= count:
                return
            time.sleep(0.05)


def _open_store(params: MatrixParams, env: DistEnv) -> Meeting:
    limits = StoreLimits(keys_per_rank=256 + 32 * env.world_size, bytes_per_rank=64 << 20)
    try:
        return open_store(
            env,
            params.timeout_s,
            needs="bench matrix",
            node=env.host_label or socket.gethostname(),
            limits=limits,
        )
    except RendezvousError as exc:
        raise MatrixError(str(exc)) from None


class _Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    addr: IPvAnyAddress
    port: int = Field(ge=1, le=65535)
    host: str = Field(min_length=1, max_length=255)


def _endpoint(value: Any, rank: int) -> dict[str, Any] | None:
    """A rank's published endpoint, validated (an IP literal, a port, a host label); None: waits only."""
    if value is None:
        return None
    try:
        return {**_Endpoint.model_validate(value).model_dump(), "addr": str(value["addr"])}
    except (ValidationError, TypeError, KeyError):
        raise MatrixError(f"rank {rank} published an endpoint that is not one") from None


def _flow_result(value: Any) -> FlowResult:
    """A flow's result as a rank published it: a flat object of numbers, short strings and nulls."""
    ok = (
        isinstance(value, dict)
        and len(value) <= 32
        and all(
            isinstance(k, str)
            and (v is None or isinstance(v, int | float) or (isinstance(v, str) and len(v) <= 2000))
            for k, v in value.items()
        )
    )
    if not ok:
        raise MatrixError("a rank published a flow result that is not one")
    return value


def unique_labels(labels: list[str], ranks: list[int]) -> list[str]:
    if len(set(labels)) == len(labels):
        return labels
    return [f"{lab}/r{r}" for lab, r in zip(labels, ranks)]


# ----- a rank ------------------------------------------------------------------------------------
class MatrixWorker:
    """One rank of the job: joins the store, then (one rank per host) sends, receives and, on rank 0, judges."""

    def __init__(
        self,
        params: MatrixParams,
        env: DistEnv,
        meeting: Meeting,
        progress: Callable[[str], None] | None,
        which: Callable[[str], str | None],
    ) -> None:
        self.params, self.env, self.meeting, self.progress, self.which = params, env, meeting, progress, which
        self.all_ranks = Coordinator(meeting.client, env.rank, env.world_size, params.timeout_s)
        # one participant per host: local rank 0, or every rank our own launchers labelled as a host
        self.participant = env.local_rank == 0 or env.rank == 0 or env.host_label is not None
        self.server: socket.socket | None = None
        self.flow_deadline = params.duration_s + 30.0
        self.rdma_s = matrix_rdma.flow_seconds(params.duration_s)
        self.ready: matrix_rdma.Readiness | None = None
        self.fabric: Fabric | None = None

    # -- joining
    def join(self) -> None:
        """Publish this rank's endpoint (None for a rank that only waits), learn everyone's."""
        rank, co = self.env.rank, self.all_ranks
        addr = self.params.bind or local_address_towards(self.env.master_addr) or "127.0.0.1"
        if self.participant:
            self.server = socket.socket(
                socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM
            )
            self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.server.bind((addr, 0))
            self.server.listen(8)
            label = self.env.host_label or socket.gethostname()
            co.put("ep", {"addr": addr, "port": self.server.getsockname()[1], "host": label})
        else:
            co.put("ep", None)
        if rank == 0:
            co.put("token", secrets.token_hex(16))
        self.token = co.get(0, "token")
        self.eps = [_endpoint(co.get(r, "ep"), r) for r in range(self.env.world_size)]
        self.members = [r for r in range(self.env.world_size) if self.eps[r] is not None]
        self.hosts = unique_labels([self.eps[r]["host"] for r in self.members], self.members)
        self.n = len(self.members)
        if self.params.rdma and self.params.rdma_port + self.n - 1 > 65535:
            raise MatrixError(f"--rdma-port {self.params.rdma_port} + {self.n} hosts runs past port 65535")
        if self.participant:
            self.me = self.members.index(rank)
            self.co = Coordinator(self.meeting.client, rank, self.n, self.params.timeout_s)

    # -- flows: sender a, receiver b (indexes into hosts)
    def _flow(self, what: str, a: int, b: int, run: Callable[[], FlowResult]) -> FlowResult:
        try:
            res = run()
        except (OSError, MatrixError) as exc:
            return {"error": f"{self.hosts[a]} -> {self.hosts[b]}: {what} failed: {one_line(exc)}"}
        if "error" in res:
            res["error"] = f"{self.hosts[a]} -> {self.hosts[b]}: {res['error']}"
        return res

    def tcp_send(self, tag: str, k: int, a: int, b: int) -> FlowResult:
        ep = self.eps[self.members[b]]
        header = {"token": self.token, "phase": f"{tag}/{k}", "src": a}
        return self._flow(
            "send",
            a,
            b,
            lambda: send_flow((ep["addr"], ep["port"]), header, self.params.duration_s, self.flow_deadline),
        )

    def tcp_receive(self, tag: str, k: int, a: int, b: int) -> FlowResult:
        server = self.server
        assert server is not None
        expect = {"token": self.token, "phase": f"{tag}/{k}", "src": a, "src_host": self.hosts[a]}
        p = self.params
        return self._flow(
            "receive",
            a,
            b,
            lambda: receive_flow(server, expect, p.duration_s, p.warmup_s, self.flow_deadline),
        )

    def rdma_send(self, tag: str, k: int, a: int, b: int) -> FlowResult:
        assert self.ready is not None
        self.co.get(self.members[b], f"rdma-up/{tag}/{k}/{b}")  # the receiver started its perftest server
        argv = matrix_rdma.client_argv(
            self.ready,
            self.params.rdma_test,
            self.rdma_s,
            self.params.rdma_port + b,
            self.eps[self.members[b]]["addr"],
        )
        return self._flow("send", a, b, lambda: matrix_rdma.send_flow(argv, self.rdma_s))

    def rdma_receive(self, tag: str, k: int, a: int, b: int) -> FlowResult:
        assert self.ready is not None
        argv = matrix_rdma.server_argv(
            self.ready, self.params.rdma_test, self.rdma_s, self.params.rdma_port + b
        )
        return self._flow("receive", a, b, lambda: matrix_rdma.serve_flow(
            argv,
            self.rdma_s,
            started=lambda: self.co.put(f"rdma-up/{tag}/{k}/{b}", True),
            sender_done=lambda: self.co.has(self.members[a], f"res/{tag}/{k}/{a}/{b}/send"),
        ))  # fmt: skip

    # -- phases
    def run_phases(self, transport: str, tag: str, plan: list[Phase]) -> None:
        send, receive = (
            (self.tcp_send, self.tcp_receive) if transport == "tcp" else (self.rdma_send, self.rdma_receive)
        )
        for k, phase in enumerate(plan):
            self.co.barrier(f"{tag}/{k}")
            if self.progress and self.me == 0:
                self.progress(
                    f"{tag} phase {k + 1}/{len(plan)}: {', '.join(f'{self.hosts[a]}->{self.hosts[b]}' for a, b in phase)}"
                )
            for a, b in phase:
                if a == self.me:
                    self.co.put(f"res/{tag}/{k}/{a}/{b}/send", send(tag, k, a, b))
                elif b == self.me:
                    self.co.put(f"res/{tag}/{k}/{a}/{b}/recv", receive(tag, k, a, b))

    def collect(self, tag: str, plan: list[Phase]) -> dict[tuple[int, int], FlowResult]:
        out = {}
        for k, phase in enumerate(plan):
            for a, b in phase:
                recv = _flow_result(self.co.get(self.members[b], f"res/{tag}/{k}/{a}/{b}/recv"))
                send = _flow_result(self.co.get(self.members[a], f"res/{tag}/{k}/{a}/{b}/send"))
                # the sender's error first: for RDMA the client says why a flow failed
                out[(a, b)] = {**send, **recv, "error": send.get("error") or recv.get("error")}
        return out

    def survey(self, transport: str) -> Survey | None:
        """Every pair in both directions, then retests of the suspects; rank 0 gets the judged survey."""
        main_plan = phases(self.n)
        self.run_phases(transport, transport, main_plan)
        retest_key = f"plan/{transport}-retest"
        if self.me == 0:
            survey, by_suspect = self._judge(transport, self.collect(transport, main_plan))
            self.co.put(retest_key, pack_phases([f for flows in by_suspect.values() for f in flows]))
        retest_plan = [[(int(a), int(b)) for a, b in ph] for ph in self.co.get(0, retest_key)]
        if retest_plan:
            self.run_phases(transport, f"{transport}-retest", retest_plan)
        if self.me != 0:
            return None
        if self.params.retest and survey.verdict.suspects:
            results = self.collect(f"{transport}-retest", retest_plan)
            survey.suspects, survey.cleared = confirm(survey.verdict, by_suspect, results)
            survey.retests = [
                {
                    "from": self.hosts[a],
                    "to": self.hosts[b],
                    "gbps": r.get("gbps"),
                    "retransmit_pct": r.get("retx_pct"),
                    "error": r.get("error"),
                }
                for (a, b), r in results.items()
            ]
        return survey

    def _judge(
        self, transport: str, results: dict[tuple[int, int], FlowResult]
    ) -> tuple[Survey, dict[str, list[tuple[int, int]]]]:
        """The matrices of one pass, their verdict, and the retest flows of each suspect."""
        n, p = self.n, self.params
        mat: list[list[float | None]] = [[None] * n for _ in range(n)]
        retx: list[list[float | None]] = [[None] * n for _ in range(n)]
        failures = []
        for (a, b), r in results.items():
            if r.get("error"):
                failures.append(r["error"])
                continue
            mat[a][b], retx[a][b] = r.get("gbps"), r.get("retx_pct")
        retx_or_none = retx if transport == "tcp" else None
        verdict = analyze(
            self.hosts,
            mat,
            retx_or_none,
            rel_margin=p.rel_margin,
            retx_floor_pct=p.retx_floor_pct,
            transport=transport,
            fabric=self.fabric,
        )
        by_suspect = retest_flows(self.hosts, verdict, p.retest_peers) if p.retest else {}
        return Survey(transport, mat, retx_or_none, verdict, verdict.suspects, [], [], failures), by_suspect

    def rdma_part(self) -> RdmaPart:
        """The RDMA pass where every host is ready for it; else why it was skipped."""
        p = self.params
        if not p.rdma:
            return RdmaPart("skipped", "not asked (--no-rdma)")
        root = Root.at(p.root) if p.root else Root.live()
        self.ready = matrix_rdma.readiness(
            p.rdma_test,
            root=root,
            address=self.eps[self.env.rank]["addr"],
            device=p.rdma_device,
            which=self.which,
        )
        self.co.put(f"rdma-ready/{self.me}", self.ready.public())
        public = [self.co.get(self.members[i], f"rdma-ready/{i}") for i in range(self.n)]
        endpoints = [
            e for e in (matrix_rdma.endpoint_dict(h, pub) for h, pub in zip(self.hosts, public)) if e
        ]
        why = matrix_rdma.skip_reason(self.hosts, public)
        if why is not None:
            return RdmaPart("skipped", why, p.rdma_test, None, endpoints)
        survey = self.survey("rdma")
        part = RdmaPart("ok", None, p.rdma_test, self.rdma_s, endpoints, survey)
        if survey is not None and not offdiag(survey.matrix_gbps):
            part.status, part.reason = "failed", f"every RDMA flow failed; first: {survey.failures[0]}"
        return part

    # -- the whole run
    def run(self, t_start: float) -> MatrixRun | None:
        self.join()
        if not self.participant:
            self.all_ranks.leave(expected_s(self.params, self.n))
            return None
        if self.params.topology:
            self.place_on_fabric()
        tcp = self.survey("tcp")
        rdma = self.rdma_part()
        if self.me != 0:
            self.all_ranks.leave(self.params.timeout_s)
            return None
        assert tcp is not None
        self.all_ranks.put("done", True)
        self.all_ranks.wait_for_leavers(
            self.env.world_size - 1
        )  # rank 0 hosts the store: outlive its readers
        return MatrixRun(
            self.params,
            self.hosts,
            self.members,
            tcp,
            rdma,
            self.env.launcher,
            time.monotonic() - t_start,
            self.fabric,
        )

    # -- the fabric (--topology)
    def place_on_fabric(self) -> None:
        """Rank 0 reads the topology (``discover``: from every rank's LLDP) and places the hosts
        on it; a topology that does not fit ends every rank with rank 0's one-line reason."""
        from fabricscope.bench.matrix import fabric as fabric_source

        spec = self.params.topology or ""
        reading = (
            fabric_source.lldp_reading(self.hosts[self.me], self.params.lldp_socket)
            if spec == "discover"
            else None
        )
        if reading is not None:
            self.co.put(f"lldp/{self.me}", reading)
        if self.me == 0:
            try:
                readings = (
                    [self.co.get(self.members[i], f"lldp/{i}") for i in range(self.n)]
                    if spec == "discover"
                    else []
                )
                self.fabric = fabric_source.load(spec, self.hosts, readings, self.params.switch_lldp)
                self.co.put("topology", {"ok": True})
            except FabricscopeError as exc:
                self.co.put("topology", {"error": one_line(exc)})
                self.all_ranks.put("done", True)  # ranks that only wait may go
        status = self.co.get(0, "topology")
        if "error" in status:
            raise MatrixError(f"--topology {spec}: {status['error']}")

    def close(self) -> None:
        if self.server is not None:
            with contextlib.suppress(OSError):
                self.server.close()


def run_worker(
    params: MatrixParams,
    env: DistEnv,
    progress: Callable[[str], None] | None = None,
    *,
    which: Callable[[str], str | None] = shutil.which,
) -> MatrixRun | None:
    """Every rank runs this; rank 0 returns the run, the others None."""
    t_start = time.monotonic()
    meeting = _open_store(params, env)
    worker = MatrixWorker(params, env, meeting, progress, which)
    try:
        return worker.run(t_start)
    except MatrixError:
        raise
    except Exception as exc:  # store timeouts (a peer died) and socket errors
        raise MatrixError(
            f"rank {env.rank}: matrix run failed: {one_line(exc)} (a peer died, or a deadline of {params.timeout_s:g} s passed)"
        ) from None
    finally:
        worker.close()
        meeting.close()
