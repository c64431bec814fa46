"""How the ranks of ``bench collective`` tell rank 0 who they are and what they measured: JSON,
never pickles.

torch's ``all_gather_object`` unpickles what every peer sends, so a stranger that joined the
process group's store as a rank ran code on rank 0. Here each rank sends UTF-8 JSON bytes in a
uint8 tensor through ``dist.all_gather`` (lengths first, so every buffer has one size), signed with
HMAC-SHA256 under the job's secret where there is one (:mod:`fabricscope.jobs.secret`). Rank 0
checks the length cap, parses with a depth cap, validates with pydantic and checks the signature
and the rank; anything else ends the run with an error that names the rank.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricscope.bench.collective.run import CollectiveError
from fabricscope.jobs.rendezvous import parse_json
from fabricscope.jobs.secret import SecretError, from_environment
from fabricscope.jobs.wire import sign, verify

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # 100,000 float timings fit with room to spare


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RankIntro(_Strict):
    rank: int = Field(ge=0, le=1 << 20)
    host: str = Field(max_length=255)
    pid: int = Field(ge=0, le=1 << 32)
    device: str = Field(max_length=64)


class Timings(_Strict):
    times: list[float] = Field(max_length=100_000)
    wrong: int | None = Field(default=None, ge=0)


class _Envelope(_Strict):
    rank: int = Field(ge=0, le=1 << 20)
    stage: str = Field(max_length=64)
    data: dict[str, Any]
    mac: str | None = Field(default=None, max_length=64)


def job_key(launcher: str) -> tuple[str, bytes | None]:
    """(job id, key) for signing; no key where the launcher gives no secret (see docs/security.md)."""
    try:
        secret = from_environment(os.environ, launcher)
    except SecretError as exc:
        raise CollectiveError(str(exc)) from None
    if secret is None:  # Slurm without a token: munge needs the job's store; the collective has torch's
        return "", None
    return secret.job, secret.key


class Exchange:
    """All-gather of JSON messages to rank 0 over the job's process group."""

    def __init__(self, torch: Any, dist: Any, device: Any, rank: int, size: int, launcher: str) -> None:
        self.torch, self.dist, self.device, self.rank, self.size = torch, dist, device, rank, size
        self.job, self.key = job_key(launcher)

    def _encode(self, stage: str, data: dict[str, Any]) -> bytes:
        import json

        message = {
            "rank": self.rank,
            "stage": stage,
            "data": data,
            "mac": sign(self.key, [self.job, self.rank, stage, data]),
        }
        raw = json.dumps(message, separators=(",", ":")).encode()
        if len(raw) > MAX_MESSAGE_BYTES:
            raise CollectiveError(
                f"rank {self.rank}: {stage} message of {len(raw)} bytes exceeds {MAX_MESSAGE_BYTES}"
            )
        return raw

    def all_to_zero(self, stage: str, data: dict[str, Any], model: type[BaseModel]) -> list[BaseModel] | None:
        """Every rank's ``data`` (validated by ``model``) on rank 0, in rank order; None elsewhere."""
        torch, dist = self.torch, self.dist
        raw = self._encode(stage, data)
        length = torch.tensor([len(raw)], dtype=torch.int64, device=self.device)
        lengths = [torch.zeros_like(length) for _ in range(self.size)]
        dist.all_gather(lengths, length)
        sizes = [int(t.item()) for t in lengths]
        too_long = [r for r, n in enumerate(sizes) if not 0 < n <= MAX_MESSAGE_BYTES]
        if too_long:
            raise CollectiveError(
                f"rank {too_long[0]} announced a {stage} message of {sizes[too_long[0]]} bytes (limit {MAX_MESSAGE_BYTES})"
            )
        longest = max(sizes)
        buf = torch.zeros(longest, dtype=torch.uint8, device=self.device)
        buf[: len(raw)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(self.device)
        bufs = [torch.zeros_like(buf) for _ in range(self.size)]
        dist.all_gather(bufs, buf)
        if self.rank != 0:
            return None
        return [
            self._check(r, stage, b[:n].cpu().numpy().tobytes(), model)
            for r, (b, n) in enumerate(zip(bufs, sizes))
        ]

    def _check(self, rank: int, stage: str, raw: bytes, model: type[BaseModel]) -> BaseModel:
        try:
            envelope = _Envelope.model_validate(parse_json(raw.decode("utf-8"), MAX_MESSAGE_BYTES))
            data = model.model_validate(envelope.data)
        except (ValueError, UnicodeDecodeError, ValidationError) as exc:
            first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise CollectiveError(
                f"rank {rank} sent a {stage} message that is not ours ({first}); refused, nothing of it used"
            ) from None
        if envelope.rank != rank or envelope.stage != stage:
            raise CollectiveError(
                f"rank {rank} sent a message for rank {envelope.rank}, {envelope.stage!r}; refused"
            )
        if not verify(self.key, [self.job, rank, stage, envelope.data], envelope.mac):
            raise CollectiveError(
                f"rank {rank} sent a {stage} message not signed with the job's secret (FABRICSCOPE_JOB_TOKEN); refused"
            )
        return data
