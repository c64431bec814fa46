"""The exporter on a fresh snapshot of a host gives what it gives on the host itself: every file a
metric reads is one the inventory reads (one reader per kernel object), so snapshots lose nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fabricscope.host import Root
from fabricscope.host.snapshot import take_snapshot
from tests.conftest import FIXTURE_HOSTS
from tests.monitor.conftest import all_hosts, make_exporter, normalise, samples, value


def _exposition(root: Path) -> str:
    return normalise(make_exporter(root).render().decode())


@pytest.mark.parametrize("host", all_hosts())
def test_exporter_on_a_snapshot_equals_the_host(host: str, tmp_path: Path) -> None:
    archive, _recording = take_snapshot(Root.at(FIXTURE_HOSTS / host), tmp_path / f"{host}.tar.gz")
    on_host = _exposition(FIXTURE_HOSTS / host)
    on_snapshot = _exposition(archive)
    assert on_snapshot.splitlines() == on_host.splitlines()


def _host_with_undecodable_netdev(tmp_path: Path) -> Path:
    """roce-healthy plus an interface whose name holds byte 0xff (Linux allows any byte but '/'
    and NUL in a name), laid out as sysfs does: a device directory and a class/net link to it."""
    host = tmp_path / "host"
    shutil.copytree(FIXTURE_HOSTS / "roce-healthy", host, symlinks=True)
    name = b"bad\xffname"
    pci = b"devices/pci0000:00/0000:00:01.0/0000:05:00.0"
    sys_dir = os.fsencode(host / "sys")
    netdir = os.path.join(sys_dir, pci, b"net", name)
    os.makedirs(netdir)
    for attr, text in ((b"mtu", b"1500"), (b"operstate", b"up"), (b"type", b"1"), (b"speed", b"1000")):
        with open(os.path.join(netdir, attr), "wb") as handle:
            handle.write(text + b"\n")
    os.symlink(b"../..", os.path.join(netdir, b"device"))
    os.symlink(b"../../" + pci + b"/net/" + name, os.path.join(sys_dir, b"class/net", name))
    return host


def test_a_non_utf8_interface_name_is_escaped_never_fatal(tmp_path: Path) -> None:
    """Before: every scrape failed encoding the exposition (503), and `snapshot` wrote an archive
    that `--root` refused. Now the name is shown as ``bad\\xffname`` in both, the same series."""
    host = _host_with_undecodable_netdev(tmp_path)
    on_host = make_exporter(host).render().decode()
    assert value(samples(on_host), "fabricscope_netdev_mtu_bytes", netdev="bad\\xffname") == 1500
    archive, _recording = take_snapshot(Root.at(host), tmp_path / "snap.tar.gz")
    on_snapshot = make_exporter(archive).render().decode()
    assert normalise(on_snapshot).splitlines() == normalise(on_host).splitlines()
