"""A real Prometheus server (Debian package prometheus) on loopback scrapes `fabricscope exporter`
running on a fixture host; the test reads series, rule health and alert states over the HTTP API,
and evaluates every dashboard query there."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from fabricscope.monitor import dashboard
from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import ALERTS_FILE, DASHBOARD_FILE, prometheus_binary

DEADLINE_S = 60.0
SOCKET_LINE = "node1:852750:852802 [0] NCCL INFO Using network Socket\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, probe: Callable[[], Any], deadline_s: float = DEADLINE_S) -> Any:
    end = time.monotonic() + deadline_s
    last: Any = None
    while time.monotonic() < end:
        try:
            last = probe()
        except OSError as exc:  # not up yet
            last = exc
        else:
            if last:
                return last
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class PromAPI:
    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **params: str) -> dict[str, Any]:
        url = f"{self.base}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        doc = self.get("/api/v1/query", query=expr)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def scalar(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None


def start_exporter(
    root: Path, log_glob: str, err: IO[str], stderr_path: Path
) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fabricscope",
            "exporter",
            "--root",
            str(root),
            "--listen",
            "127.0.0.1:0",
            "--nccl-log",
            log_glob,
            "--doctor-interval",
            "30",
        ],
        stdout=subprocess.DEVNULL,
        stderr=err,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )

    def url() -> str | None:
        if proc.poll() is not None:
            raise AssertionError(f"exporter exited {proc.returncode}: {stderr_path.read_text()}")
        match = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics)", stderr_path.read_text())
        return match.group(1) if match else None

    try:
        return proc, wait_for("the exporter to listen", url)
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PromAPI, Path]]:
    prometheus = prometheus_binary()
    work = tmp_path_factory.mktemp("prom")
    log_dir = work / "nccl"
    log_dir.mkdir()
    (log_dir / "rank0.log").write_text("")
    with open(work / "exporter.err", "w") as exporter_err, open(work / "prometheus.err", "w") as prom_err:
        exporter, metrics_url = start_exporter(
            FIXTURE_HOSTS / "ib-degraded", str(log_dir / "*.log"), exporter_err, work / "exporter.err"
        )
        prom: subprocess.Popen | None = None
        try:
            target = urllib.parse.urlsplit(metrics_url).netloc
            config = work / "prometheus.yml"
            config.write_text(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                f"rule_files:\n  - {ALERTS_FILE}\n"
                "scrape_configs:\n  - job_name: fabricscope\n    static_configs:\n"
                f"      - targets: ['{target}']\n"
            )
            port = free_port()
            prom = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={work / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=subprocess.DEVNULL,
                stderr=prom_err,
            )
            api = PromAPI(f"http://127.0.0.1:{port}")
            wait_for(
                "prometheus to be ready",
                lambda: urllib.request.urlopen(f"{api.base}/-/ready", timeout=2).status == 200,
            )
            yield api, log_dir / "rank0.log"
        finally:
            for proc in (prom, exporter):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            if prom is not None:
                prom.wait(30)
            # SIGTERM is a clean shutdown for the exporter: exit status 0
            assert exporter.wait(30) == 0, (work / "exporter.err").read_text()


def test_prometheus_scrapes_the_exporter(stack) -> None:
    api, _log = stack
    wait_for("a successful scrape", lambda: api.scalar('up{job="fabricscope"}') == 1)
    assert api.scalar('fabricscope_rdma_port_state_id{device="mlx5_5"}') == 1
    assert api.scalar('fabricscope_rdma_port_state_id{device="mlx5_0"}') == 4
    assert api.scalar('fabricscope_rdma_port_rate_bytes_per_second{device="mlx5_3"}') == 2.5e10
    assert api.scalar('fabricscope_rdma_port_expected_rate_bytes_per_second{device="mlx5_3"}') == 5e10
    assert api.scalar('fabricscope_pcie_link_width_lanes{device="mlx5_6"}') == 8
    assert api.scalar("count(fabricscope_rdma_port_info)") == 8
    assert api.scalar("min(fabricscope_collector_success)") == 1
    assert api.scalar("scrape_samples_scraped") > 500
    wait_for(
        "the background doctor's findings",
        lambda: (
            api.scalar('fabricscope_finding{id="rdma.port_state",severity="fail",subject="mlx5_5/1"}') == 1
        ),
    )


def test_rules_load_and_alerts_follow_the_faults(stack) -> None:
    api, log = stack
    wait_for("a successful scrape", lambda: api.scalar('up{job="fabricscope"}') == 1)
    groups = wait_for(
        "rule evaluation",
        lambda: [
            g
            for g in api.get("/api/v1/rules")["data"]["groups"]
            if all(r.get("lastEvaluation", "").startswith("20") for r in g["rules"])
        ],
    )
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == 15
    assert {r["health"] for r in rules} == {"ok"}, [
        (r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"
    ]

    def alerts() -> dict[tuple[str, str], str]:
        found = {}
        for alert in api.get("/api/v1/alerts")["data"]["alerts"]:
            labels = alert["labels"]
            found[(labels["alertname"], labels.get("device", ""))] = alert["state"]
        return found

    expected = {
        ("FabricscopeRdmaPortDown", "mlx5_5"),
        ("FabricscopeRdmaLinkRateDegraded", "mlx5_3"),
        ("FabricscopePcieLinkDegraded", "mlx5_6"),
    }

    def all_expected() -> dict[tuple[str, str], str] | None:
        found = alerts()
        return found if expected <= set(found) else None

    state = wait_for("the degraded host's alerts", all_expected)
    assert all(state[key] == "pending" for key in expected)  # they have a `for:` clause
    # the healthy ports and collectors raise nothing
    assert {name for name, _device in state} <= {name for name, _device in expected} | {
        "FabricscopeDoctorFailFinding"
    }

    # NCCL falls back to sockets on a node with active RDMA ports: fires (no `for:`)
    with open(log, "a") as handle:
        handle.write(SOCKET_LINE * 2)
    wait_for(
        "the socket-fallback counter", lambda: api.scalar("fabricscope_nccl_socket_fallbacks_total") == 2
    )
    wait_for(
        "FabricscopeNcclSocketFallback to fire",
        lambda: alerts().get(("FabricscopeNcclSocketFallback", "")) == "firing",
    )


def test_every_dashboard_query_evaluates(stack) -> None:
    api, _log = stack
    wait_for("a successful scrape", lambda: api.scalar('up{job="fabricscope"}') == 1)
    time.sleep(2.5)  # a few samples, so that rate() has two points
    doc = json.loads(DASHBOARD_FILE.read_text())
    empty = []
    for query in dashboard.queries(doc):
        if query.startswith("label_values("):
            metric = re.match(r"label_values\(([^,{]+)", query).group(1)
            assert api.query(f"count({metric})"), query
            continue
        expr = query.replace("$__rate_interval", "10s").replace('=~"$instance"', '=~".*"')
        expr = expr.replace('=~"$device"', '=~".*"').replace('=~"$netdev"', '=~".*"')
        doc_ = api.get("/api/v1/query", query=expr)
        assert doc_["status"] == "success", (query, doc_)
        if not doc_["data"]["result"]:
            empty.append(query)
    # some panels are empty on an InfiniBand host by nature (RoCE, PFC, ENA, NCCL errors, ...);
    # the link-health and PCIe panels are not
    assert not [
        q for q in empty if "fabricscope_rdma_port_state_id" in q or "fabricscope_pcie_link_width_lanes" in q
    ]
