"""`fabricscope exporter`, `monitoring assets` and `history export-textfile` as users run them."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from fabricscope.bench.results.schema import BenchResult
from fabricscope.monitor.assets import ALERTS, DASHBOARD, asset_text
from fabricscope.store import Store
from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import GOLDEN, normalise, promtool, samples, value


def fabricscope(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fabricscope: error:"), proc.stderr
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in proc.stderr


def test_once_prints_the_golden_exposition() -> None:
    proc = fabricscope(
        "exporter", "--once", "--root", str(FIXTURE_HOSTS / "ib-degraded"), "--doctor-interval", "0"
    )
    assert proc.returncode == 0, proc.stderr
    assert normalise(proc.stdout) == (GOLDEN / "ib-degraded.prom").read_text()


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--listen", "9731"], "expected ADDR:PORT"),
        (["--listen", "example.com:9731"], "not an IP address"),
        (["--root", "/nonexistent/snapshot"], "no such file or directory"),
        (
            ["--doctor-interval", "5"],
            r"takes 10 to 86,400 seconds, or 0 \(off\)",
        ),  # monitor/intervals.py (issue 26 item 5)
        (["--ethtool-interval", "0.1"], "takes 1 to 3,600 seconds"),
        (["--log-level", "loud"], "--log-level"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], pattern: str) -> None:
    assert_one_line_error(fabricscope("exporter", *args), pattern)


def test_busy_port_is_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = fabricscope(
            "exporter", "--root", str(FIXTURE_HOSTS / "cloud-tcp"), "--listen", f"127.0.0.1:{port}"
        )
    assert_one_line_error(proc, f"cannot listen on 127.0.0.1:{port}")


def test_serves_until_sigterm(tmp_path: Path) -> None:
    err_path = tmp_path / "err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fabricscope",
                "exporter",
                "--root",
                str(FIXTURE_HOSTS / "cloud-tcp"),
                "--listen",
                "127.0.0.1:0",
                "--doctor-interval",
                "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            url = None
            deadline = time.monotonic() + 60
            while url is None and time.monotonic() < deadline and proc.poll() is None:
                match = re.search(r"serving (http://\S+/metrics)", err_path.read_text())
                url = match.group(1) if match else None
                time.sleep(0.1)
            assert url is not None, err_path.read_text()
            assert url.startswith("http://127.0.0.1:")  # loopback unless told otherwise
            with urllib.request.urlopen(url, timeout=10) as response:
                parsed = samples(response.read().decode())
            assert value(parsed, "fabricscope_collector_success", collector="tcp") == 1
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def test_monitoring_assets(tmp_path: Path) -> None:
    out = tmp_path / "assets"
    proc = fabricscope("monitoring", "assets", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / DASHBOARD).read_text() == asset_text(DASHBOARD)
    assert (out / ALERTS).read_text() == asset_text(ALERTS)
    proc = fabricscope("monitoring", "assets", "--out", str(out), "--json")
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "fabricscope.monitoring_assets/v1"
    assert {f["status"] for f in doc["files"]} == {"unchanged"}
    # a file the user edited is not overwritten silently
    (out / ALERTS).write_text("# my local tweaks\n")
    assert_one_line_error(fabricscope("monitoring", "assets", "--out", str(out)), "use --force")
    assert (out / ALERTS).read_text() == "# my local tweaks\n"
    proc = fabricscope("monitoring", "assets", "--out", str(out), "--force")
    assert proc.returncode == 0 and (out / ALERTS).read_text() == asset_text(ALERTS)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line_error(fabricscope("monitoring", "assets", "--out", str(blocker)), str(blocker))


def _result(kind: str, peer: str, metrics: dict, params: dict, status: str = "ok") -> BenchResult:
    result = BenchResult(kind=kind, params={"peer": peer, **params}, metrics=metrics, duration_s=10.0)
    if status == "failed":
        result.fail("peer vanished")
    return result


def test_history_export_textfile(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    with Store.open(db) as store:
        store.save(
            _result("tcp", "10.0.0.2", {"throughput_gbps": 90.0, "retransmits_count": 12}, {"streams": 4})
        )
        store.save(
            _result("tcp", "10.0.0.2", {"throughput_gbps": 94.5, "retransmits_count": 3}, {"streams": 4})
        )
        store.save(_result("tcp", "10.0.0.2", {"throughput_gbps": 40.0}, {"streams": 1}))
        store.save(
            _result(
                "latency",
                "10.0.0.2",
                {"rtt_p99_us": 41.0, "loss_pct": 0.5, "run_duration_s": 9.0},
                {"size_bytes": 64},
            )
        )
        store.save(_result("udp", "10.0.0.3", {}, {"rate": "5G"}, status="failed"))
    textfile_dir = tmp_path / "textfile"
    textfile_dir.mkdir()
    proc = fabricscope("history", "export-textfile", str(textfile_dir), "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["series_groups"] == 4 and doc["runs_considered"] == 5
    text = (textfile_dir / "fabricscope_bench.prom").read_text()
    check = subprocess.run(
        [promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0 and check.stdout.strip() == "", check.stdout + check.stderr
    parsed = samples(text)
    throughput = sorted(
        v for (name, _l), v in parsed.items() if name == "fabricscope_bench_throughput_bytes_per_second"
    )
    assert throughput == [40e9 / 8, 94.5e9 / 8]  # the latest 4-stream run, not the older one
    values = {name: v for (name, _labels), v in parsed.items()}
    assert values["fabricscope_bench_rtt_p99_seconds"] == pytest.approx(41e-6)
    assert values["fabricscope_bench_loss_ratio"] == pytest.approx(0.005)
    durations = [v for (name, _l), v in parsed.items() if name == "fabricscope_bench_run_duration_seconds"]
    assert durations == [10.0] * 4  # a bench metric cannot overwrite the exporter's own families
    oks = sorted(v for (name, _l), v in parsed.items() if name == "fabricscope_bench_ok")
    assert oks == [0.0, 1.0, 1.0, 1.0]
    assert not list(textfile_dir.glob("*.prom.*"))  # no temporary file left behind
    assert_one_line_error(
        fabricscope("history", "export-textfile", str(tmp_path / "missing"), "--db", str(db)),
        "no such directory",
    )
