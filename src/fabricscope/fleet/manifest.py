"""The expected-hardware manifest: what every node must have, checked line by line.

A node that has less, or something different, fails with the manifest line it breaks
(``manifest.yaml:7``). Facts a node does not show (ECN state hidden by an upstream driver, no
package database) cannot be verified and are reported as warnings, never as a pass. The manifest
is validated (pydantic) before any node is judged; a bad one ends the command with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fabricscope.errors import FabricscopeError

MAX_MANIFEST_BYTES = 1024 * 1024
LINK_LAYERS = {"ethernet": "Ethernet", "roce": "Ethernet", "infiniband": "InfiniBand", "ib": "InfiniBand"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuSpec(_Strict):
    count: int | None = Field(None, ge=0, le=1024)
    model: str | None = Field(None, min_length=1)


class RdmaSpec(_Strict):
    ports: int | None = Field(None, ge=0, le=1024)
    link_layer: Literal["Ethernet", "InfiniBand"] | None = None
    rate_gbps: float | None = Field(None, gt=0, le=100_000)

    @field_validator("link_layer", mode="before")
    @classmethod
    def _alias(cls, value: Any) -> Any:
        return LINK_LAYERS.get(value.lower(), value) if isinstance(value, str) else value


class ManifestSpec(_Strict):
    gpus: GpuSpec | None = None
    rdma: RdmaSpec | None = None
    firmware: dict[str, str] | None = None  # NIC model (hca_type) -> firmware version
    mtu: int | None = Field(None, ge=68, le=65535)
    pfc_priority: int | list[int] | None = None
    ecn: bool | None = None
    gpudirect: bool | str | None = None  # true: a GPUDirect RDMA module; a name: that module

    @field_validator("pfc_priority")
    @classmethod
    def _prios(cls, value: int | list[int] | None) -> int | list[int] | None:
        values = [value] if isinstance(value, int) else (value or [])
        if any(not 0 <= v <= 7 for v in values):
            raise ValueError("priorities are 0..7")
        return value

    @property
    def pfc_list(self) -> list[int] | None:
        if self.pfc_priority is None:
            return None
        return sorted([self.pfc_priority] if isinstance(self.pfc_priority, int) else set(self.pfc_priority))


@dataclass(frozen=True)
class Manifest:
    path: str
    spec: ManifestSpec
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)  # key path -> 1-based line
    texts: dict[int, str] = field(default_factory=dict)  # line -> its text

    def where(self, *path: str) -> str:
        """``file:line: text`` of the entry at ``path`` (or of its nearest parent)."""
        for n in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:n]))
            if line is not None:
                text = self.texts.get(line, "").split("  #", 1)[0].strip()
                return f"{self.path}:{line}: {text}"
        return self.path


def _key_lines(node: Any, prefix: tuple[str, ...], out: dict[tuple[str, ...], int]) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                raise FabricscopeError(
                    f"{key_node.start_mark.line + 1}: {'.'.join((*prefix, key))} given twice"
                )
            seen.add(key)
            out[(*prefix, key)] = key_node.start_mark.line + 1
            _key_lines(value_node, (*prefix, key), out)


def parse_manifest(text: str, path: str) -> Manifest:
    """Validate a manifest; every problem is one line naming ``path:line``."""
    import yaml

    from fabricscope.untrusted import yaml_compose, yaml_construct

    try:
        root = yaml_compose(text)  # no anchors or aliases: 800 bytes of them once took all memory
        data = yaml_construct(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise FabricscopeError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if data is None:
        raise FabricscopeError(f"{path}: empty manifest")
    if not isinstance(data, dict):
        raise FabricscopeError(f"{path}:1: a manifest is a mapping (gpus:, rdma:, firmware:, mtu:, ...)")
    lines: dict[tuple[str, ...], int] = {}
    try:
        _key_lines(root, (), lines)
    except FabricscopeError as exc:
        raise FabricscopeError(f"{path}:{exc}") from None
    try:
        spec = ManifestSpec.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(str(p) for p in error["loc"] if not isinstance(p, int))
        line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
        hint = ' (quote version numbers: "16.35.2000")' if loc[:1] == ("firmware",) else ""
        raise FabricscopeError(
            f"{path}{':' + str(line) if line else ''}: {'.'.join(loc) or 'manifest'}: {error['msg']}{hint}"
        ) from None
    return Manifest(path, spec, lines, dict(enumerate(text.splitlines(), start=1)))


def load_manifest(path: Path) -> Manifest:
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise FabricscopeError(f"{path}: larger than 1 MiB: not a manifest")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FabricscopeError(f"--expect {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FabricscopeError(
            f"--expect {path}: cannot read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    return parse_manifest(text, str(path))
