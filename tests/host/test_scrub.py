"""Scrubbing removes what identifies the machine and keeps what doctor judges (issue 15 item 9)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from fabricscope.checks.doctor import run_doctor
from fabricscope.host import Root
from fabricscope.host.ethtool import parse_module
from fabricscope.host.pci import PCI_DEVICES, extended_capabilities, parse_config_space
from fabricscope.host.scrub import PCI_EXT_CAP_DSN, REDACTED, scrub_cmdline, scrub_config_space
from fabricscope.host.snapshot import take_snapshot
from tests.conftest import FIXTURE_HOSTS, SAMPLES

SERIAL = bytes.fromhex("2c1ab60003a1420c")  # as lspci shows it: 0c-42-a1-03-00-b6-1a-2c


def _with_dsn(config: bytes) -> tuple[bytes, int]:
    """``config`` with a Device Serial Number capability (PCIe base spec 7.9.3: header, then the
    64-bit serial) linked at the end of its extended capability list, at a free offset."""
    out = bytearray(config)
    caps = list(extended_capabilities(config))
    if caps:  # linked after the last one
        last = caps[-1][1]
        free = next(o for o in range(last + 0x40, len(out) - 12, 4) if not any(out[o : o + 12]))
        header = int.from_bytes(out[last : last + 4], "little")
        out[last : last + 4] = ((header & 0x000FFFFF) | (free << 20)).to_bytes(4, "little")
    else:  # the list's first entry is always at 0x100
        free = 0x100
    out[free : free + 4] = (PCI_EXT_CAP_DSN | (1 << 16)).to_bytes(4, "little")
    out[free + 4 : free + 12] = SERIAL
    return bytes(out), free


def _nic_config(root: Path) -> Path:
    """The config space of a NIC of the fixture host, read whole (4096 bytes, as root reads it)."""
    for dev in sorted((root / PCI_DEVICES).iterdir()):
        config = dev / "config"
        if (dev / "net").exists() and config.exists() and len(config.read_bytes()) == 4096:
            return config
    raise AssertionError("no NIC with its whole config space in the fixture")


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _judged(root: Root) -> list[tuple[str, str, str]]:
    return sorted((f.id, f.subject, f.severity.value) for f in run_doctor(root).findings)


@pytest.mark.parametrize("level", [True, "strict"])
def test_device_serial_number_is_zeroed(host_copy, tmp_path: Path, level) -> None:
    host = host_copy("roce-healthy")
    config = _nic_config(host)
    data, dsn = _with_dsn(config.read_bytes())
    config.write_bytes(data)
    out, _ = take_snapshot(Root.at(host), tmp_path / "s.tar.gz", scrub=level)
    written = next(
        v
        for k, v in _members(out).items()
        if k.endswith("/config") and v[dsn : dsn + 4] == data[dsn : dsn + 4]
    )
    assert written[dsn + 4 : dsn + 12] == bytes(8) and SERIAL not in written
    assert parse_config_space(written) == parse_config_space(data)
    assert _judged(Root.at(out)) == _judged(Root.at(host))


def test_strict_keeps_only_what_the_host_model_parses(tmp_path: Path) -> None:
    for host in ("roce-broken", "ib-ndr-healthy", "ib-container"):
        out, _ = take_snapshot(Root.at(FIXTURE_HOSTS / host), tmp_path / f"{host}.tar.gz", scrub="strict")
        configs = {k: v for k, v in _members(out).items() if k.endswith("/config")}
        assert configs
        for data in configs.values():
            assert data[0x10:0x28] == bytes(0x18)  # base address registers
        assert _judged(Root.at(out)) == _judged(Root.at(FIXTURE_HOSTS / host)), host
    original = bytearray(_with_dsn(_nic_config(FIXTURE_HOSTS / "roce-broken").read_bytes())[0])
    original[0x10:0x14] = bytes.fromhex("0c00a0e3")  # BAR0: a 64-bit prefetchable address
    original = bytes(original)
    cut = scrub_config_space(original, strict=True)
    assert cut[0x10:0x14] == bytes(4) and SERIAL not in cut
    assert (
        len(cut) == len(original)
        and cut != original
        and parse_config_space(cut) == parse_config_space(original)
    )


def test_cmdline_secrets_are_redacted() -> None:
    line = (
        "BOOT_IMAGE=/vmlinuz root=UUID=6a1c0b7e-6f0e-4f4b-9d7c-1f3e2a9d8c11 ro iommu=pt rd.luks.key=/keys/root.key "
        'bmc_password=hunter2 api_token="a b c" nfsroot=nfs://admin:s3cret@10.0.0.1/export quiet\n'
    )
    out = scrub_cmdline(line)
    for secret in ("hunter2", "/keys/root.key", '"a b c"', "s3cret", "admin"):
        assert secret not in out
    assert (
        f"bmc_password={REDACTED}" in out
        and f"api_token={REDACTED}" in out
        and "iommu=pt" in out
        and "quiet" in out
    )
    assert out.endswith("\n")
    assert scrub_cmdline(line, strict=True) == "iommu=pt\n"


def test_cmdline_and_transceiver_serial_in_a_scrubbed_snapshot(host_copy, tmp_path: Path) -> None:
    host = host_copy("roce-healthy")
    (host / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz ro iommu=pt ipmi_password=hunter2\n")
    sample = (SAMPLES / "ethtool_m_qsfp28_mellanox.txt").read_text().split("\n", 2)[2]
    next((host / "cmd").glob("*-ethtool_m_ens0np0")).write_text(
        sample
    )  # the capture's own slot, whatever its number
    out, _ = take_snapshot(Root.at(host), tmp_path / "s.tar.gz", scrub=True)
    blob = b"".join(_members(out).values())
    assert b"hunter2" not in blob and b"MT1708FT01255" not in blob
    scrubbed = Root.at(out)
    assert scrubbed.read("proc/cmdline") == f"BOOT_IMAGE=/vmlinuz ro iommu=pt ipmi_password={REDACTED}"
    module = parse_module(scrubbed.run(["ethtool", "-m", "ens0np0"]).stdout)
    original = parse_module(sample)
    assert module.fields["Vendor SN"] == "SN00000001" and original.fields["Vendor SN"] == "MT1708FT01255"
    assert (module.identifier, module.temperature_c) == (original.identifier, original.temperature_c)
    assert _judged(scrubbed) == _judged(Root.at(host))
