"""Headless Chromium through chromedriver's W3C WebDriver API (no extra Python package), for the
report tests: tests/report/test_browser.py and tests/bench/test_report.py."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from tests.conftest import skip_unless_ci


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wd(base: str, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        base + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"{}")


@contextmanager
def browser() -> Iterator[tuple[str, str]]:
    """A WebDriver session of headless Chromium: (its base URL, the session id)."""
    driver = shutil.which("chromedriver")
    binary = next(
        (b for b in ("/usr/lib/chromium/chromium", shutil.which("chromium")) if b and os.path.exists(b)), None
    )
    if not driver or not binary:
        skip_unless_ci("headless Chromium needs the Debian packages chromium and chromium-driver")
    port = free_port()
    # Chromium keeps its profile and scratch in TMPDIR and leaves two directories behind per
    # session: a private TMPDIR, removed afterwards, keeps the machine's /tmp as it was.
    scratch = tempfile.TemporaryDirectory(prefix="fabricscope-chromium-", ignore_cleanup_errors=True)
    env = {**os.environ, "TMPDIR": scratch.name}
    proc = subprocess.Popen(
        [driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if wd(base, "GET", "/status").get("value", {}).get("ready"):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--force-device-scale-factor=1", "--hide-scrollbars"]  # fmt: skip
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {"binary": binary, "args": args},
                    "goog:loggingPrefs": {"browser": "ALL"},
                }
            }
        }
        session = wd(base, "POST", "/session", caps)["value"]["sessionId"]
        try:
            yield base, session
        finally:
            wd(base, "DELETE", f"/session/{session}")
    finally:
        proc.terminate()
        proc.wait(10)
        scratch.cleanup()
