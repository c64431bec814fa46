"""The fixture hosts in git are exactly what tests/fixtures/make_hosts.py writes.

A tree copied by a tool that follows or flattens links (a recovered working tree once held
every symlink of efa-p4d as a file holding its target) reads as another host: sysfs class
entries stop being links, and the host model no longer finds a device's PCI path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_HOSTS
from tests.fixtures.make_hosts import BUILDERS, build


def _tree(root: Path) -> dict[str, tuple[str, bytes | str]]:
    entries: dict[str, tuple[str, bytes | str]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                entries[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                entries[rel] = ("dir", "")
            else:
                entries[rel] = ("file", path.read_bytes())
        dirs[:] = [d for d in dirs if not Path(folder, d).is_symlink()]
    return entries


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_fixture_host_is_what_the_builder_writes(name: str, tmp_path: Path) -> None:
    built = _tree(build(name, tmp_path / name))
    stored = _tree(FIXTURE_HOSTS / name)
    differ = sorted(k for k in built.keys() | stored.keys() if built.get(k) != stored.get(k))
    assert not differ, (
        f"{name}: {len(differ)} entries differ from make_hosts.py, e.g. {differ[:3]} (rerun it)"
    )
