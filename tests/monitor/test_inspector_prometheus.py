"""A real Prometheus (Debian package prometheus) scrapes `fabricscope exporter --nccl-inspector`
while a generator replays NCCL Inspector dumps with a slowdown planted on one rank and a stalled
communicator: the alerts go pending naming the communicator, rank, node and NIC, and the
expected-bandwidth ratio Prometheus stores is the planted factor."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path

from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import ALERTS_FILE, prometheus_binary
from tests.monitor.inspector_gen import Communicator, DumpWriter
from tests.monitor.test_prometheus_integration import PromAPI, free_port, wait_for

SLOW = "0x7f8c496ae9f661"
STALLED = "0xe62dedaa97644a"
FACTOR = 0.5


def _replay(writer: DumpWriter, comms: list[Communicator], stop: threading.Event) -> None:
    rounds = 0
    while not stop.wait(0.5):
        rounds += 1
        if rounds == 4:
            comms[1].stalled = True  # the second communicator stops completing collectives
        writer.round(comms)


def test_slowdown_and_stall_fire_in_a_real_prometheus(tmp_path: Path) -> None:
    prometheus = prometheus_binary()
    dump = tmp_path / "inspector"
    dump.mkdir()
    writer = DumpWriter(dump, hostname="gpu-node-2")
    comms = [
        # ranks 8-15 of 16 on 2 nodes run here; rank 11 is GPU 3, whose nearest NIC is mlx5_3
        Communicator(
            SLOW,
            "DP Group 0",
            16,
            2,
            tuple(range(8, 16)),
            ops=("AllReduce",),
            sizes=(1 << 30,),
            slow={11: FACTOR},
        ),
        Communicator(STALLED, "TP Group 1", 8, 1, tuple(range(8)), ops=("ReduceScatter",), sizes=(64 << 20,)),
    ]
    writer.round(comms)
    err_path = tmp_path / "exporter.err"
    stop = threading.Event()
    with open(err_path, "w") as err, open(tmp_path / "prometheus.err", "w") as prom_err:
        exporter = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fabricscope",
                "exporter",
                "--root",
                str(FIXTURE_HOSTS / "ib-ndr-healthy"),
                "--listen",
                "127.0.0.1:0",
                "--nccl-inspector",
                str(dump),
                "--nccl-from-start",
                "--doctor-interval",
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        prom = None
        replay = threading.Thread(target=_replay, args=(writer, comms, stop), daemon=True)
        try:
            url = wait_for(
                "the exporter to listen",
                lambda: (
                    (m := re.search(r"serving (http://127\.0\.0\.1:\d+/metrics)", err_path.read_text()))
                    and m.group(1)
                ),
            )
            replay.start()
            config = tmp_path / "prometheus.yml"
            config.write_text(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                f"rule_files:\n  - {ALERTS_FILE}\n"
                "scrape_configs:\n  - job_name: fabricscope\n    static_configs:\n"
                f"      - targets: ['{urllib.parse.urlsplit(url).netloc}']\n"
            )
            port = free_port()
            prom = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=subprocess.DEVNULL,
                stderr=prom_err,
            )
            api = PromAPI(f"http://127.0.0.1:{port}")
            wait_for(
                "prometheus", lambda: urllib.request.urlopen(f"{api.base}/-/ready", timeout=2).status == 200
            )

            ratio = wait_for(
                "the slow rank's ratio",
                lambda: api.scalar(f'fabricscope_nccl_rank_busbw_ratio{{comm="{SLOW}",rank="11"}}'),
            )
            assert abs(ratio - FACTOR) <= 0.1 * FACTOR, ratio
            healthy = api.scalar(
                f'max(abs(fabricscope_nccl_rank_busbw_ratio{{comm="{SLOW}",rank!="11"}} - 1))'
            )
            assert healthy is not None and healthy <= 0.1

            def alert(name: str, comm: str) -> dict | None:
                for item in api.get("/api/v1/alerts")["data"]["alerts"]:
                    if item["labels"]["alertname"] == name and item["labels"].get("comm") == comm:
                        return item
                return None

            slow = wait_for(
                "FabricscopeNcclBusbwBelowExpected", lambda: alert("FabricscopeNcclBusbwBelowExpected", SLOW)
            )
            assert slow["state"] in ("pending", "firing")
            assert {k: slow["labels"][k] for k in ("rank", "node", "nic", "rail")} == {
                "rank": "11",
                "node": "gpu-node-2",
                "nic": "mlx5_3",
                "rail": "3",
            }
            stalled = wait_for(
                "FabricscopeNcclCollectiveStalled",
                lambda: alert("FabricscopeNcclCollectiveStalled", STALLED),
                deadline_s=90,
            )
            assert stalled["state"] in ("pending", "firing")
            assert stalled["labels"]["node"] == "gpu-node-2" and stalled["labels"]["nic"].startswith("mlx5_")
            # the communicator that keeps running does not look stalled
            assert alert("FabricscopeNcclCollectiveStalled", SLOW) is None
        finally:
            stop.set()
            for proc in (prom, exporter):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            if prom is not None:
                prom.wait(30)
            assert exporter.wait(30) == 0, err_path.read_text()
