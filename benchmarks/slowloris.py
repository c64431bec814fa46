"""Authenticated bench clients and exporter scrapes during a slow-loris from another host (issue 15).

    python benchmarks/slowloris.py                  # both servers, 20 s without and 20 s with attack
    python benchmarks/slowloris.py --seconds 5      # quick look
    python benchmarks/slowloris.py --src OTHER/src  # the same attack against another version

The attacker is a separate process whose sockets are bound to 127.0.0.2: on Linux all of 127/8
is loopback, so the servers (on 127.0.0.1) see a second host. The attacks are the issue's:

* ``bench serve --token``: 20 connections that send half a frame header and then nothing, each
  reopened as soon as the server closes it. Meanwhile, from 127.0.0.1: authenticated handshakes
  one after another (hello with the token, the server's reply), and a 0.3 s ``bench tcp`` run
  every second through the real CLI. Also counted: the lines the server logs (the issue saw
  156,168 lines in 20 s).
* ``exporter``: 130 connections that each send a request line and then one header line every
  5 s, reopened when closed. Meanwhile, from 127.0.0.1: scrapes one after another, each on a new
  connection, with Prometheus' default 10 s scrape timeout.

Every figure is measured for ``--seconds`` without the attack (the baseline) and then with it;
the ratio is attack / baseline. Exit status 1 when under attack fewer than 95% of the
authenticated handshakes, bench runs or scrapes succeed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fixture_hosts import fixture_hosts

REPO = Path(__file__).resolve().parent.parent
FIXTURE = fixture_hosts() / "ib-ndr-healthy"
ATTACKER = "127.0.0.2"
TOKEN = "3e7a1c9f5b2d8e4a6c0f1b7d3a9e5c2f"  # bench serve refuses tokens under 64 bits
SCRAPE_TIMEOUT_S = 10.0
MIN_SUCCESS = 0.95


# ----- the attacker (runs as its own process) ---------------------------------------------------
def attack(port: int, kind: str, connections: int, every_s: float, seconds: float) -> None:
    """Hold ``connections`` slow connections from ATTACKER to 127.0.0.1:port for ``seconds``."""
    stop = time.monotonic() + seconds
    opened = [0]
    lock = threading.Lock()

    def hold() -> None:
        n = 0
        while time.monotonic() < stop:
            sock = socket.socket()
            try:
                sock.bind((ATTACKER, 0))
                sock.settimeout(min(every_s, 1.0))
                sock.connect(("127.0.0.1", port))
                with lock:
                    opened[0] += 1
                if kind == "bench":
                    sock.sendall(struct.pack("!I", 40)[:2])  # half a length prefix, then silence
                else:
                    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                next_line = time.monotonic() + every_s
                while time.monotonic() < stop:
                    if kind == "http" and time.monotonic() >= next_line:
                        n += 1
                        sock.sendall(b"X-Slow-%d: 1\r\n" % n)
                        next_line += every_s
                    try:
                        if not sock.recv(4096):
                            break  # closed by the server: come back at once
                    except TimeoutError:
                        continue
            except OSError:
                pass
            finally:
                sock.close()

    threads = [threading.Thread(target=hold, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 10)
    print(json.dumps({"connections_opened": opened[0]}))


def start_attack(src: Path, port: int, kind: str, connections: int, every_s: float, seconds: float):
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--src",
            str(src),
            "attack",
            str(port),
            kind,
            str(connections),
            str(every_s),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


# ----- measurements -----------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack("!I", len(body)) + body


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def handshake(port: int) -> tuple[str, float]:
    """One authenticated hello: ("ok" | "refused" | "failed", seconds)."""
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(_frame({"op": "hello", "version": 1, "token": TOKEN}))
            (length,) = struct.unpack("!I", _recv_exact(sock, 4))
            reply = json.loads(_recv_exact(sock, length))
    except (OSError, ValueError):
        return "failed", time.perf_counter() - started
    return ("ok" if reply.get("ok") is True else "refused"), time.perf_counter() - started


def bench_tcp_run(src: Path, port: int) -> bool:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fabricscope",
            "bench",
            "tcp",
            "--peer",
            f"127.0.0.1:{port}",
            "-t",
            "0.3",
            "--timeout",
            "5",
            "--no-store",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(src), "FABRICSCOPE_BENCH_TOKEN": TOKEN},
    )
    return proc.returncode == 0


def scrape(port: int) -> tuple[str, float]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SCRAPE_TIMEOUT_S)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        body = response.read()
        outcome = "ok" if response.status == 200 and body else f"http {response.status}"
    except (OSError, http.client.HTTPException):
        outcome = "failed"
    finally:
        conn.close()
    return outcome, time.perf_counter() - started


def loop(func, seconds: float, pause_s: float = 0.0) -> list:
    """Call ``func`` one after another for ``seconds``; their results."""
    results = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        results.append(func())
        if pause_s:
            time.sleep(pause_s)
    return results


def summary(outcomes: list[tuple[str, float]], seconds: float) -> dict:
    ok = [t for o, t in outcomes if o == "ok"]
    return {
        "attempts": len(outcomes),
        "ok": len(ok),
        "ok_share": len(ok) / len(outcomes) if outcomes else 0.0,
        "ok_per_s": len(ok) / seconds,
        "p50_ms": percentile(ok, 50) * 1e3,
        "p99_ms": percentile(ok, 99) * 1e3,
        "not_ok": sorted({o for o, _ in outcomes if o != "ok"}),
    }


def count_lines(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return data.count(b"\n"), len(data)


# ----- the two servers ---------------------------------------------------------------------------
def start(src: Path, argv: list[str], log: Path, pattern: str) -> tuple[subprocess.Popen, int]:
    err = open(log, "w")  # lives as long as the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabricscope", *argv],
        stdout=subprocess.DEVNULL,
        stderr=err,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(src)},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{argv[0]} exited {proc.returncode}: {log.read_text()[-500:]}")
        match = re.search(pattern, log.read_text())
        if match:
            return proc, int(match.group(1))
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{argv[0]} did not start within 60 s")


def phase_bench(src: Path, port: int, log: Path, seconds: float, attacked: bool) -> dict:
    attacker = start_attack(src, port, "bench", 20, 1.0, seconds + 2) if attacked else None
    if attacker:
        time.sleep(1.0)  # the attack is in place before we measure
    lines0, bytes0 = count_lines(log)
    runs: list[bool] = []
    runner = threading.Thread(
        target=lambda: runs.extend(loop(lambda: bench_tcp_run(src, port), seconds, 0.5))
    )
    runner.start()
    outcomes = loop(lambda: handshake(port), seconds)
    runner.join(120)
    lines1, bytes1 = count_lines(log)
    return {
        "handshakes": summary(outcomes, seconds),
        "bench_runs": {"attempts": len(runs), "ok": sum(runs)},
        "log_lines": lines1 - lines0,
        "log_bytes": bytes1 - bytes0,
        "attacker_connections": attacker_result(attacker),
    }


def phase_exporter(src: Path, port: int, seconds: float, attacked: bool) -> dict:
    attacker = start_attack(src, port, "http", 130, 5.0, seconds + 2) if attacked else None
    if attacker:
        time.sleep(1.5)
    outcomes = loop(lambda: scrape(port), seconds, 0.05)
    return {"scrapes": summary(outcomes, seconds), "attacker_connections": attacker_result(attacker)}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def compare(hit: dict, base: dict, rate_digits: int, ms_digits: int) -> str:
    """One line: successes, rate and latency under attack against the baseline, and their ratios."""

    def side(x: dict) -> str:
        return (
            f"{x['ok']}/{x['attempts']} ({x['ok_per_s']:.{rate_digits}f}/s, p50 {x['p50_ms']:.{ms_digits}f} ms, "
            f"p99 {x['p99_ms']:.{ms_digits}f} ms)"
        )

    return (
        f"ok: {side(hit)} under attack vs {side(base)} without: rate ratio "
        f"{ratio(hit['ok_per_s'], base['ok_per_s'])}, p50 ratio {ratio(hit['p50_ms'], base['p50_ms'])}"
        + (f"; not ok: {', '.join(hit['not_ok'])}" if hit["not_ok"] else "")
    )


def attacker_result(attacker: subprocess.Popen | None) -> int | None:
    """How many connections the attacker process opened (None: no attack)."""
    if attacker is None:
        return None
    out, _ = attacker.communicate(timeout=60)
    return json.loads(out.strip().splitlines()[-1])["connections_opened"]


def report_bench(base: dict, hit: dict, seconds: float) -> bool:
    hb, ha = base["handshakes"], hit["handshakes"]
    print(f"bench serve --token, {seconds:g} s each, attack: 20 slow connections from {ATTACKER}")
    print(f"  authenticated handshakes {compare(ha, hb, rate_digits=0, ms_digits=2)}")
    rb, ra = base["bench_runs"], hit["bench_runs"]
    print(
        f"  bench tcp runs ok: {ra['ok']}/{ra['attempts']} under attack vs {rb['ok']}/{rb['attempts']} without"
    )
    print(
        f"  server log: {hit['log_lines']} lines ({hit['log_bytes']} bytes) during the attack "
        f"({hit['attacker_connections']} attacker connections) vs {base['log_lines']} without; "
        "the issue saw 156,168 lines in 20 s"
    )
    share = min(ha["ok_share"], ra["ok"] / ra["attempts"] if ra["attempts"] else 0.0)
    return share >= MIN_SUCCESS


def report_exporter(base: dict, hit: dict, seconds: float) -> bool:
    sb, sa = base["scrapes"], hit["scrapes"]
    print(f"exporter, {seconds:g} s each, attack: 130 connections from {ATTACKER}, one header line every 5 s")
    print(
        f"  scrapes {compare(sa, sb, rate_digits=1, ms_digits=1)} ({hit['attacker_connections']} attacker connections)"
    )
    return sa["ok_share"] >= MIN_SUCCESS


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="fabricscope source to run")
    parser.add_argument("--only", choices=("bench", "exporter"), help="measure one server only")
    sub = parser.add_subparsers(dest="command")
    hit = sub.add_parser("attack", help=argparse.SUPPRESS)
    for name, kind in (
        ("port", int),
        ("kind", str),
        ("connections", int),
        ("every_s", float),
        ("seconds", float),
    ):
        hit.add_argument(name, type=kind)
    args = parser.parse_args()
    if args.command == "attack":
        attack(args.port, args.kind, args.connections, args.every_s, args.seconds)
        return 0
    try:
        with socket.socket() as probe:
            probe.bind((ATTACKER, 0))
    except OSError:
        raise SystemExit(f"{ATTACKER} is not a local address here (Linux has all of 127/8 on lo)") from None
    src = args.src.resolve()
    print(f"fabricscope from {src}; load average {os.getloadavg()[0]:.1f}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="fabricscope-slowloris-") as tmp:
        if args.only in (None, "bench"):
            log = Path(tmp) / "serve.log"
            proc, port = start(
                src, ["bench", "serve", "--port", "0", "--token", TOKEN], log, r"listening on \S+ port (\d+)"
            )
            try:
                base = phase_bench(src, port, log, args.seconds, attacked=False)
                hit_ = phase_bench(src, port, log, args.seconds, attacked=True)
            finally:
                proc.terminate()
                proc.wait(10)
            ok &= report_bench(base, hit_, args.seconds)
        if args.only in (None, "exporter"):
            log = Path(tmp) / "exporter.log"
            argv = ["exporter", "--root", str(FIXTURE), "--listen", "127.0.0.1:0", "--doctor-interval", "0"]
            proc, port = start(src, argv, log, r"serving http://\S+:(\d+)/metrics")
            try:
                base = phase_exporter(src, port, args.seconds, attacked=False)
                hit_ = phase_exporter(src, port, args.seconds, attacked=True)
            finally:
                proc.terminate()
                proc.wait(10)
            ok &= report_exporter(base, hit_, args.seconds)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
