"""Root: live vs snapshot, tarballs, bad roots, and the never-raise read policy."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from fabricscope.host import Root, RootError, read_inventory
from tests.conftest import FIXTURE_HOSTS


def test_missing_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RootError, match="no such file"):
        Root.at(tmp_path / "nope")


def test_directory_without_snapshot_layout_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "random").mkdir()
    with pytest.raises(RootError, match="not a snapshot"):
        Root.at(tmp_path)


def test_garbage_file_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "x.tar.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(RootError):
        Root.at(bad)


def test_tarball_with_escaping_symlink_is_contained(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sys/class/net").mkdir(parents=True)
    (src / "sys/class/net/evil").symlink_to("../../../../../../etc")
    (src / "proc").mkdir()
    (src / "proc/cmdline").write_text("ro\n")
    archive = tmp_path / "snap.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname="snap")
    root = Root.at(archive)
    assert root.read("sys/class/net/evil/passwd") is None
    assert root.read("proc/cmdline") == "ro"


def test_unreadable_and_garbled_values_become_unknown_with_reason(host_copy) -> None:
    path = host_copy("ib-ndr-healthy")
    port = path / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "rate").write_text("lots of Gb\n")
    (port / "state").write_bytes(b"\xff\xfe\x00garbage")
    (path / "sys/class/net/eno1/mtu").write_text("")
    inv = read_inventory(Root.at(path))
    p0 = inv.ports[0]
    assert p0.rate_gbps is None and p0.state_id is None
    assert inv.netdev("eno1").mtu_bytes is None
    reasons = {p.source: p.reason for p in inv.problems}
    assert "unrecognised rate" in reasons["sys/class/infiniband/mlx5_0/ports/1/rate"]
    assert "not UTF-8" in reasons["sys/class/infiniband/mlx5_0/ports/1/state"]


def test_unreadable_file_is_recorded(host_copy) -> None:
    # A directory where a file should be: open() fails as it would for EACCES/EIO (root ignores mode bits).
    path = host_copy("ib-ndr-healthy")
    target = path / "proc/cmdline"
    target.unlink()
    target.mkdir()
    root = Root.at(path)
    assert root.read("proc/cmdline") is None
    assert any("unreadable" in p.reason for p in root.problems)


def test_command_index_lookup_and_absent_command(host_copy) -> None:
    path = host_copy("roce-healthy")
    root = Root.at(path)
    assert root.run(["mlnx_qos", "-i", "ens0np0"]).ok
    missing = root.run(["ibstat"])
    assert not missing.available and "not captured" in missing.reason


def test_malformed_command_index_is_noted(host_copy) -> None:
    path = host_copy("roce-healthy")
    (path / "cmd/index.json").write_text(
        json.dumps([{"argv": "ls", "stdout": "x"}, 5, {"argv": ["a"], "stdout": "../../etc/passwd"}])
    )
    root = Root.at(path)
    assert not root.run(["a"]).available
    assert sum("malformed" in p.reason for p in root.problems) == 3


def test_live_root_reads_this_machine() -> None:
    root = Root.live()
    assert root.read("proc/sys/net/core/somaxconn") is not None
    inv = read_inventory(root)
    assert any(n.name == "lo" for n in inv.net_devices)


def test_fixture_class_entries_are_real_symlinks() -> None:
    link = FIXTURE_HOSTS / "ib-ndr-healthy/sys/class/infiniband/mlx5_0"
    assert link.is_symlink() and os.readlink(link).startswith("../../devices/pci0000:10/")
    assert os.readlink(FIXTURE_HOSTS / "ib-ndr-healthy/sys/bus/pci/devices/0000:14:00.0").startswith(
        "../../../devices/"
    )
