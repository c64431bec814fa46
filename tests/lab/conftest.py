"""Lab tests need root, namespaces, iproute2 and nftables: skip outside CI, fail inside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import skip_unless_ci


def lab_available() -> None:
    if os.geteuid() != 0:
        skip_unless_ci("lab tests need root (network namespaces)")
    for tool, pkg in (("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")):
        if not shutil.which(tool):
            skip_unless_ci(f"lab tests need {tool} (Debian package {pkg})")


def fs(
    *args: str, timeout: float = 300, env: dict | None = None, db: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    if db is not None:
        full["FABRICSCOPE_DB"] = str(db)
    return subprocess.run(
        [sys.executable, "-m", "fabricscope", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )


# TCP payload per Ethernet frame at MTU 1500, the lab's default (tbf counts whole frames): 1448 / 1514
GOODPUT = 1448 / 1514


def best_rate(measure: Callable[[], float], enough: Callable[[float], bool], tries: int = 3) -> list[float]:
    """Up to ``tries`` measurements of a rate, stopping at the first that is ``enough``; judge the max.

    On a shared 2-core CI machine, CPU taken by other tenants slows a run (CI measured 0.890 and
    0.859 Gbit/s on a 1 Gbit/s star where this machine measures 0.937-0.952). Contention only
    ever lowers a rate, so the best run is the fabric's capability; a rate that is too high stays
    too high however often it is measured.
    """
    rates: list[float] = []
    for _ in range(tries):
        rates.append(measure())
        if enough(rates[-1]):
            break
    return rates


@pytest.fixture
def lab_dir(tmp_path, monkeypatch):
    """A private state directory, so tests never see (or remove) a user's labs."""
    lab_available()
    folder = tmp_path / "labstate"
    monkeypatch.setenv("FABRICSCOPE_LAB_DIR", str(folder))
    return folder


def module_lab(factory: pytest.TempPathFactory, name: str, *args: str) -> Iterator[str]:
    """One lab for a module's tests (for a module-scoped fixture to yield from), in its own state
    directory: a lab up and down cost 3-5 s a test. Its tests start their own runs on it and put
    back what they plant (``lab set``)."""
    lab_available()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FABRICSCOPE_LAB_DIR", str(factory.mktemp(name) / "labstate"))
        up = fs("lab", "up", "--name", name, *args)
        assert up.returncode == 0, up.stderr
        try:
            yield name
        finally:
            fs("lab", "down", name)


@contextmanager
def planted(lab: str, target: str, fault: tuple[str, str], undo: tuple[str, str]) -> Iterator[None]:
    """``lab set LAB TARGET *fault`` for the block, then ``*undo``: a module's lab as it was."""
    proc = fs("lab", "set", lab, target, *fault)
    assert proc.returncode == 0, proc.stderr
    try:
        yield
    finally:
        proc = fs("lab", "set", lab, target, *undo)
        assert proc.returncode == 0, proc.stderr


@pytest.fixture
def make_lab(lab_dir):
    made: list[str] = []

    def up(name: str, *args: str) -> dict:
        import json

        proc = fs("lab", "up", "--name", name, *args, "--json")
        assert proc.returncode == 0, proc.stderr
        made.append(name)
        return json.loads(proc.stdout)

    yield up
    for name in made:
        fs("lab", "down", name)
