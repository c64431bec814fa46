"""Helpers for the exporter tests: exporters on fixture hosts, parsed expositions, real tools."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fabricscope.host import Root
from fabricscope.monitor.exporter import Exporter, ExporterOptions
from tests.conftest import FIXTURE_HOSTS, skip_unless_ci

MONITOR_TESTS = Path(__file__).resolve().parent
GOLDEN = MONITOR_TESTS / "golden"
REPO = MONITOR_TESTS.parent.parent
ALERTS_FILE = REPO / "src" / "fabricscope" / "monitor" / "assets" / "fabricscope-alerts.yml"
DASHBOARD_FILE = REPO / "src" / "fabricscope" / "monitor" / "assets" / "fabricscope-dashboard.json"

# Values that change from scrape to scrape (timings, ages, clocks): golden files hold a placeholder.
DYNAMIC = re.compile(
    r"^(fabricscope_collector_duration_seconds|fabricscope_refresh_age_seconds|fabricscope_ethtool_stats_age_seconds"
    r"|fabricscope_doctor_last_run_timestamp_seconds|fabricscope_doctor_run_duration_seconds)(\{[^}]*\})? .*$"
)

# NCCL log lines that exercise every NCCL metric family (formats as in tests/data/samples and NCCL 2.30).
NCCL_LINES = [
    "node1:852750:852802 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
    "node1:852750:852802 [0] NCCL INFO NET/Socket : Using [0]ibs85f0:192.168.1.14<0>",
    "node1:852750:852802 [0] NCCL INFO Using network Socket",
    "node1:852751:852807 [1] NCCL INFO Using network Socket",
    "node1:225140:225355 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable",
    "node1:225140:225355 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.1.2<55431> "
    "with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.1.1.1 remoteGids ::ffff:10.1.1.2",
]


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        skip_unless_ci("promtool not installed (Debian package prometheus)")
    return path


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        skip_unless_ci("prometheus not installed (Debian package prometheus)")
    return path


def make_exporter(root: Path | str, **options: object) -> Exporter:
    """An exporter on a fixture tree, primed (topology and ethtool read once), no threads."""
    opts = {"doctor_interval_s": 0.0, **options}
    exporter = Exporter(Root.at(root), ExporterOptions(**opts))  # type: ignore[arg-type]
    exporter.prime(doctor=True)
    return exporter


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``{(sample name, labels): value}`` of an exposition, parsed by prometheus-client."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(parsed: dict, name: str, **labels: str) -> float:
    return parsed[(name, frozenset(labels.items()))]


def sample_names(text: str) -> set[str]:
    return {name for name, _labels in samples(text)}


def normalise(text: str) -> str:
    lines = []
    for line in text.splitlines():
        match = DYNAMIC.match(line)
        if match:
            line = f"{match.group(1)}{match.group(2) or ''} <dynamic>"
        line = re.sub(
            r'fabricscope_exporter_build_info\{version="[^"]*"\}',
            'fabricscope_exporter_build_info{version="<version>"}',
            line,
        )
        lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.fixture
def nccl_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "nccl" / "rank0.log"
    path.parent.mkdir()
    path.write_text("\n".join(NCCL_LINES) + "\n")
    yield path


def full_mlx5_host(dest_dir: Path) -> Path:
    """roce-healthy with one netdev's ``ethtool -S`` replaced by a complete ConnectX listing
    (tests/monitor/data/ethtool_S_mlx5_full.txt: every statistic the exporter maps, with the
    names of the kernel's mlx5 counters.rst), so that every ethtool family can be produced."""
    dest = dest_dir / "roce-mlx5-full"
    shutil.copytree(FIXTURE_HOSTS / "roce-healthy", dest, symlinks=True)
    capture = next(p for p in (dest / "cmd").iterdir() if p.name.endswith("ethtool_S_ens0np0"))
    capture.write_text((MONITOR_TESTS / "data" / "ethtool_S_mlx5_full.txt").read_text())
    add_gpu_pcie_capture(dest)
    return dest


def add_gpu_pcie_capture(host: Path) -> str:
    """`nvidia-smi -q`'s PCI block captured on ``host``: the public RTX 5090 capture
    (tests/monitor/data/nvidia_smi_q_pci_rtx5090.txt) with its bus id changed to the host's GPU 0,
    so the exporter can join it to a GPU it knows; added to the host's `nvidia-smi -q` output where
    it has one. Returns that GPU's PCI address."""
    gpus = next(p for p in (host / "cmd").iterdir() if "query-gpu" in p.name).read_text().splitlines()
    bus_id = gpus[0].split(",")[1].strip()
    text = (MONITOR_TESTS / "data" / "nvidia_smi_q_pci_rtx5090.txt").read_text().split("\n", 1)[1]
    block = text.replace("00000000:02:00.0", bus_id)
    index = json.loads((host / "cmd" / "index.json").read_text())
    full = next((e for e in index if e["argv"] == ["nvidia-smi", "-q"] and e.get("stdout")), None)
    if full is not None:
        out = host / "cmd" / full["stdout"]
        out.write_text(out.read_text() + "\n" + block)
    else:
        (host / "cmd" / "900-nvidia-smi_q").write_text(block)
        index.append({"argv": ["nvidia-smi", "-q"], "stdout": "900-nvidia-smi_q", "rc": 0})
        (host / "cmd" / "index.json").write_text(json.dumps(index))
    from fabricscope.host.gpu import normalise_bus_id

    return normalise_bus_id(bus_id)


def all_hosts() -> list[str]:
    return sorted(p.name for p in FIXTURE_HOSTS.iterdir() if p.is_dir())
