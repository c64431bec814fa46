"""A hostile snapshot reads nothing and writes nothing outside itself (issue 15 items 1, 2, 3, 11).

The archives and directories are built here (tests/host/hostile.py). Each attack aims at a canary
directory outside the snapshot: files whose content must never show up in any output, and which
must still be exactly as they were afterwards. The commands run as the user runs them, as
subprocesses with $TMPDIR pointing at an empty directory that must stay empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from fabricscope.host import Root, RootError
from fabricscope.host.archive import ArchiveError, Limits, open_archive
from tests.host.hostile import (
    Member,
    escape_members,
    make_path_max_dir,
    snapshot_skeleton,
    write_tar,
    zero_bomb,
)

REPO = Path(__file__).resolve().parents[2]

# Every command that opens a --root, with the exit codes it may give on these snapshots (lint
# of an empty script: 2, nothing to lint, after reading the node).
COMMANDS = [
    (["doctor", "--json"], (0, 1)),
    (["inventory", "--json"], (0, 1)),
    (["nccl", "env", "--format", "json"], (0, 1)),
    (["nccl", "lint", "--script", "/dev/null"], (2,)),
    (["exporter", "--once"], (0, 1)),
    (["snapshot", "-o", "x.tar.gz"], (0, 1)),
]


@dataclass
class Arena:
    """``outside``: the canary directory; ``tmp``: $TMPDIR; ``work``: the commands' cwd."""

    base: Path
    outside: Path
    tmp: Path
    work: Path
    canary: str

    def state(self) -> dict[str, bytes | str]:
        """Everything under ``outside`` (links as their targets), to compare before and after."""
        found: dict[str, bytes | str] = {}
        for dirpath, dirnames, filenames in os.walk(self.outside):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                rel = str(path.relative_to(self.outside))
                found[rel] = (
                    ("-> " + os.readlink(path))
                    if path.is_symlink()
                    else (path.read_bytes() if path.is_file() else "dir")
                )
        return found

    def run(self, args: list[str], root: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "TMPDIR": str(self.tmp),
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        env.pop("FABRICSCOPE_DEBUG", None)
        return subprocess.run(
            [sys.executable, "-m", "fabricscope", *args, "--root", str(root)],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def arena(tmp_path: Path) -> Arena:
    canary = f"CANARY-{uuid.uuid4().hex}"
    outside = tmp_path / "outside"
    (outside / "netdev").mkdir(parents=True)
    (outside / "canary").write_text(canary + "\n")
    (outside / "netdev/operstate").write_text(canary + "\n")
    (outside / "netdev/mtu").write_text("1234\n")
    for name in ("tmp", "work", "in"):
        (tmp_path / name).mkdir()
    return Arena(tmp_path, outside, tmp_path / "tmp", tmp_path / "work", canary)


def _live_secret_lines() -> list[str]:
    """Lines of this machine's /etc/passwd a snapshot must never return (any that exist)."""
    try:
        return [line for line in Path("/etc/passwd").read_text().splitlines() if line.startswith("root:")]
    except OSError:
        return []


def _pci_addresses(root: Path) -> set[str]:
    try:
        return set(os.listdir(root / "sys/bus/pci/devices")) if root.is_dir() else set()
    except OSError:
        return set()


def assert_contained(arena: Arena, root: Path, before: dict[str, bytes | str]) -> None:
    """Every command on ``root``: no traceback, no canary, nothing written outside or in $TMPDIR."""
    secrets = [arena.canary, *_live_secret_lines()]
    for args, codes in COMMANDS:
        proc = arena.run(args, root)
        out = proc.stdout + proc.stderr
        assert proc.returncode in codes, f"{args}: rc {proc.returncode}: {proc.stderr[-600:]}"
        assert "Traceback" not in out, f"{args}: {proc.stderr[-600:]}"
        for secret in secrets:
            assert secret not in out, f"{args} printed what lies outside the snapshot"
    assert arena.state() == before, "something outside the snapshot changed"
    assert os.listdir(arena.tmp) == [], "temporary files left in $TMPDIR"
    assert sorted(os.listdir(arena.work)) == ["x.tar.gz"]
    foreign_pci = _pci_addresses(Path("/")) - _pci_addresses(root)  # this machine's, not the snapshot's
    with tarfile.open(arena.work / "x.tar.gz") as tar:
        for member in tar.getmembers():
            assert not foreign_pci & set(member.name.split("/")), f"{member.name}: this machine's /sys"
            handle = tar.extractfile(member) if member.isfile() else None
            data = handle.read() if handle is not None else b""
            for secret in secrets:
                assert secret.encode() not in data, f"{member.name} of the new snapshot holds outside data"


def test_path_max_chain_archive_reads_and_writes_nothing_outside(arena: Arena) -> None:
    # The unpacking design let this archive write arena.outside/pwned-by-archive and read the
    # canary as the hostname, the live /etc/passwd and /sys.
    depth = len(arena.tmp.parts)
    archive = write_tar(
        arena.base / "in/evil.tar.gz",
        escape_members(arena.outside, depth)
        + [
            Member(
                "sys/class/net/evil1",
                "sym",
                target=f"../../../x/x/{'/'.join('abcdefghijklmnop')}/{'l' * 254}"
                f"{'/..' * (depth + 2)}{arena.outside}/netdev",
            ),
        ],
    )
    before = arena.state()
    assert_contained(arena, archive, before)
    root = Root.at(archive)
    assert root.read("proc/sys/kernel/hostname") is None
    assert root.read("etc/passwd") is None  # the snapshot has no passwd: never the machine's
    assert root.read("escape/pwned-by-archive") is None
    assert any("goes through the link escape" in p.reason for p in root.problems)


def test_path_max_chain_in_a_directory_root(arena: Arena, host_copy) -> None:
    snap = host_copy("cloud-tcp")
    make_path_max_dir(snap, arena.outside)
    before = arena.state()
    assert_contained(arena, snap, before)
    root = Root.at(snap)
    assert root.read("proc/sys/kernel/hostname") is None
    assert root.read("etc/passwd") is None
    assert root.listdir("sys/class/net/out") == root.listdir("")  # .. stops at the snapshot's root
    assert root.resolve("sys/class/net/abs") is None  # absolute: from the snapshot's root


def test_fifos_in_a_directory_root_do_not_hang(arena: Arena, host_copy) -> None:
    snap = host_copy("cloud-tcp")
    (snap / "proc/cmdline").unlink()
    os.mkfifo(snap / "proc/cmdline")  # the unpacking design blocked forever opening it
    mtu = snap / "sys/class/net/ens5/mtu"
    mtu.unlink()
    os.mkfifo(mtu)
    before = arena.state()
    assert_contained(arena, snap, before)
    root = Root.at(snap)
    assert root.read("proc/cmdline") is None
    assert any(p.source == "proc/cmdline" and "not a regular file (fifo)" in p.reason for p in root.problems)


def test_archive_tricks_are_ignored_and_said(arena: Arena) -> None:
    members = snapshot_skeleton() + [
        Member("../outside-dotdot", data=b"x"),  # CVE-2007-4559
        Member(str(arena.outside / "abs-name"), data=b"x"),
        Member("sys/class/net/abs", "sym", target=str(arena.outside)),  # re-rooted: absent here
        Member("etc/hostname", data=b"from-the-snapshot\n"),
        Member("etc/hn", "sym", target="/etc/hostname"),  # re-rooted: the snapshot's own
        Member("sys/up", "sym", target="../../../../../../.."),  # .. stops at the root
        Member("sys/lnk", "sym", target=".."),
        Member("sys/lnk/pwned", data=b"through a link"),  # GNU tar CVE-2025-45582: ignored
        Member("proc/cmdline", "hard", target=str(arena.outside / "canary")),
        Member("proc/version", "hard", target="etc/hostname"),  # a hard link inside: its bytes
        Member("dev/infiniband/uverbs0", "chr"),
        Member("proc/fifo", "fifo"),
        Member("etc/hostname", data=b"second\n"),  # a duplicate: the first is kept
        Member("sys/loop1", "sym", target="loop2"),
        Member("sys/loop2", "sym", target="loop1"),
    ]
    archive = write_tar(arena.base / "in/tricks.tar.gz", members)
    before = arena.state()
    assert_contained(arena, archive, before)
    root = Root.at(archive)
    reasons = "\n".join(f"{p.source}: {p.reason}" for p in root.problems)
    assert "../outside-dotdot: name leaves the archive" in reasons
    assert f"{arena.outside}/abs-name: name leaves the archive" in reasons
    assert "sys/lnk/pwned: name goes through the link sys/lnk" in reasons
    assert "proc/cmdline: hard link to" in reasons
    assert "etc/hostname: a second member of this name" in reasons
    assert "2 device or FIFO member(s)" in reasons
    assert root.resolve("sys/class/net/abs") is None
    assert root.read("etc/hn") == "from-the-snapshot"
    assert root.read("proc/version") == "from-the-snapshot"
    assert root.resolve("sys/up") == "" and root.is_dir("sys/up/sys")
    assert root.read("proc/cmdline") is None
    assert root.exists("dev/infiniband/uverbs0") and root.read_bytes("dev/infiniband/uverbs0") is None
    assert root.read("proc/fifo") is None
    assert root.read("sys/loop1") is None and root.resolve("sys/loop1") is None


def test_decompression_bomb_is_refused_in_one_line(arena: Arena) -> None:
    bomb = zero_bomb(arena.base / "in/bomb.tar.gz", members=1, member_mib=9)
    assert bomb.stat().st_size < 100_000
    proc = arena.run(["doctor"], bomb)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "limit on one member" in proc.stderr, proc.stderr
    assert os.listdir(arena.tmp) == []


def test_archive_limits_total_and_members(tmp_path: Path) -> None:
    bomb = zero_bomb(tmp_path / "bomb.tar.gz", members=5, member_mib=1)
    with pytest.raises(ArchiveError, match="limit on unpacked bytes"):
        open_archive(bomb, Limits(unpacked_bytes=4 << 20))
    many = write_tar(tmp_path / "many.tar.gz", snapshot_skeleton() + [Member(f"sys/f{i}") for i in range(50)])
    with pytest.raises(ArchiveError, match="limit on members"):
        open_archive(many, Limits(members=40))
    store, _ = open_archive(many)  # the defaults take it
    assert store.lookup(("sys", "f49")) is not None


def test_default_limits_fit_real_snapshots(tmp_path: Path) -> None:
    """The defaults leave room over the largest fixture host's snapshot (tests/fixtures/hosts)."""
    from fabricscope.host.snapshot import take_snapshot

    out, _ = take_snapshot(Root.at(REPO / "tests/fixtures/hosts/roce-healthy"), tmp_path / "s.tar.gz")
    with tarfile.open(out) as tar:
        members = tar.getmembers()
    limits = Limits()
    assert len(members) * 20 < limits.members
    assert max(m.size for m in members) * 100 < limits.member_bytes
    assert sum(512 + m.size for m in members) * 20 < limits.unpacked_bytes


def test_over_a_limit_is_a_root_error(tmp_path: Path) -> None:
    bomb = zero_bomb(tmp_path / "bomb.tar.gz", members=1, member_mib=9)
    with pytest.raises(RootError, match=r"--root .*bomb.tar.gz: member sys/blob0 holds 9 MiB"):
        Root.at(bomb)


def test_snapshot_output_never_follows_a_planted_link(arena: Arena) -> None:
    victim = arena.outside / "victim"
    victim.write_text("keep me\n")
    out = arena.work / "x.tar.gz"
    (arena.work / "x.tar.gz.partial").symlink_to(victim)  # the old fixed temporary name
    before = arena.state()
    proc = arena.run(["snapshot", "-o", str(out)], REPO / "tests/fixtures/hosts/cloud-tcp")
    assert proc.returncode == 0, proc.stderr
    assert arena.state() == before
    assert out.is_file() and not out.is_symlink() and (out.stat().st_mode & 0o777) == 0o600
    assert (arena.work / "x.tar.gz.partial").is_symlink()
    # A link at the target itself is replaced, not written through.
    out.unlink()
    out.symlink_to(victim)
    proc = arena.run(["snapshot", "-o", str(out)], REPO / "tests/fixtures/hosts/cloud-tcp")
    assert proc.returncode == 0 and arena.state() == before and not out.is_symlink()
    assert sorted(os.listdir(arena.work)) == ["x.tar.gz", "x.tar.gz.partial"]


def test_written_snapshot_links_stay_inside(arena: Arena) -> None:
    archive = write_tar(
        arena.base / "in/up.tar.gz",
        snapshot_skeleton()
        + [
            Member(
                "sys/class/net/evil0/device",
                "sym",
                target="../../../../../../../../sys/devices/pci0000:00/0000:00:01.0",
            ),
            Member("sys/devices/pci0000:00/0000:00:01.0/vendor", data=b"0x15b3\n"),
        ],
    )
    proc = arena.run(["snapshot", "-o", "x.tar.gz"], archive)
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(arena.work / "x.tar.gz") as tar:
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    assert (
        links["fabricscope-snapshot/sys/class/net/evil0/device"] == "../../../devices/pci0000:00/0000:00:01.0"
    )
    doc = json.loads(arena.run(["inventory", "--json"], arena.work / "x.tar.gz").stdout)
    assert doc["hostname"] == "evil-node"
