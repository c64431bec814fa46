"""The per-job secret: what lets rank 0 tell the job's own ranks from a stranger on the network.

Where it comes from, in order:

* ``FABRICSCOPE_JOB_TOKEN`` when set (by the operator for srun/torchrun/mpirun, or by our own
  launchers, ``--launch local:N`` and ``--launch lab:NAME``, which generate a random one for each
  run and hand it to every rank in its environment). A weak one is refused.
* Under Slurm without a token: munge, which runs on every Slurm node. Rank 0 draws a random secret
  and hands each connecting rank a munge credential that only the job's user can decode
  (``munge -u UID``), carrying the job id, the secret and that rank's own nonce; the rank decodes
  it with ``unmunge`` (munge checks that it was made on a host with the cluster's key) and checks
  who made it (the job's user), the job id and its nonce. Every rank asks for its own credential,
  so each credential is decoded exactly once (munge refuses a replayed one per node, and several
  ranks share a node).
* Otherwise (torchrun, mpirun without a token): no secret. A run may still judge, but nothing it
  gathered is authenticated, so scheduler actions are refused.

munge and unmunge run only through :mod:`fabricscope.host.command`, with deadlines.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from fabricscope.errors import FabricscopeError, one_line

TOKEN_ENV = "FABRICSCOPE_JOB_TOKEN"
JOB_ID_ENV = "FABRICSCOPE_JOB_ID"  # set by our own launchers; Slurm's and torchrun's ids otherwise
MUNGE_SOCKET_ENV = "FABRICSCOPE_MUNGE_SOCKET"  # munged's socket, where it is not the default
MIN_TOKEN_CHARS = 16
MIN_TOKEN_DISTINCT = 8
MUNGE_TIMEOUT_S = 10.0
MUNGE_TTL_S = 120
SET_TOKEN_HINT = f"export {TOKEN_ENV}=$(openssl rand -hex 16) in the job's environment (every rank the same)"

_UID_LINE = re.compile(r"UID:\s+\S+\s+\((\d+)\)\Z")


class SecretError(FabricscopeError):
    """The job's secret is missing where required, too weak, or could not be obtained."""


@dataclass(frozen=True)
class JobSecret:
    """The job id every message is bound to, the key (None: nothing is authenticated) and where
    the key came from: ``token``, ``launcher`` (our own --launch), ``munge`` or ``none``."""

    job: str
    key: bytes | None
    source: str

    @property
    def authenticated(self) -> bool:
        return self.key is not None


def job_id(environ: Mapping[str, str]) -> str:
    return environ.get(JOB_ID_ENV) or environ.get("SLURM_JOB_ID") or environ.get("TORCHELASTIC_RUN_ID") or ""


def check_token(token: str) -> bytes:
    """The token as a key; :class:`SecretError` when it is too weak to stop a guesser."""
    if len(token) < MIN_TOKEN_CHARS or len(set(token)) < MIN_TOKEN_DISTINCT:
        raise SecretError(
            f"{TOKEN_ENV} is too weak: use at least {MIN_TOKEN_CHARS} characters with at least "
            f"{MIN_TOKEN_DISTINCT} different ones, e.g. {SET_TOKEN_HINT}"
        )
    return token.encode("utf-8", errors="surrogateescape")


def from_environment(environ: Mapping[str, str], launcher: str) -> JobSecret | None:
    """The secret the environment gives; None where it must come from munge (Slurm, no token)."""
    job = job_id(environ)
    token = environ.get(TOKEN_ENV)
    if token:
        ours = launcher.startswith(("local:", "lab:"))
        return JobSecret(job, check_token(token), "launcher" if ours else "token")
    if launcher == "slurm" and environ.get("SLURM_JOB_ID"):
        return None
    return JobSecret(job, None, "none")


def launcher_environment() -> dict[str, str]:
    """What our own launchers add to every rank's environment: a fresh token and job id."""
    return {TOKEN_ENV: secrets.token_hex(32), JOB_ID_ENV: f"fabricscope-{secrets.token_hex(8)}"}


# ----- munge ---------------------------------------------------------------------------------------
def _socket_args(environ: Mapping[str, str]) -> list[str]:
    sock = environ.get(MUNGE_SOCKET_ENV)
    return [f"--socket={sock}"] if sock else []


def munge_credential(
    job: str, key: bytes, nonce: str, uid: int, environ: Mapping[str, str] = os.environ
) -> str:
    """Rank 0's credential for one asking rank: only ``uid`` can decode it, once, within the TTL."""
    from fabricscope.host import command

    payload = json.dumps({"job": job, "secret": key.hex(), "nonce": nonce}).encode()
    argv = ["munge", "--restrict-uid", str(uid), "--ttl", str(MUNGE_TTL_S), *_socket_args(environ)]
    try:
        out = command.run(argv, MUNGE_TIMEOUT_S, input_bytes=payload)
    except OSError as exc:
        raise SecretError(f"cannot run munge (is munge installed?): {one_line(exc)}") from None
    if out.rc != 0:
        raise SecretError(f"munge failed: {out.why_stopped or one_line(out.stderr_text) or f'exit {out.rc}'}")
    return out.stdout_text.strip()


def open_credential(credential: str, job: str, nonce: str, environ: Mapping[str, str] = os.environ) -> bytes:
    """The job's key from rank 0's credential, after checking that munge vouches for it, that the
    job's own user made it, and that it names this job and this rank's nonce."""
    from fabricscope.host import command

    if not credential.startswith("MUNGE:") or len(credential) > 4096:
        raise SecretError("rank 0 sent no munge credential")
    try:
        out = command.run(
            ["unmunge", *_socket_args(environ)], MUNGE_TIMEOUT_S, input_bytes=credential.encode()
        )
    except OSError as exc:
        raise SecretError(f"cannot run unmunge (is munge installed?): {one_line(exc)}") from None
    head, _, payload = out.stdout_text.partition("\n\n")
    if out.rc != 0:
        status = next((line for line in head.splitlines() if line.startswith("STATUS:")), out.stderr_text)
        raise SecretError(f"unmunge refused rank 0's credential: {one_line(status) or f'exit {out.rc}'}")
    uids = [int(m.group(1)) for m in map(_UID_LINE.match, head.splitlines()) if m]
    if uids[:1] != [os.getuid()]:
        raise SecretError(
            f"rank 0's munge credential was made by uid {uids[:1] or '?'}, not this job's user ({os.getuid()})"
        )
    try:
        fields = json.loads(payload)
        if fields["job"] != job or fields["nonce"] != nonce:
            raise SecretError("rank 0's munge credential is for another job or request")
        return bytes.fromhex(fields["secret"])
    except (ValueError, KeyError, TypeError):
        raise SecretError("rank 0's munge credential carries no readable secret") from None
