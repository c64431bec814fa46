"""GPUDirect RDMA without nvidia-peermem (issue 13 B9): DMA-BUF since NCCL 2.13, with the open GPU
kernel module and kernel >= 5.12; such a host is never told to load nvidia-peermem."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricscope.checks.doctor import run_doctor
from fabricscope.host import Root, read_inventory
from fabricscope.host.versions import SoftwareVersions, parse_nvidia_flavour
from fabricscope.nccl.envgen import plan_env
from fabricscope.nccl.lint import lint
from fabricscope.nccl.settings import from_environ, merge
from tests.conftest import SAMPLES

_LINES = [
    line
    for line in (SAMPLES / "proc_driver_nvidia_version.txt").read_text().splitlines()
    if line.startswith("NVRM")
]
PROPRIETARY, OPEN = _LINES  # the two NVRM lines of the capture, in its order


def test_driver_flavour_from_real_version_files() -> None:
    assert "510.54" in PROPRIETARY and "565.77" in OPEN
    assert parse_nvidia_flavour(PROPRIETARY, None) is False
    assert parse_nvidia_flavour(OPEN, None) is True
    assert parse_nvidia_flavour(None, "POE\n") is False  # taint flag P: proprietary licence
    assert parse_nvidia_flavour(None, "OE\n") is True
    assert parse_nvidia_flavour(None, None) is None


@pytest.mark.parametrize(
    ("kernel", "open_module", "capable"),
    [
        ("5.15.0-105-generic", True, True),
        ("5.12.0", True, True),
        ("5.11.22", True, False),
        ("6.8.0", False, False),
        (None, True, None),
        ("6.8.0", None, None),
    ],
)
def test_dmabuf_needs_the_open_module_and_kernel_5_12(kernel, open_module, capable) -> None:
    assert SoftwareVersions(kernel=kernel, nvidia_open=open_module).dmabuf_capable is capable


def with_driver(host_copy, text: str) -> Path:
    root = host_copy("roce-broken")  # no nvidia_peermem loaded, kernel 5.15
    (root / "proc/driver/nvidia").mkdir(parents=True, exist_ok=True)
    (root / "proc/driver/nvidia/version").write_text(text + "\n")
    return root


def test_dmabuf_host_is_not_told_to_load_peermem(host_copy) -> None:
    root = with_driver(host_copy, OPEN)
    inv = read_inventory(Root.at(root))
    assert inv.versions.dmabuf_capable is True
    [gd] = [f for f in run_doctor(Root.at(root)).findings if f.id == "pcie.gpudirect"]
    assert gd.severity.value == "pass" and "modprobe" not in gd.message + (gd.fix or "")
    assert not [
        f for f in lint(merge([from_environ({"NCCL_NET_GDR_LEVEL": "PHB"})]), inv) if f.id == "NCCL052"
    ]
    assert not [n for n in plan_env(inv).notes if "peermem" in n]


def test_proprietary_driver_on_upstream_ib_core_gets_the_fix_that_can_work(host_copy) -> None:
    root = with_driver(host_copy, PROPRIETARY)
    [gd] = [f for f in run_doctor(Root.at(root)).findings if f.id == "pcie.gpudirect"]
    assert gd.severity.value == "warn"
    assert "upstream ib_core" in (gd.fix or "") and "open GPU kernel module" in (gd.fix or "")


def test_unknown_driver_names_nccl_2_13() -> None:
    inv = read_inventory(Root.at(Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "roce-broken"))
    [f] = [f for f in lint(merge([from_environ({"NCCL_NET_GDR_LEVEL": "PHB"})]), inv) if f.id == "NCCL052"]
    assert "NCCL >= 2.13" in f.message and "2.19" not in f.message + (f.fix or "")
