"""What a lab is asked to be: validated options, rates and loss in unambiguous units."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fabricscope import units
from fabricscope.errors import FabricscopeError

PREFIX = "fsl-"  # every namespace a lab creates starts with this
NAME_RE = re.compile(r"[a-z][a-z0-9]{0,11}")  # always fullmatch: "t1\n" must not pass (issue 15 item 10)
MAX_HOSTS = 64  # namespaces are cheap, but every host is a process tree on a small machine
MAX_RAILS = 8
MIN_RATE_BPS = 8_000  # tbf cannot shape below a few kbit/s usefully
MAX_RATE_BPS = 400_000_000_000

Topology = Literal["star", "leaf-spine", "rail"]


class LabError(FabricscopeError):
    """The lab cannot be built, changed or found; the message names what and why."""


def parse_rate(text: str) -> int:
    """``"1gbit"``, ``"250mbit"``, ``"10G"`` -> bits per second, in :mod:`fabricscope.units`' grammar
    (tc's spellings; byte rates such as ``mbps``, which tc reads as megaBYTES/s, are refused)."""
    try:
        return int(round(units.parse_rate(text, minimum=MIN_RATE_BPS, maximum=MAX_RATE_BPS)))
    except units.UnitError as exc:
        raise LabError(str(exc)) from None


def format_rate(bps: int | None) -> str:
    """Bits per second as a short tc-style rate: 1000000000 -> ``1gbit``; None -> ``unshaped``."""
    if bps is None:
        return "unshaped"
    for unit, factor in (("tbit", 10**12), ("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps >= factor:
            value = bps / factor
            return f"{value:g}{unit}" if value == round(value, 3) else f"{value:.3f}{unit}"
    return f"{bps}bit"


def parse_loss(text: str) -> float:
    """``"0.1%"`` -> 0.1 (percent). A bare number is refused: 0.1 could mean 0.1% or 10%."""
    raw = str(text).strip()
    if not raw.endswith("%"):
        raise LabError(f"loss {text!r}: write a percentage with %, e.g. 0.1% or 2%")
    if raw == "100%":
        return 100.0
    try:
        return units.parse_probability(raw) * 100.0
    except units.UnitError as exc:
        raise LabError(f"loss {text!r}: {exc}") from None


def parse_oversubscription(text: str) -> float:
    """``"4:1"`` -> 4.0 (downlink capacity : uplink capacity of a leaf), at most 1000:1."""
    if ":" not in str(text):
        raise LabError(f"oversubscription {text!r}: write DOWN:UP, e.g. 4:1 or 1:1")
    try:
        ratio = units.parse_ratio(text)
    except units.UnitError as exc:
        raise LabError(f"oversubscription {text!r}: {exc}") from None
    if ratio > 1000:
        raise LabError(f"oversubscription {text!r} is beyond 1000:1")
    return ratio


def host_name(index: int) -> str:
    return f"h{index}"


def host_index(name: str, hosts: int) -> int:
    """``"h3"`` -> 3, checked against the lab's size."""
    match = re.fullmatch(r"h([1-9][0-9]*)", name.strip())
    if not match or int(match.group(1)) > hosts:
        raise LabError(f"no host {name!r} in this lab (hosts are h1 .. h{hosts})")
    return int(match.group(1))


class LabSpec(BaseModel):
    """Everything ``lab up`` was asked for; stored in the state file so ``up`` is idempotent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    topology: Topology = "star"
    hosts: int = Field(ge=1, le=MAX_HOSTS)
    hosts_per_leaf: int | None = Field(default=None, ge=1, le=MAX_HOSTS)
    rails: int = Field(default=2, ge=1, le=MAX_RAILS)
    link_rate_bps: int | None = Field(default=None, ge=MIN_RATE_BPS, le=MAX_RATE_BPS)
    uplink_rate_bps: int | None = Field(default=None, ge=MIN_RATE_BPS, le=MAX_RATE_BPS)
    oversubscription: float | None = Field(default=None, gt=0, le=1000)
    loss_pct: float = Field(default=0.0, ge=0.0, le=100.0)
    loss_on: tuple[str, ...] = ()
    mtu: int = Field(default=1500, ge=576, le=65000)
    lldp: bool = False  # run lldpd on every switch and host (lab/lldp.py)
    slurm: bool = False  # run munged, slurmctld and one slurmd per host (lab/slurm.py)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.fullmatch(value):
            raise ValueError(
                f"lab name {value!r}: 1-12 characters, lower-case letters and digits, starting with a letter"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LabSpec:
        if self.topology == "leaf-spine":
            if self.hosts_per_leaf is None:
                raise ValueError("leaf-spine needs --hosts-per-leaf")
            if self.uplink_rate_bps is not None and self.oversubscription is not None:
                raise ValueError("give --uplink-rate or --oversubscription, not both")
            if self.oversubscription is not None and self.link_rate_bps is None:
                raise ValueError("--oversubscription needs --link-rate (the uplink rate is derived from it)")
        else:
            if (
                self.hosts_per_leaf is not None
                or self.uplink_rate_bps is not None
                or self.oversubscription is not None
            ):
                raise ValueError(
                    "--hosts-per-leaf, --uplink-rate and --oversubscription apply to leaf-spine only"
                )
        if self.topology != "rail" and self.rails != 2:
            raise ValueError("--rails applies to the rail topology only")
        for host in self.loss_on:
            try:
                host_index(host, self.hosts)
            except LabError as exc:
                raise ValueError(str(exc)) from None
        if self.loss_on and self.loss_pct == 0:
            raise ValueError("--loss-on needs --loss")
        return self

    @property
    def prefix(self) -> str:
        """Namespace name prefix of this lab (``fsl-<name>-``); unique because names have no '-'."""
        return f"{PREFIX}{self.name}-"

    @property
    def leaves(self) -> int:
        if self.topology != "leaf-spine" or not self.hosts_per_leaf:
            return 0
        return -(-self.hosts // self.hosts_per_leaf)

    @property
    def effective_uplink_bps(self) -> int | None:
        """The leaf-to-spine rate: given, or hosts-per-leaf x link rate / oversubscription."""
        if self.topology != "leaf-spine":
            return None
        if self.uplink_rate_bps is not None:
            return self.uplink_rate_bps
        if self.oversubscription is not None and self.link_rate_bps is not None and self.hosts_per_leaf:
            return max(
                MIN_RATE_BPS, int(round(self.hosts_per_leaf * self.link_rate_bps / self.oversubscription))
            )
        return None

    def loss_for(self, host: str) -> float:
        if not self.loss_pct:
            return 0.0
        return self.loss_pct if (not self.loss_on or host in self.loss_on) else 0.0


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise LabError(
            f"lab name {name!r}: 1-12 characters, lower-case letters and digits, starting with a letter"
        )
    return name
