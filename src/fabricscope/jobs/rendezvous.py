"""The job's meeting point: torch.distributed's TCPStore at MASTER_ADDR:MASTER_PORT, with a
deadline on every wait, and the one gather that launched commands need.

Whatever launched the ranks (srun, torchrun, mpirun, ``--launch lab:NAME``), rank 0 hosts the
store and the others connect to it; nothing of our own listens, and no SSH is needed. A rank
that dies shows as a key that never comes: every wait ends at its deadline with an error that
names the rank, instead of hanging the job.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from fabricscope.errors import FabricscopeError, one_line
from fabricscope.jobs.launch import DistEnv


class RendezvousError(FabricscopeError):
    """A rank could not reach the store, or a peer sent nothing before the deadline."""


def open_store(env: DistEnv, timeout_s: float, *, needs: str) -> Any:
    """Rank 0 serves the store and waits (up to ``timeout_s``) for every other rank to connect;
    the others connect. ``needs`` names the command, for the message when torch is missing."""
    try:
        from torch.distributed import TCPStore
    except ImportError:
        raise RendezvousError(f"{needs} needs torch (for torch.distributed's store): pip install 'fabricscope[torch]'") from None
    try:
        return TCPStore(env.master_addr, env.master_port, env.world_size, env.rank == 0,
                        timeout=timedelta(seconds=timeout_s), wait_for_workers=True)
    except Exception as exc:
        raise RendezvousError(
            f"rank {env.rank}: cannot reach the job's store at {env.master_addr}:{env.master_port} "
            f"within {timeout_s:g} s: {one_line(exc)}"
        ) from None


def gather(store: Any, env: DistEnv, items: dict[str, bytes], timeout_s: float) -> list[dict[str, bytes]] | None:
    """Every rank hands in ``items`` (name -> bytes; empty for a rank with nothing to give); rank 0
    gets them all, in rank order, and the others None. A rank whose items have not come within
    ``timeout_s`` of rank 0 asking ends the gather with an error naming it."""
    names = sorted(items)
    for name in names:
        store.set(f"gather/{env.rank}/{name}", items[name])
    store.set(f"gather/{env.rank}", ",".join(names))  # last: its items are all there
    if env.rank != 0:
        return None
    out: list[dict[str, bytes]] = []
    deadline = time.monotonic() + timeout_s
    for rank in range(env.world_size):
        left = max(0.1, deadline - time.monotonic())
        try:
            store.wait([f"gather/{rank}"], timedelta(seconds=left))
            listed = store.get(f"gather/{rank}").decode()
            out.append({name: store.get(f"gather/{rank}/{name}") for name in listed.split(",") if name})
        except RendezvousError:
            raise
        except Exception as exc:
            raise RendezvousError(f"rank {rank} sent nothing within {timeout_s:g} s (it died or hangs): {one_line(exc)}") from None
    return out
