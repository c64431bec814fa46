"""Software versions that must agree across a fleet: kernel, driver modules, rdma-core, NCCL.

Sources, each a real interface: ``/proc/sys/kernel/osrelease``; ``/sys/module/<name>/version``
(set by out-of-tree drivers such as MLNX_OFED's mlx5_core and NVIDIA's nvidia; in-tree drivers
have none and go with the kernel release); the package database through ``dpkg-query`` (Debian,
Ubuntu) or ``rpm -q`` (RHEL and derivatives) for rdma-core and NCCL; which NVIDIA kernel module
flavour runs, from ``/proc/driver/nvidia/version`` (the open modules print "NVIDIA UNIX Open Kernel
Module", the proprietary ones "NVIDIA UNIX <arch> Kernel Module") or else ``/sys/module/nvidia/taint``
(flag P: a proprietary licence, kernel Documentation/admin-guide/tainted-kernels.rst).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricscope.host.root import Root

# Modules whose version decides RDMA and GPUDirect behaviour (those without a version file are skipped).
VERSIONED_MODULES = ("mlx5_core", "mlx5_ib", "ib_core", "nvidia", "nvidia_peermem", "nv_peer_mem")
DMABUF_KERNEL = (5, 12)
DPKG_PACKAGES = ("rdma-core", "libibverbs1", "libnccl2")
RPM_PACKAGES = ("rdma-core", "libibverbs", "libnccl")
# dpkg-query's default -W format is "${binary:Package}\t${Version}\n" ("libibverbs1:amd64\t50.0-2").
DPKG_QUERY = ("dpkg-query", "-W", *DPKG_PACKAGES)
RPM_QUERY = ("rpm", "-q", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\n", *RPM_PACKAGES)


@dataclass(frozen=True)
class SoftwareVersions:
    kernel: str | None = None  # uname -r
    modules: dict[str, str] = field(default_factory=dict)  # module -> /sys/module/<m>/version
    packages: dict[str, str] = field(default_factory=dict)  # package -> version, from dpkg or rpm
    nvidia_open: bool | None = None  # the open GPU kernel module runs; None: no NVIDIA module seen

    @property
    def kernel_release(self) -> tuple[int, int] | None:
        """``5.15.0-105-generic`` -> (5, 15)."""
        match = re.match(r"(\d+)\.(\d+)", self.kernel or "")
        return (int(match.group(1)), int(match.group(2))) if match else None

    @property
    def dmabuf_capable(self) -> bool | None:
        """Whether GPUDirect RDMA can go through DMA-BUF instead of nvidia-peermem: the open GPU
        kernel module and kernel >= 5.12 (NCCL uses it since 2.13, NCCL_DMABUF_ENABLE); None when
        either is unknown."""
        release = self.kernel_release
        if self.nvidia_open is None or release is None:
            return None
        return self.nvidia_open and release >= DMABUF_KERNEL

    @property
    def rdma_core(self) -> str | None:
        return (
            self.packages.get("rdma-core")
            or self.packages.get("libibverbs1")
            or self.packages.get("libibverbs")
        )

    @property
    def nccl(self) -> str | None:
        """NCCL's version from its package (``2.21.5-1+cuda12.4`` -> ``2.21.5``)."""
        raw = self.packages.get("libnccl2") or self.packages.get("libnccl")
        return raw.split("-", 1)[0] if raw else None


def parse_nvidia_flavour(version_text: str | None, taint_text: str | None) -> bool | None:
    """True for the open GPU kernel module, False for the proprietary one, None when neither file says."""
    if version_text and "Kernel Module" in version_text:
        return "Open Kernel Module" in version_text
    if taint_text is not None and taint_text.strip():
        return "P" not in taint_text
    return None


def parse_package_versions(text: str) -> dict[str, str]:
    """``name[:arch]<TAB>version`` lines (dpkg-query -W, our rpm format); rpm's "package X is not
    installed" lines and dpkg's entries with an empty version (not installed) are dropped."""
    versions: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, version = line.partition("\t")
        name = name.strip().split(":", 1)[0]
        if sep and name and version.strip() and " " not in name:
            versions[name] = version.strip()
    return versions


def read_versions(root: Root, drivers: tuple[str, ...] = ()) -> SoftwareVersions:
    """Kernel release, versions of the RDMA/GPU modules and ``drivers``, rdma-core and NCCL packages."""
    release = root.read("proc/sys/kernel/osrelease")
    modules: dict[str, str] = {}
    for name in dict.fromkeys((*VERSIONED_MODULES, *drivers)):
        value = root.read(f"sys/module/{name}/version")
        if value and value.strip():
            modules[name] = value.strip()
    packages: dict[str, str] = {}
    for query in (DPKG_QUERY, RPM_QUERY):
        result = root.run(query)
        # dpkg-query exits 1 when one of the packages is missing and still lists the others.
        if result.available and result.rc is not None:
            packages = parse_package_versions(result.stdout)
            break
    flavour = parse_nvidia_flavour(
        root.read("proc/driver/nvidia/version"), root.read("sys/module/nvidia/taint")
    )
    return SoftwareVersions(
        kernel=release.strip() if release else None, modules=modules, packages=packages, nvidia_open=flavour
    )
