"""The job's meeting point: rank 0 serves the job's store (:mod:`fabricscope.jobs.store`) at
MASTER_ADDR:MASTER_PORT, every rank (rank 0 too) connects to it, and :func:`gather` brings every
rank's items to rank 0, as JSON text, in rank order.

Whatever launched the ranks (srun, torchrun, mpirun, ``--launch lab:NAME``), nothing else listens
and no SSH is needed. The store binds to the address the launcher names, signs every message
under the job's secret (:mod:`fabricscope.jobs.secret`) when there is one, and accepts a rank's
node only from the job's node list (:mod:`fabricscope.jobs.nodelist`). A rank that dies shows as
a key that never comes: every wait ends at its deadline with an error that names the rank.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from fabricscope.errors import FabricscopeError
from fabricscope.jobs.client import StoreClient, StoreTimeout
from fabricscope.jobs.frames import ProtocolError, decode_json
from fabricscope.jobs.launch import DistEnv
from fabricscope.jobs.nodelist import job_nodes
from fabricscope.jobs.secret import JobSecret, from_environment, job_id, munge_credential, open_credential
from fabricscope.jobs.store import StoreError, StoreLimits, StoreServer
from fabricscope.jobs.wire import MAX_NODE_CHARS

MAX_ITEMS = 16  # names one rank may hand in to a gather


class RendezvousError(FabricscopeError):
    """A rank could not reach the store, or a peer sent nothing before the deadline."""


@dataclass
class Meeting:
    """This rank's place in the job: its store connection (and, on rank 0, the server)."""

    env: DistEnv
    client: StoreClient
    secret: JobSecret
    nodes: frozenset[str] | None
    server: StoreServer | None = None
    node: str = ""

    @property
    def authenticated(self) -> bool:
        return self.client.authenticated

    def close(self) -> None:
        self.client.close()
        if self.server is not None:
            self.server.close()


def job_secret(env: DistEnv, environ: Mapping[str, str]) -> tuple[JobSecret, bool]:
    """The job's secret and whether it comes through munge (Slurm, no token)."""
    found = from_environment(environ, env.launcher)
    if found is not None:
        return found, False
    key = secrets.token_bytes(32) if env.rank == 0 else None
    return JobSecret(job_id(environ), key, "munge"), True


def open_store(env: DistEnv, timeout_s: float, *, needs: str, node: str = "", environ: Mapping[str, str] = os.environ,
               limits: StoreLimits | None = None) -> Meeting:  # fmt: skip
    """Rank 0 serves the store at MASTER_ADDR:MASTER_PORT; every rank connects (retrying until
    ``timeout_s``: rank 0 may start later). ``needs`` names the command in messages."""
    try:
        secret, by_munge = job_secret(env, environ)
        server = None
        if env.rank == 0:
            munge = (
                (lambda nonce: munge_credential(secret.job, secret.key or b"", nonce, os.getuid(), environ))
                if by_munge
                else None
            )
            server = StoreServer(env.master_addr, env.master_port, env.world_size, secret.job, secret.key,
                                 limits=limits, idle_timeout_s=max(timeout_s, 60.0) * 4, munge=munge)  # fmt: skip
            server.start()
        learned = (
            (lambda cred, nonce: open_credential(cred, secret.job, nonce, environ)) if by_munge else None
        )
        try:
            client = StoreClient.open(env.master_addr, env.master_port, env.rank, secret.job, secret.key, timeout_s,
                                      node=node, from_credential=learned)  # fmt: skip
        except BaseException:
            if server is not None:
                server.close()
            raise
        secret = JobSecret(secret.job, client.key, secret.source if client.key is not None else "none")
        return Meeting(env, client, secret, job_nodes(environ, env.launcher), server, node)
    except FabricscopeError as exc:
        raise RendezvousError(f"{needs}: {exc}") from None


# ----- the gather ---------------------------------------------------------------------------------
@dataclass
class Gathered:
    """What one rank handed in (rank 0's view): items by name (JSON text), its node, and whether
    it came signed under the job's secret; ``error``: why rank 0 did not take it."""

    rank: int
    node: str
    source: str
    items: dict[str, str] = field(default_factory=dict)
    authenticated: bool = False
    error: str | None = None


def _put(meeting: Meeting, items: dict[str, str]) -> None:
    if len(items) > MAX_ITEMS:
        raise RendezvousError(f"rank {meeting.env.rank}: more than {MAX_ITEMS} items to gather")
    chunk = max(1, meeting.client.value_bytes - 1024)
    index: dict[str, int] = {}
    base = f"rank/{meeting.env.rank}/gather"
    for name, text in sorted(items.items()):
        parts = [text[i : i + chunk] for i in range(0, len(text), chunk)] or [""]
        for i, part in enumerate(parts):
            meeting.client.set(f"{base}/{name}/{i}", part)
        index[name] = len(parts)
    meeting.client.set(
        base, json.dumps({"node": meeting.node, "items": index})
    )  # last: its items are all there


ItemName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
ChunkCount = Annotated[int, Field(ge=1, le=4096)]


class _Index(BaseModel):
    """What a rank says it handed in: its node and how many chunks each item has."""

    model_config = ConfigDict(extra="forbid", strict=True)

    node: str = Field(max_length=MAX_NODE_CHARS)
    items: dict[ItemName, ChunkCount] = Field(max_length=MAX_ITEMS)


def _take(meeting: Meeting, rank: int, index_text: str) -> Gathered:
    server = meeting.server
    assert server is not None
    node, source = server.nodes.get(rank, ""), server.sources.get(rank, "?")
    got = Gathered(rank, node, source, authenticated=meeting.authenticated)
    try:
        index = _Index.model_validate(parse_json(index_text, 64 * 1024, 4))
        if index.node != node:
            raise ValueError(f"node {index.node!r} after saying {node!r}")
    except (ValueError, ValidationError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        got.error = f"rank {rank} ({source}) sent a malformed index: {first}"
        return got
    if meeting.nodes is not None and node not in meeting.nodes:
        got.error = f"rank {rank} ({source}) names node {node!r}, which is not one of the job's nodes"
        return got
    base = f"rank/{rank}/gather"
    for name, count in index.items.items():
        got.items[name] = "".join(meeting.client.get(f"{base}/{name}/{i}", 5.0) for i in range(count))
    return got


def gather(meeting: Meeting, items: dict[str, str], timeout_s: float) -> list[Gathered] | None:
    """Every rank hands in ``items`` (name -> JSON text; empty for a rank with nothing to give);
    rank 0 gets every rank's, in rank order, and the others None. Ranks whose items have not come
    within ``timeout_s`` of rank 0 asking end the gather with an error naming every one of them."""
    env = meeting.env
    _put(meeting, items)
    if env.rank != 0:
        return None
    out: list[Gathered] = []
    missing: list[int] = []
    deadline = time.monotonic() + timeout_s
    for rank in range(env.world_size):
        try:
            text = meeting.client.get(f"rank/{rank}/gather", max(0.1, deadline - time.monotonic()))
        except StoreTimeout:
            missing.append(rank)
            continue
        except StoreError as exc:
            raise RendezvousError(str(exc)) from None
        out.append(_take(meeting, rank, text))
    if missing:
        names = ", ".join(f"rank {r}" for r in missing)
        raise RendezvousError(
            f"{names} sent nothing within {timeout_s:g} s (died, hangs, or cannot reach rank 0)"
        )
    return out


def parse_json(text: str, max_bytes: int, max_depth: int = 32) -> Any:
    """A peer's JSON text, with caps on size and nesting; :class:`ValueError` if it breaks them."""
    if len(text) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    try:
        return decode_json(text.encode("utf-8"), max_depth)
    except (ProtocolError, UnicodeEncodeError) as exc:
        raise ValueError(str(exc) if isinstance(exc, ProtocolError) else "not UTF-8 text") from None
