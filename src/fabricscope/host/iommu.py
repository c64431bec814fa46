"""IOMMU groups from /sys/kernel/iommu_groups: how each group's DMA is handled.

Kernel ABI (Documentation/ABI/testing/sysfs-kernel-iommu_groups): ``<group>/type`` reads
``DMA`` (translated), ``DMA-FQ`` (translated, lazy invalidation), ``identity`` (not translated,
what ``iommu=pt`` gives), ``blocked`` or ``unmanaged`` (owned by VFIO and the like). The kernel
command line does not say whether the IOMMU translates: it can be on by default
(CONFIG_INTEL_IOMMU_DEFAULT_ON, AMD), so the groups are the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricscope.host.root import Root
from fabricscope.host.sysfs import read_str

IOMMU_GROUPS = "sys/kernel/iommu_groups"
GROUP_TYPES = ("DMA", "DMA-FQ", "identity", "blocked", "unmanaged")
TRANSLATED = frozenset({"DMA", "DMA-FQ"})


@dataclass(frozen=True)
class IommuGroups:
    visible: bool = False  # /sys/kernel/iommu_groups exists (empty: no IOMMU in use)
    types: dict[int, str | None] = field(default_factory=dict)  # group -> type (None: unreadable)

    def type_of(self, group: int | None) -> str | None:
        return self.types.get(group) if group is not None else None


def parse_group_type(text: str | None) -> str | None:
    """``"DMA-FQ"`` -> ``"DMA-FQ"``; anything the kernel does not write -> None."""
    if text is None:
        return None
    value = text.strip()
    return value if value in GROUP_TYPES else None


def group_of(resolved: str | None) -> int | None:
    """The group number of a resolved ``<device>/iommu_group`` link (``sys/kernel/iommu_groups/17``)."""
    if resolved is None:
        return None
    tail = resolved.rstrip("/").rsplit("/", 1)[-1]
    return int(tail) if (tail.isascii() and tail.isdigit()) else None


def read_iommu_groups(root: Root) -> IommuGroups:
    if not root.is_dir(IOMMU_GROUPS):
        return IommuGroups(visible=False)
    types: dict[int, str | None] = {}
    for name in root.listdir(IOMMU_GROUPS):
        if not (name.isascii() and name.isdigit()):
            continue
        rel = f"{IOMMU_GROUPS}/{name}/type"
        text = read_str(root, rel)
        value = parse_group_type(text)
        if text is not None and value is None:
            root.note(rel, f"unknown IOMMU group type {text[:40]!r}")
        types[int(name)] = value
    return IommuGroups(visible=True, types=types)
