"""Fleets of fixture hosts: copies of tests/fixtures/hosts/roce-healthy (hard links, so ten nodes
cost little), each with its own hostname, some with a planted difference written the way the
kernel and the tools would show it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from make_hosts import mlnx_qos

from tests.conftest import FIXTURE_HOSTS

NICS = 8


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem (a tmpfs /tmp): copy instead
        shutil.copy2(src, dst)


def _copy(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, symlinks=True, copy_function=_link_or_copy)


def write(root: Path, rel: str, content: str) -> None:
    """Replace one file of a copied host (through its symlinks) without touching the shared original."""
    path = Path(os.path.realpath(root / rel))
    assert str(path).startswith(str(root.resolve())), rel
    if path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if content.endswith("\n") else content + "\n")


def remove(root: Path, rel: str) -> None:
    path = root / rel
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _command_file(root: Path, argv: list[str]) -> str:
    index = json.loads((root / "cmd" / "index.json").read_text())
    return "cmd/" + next(e["stdout"] for e in index if e["argv"] == argv)


# ----- planted differences ----------------------------------------------------------------------
def firmware_behind(root: Path) -> None:
    for i in range(NICS):
        write(root, f"sys/class/infiniband/mlx5_{i}/fw_ver", "28.38.1900")


def gid_index_5(root: Path) -> None:
    """An IPv6 address added before the IPv4 one: its GIDs take indices 2/3, IPv4 moves to 4/5 (as in
    tests/data/samples/show_gids_cx6_ipv6_and_ipv4.txt, a real show_gids with the IPv4 v2 GID at 5)."""
    for i in range(NICS):
        base = f"sys/class/infiniband/mlx5_{i}/ports/1"
        v4 = (root / base / "gids" / "3").read_text().strip()
        ula = f"fd00:0000:0000:0020:a288:c2ff:fe5b:03{0xE0 + i:02x}"
        for index, gid, kind in (
            (2, ula, "IB/RoCE v1"),
            (3, ula, "RoCE v2"),
            (4, v4, "IB/RoCE v1"),
            (5, v4, "RoCE v2"),
        ):
            write(root, f"{base}/gids/{index}", gid)
            write(root, f"{base}/gid_attrs/types/{index}", kind)
            write(root, f"{base}/gid_attrs/ndevs/{index}", f"ens{i}np0")


def pfc_priority_4(root: Path) -> None:
    for i in range(NICS):
        write(root, _command_file(root, ["mlnx_qos", "-i", f"ens{i}np0"]), mlnx_qos("dscp", [4]))


def seven_nics(root: Path) -> None:
    """The NIC of rail 5 (0000:b4:00.0, mlx5_5) is gone: no RDMA device, netdev or PCI function."""
    remove(root, "sys/class/infiniband/mlx5_5")
    remove(root, "sys/class/net/ens5np0")
    remove(root, "sys/bus/pci/devices/0000:b4:00.0")
    remove(root, "sys/devices/pci0000:b0/0000:b0:01.0/0000:b1:00.0/0000:b2:01.0/0000:b4:00.0")


def all_at_200g(root: Path) -> None:
    for i in range(NICS):
        write(root, f"sys/class/infiniband/mlx5_{i}/ports/1/rate", "200 Gb/sec (4X HDR)")
        write(root, f"sys/class/net/ens{i}np0/speed", "200000")


def mtu_1500_on_rail_2(root: Path) -> None:
    write(root, "sys/class/net/ens2np0/mtu", "1500")


PLANTS: dict[str, Callable[[Path], None]] = {
    "firmware_behind": firmware_behind,
    "gid_index_5": gid_index_5,
    "pfc_priority_4": pfc_priority_4,
    "seven_nics": seven_nics,
    "all_at_200g": all_at_200g,
    "mtu_1500_on_rail_2": mtu_1500_on_rail_2,
}


def build_fleet(
    dest: Path, count: int, plants: dict[int, list[str]] | None = None, base: str = "roce-healthy"
) -> list[Path]:
    """``count`` snapshot directories node-01..; ``plants`` maps a node number to plant names."""
    hosts = []
    for n in range(1, count + 1):
        root = dest / f"node-{n:02d}"
        _copy(FIXTURE_HOSTS / base, root)
        write(root, "proc/sys/kernel/hostname", f"node-{n:02d}")
        for plant in (plants or {}).get(n, []):
            PLANTS[plant](root)
        hosts.append(root)
    return hosts
