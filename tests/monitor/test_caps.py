"""A small archive must not expand into a huge exposition: objects of each kind are read up to a
cap, and what was left unread is a problem (collector success 0) and a metric."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from fabricscope.host.sysfs import MAX_COUNTER_FILES, MAX_RDMA_PORTS
from tests.monitor.conftest import make_exporter, samples, value

PORT_FILES = {
    "state": "4: ACTIVE",
    "phys_state": "5: LinkUp",
    "rate": "400 Gb/sec (4X NDR)",
    "link_layer": "InfiniBand",
}


def _archive(path: Path, files: dict[str, str]) -> Path:
    """A snapshot archive as an attacker would write one: only the members named, and a repeated
    content as a hard link to its first member (which is what keeps such an archive small)."""
    first: dict[str, str] = {}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in [("proc/net/snmp", ""), *files.items()]:
            info = tarfile.TarInfo(name)
            if text in first:
                info.type, info.linkname = tarfile.LNKTYPE, first[text]
                tar.addfile(info)
                continue
            first[text] = name
            data = text.encode()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_twenty_thousand_ports_are_capped_and_the_drop_is_exported(tmp_path: Path) -> None:
    files = {}
    for port in range(1, 20_002):
        for name, text in PORT_FILES.items():
            files[f"sys/class/infiniband/mlx5_0/ports/{port}/{name}"] = text
    archive = _archive(tmp_path / "ports.tar.gz", files)
    assert archive.stat().st_size < 1_000_000  # the attack: a small archive
    exporter = make_exporter(archive)
    text = exporter.render().decode()
    parsed = samples(text)
    ports = {labels for name, labels in parsed if name == "fabricscope_rdma_port_state_id"}
    assert len(ports) == MAX_RDMA_PORTS
    assert len(parsed) < 20 * MAX_RDMA_PORTS  # was 10 series a port for every one of the 20,001
    assert (
        value(parsed, "fabricscope_objects_dropped", collector="rdma", kind="rdma ports")
        == 20_001 - MAX_RDMA_PORTS
    )
    assert value(parsed, "fabricscope_collector_success", collector="rdma") == 0
    assert (
        value(parsed, "fabricscope_objects_dropped", collector="topology", kind="rdma ports")
        == 20_001 - MAX_RDMA_PORTS
    )


def test_counter_files_are_capped_per_directory(tmp_path: Path) -> None:
    files = {f"sys/class/infiniband/mlx5_0/ports/1/{name}": text for name, text in PORT_FILES.items()}
    for i in range(5000):
        files[f"sys/class/infiniband/mlx5_0/ports/1/hw_counters/c{i:05d}"] = str(i)
    parsed = samples(make_exporter(_archive(tmp_path / "counters.tar.gz", files)).render().decode())
    other = [labels for name, labels in parsed if name == "fabricscope_rdma_hw_stat_total"]
    assert len(other) == MAX_COUNTER_FILES
    assert (
        value(parsed, "fabricscope_objects_dropped", collector="rdma", kind="counter files")
        == 5000 - MAX_COUNTER_FILES
    )


def test_no_drop_metric_on_a_real_node() -> None:
    from tests.conftest import FIXTURE_HOSTS

    text = make_exporter(FIXTURE_HOSTS / "ib-ndr-healthy").render().decode()
    assert "fabricscope_objects_dropped" not in text
