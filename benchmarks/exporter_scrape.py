"""Exporter performance against the targets of issue #7, on the 8-HCA fixture host.

    python benchmarks/exporter_scrape.py                 # full run (about 45 s)
    python benchmarks/exporter_scrape.py --duration 5    # quick look
    python benchmarks/exporter_scrape.py --inspector     # NCCL Inspector case only (issue 25)

Reference figures (issue #7): one scrape of the 8-HCA fixture host under 50 ms; exporter resident
memory under 80 MB; 50 concurrent scrapers for 30 s get no error. Measured here:

1. collection cost in process: ``Exporter.render()`` (all collectors + text exposition), N times;
2. end to end over HTTP against ``fabricscope exporter`` in its own process (doctor and NCCL log
   follower enabled, as in production): sequential scrapes;
3. 50 concurrent scrapers (keep-alive connections, 10 s timeout like Prometheus' default
   scrape_timeout) for 30 s: errors, latency percentiles, scrapes/s;
4. resident memory of the exporter process (VmRSS after warm-up, VmHWM peak after the load).

With ``--inspector``: the exporter follows NCCL Inspector dumps of 64 communicators x 16
collectives x 8 size buckets (8,192 series keys; tests/monitor/inspector_gen.py writes the
plugin's format): the scrape median (target under 50 ms) when every key has moved since the last
scrape (one record per key read in between by the background poll, which also formats what
changed: its CPU is printed, not counted in the scrape; the exporter's worst case, and a busy
job's ordinary one at a 15 s scrape interval), also when nothing has; and the follower's CPU while
1,000 collectives a second are written (target under 5% of a core: the poll thread's CPU time over
wall time, the writer's own CPU not counted; ``--follow-seconds 0`` skips that part).

Prints each figure with its ratio to the target; exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))  # this tree's code, before anything imports an installed one

from fixture_hosts import fixture_hosts  # noqa: E402 (after the path above)

DEFAULT_ROOT = fixture_hosts() / "ib-ndr-healthy"
TARGET_SCRAPE_MS = 50.0
TARGET_RSS_MB = 80.0
SCRAPE_TIMEOUT_S = 10.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def in_process(root: Path, count: int) -> dict[str, float]:
    sys.path.insert(0, str(REPO / "src"))
    from fabricscope.host import Root
    from fabricscope.monitor.exporter import Exporter, ExporterOptions

    exporter = Exporter(Root.at(root), ExporterOptions(doctor_interval_s=0))
    exporter.prime()
    exporter.render()  # warm caches (imports, first directory walk)
    times = []
    size = 0
    for _ in range(count):
        started = time.perf_counter()
        body = exporter.render()
        times.append((time.perf_counter() - started) * 1000)
        size = len(body)
    samples = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    return {
        "median_ms": statistics.median(times),
        "p99_ms": percentile(times, 99),
        "max_ms": max(times),
        "bytes": size,
        "samples": samples,
    }


def inspector_case(
    root: Path, seconds: float = 10.0, rate: int = 1000, scrapes: int = 30
) -> dict[str, float]:
    """64 communicators x 16 collectives x 8 size buckets followed; scrape time and follower CPU."""
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(REPO))
    from tests.monitor.inspector_gen import OPS, record_line, true_busbw_gbs

    from fabricscope.host import Root
    from fabricscope.monitor.exporter import Exporter, ExporterOptions

    ops = [
        *OPS,
        *(f"Op{i}" for i in range(len(OPS), 16)),
    ]  # NCCL has 6 collectives the model knows; 10 more names
    sizes = [(1 << 20) << (2 * i) for i in range(8)]  # 1 MiB .. 16 GiB: 8 buckets
    comms = [f"0x{0x7F8C496AE9F600 + i:x}" for i in range(64)]
    with tempfile.TemporaryDirectory(prefix="fabricscope-inspector-") as tmp:
        dump = Path(tmp) / "rank.log"
        keys = [(c, op, size) for c in comms for op in ops for size in sizes]

        def lines(n: int, start: int) -> str:
            now_us = int(time.time() * 1e6)
            out = []
            for i in range(start, start + n):
                comm, op, size = keys[i % len(keys)]
                bw = true_busbw_gbs(op, size, 16, 2) if op in OPS else 100.0
                out.append(
                    record_line(
                        comm_id=comm,
                        comm_name="",
                        rank=8 + i % 8,
                        n_ranks=16,
                        n_nodes=2,
                        op=op,
                        seq=i,
                        size=size,
                        busbw_gbs=bw,
                        hostname="node",
                        pid=1,
                        now_us=now_us,
                    )
                )
            return "\n".join(out) + "\n"

        dump.write_text(lines(len(keys), 0))
        exporter = Exporter(
            Root.at(root), ExporterOptions(doctor_interval_s=0, inspector_dirs=(tmp,), nccl_from_start=True)
        )
        exporter.prime()
        body = exporter.render()
        task = exporter.inspector_task
        assert task is not None

        def timed(between: Callable[[int], None]) -> tuple[list[float], list[float]]:
            walls, cpus = [], []
            for i in range(scrapes):
                between(i)
                started, started_cpu = time.perf_counter(), time.thread_time()
                exporter.render()
                walls.append((time.perf_counter() - started) * 1000)
                cpus.append((time.thread_time() - started_cpu) * 1000)
            return walls, cpus

        poll_cpus: list[float] = []

        def every_key_moves(i: int) -> None:  # one record per key, read by the follower (not timed)
            with open(dump, "a") as handle:
                handle.write(lines(len(keys), len(keys) * (i + 1)))
            before = time.thread_time()
            task.run_once()  # the background poll: reads the records, formats what changed
            poll_cpus.append((time.thread_time() - before) * 1000)

        idle_times, idle_cpu = timed(lambda _i: None)
        times, cpu_times = timed(every_key_moves)
        series = sum(1 for line in body.decode().splitlines() if line.startswith("fabricscope_nccl_"))
        cpu = 0.0
        written = len(keys) * (scrapes + 1)
        started_wall = time.monotonic()
        for second in range(int(seconds)):
            with open(dump, "a") as handle:
                handle.write(lines(rate, written))
            written += rate
            before = time.thread_time()
            task.run_once()
            cpu += time.thread_time() - before
            time.sleep(max(0.0, started_wall + second + 1 - time.monotonic()))
        wall = max(time.monotonic() - started_wall, 1e-9)
        counts = exporter.inspector.counts()
        exporter.stop()
    return {
        "keys": len(keys),
        "nccl_series": series,
        "scrape_median_ms": statistics.median(times),
        "scrape_p99_ms": percentile(times, 99),
        "scrape_cpu_median_ms": statistics.median(cpu_times),
        "poll_cpu_median_ms": statistics.median(poll_cpus),
        "idle_scrape_median_ms": statistics.median(idle_times),
        "idle_scrape_cpu_median_ms": statistics.median(idle_cpu),
        "collectives_per_s": rate,
        "follower_cpu_share": cpu / wall,
        "records": counts.records,
        "bad_lines": counts.bad_lines,
    }


def status_kb(pid: int, field: str) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return float(match.group(1)) if match else float("nan")


def start_exporter(root: Path, log_dir: Path) -> tuple[subprocess.Popen, str, Path]:
    err_path = log_dir / "exporter.err"
    err = open(err_path, "w")  # lives as long as the process
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
            str(log_dir / "*.log"),
            "--log-level",
            "info",
        ],
        stdout=subprocess.DEVNULL,
        stderr=err,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO / "src")},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"exporter exited {proc.returncode}: {err_path.read_text()}")
        match = re.search(r"serving (http://\S+/metrics)", err_path.read_text())
        if match:
            return proc, match.group(1), err_path
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("exporter did not start listening within 60 s")


def scrape(conn: http.client.HTTPConnection, path: str) -> int:
    conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200 or not body:
        raise RuntimeError(f"HTTP {response.status}")
    return len(body)


def sequential(url: str, count: int) -> dict[str, float]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=SCRAPE_TIMEOUT_S)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        scrape(conn, parts.path)
        times.append((time.perf_counter() - started) * 1000)
    conn.close()
    return {"median_ms": statistics.median(times), "p99_ms": percentile(times, 99), "max_ms": max(times)}


def concurrent(url: str, scrapers: int, duration_s: float) -> dict[str, float]:
    parts = urlsplit(url)
    stop = time.monotonic() + duration_s
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []

    def worker(index: int) -> None:
        # One loopback source address per scraper (127.0.0.2, .3 ...): a Prometheus fleet scrapes from
        # many hosts, and the exporter caps connections per source address (docs/security.md).
        source = (f"127.0.0.{2 + index}", 0) if parts.hostname == "127.0.0.1" else None
        conn = http.client.HTTPConnection(
            parts.hostname, parts.port, timeout=SCRAPE_TIMEOUT_S, source_address=source
        )
        mine = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                scrape(conn, parts.path)
                mine.append((time.perf_counter() - started) * 1000)
            except Exception as exc:  # every failure counts, whatever it is
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                conn.close()
                conn = http.client.HTTPConnection(
                    parts.hostname, parts.port, timeout=SCRAPE_TIMEOUT_S, source_address=source
                )
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(scrapers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    return {
        "scrapes": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "scrapes_per_s": len(latencies) / elapsed,
        "median_ms": statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": percentile(latencies, 99),
        "max_ms": max(latencies) if latencies else float("nan"),
        "elapsed_s": elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", type=Path, default=DEFAULT_ROOT, help="fixture host (default: the 8-HCA ib-ndr-healthy)"
    )
    parser.add_argument(
        "--scrapes",
        type=int,
        default=None,
        help="sequential scrapes (in process and over HTTP: default 200; NCCL Inspector case: 30 of each kind)",
    )
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of concurrent scraping")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--inspector", action="store_true", help="only the NCCL Inspector case (issue 25)")
    parser.add_argument(
        "--follow-seconds",
        type=float,
        default=10.0,
        help="NCCL Inspector case: seconds of following at 1,000 collectives/s (0: scrapes only)",
    )
    args = parser.parse_args()
    if args.inspector:
        case = inspector_case(args.root, seconds=args.follow_seconds, scrapes=args.scrapes or 30)
        ok = case["scrape_median_ms"] < TARGET_SCRAPE_MS and (
            not args.follow_seconds or case["follower_cpu_share"] < 0.05
        )
        if args.json:
            print(json.dumps({**case, "targets_met": ok}, indent=2))
        else:
            print(
                f"NCCL Inspector: {case['keys']} communicator x collective x size keys, {case['nccl_series']} "
                f"fabricscope_nccl_* samples per scrape; {os.cpu_count()} CPUs"
            )
            print(
                f"scrape, every key moved: median {case['scrape_median_ms']:.1f} ms (CPU {case['scrape_cpu_median_ms']:.1f} ms), "
                f"p99 {case['scrape_p99_ms']:.1f} ms "
                f"-> median is {case['scrape_median_ms'] / TARGET_SCRAPE_MS:.2f}x the 50 ms target"
            )
            print(
                f"background poll that read them ({case['keys']} records) and formatted what changed: "
                f"CPU median {case['poll_cpu_median_ms']:.1f} ms (not on a scrape's path)"
            )
            print(
                f"scrape, nothing new    : median {case['idle_scrape_median_ms']:.1f} ms "
                f"(CPU {case['idle_scrape_cpu_median_ms']:.1f} ms)"
            )
            print(
                f"follower at {case['collectives_per_s']} collectives/s: {case['follower_cpu_share'] * 100:.1f}% of a core "
                f"-> {case['follower_cpu_share'] / 0.05:.2f}x the 5% target ({case['records']} records, "
                f"{case['bad_lines']} bad lines)"
            )
        return 0 if ok else 1

    hca = (
        len([p for p in (args.root / "sys/class/infiniband").iterdir()])
        if (args.root / "sys/class/infiniband").is_dir()
        else 0
    )
    args.scrapes = args.scrapes or 200
    local = in_process(args.root, args.scrapes)
    with tempfile.TemporaryDirectory(prefix="fabricscope-bench-") as tmp:
        log_dir = Path(tmp)
        (log_dir / "rank0.log").write_text("")
        proc, url, _err = start_exporter(args.root, log_dir)
        try:
            sequential(url, 20)  # warm-up: imports done, first doctor run under way
            time.sleep(2)
            rss_warm_mb = status_kb(proc.pid, "VmRSS") / 1024
            http_seq = sequential(url, args.scrapes)
            load = concurrent(url, args.concurrency, args.duration)
            rss_after_mb = status_kb(proc.pid, "VmRSS") / 1024
            hwm_mb = status_kb(proc.pid, "VmHWM") / 1024
        finally:
            proc.terminate()
            proc.wait(30)

    figures = {
        "root": str(args.root),
        "rdma_devices": hca,
        "cpus": os.cpu_count(),
        "in_process": local,
        "http_sequential": http_seq,
        "concurrent": load,
        "rss_warm_mb": rss_warm_mb,
        "rss_after_load_mb": rss_after_mb,
        "rss_peak_mb": hwm_mb,
    }
    ok_scrape = local["p99_ms"] < TARGET_SCRAPE_MS and http_seq["p99_ms"] < TARGET_SCRAPE_MS
    ok_rss = hwm_mb < TARGET_RSS_MB
    ok_load = load["errors"] == 0 and load["scrapes"] > 0
    figures["targets_met"] = {
        "scrape_under_50ms": ok_scrape,
        "rss_under_80mb": ok_rss,
        "no_errors_under_load": ok_load,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"fixture host: {args.root.name} ({hca} RDMA devices, {local['samples']} samples, "
            f"{local['bytes'] / 1024:.0f} KiB exposition); {os.cpu_count()} CPUs"
        )
        print(
            f"scrape, in process   : median {local['median_ms']:.1f} ms, p99 {local['p99_ms']:.1f} ms, "
            f"max {local['max_ms']:.1f} ms  -> p99 is {local['p99_ms'] / TARGET_SCRAPE_MS:.2f}x the 50 ms target"
        )
        print(
            f"scrape, HTTP (gzip)  : median {http_seq['median_ms']:.1f} ms, p99 {http_seq['p99_ms']:.1f} ms, "
            f"max {http_seq['max_ms']:.1f} ms  -> p99 is {http_seq['p99_ms'] / TARGET_SCRAPE_MS:.2f}x the 50 ms target"
        )
        print(
            f"{args.concurrency} concurrent scrapers, {load['elapsed_s']:.0f} s: {load['scrapes']} scrapes "
            f"({load['scrapes_per_s']:.0f}/s), {load['errors']} errors, median {load['median_ms']:.0f} ms, "
            f"p99 {load['p99_ms']:.0f} ms, max {load['max_ms']:.0f} ms (timeout {SCRAPE_TIMEOUT_S:.0f} s)"
            + (f"; first error: {load['first_error']}" if load["errors"] else "")
        )
        print(
            f"exporter RSS         : {rss_warm_mb:.1f} MB warm, {rss_after_mb:.1f} MB after load, "
            f"peak {hwm_mb:.1f} MB -> {hwm_mb / TARGET_RSS_MB:.2f}x the 80 MB target"
        )
        print(
            "targets: "
            + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in figures["targets_met"].items())
        )
    return 0 if ok_scrape and ok_rss and ok_load else 1


if __name__ == "__main__":
    sys.exit(main())
