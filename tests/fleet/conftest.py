"""Fleets built once per session: ten copies of the RoCE fixture host, some with planted drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricscope.checks.doctor import run_doctor
from fabricscope.host import Root
from tests.fleet.fleetbuilder import build_fleet

# Node number -> what is planted on it (the cases: firmware one release behind on 2 of 10,
# GID index 5 instead of 3 on a few, PFC on priority 4 on two, 7 NICs, every NIC at 200G).
PLANTED = {
    2: ["gid_index_5"],
    4: ["gid_index_5"],
    6: ["gid_index_5"],
    3: ["firmware_behind"],
    7: ["firmware_behind"],
    5: ["pfc_priority_4"],
    8: ["pfc_priority_4"],
    9: ["seven_nics"],
    10: ["all_at_200g"],
}


def write_documents(hosts: list[Path], dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for host in hosts:
        doc = run_doctor(Root.at(host)).to_dict()
        (dest / f"{host.name}.json").write_text(json.dumps(doc))
    return dest


@pytest.fixture(scope="session")
def planted_fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """(snapshot directories, directory of their doctor documents)."""
    base = tmp_path_factory.mktemp("planted")
    hosts = build_fleet(base / "hosts", 10, PLANTED)
    return hosts, write_documents(hosts, base / "docs")


@pytest.fixture(scope="session")
def uniform_fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    base = tmp_path_factory.mktemp("uniform")
    hosts = build_fleet(base / "hosts", 10)
    return hosts, write_documents(hosts, base / "docs")
