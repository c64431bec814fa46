"""The confined walk: a legitimate snapshot resolves as the kernel resolves it; nothing leaves it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from fabricscope.host.archive import open_archive
from fabricscope.host.confined import MAX_HOPS, ConfinedFs, DirStore
from tests.conftest import FIXTURE_HOSTS
from tests.host.hostile import LONG, LOOP, Member, chain_members, snapshot_skeleton, write_tar


def _links(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*")) if p.is_symlink()]


@pytest.mark.parametrize("host", ["ib-ndr-healthy", "roce-healthy"])
def test_fixture_links_resolve_as_the_kernel_does(host: str) -> None:
    # The fixture trees hold sysfs's own links (class -> devices, bus -> devices, driver, iommu_group).
    root = FIXTURE_HOSTS / host
    fs = ConfinedFs(DirStore(root))
    links = _links(root)
    assert len(links) > 200
    for rel in links:
        real = os.path.realpath(root / rel)
        expected = os.path.relpath(real, root) if os.path.exists(real) else None
        try:
            got = fs.realpath(rel)
        except OSError:
            got = None
        assert got == expected, rel


def _fs(tmp_path: Path, members: list[Member]) -> ConfinedFs:
    store, _ = open_archive(write_tar(tmp_path / "t.tar.gz", snapshot_skeleton() + members))
    return ConfinedFs(store)


def test_dotdot_stops_at_the_root_and_absolute_targets_start_there(tmp_path: Path) -> None:
    fs = _fs(
        tmp_path,
        [
            Member("sys/a", "sym", target="../../../../proc"),
            Member("sys/b", "sym", target="/proc/sys/kernel/hostname"),
            Member("sys/c", "sym", target="/../../sys/b"),
        ],
    )
    assert fs.realpath("sys/a") == "proc"
    assert fs.read("sys/b", 100) == b"evil-node\n"
    assert fs.realpath("sys/c") == "proc/sys/kernel/hostname"
    assert fs.realpath("/../../../sys/../proc") == "proc"


def test_path_max_chain_resolves_inside(tmp_path: Path) -> None:
    chain, bottom = chain_members(through_links=False)
    fs = _fs(tmp_path, chain)
    steps = "/".join("abcdefghijklmnop")
    assert fs.realpath(steps) == "/".join([LONG] * 16)  # 16 x 255 characters: no PATH_MAX here
    assert fs.realpath(f"{steps}/{LOOP}") == ""
    assert fs.realpath(f"{steps}/{LOOP}/../../../proc") == "proc"


def test_hop_limit_is_the_kernels(tmp_path: Path) -> None:
    members = [Member(f"sys/l{i}", "sym", target=f"l{i + 1}") for i in range(MAX_HOPS + 1)]
    fs = _fs(tmp_path, [*members, Member(f"sys/l{MAX_HOPS + 1}", "dir")])
    assert fs.realpath(f"sys/l{1}") == f"sys/l{MAX_HOPS + 1}"  # 40 links: followed
    with pytest.raises(OSError) as info:
        fs.realpath("sys/l0")  # 41 links
    assert info.value.errno == errno.ELOOP


def test_errors_are_the_kernels(tmp_path: Path) -> None:
    fs = _fs(tmp_path, [Member("sys/dangling", "sym", target="nowhere")])
    for rel, code in [
        ("sys/nothing", errno.ENOENT),
        ("proc/sys/kernel/hostname/x", errno.ENOTDIR),
        ("sys/dangling", errno.ENOENT),
        ("sys", errno.EISDIR),
    ]:
        with pytest.raises(OSError) as info:
            fs.read(rel, 10)
        assert info.value.errno == code, rel
    assert fs.readlink("sys/dangling") == "nowhere"
    assert fs.lstat("sys/dangling").kind == "link"
