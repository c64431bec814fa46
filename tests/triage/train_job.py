"""A small data-parallel training loop for lab tests of `fabricscope job` (run on each lab host by `lab run`).

Each step: a gradient all_reduce (GRAD floats), a loss all_reduce (1 float), and every 5 steps a
broadcast. A thread writes this rank's Flight Recorder dump every DUMP_EVERY seconds (as a job's
sidecar or TORCH_FR_DUMP_TEMP_FILE would) to DUMP_DIR/<host>/fr_rank<R>.json|.pkl (odd ranks
pickle, even ranks JSON: both formats in every job), replacing it atomically.

Planted faults (env JOB_FAULT, one at a time): ``skip:R:S`` rank R skips step S's loss all_reduce;
``size:R:S`` rank R all-reduces a gradient one element larger at step S; ``slow:R:F`` rank R's
compute (the sleep standing for forward and backward) takes F times as long (a straggler). SIGSTOP/SIGKILL/shaping
are planted from outside. With DUMP_EACH=1 the rank also dumps right after enqueuing each
collective, before waiting for it: gloo ends a rank that receives a mismatched size with
std::terminate (no Python ``finally``), and the entry must already be on disk by then. So at a
planted skip or size fault the other ranks issue their side of the divergent collective only once
the culprit's dump holds its side (DUMP_DIR/.culprit-dumped; CI failed when, under load, the
culprit was ended before its dump was written and the dumps held no mismatch to find). NCCL,
unlike gloo, hangs on a mismatch, and its dumps are written by then.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
HOST = os.environ.get("FABRICSCOPE_HOST", f"host{RANK}")
DUMP_DIR = os.environ["DUMP_DIR"]
STEPS = int(os.environ.get("STEPS", "60"))
GRAD = int(os.environ.get("GRAD", "65536"))
STEP_SLEEP = float(os.environ.get("STEP_SLEEP", "0.05"))
DUMP_EVERY = float(os.environ.get("DUMP_EVERY", "0.5"))
FAULT = os.environ.get("JOB_FAULT", "")
DUMP_EACH = (
    os.environ.get("DUMP_EACH") == "1"
)  # also dump right after each call is enqueued (a crash leaves it)


def dump() -> None:
    folder = os.path.join(DUMP_DIR, HOST)
    os.makedirs(folder, exist_ok=True)
    if RANK % 2:
        data, name = (
            _dump_fr_trace(includeCollectives=True, includeStackTraces=True, onlyActive=False),
            f"fr_rank{RANK}.pkl",
        )
    else:
        text = _dump_fr_trace_json(includeCollectives=True, onlyActive=False)
        data, name = (text if isinstance(text, bytes) else text.encode()), f"fr_rank{RANK}.json"
    tmp = os.path.join(
        folder, f".{name}.{threading.get_ident()}.tmp"
    )  # the dumper thread and DUMP_EACH both write
    with open(tmp, "wb") as out:
        out.write(data)
    os.replace(tmp, os.path.join(folder, name))


def dumper(stop: threading.Event) -> None:
    while not stop.wait(DUMP_EVERY):
        dump()


def fault(kind: str, step: int) -> bool:
    """This rank plants the fault of this kind at this step (skip or size)."""
    return planted_step(kind) == step and planted_rank() == RANK


def planted_step(kind: str) -> int | None:
    """The step of a planted fault of this kind, on every rank (the others wait at it)."""
    return int(FAULT.split(":")[2]) if FAULT.startswith(kind + ":") else None


def planted_rank() -> int | None:
    """The culprit of a planted skip or size fault."""
    return int(FAULT.split(":")[1]) if FAULT.startswith(("skip:", "size:")) else None


def slow_factor() -> float:
    if not FAULT.startswith("slow:"):
        return 1.0
    _, rank, factor = FAULT.split(":")
    return float(factor) if int(rank) == RANK else 1.0


CULPRIT_DUMPED = os.path.join(DUMP_DIR, ".culprit-dumped")


def call(collective, *args, divergent: bool = False) -> None:
    """One collective; ``divergent``: this rank's side of the planted mismatch (culprit or not)."""
    culprit = divergent and planted_rank() == RANK
    if divergent and DUMP_EACH and not culprit:
        deadline = time.monotonic() + 60  # the culprit is alive and about to dump
        while not os.path.exists(CULPRIT_DUMPED) and time.monotonic() < deadline:
            time.sleep(0.01)
    work = collective(*args, async_op=True)
    if DUMP_EACH:
        dump()
        if culprit:
            open(CULPRIT_DUMPED, "w").close()
    work.wait()


def main() -> int:
    dist.init_process_group(
        "gloo",
        rank=RANK,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "120"))),
    )
    stop = threading.Event()
    threading.Thread(target=dumper, args=(stop,), daemon=True).start()
    grad, loss = torch.ones(GRAD), torch.ones(1)
    try:
        skipped = False  # the culprit skipped a call: its next one is its side of the divergence
        for step in range(STEPS):
            time.sleep(STEP_SLEEP * slow_factor())  # the forward and backward pass
            call(
                dist.all_reduce,
                torch.ones(GRAD + 1) if fault("size", step) else grad,
                divergent=planted_step("size") == step or skipped,
            )
            skipped = fault("skip", step)
            if not skipped:
                call(dist.all_reduce, loss, divergent=planted_step("skip") == step)
            if step % 5 == 4:
                call(dist.broadcast, grad, 0, divergent=skipped)
                skipped = False
            print(f"step {step} done", flush=True)
    finally:
        stop.set()
        dump()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
